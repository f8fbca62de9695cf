"""SAC on the agent-neutral loop: what its buffer holds, exact resume, no recompilation, refused
configs, learning, and the Tune workflows."""

import dataclasses

import jax
import numpy as np
import pytest
from helpers import assert_trees_equal, host

from ajax_tune import Runner
from ajax_tune.agents import SAC, SACConfig
from ajax_tune.config import Config
from ajax_tune.envs import make_env
from ajax_tune.evaluation import summarize
from ajax_tune.fields import ConfigError
from ajax_tune.loop import LoopConfig, TrainLoop
from ajax_tune.schedules import Schedule

TINY = dict(num_envs=2, unroll_length=8, utd_ratio=0.5, batch_size=16, capacity=80, learning_starts=32,
            hidden_sizes=(16, 16))
UNROLL = 2 * 8  # env steps per update with TINY


def sac_loop(env="point_reach", agent=None, env_kwargs=None, **loop_overrides) -> TrainLoop:
    """Every fast test builds this same program (the compilation cache then compiles it once)."""
    env = make_env(env, **(env_kwargs or {"max_episode_steps": 5}))
    config = SACConfig(**{**TINY, **(agent or {})})
    loop_cfg = dict(total_timesteps=20_000, timesteps_per_iteration=2 * UNROLL, eval_every=3 * UNROLL,
                    eval_episodes=2, num_seeds=2)
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


def test_buffer_holds_true_successors_and_cuts_only_at_terminations():
    """Episodes end by arriving (terminated) or after 5 steps (truncated); envs restart on the
    very next step. Every stored transition holds the true successor of its observation, the
    truncated ones included (their real final observation, not the next episode's first), and
    `terminated` is set exactly on arrivals."""
    loop = sac_loop()
    state = loop.set_task(loop.init(seed=0), {"distance": 0.12, "radius": 0.1})
    state, rows = loop.train(state)
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
    assert rows["train/episodes"].sum() >= sum(ends.values())


# -- exact resume, no recompilation ------------------------------------------------------------

def test_split_runs_with_restore_are_bit_identical(tmp_path):
    """One call of 3T == three calls of T with a save and a restore into a fresh loop between
    them: parameters, optimisers, targets and buffers (which wrap around) alike."""
    long_loop = sac_loop(timesteps_per_iteration=6 * UNROLL)
    one_state, one_rows = long_loop.train(long_loop.init(seed=5))
    one_state, one_rows = host(one_state), host(one_rows)

    split_rows = []
    for i in range(3):
        loop = sac_loop()
        state = loop.init(seed=5) if i == 0 else loop.restore(tmp_path / f"ck{i - 1}")[0]
        state, rows = loop.train(state)
        assert loop.compilations == 1
        split_rows.append(host(rows))
        loop.save(tmp_path / f"ck{i}", state)
    assert_trees_equal(state.agent.buffer, one_state.agent.buffer)
    assert np.asarray(one_state.agent.buffer.is_full).all()  # 96 transitions into 80 places: it wrapped
    assert_trees_equal(state, one_state)
    for key in ("loss/critic", "loss/actor", "alpha", "eval/return", "replay/size"):
        np.testing.assert_array_equal(np.concatenate([r[key] for r in split_rows], axis=1), one_rows[key])
    # before learning_starts (32 steps): no gradient steps, NaN losses, healthy flags
    assert np.isnan(one_rows["loss/critic"][:, :1]).all() and not np.isnan(one_rows["loss/critic"][:, 1:]).any()
    assert (one_rows["health/loss"] == 1).all() and summarize(one_rows)["train/nonfinite"] == 0.0


def test_no_recompilation_when_task_schedule_tau_and_target_entropy_change():
    loop = sac_loop()
    state = loop.init(seed=0)
    config = loop.agent.config
    changes = [
        lambda s: s,
        lambda s: loop.set_task(s, {"distance": 0.5}),
        lambda s: loop.set_hparams(s, dataclasses.replace(config, lr=Schedule(kind="cosine", peak=5e-4), tau=0.05)),
        lambda s: loop.set_hparams(s, dataclasses.replace(config, lr=Schedule(kind="step", peak=2e-3),
                                                          tau=1.0, target_entropy_scale=-0.25)),
    ]
    seen, agents = [], []
    for change in changes:
        state = change(state)
        state, rows = loop.train(state)
        seen.append(host(rows))
        agents.append(host(state.agent))
    assert loop.compilations == 1 and loop._train._cache_size() == 1
    assert [r["task/distance"][0, -1] for r in seen] == [1.0, 0.5, 0.5, 0.5]
    assert float(seen[3]["lr"][0, 0]) == pytest.approx(2e-3)
    assert agents[3].hp["target_entropy_scale"].tolist() == [-0.25, -0.25]
    assert agents[2].hp["tau"].tolist() == [pytest.approx(0.05)] * 2
    # tau = 1 copies the critics into their targets at every gradient step; at 0.05 they lag
    kernel = lambda tree: jax.tree.leaves(tree)[0]  # noqa: E731
    assert not np.array_equal(kernel(agents[2].target_critic), kernel(agents[2].params["critic"]))
    assert_trees_equal(agents[3].target_critic, agents[3].params["critic"])


# -- refused configs -----------------------------------------------------------------------------

def tiny_config(**agent):
    """`sac_loop`'s settings as a trial config."""
    return {"env": {"name": "point_reach", "kwargs": {"max_episode_steps": 5}}, "agent": {"name": "sac", **TINY, **agent},
            "train": {"total_timesteps": 1_000, "timesteps_per_iteration": 2 * UNROLL, "eval_every": 3 * UNROLL,
                      "eval_episodes": 2, "num_seeds": 2}}


@pytest.mark.parametrize("config, message", [
    (tiny_config(learning_starts=5_000), r"agent\.learning_starts \(5000\) is beyond .*train\.total_timesteps \(1000\)"),
    (tiny_config(batch_size=128), r"agent\.batch_size \(128\) must not exceed agent\.capacity \(80\)"),
    (tiny_config(capacity=8, batch_size=8), r"agent\.capacity \(8\) must hold .* = 16"),
    (tiny_config(utd_ratio=0.1), r"agent\.utd_ratio \(0\.1\) times .* whole number of gradient steps .* got 1\.6"),
    (tiny_config(tau=0.0), r"agent\.tau must be > 0"),
    ({**tiny_config(), "env": {"name": "cartpole"}}, r"agent\.name 'sac' needs .*action space is Discrete\(2\)"),
])
def test_bad_configs_are_refused_in_one_line_before_compiling(config, message):
    with pytest.raises(ConfigError, match=message) as info:
        Runner.check(config)
    assert "\n" not in str(info.value)
    # the same error where a trial would start, and no runner (nothing compiled) came of it
    with pytest.raises(ConfigError, match=message):
        Runner(config)


def test_sac_config_round_trips_and_reports_stable_keys():
    config = Config.from_dict(tiny_config(lr={"kind": "linear", "peak": 1e-3}))
    assert isinstance(config.agent, SACConfig) and Config.from_dict(config.to_dict()) == config
    runner = Runner(config)
    first, second = runner.train(), runner.train()
    assert set(first) == set(second)
    for key in ("loss/actor", "loss/critic", "loss/temperature", "alpha", "q/mean", "lr", "entropy", "replay/size"):
        assert key in first
    assert np.isnan(first["loss/critic"]) or first["loss/critic"] >= 0  # mean of the updates that learned
    assert second["replay/size"] == 4 * UNROLL and second["train/nonfinite"] == 0.0
    assert first["alpha"] == pytest.approx(1.0, abs=0.05)
