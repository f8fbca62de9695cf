"""Recurrent PPO: one agent name, built from a `recurrent` setting; the same traced settings and
metrics as PPO; split runs, checkpoints and task changes as for every agent; evaluation and the
gymnasium policy carrying the state."""

import json

import jax
import numpy as np
import pytest

from ajax_tune.agents import PPO, PPOConfig, make_agent
from ajax_tune.agents.ppo import RecurrentPPO
from ajax_tune.cli import main
from ajax_tune.envs import make_env
from ajax_tune.errors import ConfigError
from ajax_tune.loop import LoopConfig, TrainLoop
from ajax_tune.runner import Runner
from ajax_tune.schedules import Schedule
from tests.support.helpers import assert_trees_equal, host

TINY = dict(num_envs=4, unroll_length=16, num_minibatches=2, update_epochs=2, hidden_sizes=(16,))
UNROLL = 4 * 16


def tiny_loop(cell="gru", env="cartpole", **loop):
    kwargs = {"hide_velocities": True} if env == "cartpole" else {"max_length": 8}
    env = make_env(env, **kwargs)
    config = PPOConfig(**TINY, lr=Schedule(kind="linear", peak=1e-3), recurrent={"cell": cell, "size": 8})
    train = dict(
        total_timesteps=40 * UNROLL, timesteps_per_iteration=2 * UNROLL, eval_every=3 * UNROLL, eval_episodes=2, num_seeds=2
    )
    return TrainLoop(env, make_agent("ppo", config, env.observation_space, env.action_space), LoopConfig(**{**train, **loop}))


def runner_config(**agent):
    return {
        "env": {"name": "cartpole", "kwargs": {"hide_velocities": True}},
        "agent": {**TINY, "hidden_sizes": [16], "recurrent": {"cell": "gru", "size": 8}, **agent},
        "train": {"total_timesteps": 10 * UNROLL, "timesteps_per_iteration": 2 * UNROLL, "num_seeds": 2, "eval_episodes": 2},
    }


def test_a_recurrent_setting_builds_recurrent_ppo_and_none_leaves_ppo_as_it_was():
    space = make_env("cartpole", hide_velocities=True)
    recurrent = PPOConfig(**TINY, recurrent={"cell": "lstm", "size": 8})
    rec = make_agent("ppo", recurrent, space.observation_space, space.action_space)
    plain = make_agent("ppo", PPOConfig(**TINY), space.observation_space, space.action_space)
    assert type(rec) is RecurrentPPO and type(plain) is PPO and PPO.form(recurrent) is RecurrentPPO
    with pytest.raises(ConfigError, match="agent.recurrent is set: build the recurrent form"):
        PPO(recurrent, space.observation_space, space.action_space)
    assert rec.metric_keys == plain.metric_keys and rec.reset_modes == plain.reset_modes
    assert not hasattr(plain, "init_carry")
    carry = rec.init_carry(3)
    assert [x.shape for x in carry] == [(3, 8), (3, 8)]  # an LSTM's cell and hidden state
    assert make_env("cartpole", hide_velocities=True).observation_space.shape == (2,)


@pytest.mark.parametrize(
    "agent, expected",
    [
        ({"name": "sac", "recurrent": {"cell": "gru"}}, "agent.recurrent: agent 'sac' has no recurrent form"),
        ({"recurrent": {"cell": "gru", "size": 0}}, "agent.recurrent.size must be >= 1, got 0"),
        ({"recurrent": {"cell": "rnn"}}, "agent.recurrent.cell must be one of ['gru', 'lstm'], got 'rnn'"),
        ({"recurrent": {"cells": "gru"}}, "unknown key agent.recurrent.'cells'"),
        ({"recurrent": "gru"}, "agent.recurrent must be a mapping"),
        ({"num_minibatches": 3}, "agent.num_minibatches (3) must divide num_envs (4)"),
    ],
)
def test_bad_recurrent_settings_are_refused_in_one_line(agent, expected):
    config = runner_config()
    config["agent"] = {**config["agent"], **agent}
    if agent.get("name") == "sac":
        config["agent"] = {"name": "sac", **{k: v for k, v in agent.items() if k != "name"}}
    with pytest.raises(ConfigError) as info:
        Runner.check(config)
    assert expected in str(info.value) and "\n" not in str(info.value)


