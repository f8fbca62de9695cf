"""Episode semantics of EpisodeWrapper and VecEnv, per-env tasks, and no recompilation on tasks."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune.compat import jit_cache_size
from ajax_tune.envs import EpisodeWrapper, TaskError, VecEnv, make_env
from ajax_tune.envs.base import task_to_jax

RIGHT = 1
LEFT = 0


def corridor_vec(num_envs, lengths, max_episode_steps=6, penalty=0.0):
    env = EpisodeWrapper(make_env("corridor", max_length=16), max_episode_steps, truncation_penalty=penalty)
    venv = VecEnv(env, num_envs)
    task = env.validate_task({"length": np.asarray(lengths, np.int32)}, num_envs=num_envs)
    state = venv.reset(jax.random.PRNGKey(0), task_to_jax(task))
    return venv, state


def run(venv, state, actions):
    step = jax.jit(venv.step)
    trace = []
    for t, a in enumerate(actions):
        state = step(state, jnp.asarray(a, jnp.int32), jax.random.PRNGKey(t))
        trace.append(jax.device_get(state))
    return state, trace


def test_termination_versus_truncation():
    # env 0 reaches the goal in 2 steps (terminated); env 1 cannot reach 9 cells in 6 (truncated)
    venv, state = corridor_vec(2, [2, 9])
    _, trace = run(venv, state, [[RIGHT, RIGHT]] * 6)
    assert [bool(s.terminated[0]) for s in trace] == [False, True, False, False, False, False]
    assert [bool(s.truncated[0]) for s in trace] == [False] * 6
    assert [bool(s.truncated[1]) for s in trace] == [False] * 5 + [True]
    assert not any(bool(s.terminated[1]) for s in trace)
    assert trace[-1].episode.step.tolist() == [2, 6]
    assert trace[-1].episode.ret.tolist() == [1.0, 0.0]


def test_post_done_steps_are_frozen_and_masked():
    venv, state = corridor_vec(1, [2])
    _, trace = run(venv, state, [[RIGHT]] * 5)
    assert [bool(s.episode.post_done[0]) for s in trace] == [False, False, True, True, True]
    assert [bool(s.episode.done[0]) for s in trace] == [False, True, True, True, True]
    for s in trace[2:]:
        assert float(s.reward[0]) == 0.0 and not bool(s.terminated[0]) and not bool(s.truncated[0])
        np.testing.assert_array_equal(s.obs, trace[1].obs)  # frozen at the final observation
        assert int(s.episode.step[0]) == 2 and float(s.episode.ret[0]) == 1.0


def test_truncation_penalty_applies_only_to_truncation():
    venv, state = corridor_vec(2, [2, 9], penalty=0.5)
    final, trace = run(venv, state, [[RIGHT, RIGHT]] * 6)
    assert float(trace[1].reward[0]) == 1.0  # terminated normally: no penalty
    assert float(trace[5].reward[1]) == -0.5
    assert final.episode.ret.tolist() == [1.0, -0.5]


def test_reset_only_when_asked_and_keeps_task():
    venv, state = corridor_vec(2, [2, 5])
    state, _ = run(venv, state, [[RIGHT, LEFT]] * 3)
    assert state.episode.done.tolist() == [True, False]
    # stepping never resets: the finished env stays finished however long the unroll is
    state, _ = run(venv, state, [[RIGHT, RIGHT]] * 2)
    assert bool(state.episode.post_done[0])
    reset = jax.jit(venv.reset_done)(state, jax.random.PRNGKey(1))
    assert reset.episode.step.tolist() == [0, 5]  # only the finished env restarted
    assert not bool(reset.episode.done[0]) and not bool(reset.episode.post_done[0])
    assert reset.task["length"].tolist() == [2, 5]  # tasks survive the reset
    np.testing.assert_array_equal(reset.obs[1], state.obs[1])


def test_per_env_tasks_behave_differently():
    venv, state = corridor_vec(3, [1, 3, 5], max_episode_steps=10)
    final, _ = run(venv, state, [[RIGHT] * 3] * 6)
    assert final.episode.step.tolist() == [1, 3, 5]
    assert final.info["success"].tolist() == [1.0, 1.0, 1.0]


def test_set_task_restarts_only_changed_envs():
    venv, state = corridor_vec(2, [4, 4])
    state, _ = run(venv, state, [[RIGHT, RIGHT]])
    state = venv.set_task(state, task_to_jax({"length": np.array([4, 7], np.int32)}))
    assert state.episode.done.tolist() == [False, True]
    state = venv.reset_done(state, jax.random.PRNGKey(3))
    assert state.episode.step.tolist() == [1, 0]
    assert state.task["length"].tolist() == [4, 7]


def test_open_door_at_the_start_pays_the_exit_reward():
    env = EpisodeWrapper(make_env("corridor", max_length=16), 10)
    venv = VecEnv(env, 2)
    task = env.validate_task({"length": 5, "exit_reward": [0.0, 0.25]}, num_envs=2)
    state = venv.reset(jax.random.PRNGKey(0), task_to_jax(task))
    state, trace = run(venv, state, [[LEFT, LEFT]])
    assert state.terminated.tolist() == [False, True]  # closed door: a wall; open door: out
    assert state.reward.tolist() == [0.0, 0.25]
    assert state.info["success"].tolist() == [0.0, 0.0]


def test_rollout_with_new_tasks_compiles_once():
    """One jitted rollout, stepped on four different tasks (scalar and per env)."""
    env = EpisodeWrapper(make_env("corridor", max_length=16), 20)
    venv = VecEnv(env, 4)
    traces = []

    @jax.jit
    def rollout(state, key):
        traces.append(1)
        state = venv.reset_done(state, key)

        def body(s, k):
            s = venv.step(s, jnp.ones((4,), jnp.int32), k)
            return s, s.reward

        return jax.lax.scan(body, state, jax.random.split(key, 20))

    state = venv.reset(jax.random.PRNGKey(0), task_to_jax(env.validate_task({"length": 3})))
    returns = []
    for i, task in enumerate(
        [
            {"length": np.int32(3)},
            {"length": np.int32(9)},
            {"length": np.array([1, 2, 3, 4], np.int32)},
            {"length": np.array([16, 8, 4, 2], np.int32)},
        ]
    ):
        state = venv.set_task(state, task_to_jax(task))
        state, rewards = rollout(state, jax.random.PRNGKey(i))
        returns.append(np.asarray(rewards).sum(0))
        np.testing.assert_array_equal(np.asarray(state.episode.step), np.broadcast_to(task["length"], (4,)))
    assert len(traces) == 1
    assert jit_cache_size(rollout) == 1
    assert all(r.tolist() == [1.0] * 4 for r in returns)


def test_task_defaults_and_partial_updates():
    env = make_env("corridor", max_length=16, default_length=5)
    assert env.default_task()["length"] == 5
    assert env.validate_task({})["length"] == 5
    assert env.validate_task({}, current={"length": np.int32(9)})["length"] == 9
    batch = env.validate_task({"length": [1, 2, 3]}, num_envs=3)
    assert batch["length"].dtype == np.int32 and batch["length"].tolist() == [1, 2, 3]


@pytest.mark.parametrize(
    "task, message",
    [
        ([3], "must be a mapping"),
        ({"lenght": 3}, "unknown task field"),
        ({"length": 0}, "in [1, 16]"),
        ({"length": 17}, "in [1, 16]"),
        ({"length": 2.5}, "expected an integer"),
        ({"length": "long"}, "expected integer scalar"),
        ({"length": True}, "boolean"),
        ({"length": [1, 2]}, "expected shape"),
        ({"length": float("nan")}, "finite"),
    ],
)
def test_bad_corridor_tasks(task, message):
    env = make_env("corridor", max_length=16)
    with pytest.raises(TaskError, match="corridor") as info:
        env.validate_task(task, num_envs=3)
    assert message in str(info.value)


def test_registry_names_the_nearest_env():
    with pytest.raises(KeyError, match="did you mean 'corridor'"):
        make_env("coridor")
