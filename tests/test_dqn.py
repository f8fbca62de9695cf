"""DQN on the agent contract: it learns, resumes exactly (buffer included), never recompiles for
traced settings, follows its epsilon schedule, and refuses bad settings before compiling."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune.agents import DQN, DQNConfig
from ajax_tune.agents.dqn import epsilon
from ajax_tune.agents.dqn.losses import double_q_target
from ajax_tune.agents.hparams import init_hparams
from ajax_tune.envs import make_env
from ajax_tune.envs.wrappers import EpisodeWrapper, VecEnv
from ajax_tune.loop import LoopConfig, TrainLoop
from ajax_tune.loop.summary import summarize
from ajax_tune.schedules import Schedule
from tests.support.helpers import assert_refused_before_compiling, assert_trees_equal, host

# A small DQN whose buffer wraps around within a few updates, with learning under way after the
# first update, a target network moved every other gradient step and observation statistics.
SMALL = dict(
    num_envs=4,
    unroll_length=8,
    utd_ratio=0.25,
    batch_size=16,
    capacity=160,
    learning_starts=32,
    target_update_every=2,
    tau=0.5,
    hidden_sizes=(32, 32),
    normalize_observations=True,
    lr=Schedule(kind="linear", peak=1e-3),
)
UNROLL = 4 * 8  # env steps per update
EPSILON_DEFAULTS = {k: getattr(DQNConfig(), k) for k in ("epsilon_start", "epsilon_end", "epsilon_decay_fraction")}


def small_loop(agent=None, **loop_overrides) -> TrainLoop:
    env = make_env("cartpole")
    agent = DQN(DQNConfig(**{**SMALL, **(agent or {})}), env.observation_space, env.action_space)
    loop = dict(
        total_timesteps=20 * UNROLL, timesteps_per_iteration=3 * UNROLL, eval_every=2 * UNROLL, eval_episodes=2, num_seeds=2
    )
    return TrainLoop(env, agent, LoopConfig(**{**loop, **loop_overrides}))


def per_update(out):
    """A call's per-update rows and health, keyed apart."""
    return {**host(out.rows), **{f"health/{k}": v for k, v in host(out.health).items()}}


def hp(**values):
    return init_hparams(dataclasses.replace(DQNConfig(), **values))


@pytest.mark.optimised  # bit-identity is claimed for the build users run
def test_split_run_with_restore_is_bit_identical_buffer_included(tmp_path):
    """One call of 6 updates == two calls of 3 with a save and a restore into a fresh loop."""
    assert not jax.config.read("jax_disable_most_optimizations")
    long_loop = small_loop(timesteps_per_iteration=6 * UNROLL)
    long_state, long_rows = long_loop.train(long_loop.init(seed=5))
    long_state, long_rows = host(long_state), per_update(long_rows)

    first = small_loop()
    state, rows_a = first.train(first.init(seed=5))
    first.save(tmp_path / "ckpt", state)
    second = small_loop()
    state, _ = second.restore(tmp_path / "ckpt")
    state, rows_b = second.train(state)

    assert_trees_equal(state, long_state)  # parameters, target, optimiser, buffer, epsilon clock, env, RNG
    split_rows = {k: np.concatenate([per_update(rows_a)[k], per_update(rows_b)[k]], axis=1) for k in long_rows}
    assert_trees_equal(split_rows, long_rows)
    assert first.compilations == second.compilations == 1

    # the comparison covered what it should: the buffer wrapped, learning and the target moved
    buffer = long_state.agent.buffer
    assert buffer.is_full.all() and buffer.current_index.tolist() == [6 * UNROLL % 160] * 2
    assert long_state.agent.gradient_steps.tolist() == [6 * 8] * 2  # 8 gradient steps per update, from the first
    kernel = lambda tree: jax.tree.leaves(tree)[0]  # noqa: E731
    assert not np.array_equal(kernel(long_state.agent.params), kernel(long_state.agent.target_params))
    assert np.isfinite(long_rows["loss/q"]).all() and (long_rows["eval/timestep"][0] >= 0).sum() == 3
    assert long_rows["replay/size"][0].tolist() == [min(UNROLL * i, 160) for i in range(1, 7)]


