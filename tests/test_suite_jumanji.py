"""Jumanji by name: `jumanji/<id>`, task-free (its settings are constructor arguments), every
observation field flattened in order, Discrete actions."""

import pytest

from tests.support.helpers import import_extra
from tests.support.suites import gymnasium_check, refused, smoke, tiny

import_extra("jumanji", extra="jumanji")

from ajax_tune.envs import make_env  # noqa: E402

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
    ],
)
def test_bad_input_is_one_line_before_compiling(sections, message):
    refused({**tiny({"name": SNAKE}), **sections}, message)


@pytest.mark.slow
def test_trains_saves_and_restores(tmp_path):
    smoke(tiny({"name": SNAKE}), tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name", [SNAKE, "jumanji/Game2048-v1", "jumanji/Maze-v0"])
def test_passes_gymnasiums_checker(name):
    gymnasium_check(name)