@pytest.mark.heavy
@pytest.mark.parametrize("cell", ["gru", "lstm"])
def test_the_replay_computes_flaxs_cell(cell):
    """The update's replay (encoder and input-side products over the whole unroll at once, the
    carry-side products as one matrix product per step, restarts where the loop restarted) is
    flax's cell applied step by step: the same arithmetic, its matrix products of other shapes
    (so summed in another order: within a few float32 roundings, not bit for bit)."""
    env = make_env("cartpole", hide_velocities=True)
    agent = RecurrentPPO(PPOConfig(**TINY, recurrent={"cell": cell, "size": 8}), env.observation_space, env.action_space)
    params = agent.init(jax.random.key(0)).params["trunk"]
    k_obs, k_reset, k_start = jax.random.split(jax.random.key(1), 3)
    obs = jax.random.normal(k_obs, (16, 4, 2))
    reset = jax.random.bernoulli(k_reset, 0.2, (16, 4))
    start = jax.tree.map(lambda z: jax.random.normal(k_start, z.shape), agent.init_carry(4))

    def flax_step(carry, xs):
        x, fresh = xs
        carry = jax.tree.map(lambda z, c: jax.numpy.where(fresh[:, None], z, c), agent.init_carry(4), carry)
        carry, features = agent.trunk.apply(params, carry, x)
        return carry, (features, carry)

    expected = jax.jit(lambda: jax.lax.scan(flax_step, start, (obs, reset))[1])()
    close = lambda a, b: [np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6) for x, y in zip(*map(jax.tree.leaves, (a, b)))]  # noqa: E731
    close(jax.jit(agent._replay)(params, start, obs, reset), expected)
    close(jax.jit(agent.trunk.step)(params, start, obs[0]), jax.jit(agent.trunk.apply)(params, start, obs[0]))


@pytest.mark.heavy
@pytest.mark.parametrize("forward", ["run", "recorded"])
def test_the_lstms_written_out_backward_pass_gives_jaxs_gradients(forward):
    """The loss's LSTM (`agents/lstm.py`: the reverse loop carries only the state's gradient, the
    recurrent kernel's is one product after it) has the gradients JAX derives for flax's cell
    applied step by step: for every trunk parameter (the input side included) and the start
    carries, across restarts, to float32 rounding. Also where its forward pass is the one
    recorded while acting (`recorded`: the gates and carries of `step_with_gates`, stepped as the
    rollout steps), which the update's first gradient step reads."""
    env = make_env("cartpole", hide_velocities=True)
    agent = RecurrentPPO(PPOConfig(**TINY, recurrent={"cell": "lstm", "size": 8}), env.observation_space, env.action_space)
    params = agent.init(jax.random.key(0)).params["trunk"]
    k_obs, k_reset, k_start, k_weights = jax.random.split(jax.random.key(2), 4)
    obs = jax.random.normal(k_obs, (16, 4, 2))
    reset = jax.random.bernoulli(k_reset, 0.2, (16, 4))
    start = jax.tree.map(lambda z: jax.random.normal(k_start, z.shape), agent.init_carry(4))
    weights = jax.random.normal(k_weights, (16, 4, 8))  # a loss that reads every step differently

    def flax_step(params, carry, xs):
        x, fresh = xs
        carry = jax.tree.map(lambda z, c: jax.numpy.where(fresh[:, None], z, c), agent.init_carry(4), carry)
        return agent.trunk.apply(params, carry, x)

    def flax_loss(params, start):
        features = jax.lax.scan(lambda c, xs: flax_step(params, c, xs), start, (obs, reset))[1]
        return jax.numpy.sum(jax.numpy.sin(features) * weights)

    def acting(params, carry, xs):
        x, fresh = xs
        carry = jax.tree.map(lambda z, c: jax.numpy.where(fresh[:, None], z, c), agent.init_carry(4), carry)
        carry, _, gates = agent.trunk.step_with_gates(params, carry, x)
        return carry, (gates, carry)

    def ours(params, start):
        recorded = None
        if forward == "recorded":  # recorded under these parameters, as the rollout records them
            gates, after = jax.lax.stop_gradient(jax.lax.scan(lambda c, xs: acting(params, c, xs), start, (obs, reset))[1])
            recorded = (jax.numpy.bool_(True), gates, after)
        return jax.numpy.sum(jax.numpy.sin(agent.trunk.features(params, start, obs, reset, recorded)) * weights)

    expected = jax.jit(jax.value_and_grad(flax_loss, argnums=(0, 1)))(params, start)
    got = jax.jit(jax.value_and_grad(ours, argnums=(0, 1)))(params, start)
    leaves = list(zip(*map(jax.tree.leaves, (got, expected))))
    assert len(leaves) > 6  # the loss, the encoder's and cell's parameters, both start carries
    for x, y in leaves:
        assert np.any(np.asarray(y) != 0)  # every gradient is there to compare
        np.testing.assert_allclose(x, y, rtol=2e-5, atol=1e-6)