@pytest.mark.heavy
def test_no_recompilation_while_task_lr_tau_and_epsilon_change():
    loop = small_loop()
    state = loop.init()
    horizon = 20 * UNROLL
    new_eps = dict(epsilon_start=0.5, epsilon_end=0.2, epsilon_decay_fraction=0.5)
    changes = [
        lambda s: s,
        lambda s: loop.set_task(s, {"pole_length": 0.3}),
        lambda s: loop.set_hparams(
            s, dataclasses.replace(loop.agent.config, lr=Schedule(kind="constant", peak=5e-4), tau=0.25, **new_eps)
        ),
        lambda s: loop.set_task(s, {"force_mag": np.linspace(5.0, 15.0, 4)}),
    ]
    seen = []
    for change in changes:
        state = change(state)
        state, out = loop.train(state)
        seen.append(host(out.rows))
    assert loop.compilations == 1
    assert [float(r["task/pole_length"][0, -1]) for r in seen] == pytest.approx([0.5, 0.3, 0.3, 0.3])
    assert float(seen[2]["lr"][0, 0]) == pytest.approx(5e-4)
    assert np.asarray(state.agent.hp.tau).tolist() == [0.25, 0.25]

    # epsilon follows the schedule in force from the current timestep: before the change the
    # default one, after it the new one, with progress measured over the whole run
    for call, rows in enumerate(seen):
        params = hp(**(new_eps if call >= 2 else EPSILON_DEFAULTS))
        steps = np.asarray(rows["timestep"][0]) - UNROLL  # each update reports the epsilon it collected with
        expected = [float(epsilon(params, jnp.float32(t), jnp.float32(horizon))) for t in steps]
        np.testing.assert_allclose(rows["epsilon"][0], expected, rtol=1e-6)
    assert seen[2]["epsilon"][0, 0] == pytest.approx(0.5 - 0.3 * (6 * UNROLL) / (0.5 * horizon))
    assert np.asarray(state.agent.timestep).tolist() == [12 * UNROLL] * 2  # the clock act reads


def test_epsilon_schedule_at_hand_picked_timesteps():
    params = hp(epsilon_start=1.0, epsilon_end=0.1, epsilon_decay_fraction=0.2)
    horizon = jnp.float32(10_000)  # decays over the first 2,000 steps
    for t, expected in [(0, 1.0), (500, 0.775), (1_000, 0.55), (2_000, 0.1), (9_999, 0.1), (20_000, 0.1)]:
        assert float(epsilon(params, jnp.float32(t), horizon)) == pytest.approx(expected, abs=1e-6), t
    rising = hp(epsilon_start=0.0, epsilon_end=0.4, epsilon_decay_fraction=0.5)
    assert float(epsilon(rising, jnp.float32(2_500), horizon)) == pytest.approx(0.2)
    flat = hp(epsilon_start=1.0, epsilon_end=0.3, epsilon_decay_fraction=0.0)  # no decay: the end value throughout
    assert float(epsilon(flat, jnp.float32(0), horizon)) == pytest.approx(0.3)


def test_acting_explores_with_the_epsilon_of_the_state():
    env = make_env("cartpole")
    agent = DQN(DQNConfig(hidden_sizes=(8,)), env.observation_space, env.action_space)
    state = agent.init(jax.random.PRNGKey(0))
    obs = jax.random.normal(jax.random.PRNGKey(1), (512, 4))
    act = jax.jit(agent.act, static_argnames="deterministic")
    greedy, _ = act(state, obs, jax.random.PRNGKey(2), deterministic=True)

    def differs(state):  # share of actions that are not the greedy one
        return float(jnp.mean(act(state, obs, jax.random.PRNGKey(3))[0] != greedy))

    assert differs(state) == pytest.approx(0.5, abs=0.07)  # epsilon 1 at timestep 0: uniform over 2 actions
    late = state.replace(timestep=jnp.float32(600), horizon=jnp.float32(1000))  # past the decay: 0.05
    assert differs(late) == pytest.approx(0.025, abs=0.02)
    greedy_only = agent.with_hparams(late, dataclasses.replace(agent.config, epsilon_end=0.0))
    assert differs(greedy_only) == 0.0


