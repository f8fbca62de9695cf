"""Envs whose task has no fields (MinAtar, Jumanji, a user's env with `task_spec = {}`) train,
evaluate, save and restore like any other, in one compilation; what would choose among tasks
(a held-out set, a task sampler, levels) is refused in one line, before compiling.

No built-in env is task-free: each was written around a difficulty (docs/envs.md). The
task-free env named by a registered name is `gymnax/Breakout-MinAtar` (and the suites' task-free
envs, tests/test_suites_*.py); the user's is `tests.support.custom_parts:coin`.
"""

import numpy as np
import pytest

from ajax_tune.runner import Runner
from tests.support.helpers import assert_refused_before_compiling, assert_trees_equal, import_extra

TINY = {
    "agent": {"num_envs": 4, "unroll_length": 8, "num_minibatches": 2, "update_epochs": 1, "hidden_sizes": [16]},
    "train": {"total_timesteps": 10_000, "timesteps_per_iteration": 4 * 8 * 2, "num_seeds": 2, "eval_episodes": 2},
}


def config(name: str, **sections) -> dict:
    return {"env": {"name": name}, **TINY, **sections}


def trains_evaluates_saves_and_restores(name: str, tmp_path) -> dict:
    runner = Runner(config(name), trial_id="t")
    assert runner.env.task_spec == {} and runner.get_task() == {}
    first, second = runner.train(), runner.train()
    assert second["env_steps"] == 2 * first["env_steps"] > 0
    assert np.isfinite(second["eval/return_mean"]) and second["train/nonfinite"] == 0
    assert second["perf/compilations"] == 1
    assert not any(key.startswith(("curriculum/task/", "curriculum/next_task/")) for key in second)
    evaluated = runner.evaluate(episodes=2)
    assert evaluated["task"] == {} and evaluated["return"].shape == (2, 2)

    runner.save(tmp_path / "ck")
    restored = Runner(config(name), trial_id="t")
    restored.restore(tmp_path / "ck")
    assert_trees_equal(runner.state, restored.state)
    assert restored.iteration == 2
    third, again = runner.train(), restored.train()  # the restored run continues as the original does
    assert third["eval/return_mean"] == again["eval/return_mean"] and again["perf/compilations"] == 1
    return second


@pytest.mark.heavy
def test_a_users_task_free_env_by_import_path_trains_evaluates_saves_and_restores(tmp_path):
    trains_evaluates_saves_and_restores("tests.support.custom_parts:coin", tmp_path)


@pytest.mark.heavy
def test_minatar_breakout_trains_evaluates_saves_and_restores(tmp_path):
    import_extra("gymnax", extra="gymnax")
    result = trains_evaluates_saves_and_restores("gymnax/Breakout-MinAtar", tmp_path)
    assert result["env_steps"] == 2 * 4 * 8 * 2


@pytest.mark.parametrize(
    "section, message",
    [
        (
            {"heldout": {"tasks": [{}]}},
            r"^heldout: coin has no task fields \(its task is empty\), so there are no tasks to hold out",
        ),
        ({"task_sampler": {"name": "uniform"}}, "^task_sampler: coin has no task fields"),
        ({"env": {"name": "tests.support.custom_parts:coin", "levels": [{}, {}]}}, "^env.levels: coin has no task fields"),
    ],
)
def test_choosing_among_the_tasks_of_a_task_free_env_is_refused_in_one_line(section, message):
    assert_refused_before_compiling({**config("tests.support.custom_parts:coin"), **section}, message)


def test_minatar_refuses_a_heldout_set_in_one_line():
    import_extra("gymnax", extra="gymnax")
    assert_refused_before_compiling(
        {**config("gymnax/Breakout-MinAtar"), "heldout": {"space": {"x": [0, 1]}, "num_tasks": 2}},
        "^heldout: gymnax/Breakout-MinAtar has no task fields",
    )
