"""SAC on the agent-neutral loop: what its buffer holds, exact resume, no recompilation, refused
configs, learning, and the Tune workflows."""

import dataclasses

import jax
import numpy as np
import pytest

from ajax_tune import Runner, compat
from ajax_tune.agents import SAC, SACConfig
from ajax_tune.config import Config
from ajax_tune.envs import make_env
from ajax_tune.loop import LoopConfig, TrainLoop
from ajax_tune.loop.summary import summarize
from ajax_tune.schedules import Schedule
from tests.support.helpers import assert_refused_before_compiling, assert_trees_equal, host

TINY = dict(
    num_envs=2,
    unroll_length=8,
    utd_ratio=0.5,
    batch_size=16,
    capacity=80,
    learning_starts=32,
    hidden_sizes=(16, 16),
    normalize_observations=True,
)
UNROLL = 2 * 8  # env steps per update with TINY


def sac_loop(env="point_reach", agent=None, env_kwargs=None, **loop_overrides) -> TrainLoop:
    """Every fast test builds this same program (the compilation cache then compiles it once)."""
    env = make_env(env, **(env_kwargs or {"max_episode_steps": 5}))
    config = SACConfig(**{**TINY, **(agent or {})})
    loop_cfg = dict(
        total_timesteps=20_000, timesteps_per_iteration=2 * UNROLL, eval_every=3 * UNROLL, eval_episodes=2, num_seeds=2
    )
    loop_cfg.update(loop_overrides)
    return TrainLoop(env, SAC(config, env.observation_space, env.action_space), LoopConfig(**loop_cfg))


def stored(buffer_state, num_envs):
    """The buffer's items in insertion order, as `[seeds, steps, num_envs, ...]` (the loop adds
    each unroll time-major)."""
    experience = host(buffer_state.experience)
    count = int(np.asarray(buffer_state.current_index)[0])
    return jax.tree.map(lambda x: x[:, 0, :count].reshape(x.shape[0], -1, num_envs, *x.shape[3:]), experience)


# -- what the buffer holds -----------------------------------------------------------------------


def point_reach_successor(obs, action):
    """point_reach's step from an observation (position, velocity, offset to the target) and an
    action, with whether the step came within `radius` of the target (see envs/point_reach.py)."""
    pos, vel, target = obs[..., 0:2], obs[..., 2:4], obs[..., 4:6] + obs[..., 0:2]
    vel = vel * (1.0 - 1.5 * 0.1) + 1.5 * np.clip(action, -1.0, 1.0) * 0.1
    new = pos + vel * 0.1
    return np.concatenate([new, vel, target - new], axis=-1)


def closest_approach(obs, next_obs):
    start, end, target = obs[..., 0:2], next_obs[..., 0:2], obs[..., 4:6] + obs[..., 0:2]
    seg = end - start
    t = np.clip(np.sum((target - start) * seg, -1) / np.maximum(np.sum(seg * seg, -1), 1e-12), 0.0, 1.0)
    return np.linalg.norm(start + t[..., None] * seg - target, axis=-1)


@pytest.mark.heavy
def test_buffer_holds_true_successors_and_cuts_only_at_terminations():
    """Episodes end by arriving (terminated) or after 5 steps (truncated); envs restart on the
    very next step. Every stored transition holds the true successor of its observation, the
    truncated ones included (their real final observation, not the next episode's first), and
    `terminated` is set exactly on arrivals. Observations are stored raw (normalised when sampled)."""
    loop = sac_loop()
    state = loop.set_task(loop.init(seed=0), {"distance": 0.12, "radius": 0.1})
    state, out = loop.train(state)
    items = stored(state.agent.buffer, num_envs=2)
    assert items.obs.shape[:3] == (2, 2 * 8, 2)
    np.testing.assert_allclose(items.next_obs, point_reach_successor(items.obs, items.action), atol=1e-5)
    np.testing.assert_array_equal(items.terminated, closest_approach(items.obs, items.next_obs) <= 0.1)

    ends = {"terminated": 0, "truncated": 0}
    for seed in range(2):
        for env in range(2):
            steps = 0
            for t in range(2 * 8 - 1):
                steps += 1
                terminated = bool(items.terminated[seed, t, env])
                restarted = np.all(items.obs[seed, t + 1, env, :4] == 0.0)  # at rest at the origin
                continued = np.array_equal(items.obs[seed, t + 1, env], items.next_obs[seed, t, env])
                if terminated or steps == 5:
                    ends["terminated" if terminated else "truncated"] += 1
                    assert restarted and not continued, (seed, t, env)
                    steps = 0
                else:
                    assert continued, (seed, t, env)
    assert ends["terminated"] >= 1 and ends["truncated"] >= 1, ends
    assert out.rows["train/episodes"].sum() >= sum(ends.values())


