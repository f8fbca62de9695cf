"""Jumanji by name: `jumanji/<id>`, task-free (its settings are constructor arguments), every
observation field flattened in order, Discrete actions."""

import pytest

from tests.support.helpers import host, import_extra
from tests.support.suites import episode_rollout, gymnasium_check, refused, smoke, step_keys, tiny

import_extra("jumanji", extra="jumanji")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from ajax_tune.envs import EpisodeWrapper, make_env  # noqa: E402

SNAKE = "jumanji/Snake-v1"


def test_observations_flattened_in_order():
    snake = make_env(SNAKE)
    # grid (12 x 12 x 5), step count, action mask (4): the grid first, an image
    assert snake.observation_space.shape == (12 * 12 * 5 + 1 + 4,) and snake.image_shape == (12, 12, 5)
    assert snake.task_spec == {} and snake.max_episode_steps == 4000 and snake.action_space.n == 4
    assert make_env("jumanji/Game2048-v1").max_episode_steps == 1000  # no time limit of its own


@pytest.mark.parametrize(
    "sections, message",
    [
        ({"env": {"name": "jumanji/Snake-v2"}}, "unknown jumanji env 'Snake-v2'; did you mean 'jumanji/Snake-v1'"),
        ({"env": {"name": "jumanji/Minesweeper-v0"}}, r"its actions are MultiDiscrete\(\[10 10\]\)"),
        ({"task_sampler": {"name": "uniform"}}, "task_sampler: jumanji/Snake-v1 has no task fields"),
        ({"env": {"name": SNAKE, "kwargs": {"max_episode_steps": -5}}}, "max_episode_steps must be an integer >= 1, got -5"),
    ],
)
def test_bad_input_is_one_line_before_compiling(sections, message):
    refused({**tiny({"name": SNAKE}), **sections}, message)


LIMIT = 12
UP, RIGHT, DOWN, LEFT = 0, 1, 2, 3  # Snake's actions


@pytest.mark.heavy
def test_episodes_end_as_jumanjis_own_step_says():
    """Snake with a 12-step limit of its own, stepped beside jumanji's own step from the same
    states. Running into the wall (jumanji: the last step, discount 0, before its limit) is
    `terminated`. At its limit jumanji ends the episode with discount 0 as well, folding the time
    limit into a termination; here that step is `truncated` (not terminated), keeping jumanji's
    final observation to bootstrap from."""
    env = make_env(SNAKE, time_limit=LIMIT)
    assert env.max_episode_steps == LIMIT
    wrapped, run = EpisodeWrapper(env), episode_rollout(env)
    beside = jax.jit(
        lambda state, action, key: (wrapped.step(state, action, key), env.jumanji_env.step(state.physics[0], action))
    )
    _, keys = step_keys(0, LIMIT)

    _, crashed = run({}, jnp.full(LIMIT, UP))  # the head starts on row 8: the wall after 9 moves up
    end = int(np.argmax(crashed.terminated))
    assert end == 8 and crashed.terminated.sum() == 1 and not crashed.truncated.any()
    ours, (_, theirs) = host(beside(jax.tree.map(lambda x: x[end - 1], crashed), jnp.int32(UP), keys[end]))
    assert bool(theirs.last()) and float(theirs.discount) == 0.0 and bool(ours.terminated) and not bool(ours.truncated)
    np.testing.assert_array_equal(crashed.obs[end], ours.obs)

    _, circling = run({}, jnp.asarray([LEFT, UP, RIGHT, DOWN] * 3))  # a square with no fruit on it
    assert circling.truncated.tolist() == [False] * (LIMIT - 1) + [True] and not circling.terminated.any()
    ours, (inner, theirs) = host(beside(jax.tree.map(lambda x: x[LIMIT - 2], circling), jnp.int32(DOWN), keys[-1]))
    assert bool(theirs.last()) and float(theirs.discount) == 0.0 and int(inner.step_count) == LIMIT  # its limit, as an end
    assert bool(ours.truncated) and not bool(ours.terminated)
    observed = np.concatenate([np.asarray(x, np.float32).reshape(-1) for x in jax.tree.leaves(theirs.observation)])
    np.testing.assert_array_equal(circling.obs[-1], observed)


@pytest.mark.slow
def test_trains_saves_and_restores(tmp_path):
    smoke(tiny({"name": SNAKE}), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", [SNAKE, "jumanji/Game2048-v1", "jumanji/Maze-v0"])
def test_passes_gymnasiums_checker(name):
    gymnasium_check(name)