@pytest.mark.heavy
@pytest.mark.parametrize("normalize", [False, True])
def test_the_update_reads_the_recorded_values_only_where_its_normaliser_did_not_move(normalize):
    """The values a rollout recorded while acting hold for the parameters and observation
    normaliser that collected it. The update reads them (the unroll is not replayed for them)
    unless it normalises observations, whose statistics it moves before computing GAE: then it
    replays the unroll, and what was recorded does not matter. Shown by corrupting the record."""
    from ajax_tune.agents.base import Carries, Clock
    from ajax_tune.agents.ppo.agent import PPOTransition

    env = make_env("cartpole", hide_velocities=True)
    config = PPOConfig(**TINY, normalize_observations=normalize, recurrent={"cell": "lstm", "size": 8})
    agent = make_agent("ppo", config, env.observation_space, env.action_space)
    T, B = TINY["unroll_length"], TINY["num_envs"]
    k = jax.random.split(jax.random.key(3), 5)
    done = jax.random.bernoulli(k[1], 0.1, (T, B))
    batch = PPOTransition(
        obs=jax.random.normal(k[0], (T, B, 2)) * 3.0 + 1.0,
        action=jax.random.randint(k[2], (T, B), 0, 2),
        log_prob=jax.numpy.full((T, B), -0.7),
        reward=jax.random.uniform(k[3], (T, B)),
        terminated=done,
        truncated=jax.numpy.zeros((T, B), bool),
        valid=jax.numpy.ones((T, B), bool),
        next_obs=jax.random.normal(k[4], (T, B, 2)),
    )
    carries = Carries(start=agent.init_carry(B), reset=jax.numpy.concatenate([jax.numpy.zeros((1, B), bool), done[:-1]]))
    state = agent.init(jax.random.key(4))
    features, after = agent._replay(state.params["trunk"], carries.start, batch.obs, carries.reset)
    recorded = batch.replace(value=agent._value(state.params["value"], features), after=after)
    corrupted = recorded.replace(value=recorded.value + 5.0)
    clock = Clock(jax.numpy.float32(0), jax.numpy.float32(1e6))
    update = jax.jit(lambda b: agent.update(state, b, jax.random.key(5), clock, carries=carries)[1])
    honest, misled = update(recorded), update(corrupted)
    if normalize:
        assert_trees_equal(honest, misled)
    else:
        assert float(misled["loss/value"]) > float(honest["loss/value"]) + 1.0


@pytest.mark.heavy
@pytest.mark.parametrize("mode, minibatches", [("next_step", 2), ("unroll_start", 1)])
def test_the_first_gradient_step_reads_the_gates_the_rollout_recorded(mode, minibatches):
    """The LSTM records its gate activations while acting, and the update's first gradient step
    (the first epoch's first minibatch), whose parameters are the rollout's, reads them with the
    carries each step left for its forward pass instead of running the cell again. On real
    unrolls of cartpole, with restarts and episodes carried over between unrolls, 2 epochs of 2
    minibatches (the first a shuffled half of the envs) or of 1: the update from the record
    equals the update that runs the cell (to float32 rounding), and corrupting the record changes
    it, so it is read. Where the update moves the observation normaliser first, nothing is
    recorded."""
    from ajax_tune.agents.base import Carries, Clock, reset_carry
    from ajax_tune.envs import EpisodeWrapper
    from ajax_tune.envs.wrappers import VecEnv
    from ajax_tune.loop.rollout import make_collect

    env = EpisodeWrapper(make_env("cartpole", hide_velocities=True), 7)
    config = PPOConfig(**{**TINY, "num_minibatches": minibatches}, recurrent={"cell": "lstm", "size": 8})
    agent = make_agent("ppo", config, env.observation_space, env.action_space)
    normalising = PPOConfig(**TINY, recurrent={"cell": "lstm", "size": 8}, normalize_observations=True)
    normalising = make_agent("ppo", normalising, env.observation_space, env.action_space)
    assert agent.records_gates and not normalising.records_gates
    envs, k = TINY["num_envs"], jax.random.split(jax.random.key(0), 8)
    venv = VecEnv(env, envs)
    collect = jax.jit(make_collect(agent, venv, mode))
    state, carry = agent.init(k[0]), agent.init_carry(envs)
    env_state = venv.reset(k[1], {k_: jax.numpy.asarray(v) for k_, v in env.validate_task({}).items()})
    clock = Clock(jax.numpy.float32(0), jax.numpy.float32(1e6), 7)
    update = jax.jit(lambda batch, carries: agent.update(state, batch, k[7], clock, carries=carries)[:2])
    restarts = 0
    for i in range(2):  # the second unroll starts mid-episode, from carried-over carries
        fresh = env_state.episode.done
        carry = reset_carry(agent, carry, fresh)
        env_state = venv.reset_done(env_state, k[2 + i])
        start = carry
        env_state, carry, resets, batch, _ = collect(state, env_state, carry, fresh, k[4 + i])
        carries = Carries(start=start, reset=resets)
        assert batch.gates.shape == (TINY["unroll_length"], envs, 4 * 8)
        from_record, from_cell = update(batch, carries), update(batch.replace(gates=None), carries)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), from_record, from_cell)
        misled = update(batch.replace(gates=batch.gates * 0.5), carries)
        moved = jax.tree.map(lambda a, b: float(jax.numpy.max(jax.numpy.abs(a - b))), misled[0].params, from_cell[0].params)
        assert max(jax.tree.leaves(moved)) > 1e-4
        restarts += int(resets.sum())
    assert restarts > 0  # carries restarted (inside the unrolls, or at the second's start in unroll_start mode)