# -- exact resume, no recompilation ------------------------------------------------------------


@pytest.mark.optimised  # bit-identity is claimed for the build users run
def test_split_runs_with_restore_are_bit_identical(tmp_path):
    """One call of 3T == three calls of T with a save and a restore into a fresh loop between
    them: parameters, optimisers, targets and buffers (which wrap around) alike."""
    assert not jax.config.read("jax_disable_most_optimizations")
    long_loop = sac_loop(timesteps_per_iteration=6 * UNROLL)
    one_state, one_out = long_loop.train(long_loop.init(seed=5))
    one_state, one_out = host(one_state), host(one_out)
    one_rows = one_out.rows

    split_rows = []
    for i in range(3):
        loop = sac_loop()
        state = loop.init(seed=5) if i == 0 else loop.restore(tmp_path / f"ck{i - 1}")[0]
        state, out = loop.train(state)
        assert loop.compilations == 1
        split_rows.append(host(out.rows))
        loop.save(tmp_path / f"ck{i}", state)
    assert_trees_equal(state.agent.buffer, one_state.agent.buffer)
    assert np.asarray(one_state.agent.buffer.is_full).all()  # 96 transitions into 80 places: it wrapped
    assert_trees_equal(state, one_state)
    assert np.asarray(one_state.agent.obs_norm.count).tolist() == [96, 96]  # normalised by what it saw
    for key in ("loss/critic", "loss/actor", "alpha", "eval/return", "replay/size"):
        np.testing.assert_array_equal(np.concatenate([r[key] for r in split_rows], axis=1), one_rows[key])
    # before learning_starts (32 steps): no gradient steps, NaN losses, healthy flags
    assert np.isnan(one_rows["loss/critic"][:, :1]).all() and not np.isnan(one_rows["loss/critic"][:, 1:]).any()
    assert (one_out.health["loss"] == 1).all() and summarize(one_out)["train/nonfinite"] == 0.0


@pytest.mark.heavy
def test_no_recompilation_when_task_schedule_tau_and_target_entropy_change():
    loop = sac_loop()
    state = loop.init(seed=0)
    config = loop.agent.config
    changes = [
        lambda s: s,
        lambda s: loop.set_task(s, {"distance": 0.5}),
        lambda s: loop.set_hparams(s, dataclasses.replace(config, lr=Schedule(kind="cosine", peak=5e-4), tau=0.05)),
        lambda s: loop.set_hparams(
            s, dataclasses.replace(config, lr=Schedule(kind="step", peak=2e-3), tau=1.0, target_entropy_scale=-0.25)
        ),
    ]
    seen, agents = [], []
    for change in changes:
        state = change(state)
        state, out = loop.train(state)
        seen.append(host(out.rows))
        agents.append(host(state.agent))
    assert loop.compilations == 1 and compat.jit_cache_size(loop.compiled.call) == 1
    assert [r["task/distance"][0, -1] for r in seen] == [1.0, 0.5, 0.5, 0.5]
    assert float(seen[3]["lr"][0, 0]) == pytest.approx(2e-3)
    assert agents[3].hp.target_entropy_scale.tolist() == [-0.25, -0.25]
    assert agents[2].hp.tau.tolist() == [pytest.approx(0.05)] * 2
    # tau = 1 copies the critics into their targets at every gradient step; at 0.05 they lag
    kernel = lambda tree: jax.tree.leaves(tree)[0]  # noqa: E731
    assert not np.array_equal(kernel(agents[2].target_params), kernel(agents[2].params["critic"]))
    assert_trees_equal(agents[3].target_params, agents[3].params["critic"])


# -- refused configs -----------------------------------------------------------------------------


def tiny_config(**agent):
    """`sac_loop`'s settings as a trial config."""
    return {
        "env": {"name": "point_reach", "kwargs": {"max_episode_steps": 5}},
        "agent": {"name": "sac", **TINY, **agent},
        "train": {
            "total_timesteps": 1_000,
            "timesteps_per_iteration": 2 * UNROLL,
            "eval_every": 3 * UNROLL,
            "eval_episodes": 2,
            "num_seeds": 2,
        },
    }


@pytest.mark.parametrize(
    "config, message",
    [
        (tiny_config(learning_starts=5_000), r"agent\.learning_starts \(5000\) must be below train\.total_timesteps \(1000\)"),
        (tiny_config(batch_size=128), r"agent\.batch_size \(128\) must not exceed agent\.capacity \(80\)"),
        (tiny_config(capacity=8, batch_size=8), r"agent\.capacity \(8\) must hold .* = 16"),
        (tiny_config(utd_ratio=0.1), r"agent\.utd_ratio \(0\.1\) times .* whole number of gradient steps .* got 1\.6"),
        (tiny_config(tau=0.0), r"agent\.tau must be > 0"),
        ({**tiny_config(), "env": {"name": "cartpole"}}, r"agent\.name 'sac' needs .*action space is Discrete\(2\)"),
        ({**tiny_config(), "train": {"reset_mode": "unroll_start"}}, r"train\.reset_mode 'unroll_start' does not suit agent SAC"),
    ],
)
def test_bad_configs_are_refused_in_one_line_before_compiling(config, message):
    assert_refused_before_compiling(config, message)