def test_truncation_stores_the_real_final_obs_and_bootstraps():
    env = EpisodeWrapper(make_env("cartpole"), max_episode_steps=3)  # too short for cartpole to fall
    venv = VecEnv(env, 2)
    agent = DQN(
        DQNConfig(num_envs=2, unroll_length=3, utd_ratio=0.5, capacity=6, batch_size=2, hidden_sizes=(8,)),
        env.observation_space,
        env.action_space,
    )
    task = {k: jnp.float32(v.default) for k, v in env.task_spec.items()}

    @jax.jit
    def unroll(key):
        def step(state, k):
            action = jnp.array([1, 0], jnp.int32)
            nxt = venv.step(state, action, k)
            return nxt, agent.transition(state.obs, action, {}, nxt)

        # [T, N], as the loop hands it over
        last, batch = jax.lax.scan(step, venv.reset(key, task), jax.random.split(key, 3))
        return last, batch, venv.reset_done(last, key).obs, agent.buffer.add(agent.buffer.init(), batch)

    last, batch, restarted, buffer = unroll(jax.random.PRNGKey(0))
    assert last.truncated.all() and not last.terminated.any()
    np.testing.assert_array_equal(batch.next_obs[-1], last.obs)  # the real final observation ...
    assert not batch.terminated.any()  # ... and no termination: the step bootstraps
    assert not np.allclose(restarted, last.obs)  # what a reset would have shown instead
    np.testing.assert_array_equal(buffer.experience.next_obs[0, 4:6], last.obs)  # stored as such
    assert not buffer.experience.terminated.any()


def test_double_dqn_target_and_termination():
    reward = jnp.array([1.0, 1.0, 0.5])
    terminated = jnp.array([False, True, False])
    online = jnp.array([[1.0, 3.0], [5.0, 0.0], [0.0, 2.0]])  # picks actions 1, 0, 1
    target = jnp.array([[10.0, 4.0], [7.0, 9.0], [6.0, -2.0]])  # values them, not its own max
    out = double_q_target(reward, terminated, online, target, 0.5)
    np.testing.assert_allclose(out, [1.0 + 0.5 * 4.0, 1.0, 0.5 + 0.5 * -2.0])


def cartpole_config(**agent):
    return {
        "env": {"name": "cartpole"},
        "agent": {"name": "dqn", **agent},
        "train": {"total_timesteps": 10_000, "timesteps_per_iteration": 1_024},
    }


@pytest.mark.parametrize(
    "config, message",
    [
        (cartpole_config(batch_size=512, capacity=256), r"agent\.batch_size \(512\) must not exceed agent\.capacity \(256\)"),
        (cartpole_config(learning_starts=10_000), r"agent\.learning_starts \(10000\) must be below train\.total_timesteps"),
        (cartpole_config(capacity=64), r"agent\.capacity \(64\) must hold at least one unroll"),
        (cartpole_config(utd_ratio=0.3), r"agent\.utd_ratio \(0\.3\) times .* whole number of gradient steps"),
        (cartpole_config(epsilon_end=1.5), r"agent\.epsilon_end"),
        (
            {**cartpole_config(), "env": {"name": "pendulum"}},
            r"agent\.name 'dqn' needs a discrete action space; this env's is Box\(",
        ),
        ({**cartpole_config(), "agent": {"name": "dqm"}}, r"agent\.name must be one of .*got 'dqm'; did you mean 'dqn'\?"),
        (
            {
                **cartpole_config(),
                "train": {"total_timesteps": 10_000, "timesteps_per_iteration": 1_024, "reset_mode": "unroll_start"},
            },
            r"train\.reset_mode 'unroll_start' does not suit",
        ),
    ],
)
def test_bad_configs_are_refused_in_one_line_before_compiling(config, message):
    assert_refused_before_compiling(config, message)


# The defaults, spelled out: what the learning test and configs/dqn_cartpole.yaml train with.
CARTPOLE_AGENT = dict(
    num_envs=16,
    unroll_length=8,
    utd_ratio=0.25,
    batch_size=128,
    capacity=50_000,
    learning_starts=2_000,
    hidden_sizes=(64, 64),
    lr=Schedule(kind="linear", peak=1e-3),
    tau=0.005,
    huber_delta=100.0,
    epsilon_end=0.05,
    epsilon_decay_fraction=0.25,
)


