"""MuJoCo Playground by name: `playground/<id>` for its dm_control-suite envs, with gravity and
mass as the task (as brax's). Playground is not part of dev (it needs brax>=0.14.2, above this
project's floor), so these tests skip where it is missing unless AJAX_TUNE_TESTS_REQUIRE names
playground, as CI's step that installs it does."""

import pytest

from tests.support.helpers import host, import_extra
from tests.support.suites import assert_task_changes_behaviour, episode_rollout, gymnasium_check, refused, smoke, step_keys, tiny

import_extra("mujoco_playground", extra="playground", in_dev=False)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from brax.envs.wrappers.training import EpisodeWrapper as BraxEpisodeWrapper  # noqa: E402

from ajax_tune.envs import EpisodeWrapper, make_env  # noqa: E402

pytestmark = pytest.mark.slow  # importing Playground takes about ten seconds
CARTPOLE = "playground/CartpoleBalance"


def test_gravity_and_mass_are_the_task():
    env = make_env(CARTPOLE)
    assert list(env.task_spec) == ["gravity_scale", "mass_scale"]
    assert env.observation_space.shape == (5,) and env.action_space.shape == (1,) and env.max_episode_steps == 1000
    assert make_env(CARTPOLE, config_overrides={"episode_length": 200}).max_episode_steps == 200


@pytest.mark.parametrize(
    "env, message",
    [
        ({"name": "playground/CartpoleBalanse"}, "did you mean 'playground/CartpoleBalance'"),
        ({"name": "playground/Go1JoystickFlatTerrain"}, "needs MuJoCo Menagerie, which Playground downloads at run time"),
        ({"name": CARTPOLE, "task": {"gravity_scale": 9.0}}, r"task field 'gravity_scale' expected float scalar in \[0, 5\]"),
    ],
)
def test_bad_input_is_one_line_before_compiling(env, message):
    refused(tiny(env), message)


LIMIT = 8
STILL = jnp.zeros((LIMIT, 1), jnp.float32)


@pytest.fixture(scope="module")
def cartpole():
    env = make_env(CARTPOLE, max_episode_steps=LIMIT)
    return env, episode_rollout(env)


def test_a_new_task_changes_how_the_env_steps(cartpole):
    """Weightless against twice the gravity, the same keys and no force: the pole's motion
    differs from the first step on, in one program."""
    _, run = cartpole
    (_, weightless), (_, heavy) = assert_task_changes_behaviour(run, {"gravity_scale": 0.0}, {"gravity_scale": 2.0}, STILL)
    assert not np.array_equal(weightless.obs[0], heavy.obs[0])


def test_episodes_end_as_playgrounds_own_step_says(cartpole):
    """Beside Playground's env under the episode wrapper its training uses (brax's: a time limit
    sets `done` and `info["truncation"]`), from the same reset with the same actions: the time
    limit is `truncated`, keeping Playground's final observation. A state gone non-finite
    (Playground's own `done` in the dm_control suite) is `terminated`."""
    env, run = cartpole
    reset_key, keys = step_keys(0, LIMIT)
    theirs_env = BraxEpisodeWrapper(env.playground_env, LIMIT, 1)

    @jax.jit
    def theirs():
        def body(state, action):
            state = theirs_env.step(state, action)
            return state, (state.obs, state.done, state.info["truncation"])

        return jax.lax.scan(body, theirs_env.reset(reset_key), STILL)[1]

    first, ours = run({}, STILL)
    obs, done, truncation = host(theirs())
    np.testing.assert_allclose(ours.obs, obs, rtol=1e-5, atol=1e-6)
    assert ours.truncated.tolist() == [False] * (LIMIT - 1) + [True] and not ours.terminated.any()
    assert done.tolist() == [0.0] * (LIMIT - 1) + [1.0] and truncation[-1] == 1.0

    wrapped = EpisodeWrapper(env)
    beside = jax.jit(lambda state, key: (wrapped.step(state, STILL[0], key), env.playground_env.step(state.physics, STILL[0])))
    broken = jax.tree.map(jnp.asarray, first)
    broken = broken.replace(
        physics=broken.physics.replace(data=broken.physics.data.replace(qpos=broken.physics.data.qpos * jnp.nan))
    )
    ours, theirs_state = host(beside(broken, keys[0]))
    assert theirs_state.done == 1.0 and bool(ours.terminated) and not bool(ours.truncated)


def test_trains_saves_restores_and_a_new_task_does_not_recompile(tmp_path):
    smoke(tiny({"name": CARTPOLE}), tmp_path, new_task={"gravity_scale": 2.0, "mass_scale": 0.5})


def test_passes_gymnasiums_checker():
    gymnasium_check(CARTPOLE)