@pytest.mark.heavy
def test_sac_config_round_trips_and_reports_stable_keys():
    config = Config.from_dict(tiny_config(lr={"kind": "linear", "peak": 1e-3}))
    assert isinstance(config.agent, SACConfig) and Config.from_dict(config.to_dict()) == config
    runner = Runner(config)
    first, second = runner.train(), runner.train()
    assert set(first) == set(second)
    for key in ("loss/actor", "loss/critic", "loss/temperature", "alpha", "q/mean", "lr", "entropy", "replay/size"):
        assert key in first
    # update 2 of the first call reaches learning_starts (32 env steps): the mean of the updates that learned
    assert np.isfinite(first["loss/critic"]) and first["loss/critic"] > 0
    assert second["replay/size"] == 4 * UNROLL and second["train/nonfinite"] == 0.0
    assert first["alpha"] == pytest.approx(1.0, abs=0.05)


# -- learning --------------------------------------------------------------------------------------


def train_until(loop, state, done, calls):
    """Train call by call until `done(result)`; returns the state and every call's result."""
    history = []
    for _ in range(calls):
        state, rows = loop.train(state)
        history.append(summarize(rows, latest=loop.agent.latest_metrics))
        if done(history[-1]):
            break
    return state, history


@pytest.mark.learning
@pytest.mark.long
def test_sac_learns_pendulum_within_20k_steps():
    env = make_env("pendulum")
    agent = SAC(
        SACConfig(
            num_envs=4, unroll_length=8, utd_ratio=1.0, batch_size=128, hidden_sizes=(64, 64), lr=3e-4, learning_starts=1_000
        ),
        env.observation_space,
        env.action_space,
    )
    loop = TrainLoop(env, agent, LoopConfig(total_timesteps=20_000, timesteps_per_iteration=4_000, num_seeds=4, eval_episodes=8))
    _, history = train_until(loop, loop.init(seed=0), lambda r: r["eval/return_mean"] >= -250, calls=5)
    returns = [(r["timestep"], round(r["eval/return_mean"])) for r in history]
    print("pendulum (env steps per seed, mean eval return):", returns)
    assert history[-1]["eval/return_mean"] >= -250, f"pendulum not learned in 20k steps: {returns}"
    assert history[0]["eval/return_mean"] < -600  # it had to learn (random acting scores about -1200)
    assert all(r["train/nonfinite"] == 0.0 for r in history) and loop.compilations == 1


@pytest.mark.learning
def test_sac_reaches_point_reach_targets():
    env = make_env("point_reach", max_episode_steps=50)
    agent = SAC(SACConfig(**POINT_REACH_AGENT), env.observation_space, env.action_space)
    loop = TrainLoop(env, agent, LoopConfig(total_timesteps=20_480, timesteps_per_iteration=4_096, num_seeds=2, eval_episodes=16))
    state, history = train_until(loop, loop.init(seed=0), lambda r: r["eval/success_rate_mean"] >= 0.9, calls=5)
    rates = [(r["timestep"], r["eval/success_rate_mean"]) for r in history]
    print("point_reach (env steps per seed, eval success rate):", rates)
    assert history[-1]["eval/success_rate_mean"] >= 0.9, f"point_reach not learned: {rates}"
    assert history[-1]["eval/length_mean"] < 50  # it arrives before the time limit, on average well before
    assert loop.compilations == 1


# -- through Tune ----------------------------------------------------------------------------------

POINT_REACH_AGENT = dict(
    num_envs=4,
    unroll_length=8,
    utd_ratio=0.5,
    batch_size=128,
    capacity=20_000,
    learning_starts=512,
    hidden_sizes=(64, 64),
    lr=1e-3,
    init_alpha=0.05,
    gamma=0.95,
)
BUDGET = 1_024  # env steps per seed per train() in the Tune tests


def point_reach_trial(**sections):
    config = {
        "env": {"name": "point_reach", "kwargs": {"max_episode_steps": 50}, "task": {"distance": 0.3, "radius": 0.2}},
        "agent": {"name": "sac", **POINT_REACH_AGENT, "hidden_sizes": [32, 32], "capacity": 4_096, "batch_size": 64},
        "train": {"total_timesteps": 20 * BUDGET, "timesteps_per_iteration": BUDGET, "num_seeds": 2, "eval_episodes": 8},
    }
    for key, value in sections.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) and key in config else value
    return config


