"""Tasks by name (a suite's shipped levels, a benchmark's rulesets): wherever a task is written a
name the env knows may stand for it, and wherever a list of tasks is, a set the env names; a
task field too large to be a knob (a level) stays out of results. Checked on a user's env that
names its tasks (`tests.support.custom_parts:named_corridor`)."""

import numpy as np
import pytest

from ajax_tune.envs import TaskError, make_env
from ajax_tune.errors import ConfigError
from ajax_tune.results.keys import MAX_REPORTED_FIELD_SIZE
from ajax_tune.runner import Runner
from tests.support.helpers import assert_refused_before_compiling

NAME = "tests.support.custom_parts:named_corridor"
TINY = {
    "agent": {"num_envs": 4, "unroll_length": 8, "num_minibatches": 2, "update_epochs": 1, "hidden_sizes": [16]},
    "train": {"total_timesteps": 10_000, "timesteps_per_iteration": 64, "num_seeds": 1, "eval_episodes": 1},
}


def config(env=None, **sections):
    return {"env": {"name": NAME, **(env or {})}, **TINY, **sections}


@pytest.mark.heavy
def test_a_name_is_a_task_wherever_a_task_is_written():
    env = make_env(NAME)
    assert env.validate_task("long")["length"] == 6 and env.validate_task("long")["walls"].shape == (4, 5)
    with pytest.raises(TaskError, match="has no task 'longest'"):
        env.validate_task("longest")
    runner = Runner(config({"task": "middle"}, heldout={"tasks": ["short", {"length": 7}]}))
    assert runner.get_task()["length"] == 4
    np.testing.assert_array_equal(runner.heldout["length"], [2, 7])
    runner.set_task("long")
    assert runner.get_task()["length"] == 6
    result = runner.train()
    # the large field is data, not reported; the scalar ones are
    assert MAX_REPORTED_FIELD_SIZE < 4 * 5
    assert result["curriculum/task/length"] == 6 and not any("walls" in key for key in result)
    assert set(result) == set(runner.train())


def test_a_set_of_tasks_by_name_as_levels_a_sampler_and_a_heldout_set():
    runner = Runner(
        config(
            {"levels": "all"},
            task_sampler={"name": "uniform", "kwargs": {"levels": "ends", "seed": 1}},
            heldout={"named": "all", "num_tasks": 2, "seed": 3},
        )
    )
    assert runner.get_level() == 0 and runner.get_task()["length"] == 2
    lengths = runner.heldout["length"].tolist()
    assert lengths in ([2, 4], [2, 6], [4, 6])  # two of the set, in its order
    result = runner.train()
    assert set(runner.get_task(per_env=True)["length"].tolist()) <= {2, 6}
    named = {2: "short", 4: "middle", 6: "long"}
    assert {f"eval/heldout/{named[n]}/return" for n in lengths} | {"curriculum/level"} <= set(result)
    whole = Runner(config(heldout={"named": "all", "num_tasks": 3}))
    assert whole.heldout["length"].tolist() == [2, 4, 6]


@pytest.mark.parametrize(
    "sections, message",
    [
        ({"heldout": {"named": "all", "num_tasks": 4}}, "heldout.num_tasks is 4, but named_corridor's set 'all' holds 3 tasks"),
        (
            {"heldout": {"named": "al", "num_tasks": 1}},
            "heldout: named_corridor: no named task set 'al'; did you mean 'all'?",
        ),
        (
            {"task_sampler": {"name": "uniform", "kwargs": {"levels": "odd"}}},
            "levels: named_corridor: no named task set 'odd'",
        ),
        ({"env": {"name": NAME, "levels": "none"}}, "env.levels: named_corridor: no named task set 'none'"),
        ({"heldout": {"tasks": ["short", "shortest"]}}, r"heldout.tasks\[1\]: named_corridor has no task 'shortest'"),
    ],
)
def test_a_name_or_set_the_env_does_not_know_is_refused_in_one_line(sections, message):
    assert_refused_before_compiling({**config(), **sections}, message)


def test_an_env_without_names_says_so():
    with pytest.raises(TaskError, match="corridor knows no task by name"):
        make_env("corridor").validate_task("long")
    with pytest.raises(ConfigError, match="heldout: corridor has no named sets of tasks"):
        Runner.check({"env": {"name": "corridor"}, "heldout": {"named": "all", "num_tasks": 1}})
