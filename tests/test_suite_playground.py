"""MuJoCo Playground by name: `playground/<id>` for its dm_control-suite envs, with gravity and
mass as the task (as brax's). Playground is not part of dev (it needs brax>=0.14.2, above this
project's floor), so these tests skip where it is missing unless AJAX_TUNE_TESTS_REQUIRE names
playground, as CI's step that installs it does."""

import pytest

from tests.support.helpers import import_extra
from tests.support.suites import gymnasium_check, refused, smoke, tiny

import_extra("mujoco_playground", extra="playground", in_dev=False)

from ajax_tune.envs import make_env  # noqa: E402

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


def test_trains_saves_restores_and_a_new_task_does_not_recompile(tmp_path):
    smoke(tiny({"name": CARTPOLE}), tmp_path, new_task={"gravity_scale": 2.0, "mass_scale": 0.5})


def test_passes_gymnasiums_checker():
    gymnasium_check(CARTPOLE)