@pytest.mark.parametrize("cell", ["gru", "lstm"])
@pytest.mark.heavy
def test_recurrent_ppo_trains_with_ppo_metrics_and_a_task_change_compiles_nothing(cell):
    loop = tiny_loop(cell)
    state, out = loop.train(loop.init(seed=1))
    result = loop.summarize(out)
    assert set(PPO.metric_keys) <= set(result) and all(np.isfinite(result[k]) for k in PPO.metric_keys)
    assert result["train/nonfinite"] == 0.0
    state = loop.set_task(state, {"pole_length": np.array([0.5, 0.3, 0.5, 0.7])}, eval_task={"pole_length": 0.3})
    state, out = loop.train(state)
    assert loop.summarize(out)["curriculum/task/pole_length"] == pytest.approx(0.3)
    assert loop.compilations == 1


@pytest.mark.optimised
def test_split_runs_with_save_and_restore_are_bit_identical(tmp_path):
    """One call of 6 unrolls == 3 calls of 2, each into a fresh loop restored from a checkpoint, in
    the fully optimised build users run (the claim is about that build; one test, two programs).
    Measured on 2 shared cores: 27 s with a cold compilation cache, 8.5 s warm."""
    assert jax.config.read("jax_disable_most_optimizations") is False
    long_loop = tiny_loop(timesteps_per_iteration=6 * UNROLL)
    one_call = host(long_loop.train(long_loop.init(seed=5)))
    for i in range(3):
        loop = tiny_loop()
        state = loop.init(seed=5) if i == 0 else loop.restore(tmp_path / f"ckpt{i - 1}")[0]
        state, out = loop.train(state)
        assert loop.compilations == 1
        loop.save(tmp_path / f"ckpt{i}", state)
    assert_trees_equal(state, one_call[0])  # parameters, optimiser, carries, env states and keys
    assert state.carry.shape == (2, 4, 8)
    np.testing.assert_array_equal(np.asarray(out.rows["loss/policy"]), one_call[1].rows["loss/policy"][:, -2:])


@pytest.mark.heavy
def test_evaluation_and_the_gymnasium_policy_carry_the_state(tmp_path, capsys):
    runner = Runner(runner_config())
    runner.train()
    out = runner.evaluate(episodes=3, seed=0)
    assert out["return"].shape == (2, 3)
    policy = runner.policy()
    first = policy(np.zeros(2, np.float32))
    assert policy.carry is not None and int(first) in (0, 1)
    carried = jax.device_get(policy.carry)
    policy.reset()
    assert not np.array_equal(jax.device_get(policy.carry), carried)  # a fresh carry for a new episode
    checkpoint = runner.save(tmp_path / "ckpt")
    assert main(["evaluate", str(checkpoint), "--episodes", "3", "--json"]) == 0
    jax_stats = json.loads(capsys.readouterr().out)
    # the checkpoint's policy, restored in a fresh runner with its carries, plays the episodes the live one did
    assert [jax_stats[f"return_{k}"] for k in ("min", "max")] == [out["return"].min(), out["return"].max()]
    assert jax_stats["return_mean"] == pytest.approx(float(out["return"].mean()))
    # gymnasium's CartPole-v1 shows the policy position and angle only, as the JAX env did
    assert main(["evaluate", str(checkpoint), "--episodes", "3", "--gymnasium", "CartPole-v1", "--json"]) == 0
    gym_stats = json.loads(capsys.readouterr().out)
    assert gym_stats["env"] == "CartPole-v1" and gym_stats["return_min"] >= 8 and jax_stats["return_min"] >= 8