@pytest.mark.slow
def test_asha_over_sac_learning_rate_with_a_point_reach_curriculum(ray_session, tmp_path):
    """One search proves two workflows: ASHA prunes by the curriculum level SAC reaches, and the
    ThresholdCurriculum promotes a SAC trial along point_reach's ladder without recompiling."""
    from ray import tune
    from ray.tune.schedulers import ASHAScheduler

    from ajax_tune import AjaxTrainable
    from ajax_tune.tune.output import trial_dirname
    from tests.test_tune import fit, rows

    ladder = {
        "class": "ajax_tune.curriculum:ThresholdCurriculum",
        "kwargs": {"levels": {"distance": [0.3, 0.6, 1.0], "radius": [0.2, 0.15, 0.1]}, "threshold": 0.9},
    }
    space = point_reach_trial(agent={"lr": tune.grid_search([1e-5, 2e-3])}, callbacks=[ladder])
    asha = ASHAScheduler(time_attr="training_iteration", max_t=6, grace_period=2, reduction_factor=2)
    results = fit(
        AjaxTrainable,
        space,
        tmp_path,
        "sac_asha",
        tune_config=tune.TuneConfig(
            metric="curriculum/level", mode="max", scheduler=asha, reuse_actors=True, trial_dirname_creator=trial_dirname
        ),
    )
    assert sorted(r.config["agent"]["lr"] for r in results) == [1e-5, 2e-3]
    assert all(2 <= r.metrics["training_iteration"] <= 6 for r in results)  # ASHA's rungs and max_t

    best = results.get_best_result()
    assert best.config["agent"]["lr"] == 2e-3
    df = rows(best)
    distance, chosen = df["curriculum/task/distance"].tolist(), df["curriculum/next_task/distance"].tolist()
    assert distance[1:] == chosen[:-1]  # each call trains on the task the curriculum chose after the last
    assert max(df["curriculum/level"]) >= 1 and distance[0] == pytest.approx(0.3)
    for before, after, rate in zip(distance, chosen, df["eval/success_rate_mean"]):
        assert (after > before) == (rate >= 0.9) or after == pytest.approx(1.0)  # promoted exactly when solved
    assert (df["perf/compilations"] == 1).all() and (df["train/nonfinite"] == 0).all()
    assert df["replay/size"].tolist() == [min(BUDGET * i, 4_096) for i in range(1, len(df) + 1)]


@pytest.mark.slow
def test_pbt_over_sac_schedules_carries_the_donor_buffer(ray_session, tmp_path):
    """PBT with reuse_actors: every actor compiles once, and an exploiting trial continues from
    exactly the replay buffers its donor had at the iteration it was cloned from."""
    from ray import tune

    from tests.test_tune import fit_synch_pbt

    space = point_reach_trial(
        agent={"lr": {"kind": "warmup_cosine", "peak": tune.choice([1e-4, 3e-3]), "warmup_fraction": 0.1}},
        # two trials: synchronous PBT at quantile 0.5 ranks them into a lower and an upper half of one
        train={"seed": tune.grid_search([0, 1]), "total_timesteps": 8 * BUDGET},
        callbacks=["tests.support.replay_probe:ReplayProbe"],
    )
    mutations = {
        "agent": {"lr": {"peak": tune.loguniform(1e-4, 1e-2), "kind": ["warmup_cosine", "cosine"], "warmup_fraction": [0.0, 0.1]}}
    }
    _, per_trial, exploits = fit_synch_pbt(
        space, tmp_path, "sac_pbt", mutations, metric="eval/return_mean", interval=2, resample_probability=0.5
    )
    assert exploits and all(exploits), "PBT never exploited"
    assert len(per_trial) == 2

    after = {(trial, r["env_steps"]): r["probe/buffer"] for trial, trial_rows in per_trial.items() for r in trial_rows}
    inherited = 0
    for trial, trial_rows in per_trial.items():
        for previous, r in zip([None, *trial_rows], trial_rows):
            assert r["perf/compilations"] == 1
            assert r["replay/size"] == min(r["env_steps"], 4_096)  # the buffer follows the state's lineage
            if np.isnan(r["probe/restored_buffer"]):
                continue
            donors = [
                t for (t, steps), fp in after.items() if steps == r["env_steps"] - BUDGET and fp == r["probe/restored_buffer"]
            ]
            assert donors, f"trial {trial} restored a buffer no trial had at step {r['env_steps'] - BUDGET}"
            if trial not in donors and previous is not None:
                assert r["probe/restored_buffer"] != previous["probe/buffer"]  # it really swapped buffers
                inherited += 1
    assert inherited >= 1