@pytest.mark.learning
def test_dqn_solves_cartpole_within_300k_steps():
    """Mean greedy evaluation return over 4 seeds (8 episodes each) reaches 450 of cartpole's 500
    within 300k env steps per seed; the seeds train side by side in one program."""
    env = make_env("cartpole")
    agent = DQN(DQNConfig(**CARTPOLE_AGENT), env.observation_space, env.action_space)
    assert agent.config == DQNConfig()  # these are the defaults
    loop = TrainLoop(
        env, agent, LoopConfig(total_timesteps=300_000, timesteps_per_iteration=20_480, num_seeds=4, eval_episodes=8)
    )
    state = loop.init(seed=0)
    history = []
    while loop.timestep(state) < 300_000:
        state, rows = loop.train(state)
        result = summarize(rows, latest=agent.latest_metrics)
        history.append((int(result["timestep"]), round(result["eval/return_mean"], 1)))
        assert result["train/nonfinite"] == 0.0
        if result["eval/return_mean"] >= 450:
            break
    print("cartpole (env steps per seed, mean eval return):", history)
    assert history[-1][1] >= 450, f"cartpole not solved in 300k steps: {history}"
    assert history[0][1] < 450  # it had to learn
    assert loop.compilations == 1


@pytest.mark.slow
def test_pbt_mutates_epsilon_and_lr_without_recompiling(ray_session, tmp_path):
    """PBT with reuse_actors over DQN's exploration schedule and learning rate: every actor
    compiles once, every result reports the epsilon and learning rate of the config in force at
    its timestep, and an exploiting trial continues from its donor's replay buffers."""
    from ray import tune

    from ajax_tune.schedules import learning_rate
    from tests.test_tune import fit_synch_pbt

    budget, horizon = 2 * UNROLL, 12 * UNROLL
    space = {
        "env": {"name": "cartpole"},
        "agent": {
            "name": "dqn",
            **{k: list(v) if isinstance(v, tuple) else v for k, v in SMALL.items()},
            "lr": {"kind": "linear", "peak": tune.choice([3e-4, 1e-3])},
            "epsilon_end": tune.choice([0.05, 0.2]),
            "epsilon_decay_fraction": 0.25,
        },
        # A seed each: two trials drawing the same settings with one seed fill identical buffers,
        # and a clone between them cannot be told from a trial restoring its own. Two trials are
        # enough: synchronous PBT at quantile 0.5 ranks them into a lower and an upper half of one.
        "train": {
            "total_timesteps": horizon,
            "timesteps_per_iteration": budget,
            "num_seeds": 1,
            "eval_episodes": 2,
            "seed": tune.grid_search([0, 1]),
        },
        "callbacks": ["tests.support.replay_probe:ReplayProbe"],
    }
    mutations = {
        "agent": {
            "epsilon_end": [0.01, 0.1, 0.3],
            "epsilon_decay_fraction": [0.1, 0.5],
            "lr": {"peak": tune.loguniform(1e-4, 3e-3)},
        }
    }
    _, per_trial, exploits = fit_synch_pbt(
        space, tmp_path, "dqn_pbt", mutations, metric="eval/return_mean", interval=2, resample_probability=0.5, num_samples=1
    )
    assert exploits and all(exploits), "PBT never exploited"
    assert len(per_trial) == 2

    after = {(trial, r["env_steps"]): r["probe/buffer"] for trial, trial_rows in per_trial.items() for r in trial_rows}
    mutated = inherited = 0
    for trial, trial_rows in per_trial.items():
        settings = set()
        for r in trial_rows:
            assert r["perf/compilations"] == 1 and r["train/nonfinite"] == 0
            # the state's lineage: Tune's counter follows the state loaded, also where synchronous
            # PBT hands an exploiting trial a donor checkpoint that the donor's next save overwrote
            assert r["env_steps"] == r["training_iteration"] * budget
            # the schedules in force, read at the timestep the call's last unroll began
            agent = r["config"]["agent"]
            settings.add((agent["lr"]["peak"], agent.get("epsilon_end"), agent.get("epsilon_decay_fraction")))
            timestep = jnp.float32(r["env_steps"] - UNROLL)
            params = hp(**{k: agent.get(k, v) for k, v in EPSILON_DEFAULTS.items()})
            assert r["epsilon"] == pytest.approx(float(epsilon(params, timestep, jnp.float32(horizon))), rel=1e-5)
            lr = learning_rate(Schedule.parse(agent["lr"]).to_params(), timestep, jnp.float32(horizon))
            assert r["lr"] == pytest.approx(float(lr), rel=1e-5)
            if not np.isnan(r["probe/restored_buffer"]):  # restored: from some trial's buffers at that step
                donors = [
                    t for (t, steps), fp in after.items() if steps == r["env_steps"] - budget and fp == r["probe/restored_buffer"]
                ]
                assert donors, f"trial {trial} restored buffers no trial had at step {r['env_steps'] - budget}"
                inherited += trial not in donors
        mutated += len(settings) > 1
    assert mutated >= 1 and inherited >= 1
