"""Navix by name: `navix/<id>`, task-free (every setting of a navix env is a Python constant),
its symbolic grid flattened with `image_shape` declared."""

import pytest

from tests.support.helpers import import_extra
from tests.support.suites import gymnasium_check, refused, smoke, tiny

import_extra("navix", extra="navix")

from ajax_tune.envs import make_env  # noqa: E402

EMPTY = "navix/Navix-Empty-5x5-v0"


def test_a_grid_image_and_no_task():
    env = make_env(EMPTY)
    assert env.task_spec == {} and env.image_shape == (5, 5, 3) and env.observation_space.shape == (75,)
    assert env.action_space.n == 7 and env.max_episode_steps == 100  # navix.make's time limit
    assert make_env(EMPTY, max_episode_steps=30).max_episode_steps == 30


@pytest.mark.parametrize(
    "sections, message",
    [
        (
            {"env": {"name": "navix/Navix-Empty-5x5"}},
            "unknown navix env 'Navix-Empty-5x5'; did you mean 'navix/Navix-Empty-5x5-v0'",
        ),
        ({"heldout": {"tasks": [{}]}}, "heldout: navix/Navix-Empty-5x5-v0 has no task fields"),
        ({"env": {"name": EMPTY, "task": {"size": 6}}}, "unknown task field"),
    ],
)
def test_bad_input_is_one_line_before_compiling(sections, message):
    refused({**tiny({"name": EMPTY}), **sections}, message)


@pytest.mark.slow
def test_trains_saves_and_restores(tmp_path):
    smoke(tiny({"name": EMPTY}), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", [EMPTY, "navix/Navix-DoorKey-5x5-v0"])
def test_passes_gymnasiums_checker(name):
    gymnasium_check(name)
