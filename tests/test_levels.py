"""Levels: numbered tasks, so RLlib's documented curriculum function runs as it is written."""

import numpy as np
import pytest

from ajax_tune.config import Config
from ajax_tune.envs import TaskError, make_env
from ajax_tune.envs.level_list import Levels, level_list, level_number
from ajax_tune.errors import ConfigError
from ajax_tune.runner import Runner
from tests.support.curricula import curriculum_fn
from tests.support.helpers import corridor_config

LADDER = {"length": [4, 8, 16]}


@pytest.fixture(scope="module")
def corridor():
    return make_env("corridor", max_length=32)


def test_a_ladder_per_field_and_a_list_of_tasks_are_the_same_levels(corridor):
    ladder = Levels(corridor, {"length": [4, 8], "exit_reward": [0.0, 0.2]}, base={"length": 6})
    listed = Levels(corridor, [{"length": 4}, {"length": 8, "exit_reward": 0.2}], base={"length": 6})
    assert len(ladder) == len(listed) == 2 and ladder.last == 1
    for i in range(2):
        for field in ("length", "exit_reward"):
            np.testing.assert_array_equal(ladder.task(i)[field], listed.task(i)[field])
    assert listed.task(1)["exit_reward"].dtype == np.float32 and float(listed.task(1)["exit_reward"]) == pytest.approx(0.2)
    # fields a level leaves out come from the base (the starting task), then the env's default
    partial = Levels(corridor, [{"exit_reward": 0.1}, {"exit_reward": 0.3}], base={"length": 6})
    assert int(partial.task(0)["length"]) == 6
    assert partial.level_of(partial.task(1)) == 1 and partial.level_of({"length": 7, "exit_reward": 0.1}) is None


def test_level_numbers_overflow_and_bad_levels(corridor):
    strict = Levels(corridor, LADDER, overflow="error")
    held = Levels(corridor, LADDER, overflow="clamp")
    assert int(strict.task(np.int64(2))["length"]) == 16 and int(strict.task(1.0)["length"]) == 8
    with pytest.raises(TaskError, match=r"level 3 is outside env.levels, which has levels 0..2; set env.level_overflow: clamp"):
        strict.task(3)
    with pytest.raises(TaskError, match="level -1 is outside"):
        strict.task(-1)
    assert int(held.task(7)["length"]) == 16 and int(held.task(-2)["length"]) == 4
    for bad in (True, 1.5, "2", {"length": 4}):
        with pytest.raises(TaskError, match=r"a level must be an integer in \[0, 2\]"):
            held.task(bad)
    assert [level_number(v) for v in (3, 3.0, np.int32(3), np.array(3), True, 2.5)] == [3, 3, 3, 3, None, None]
    np.testing.assert_array_equal(strict.batch([0, 2, 1])["length"], [4, 16, 8])


@pytest.mark.parametrize(
    "levels, message",
    [
        (
            {"length": [4, 8], "exit_reward": [0.1]},
            "env.levels: every field needs the same number of values (one per level), got {'length': 2, 'exit_reward': 1}",
        ),
        ([], "env.levels must be a non-empty list of tasks"),
        ([4, 8], "env.levels[0] must be a task"),
        ({"length": 4}, "env.levels.length must be a non-empty list of values"),
    ],
)
def test_malformed_levels_are_config_errors(levels, message):
    with pytest.raises(ConfigError) as info:
        level_list(levels, "env.levels")
    assert message in str(info.value)


def test_levels_are_checked_against_the_env_before_compiling(corridor):
    with pytest.raises(ConfigError, match=r"env.levels\[1\]: corridor: task field 'length' expected integer scalar in \[1, 32\]"):
        Levels(corridor, {"length": [4, 64]})
    with pytest.raises(ConfigError, match=r"env.levels\[1\] is the same task as env.levels\[0\]"):
        Levels(corridor, [{"length": 4}, {"length": 4, "exit_reward": 0.0}])
    with pytest.raises(ConfigError, match=r"env.level must be in \[0, 2\] \(env.levels has 3\), got 3"):
        Config.from_dict(corridor_config(env={"levels": LADDER, "level": 3}))
    with pytest.raises(ConfigError, match="env.level \\(1\\) needs env.levels"):
        Config.from_dict(corridor_config(env={"level": 1}))
    with pytest.raises(ConfigError, match="env.level_overflow must be one of"):
        Config.from_dict(corridor_config(env={"levels": LADDER, "level_overflow": "wrap"}))
    with pytest.raises(ConfigError, match=r"env.levels\[2\]: corridor: task field 'length'"):
        Runner.check(corridor_config(env={"levels": {"length": [4, 8, 99]}}))


def test_rllib_curriculum_fn_runs_verbatim_on_levels():
    """RLlib's guide: `get_task()` is an int and the function returns `current_task + 1`."""
    config = corridor_config(env={"levels": LADDER, "level": 1}, env_task_fn=curriculum_fn)
    runner = Runner(config)
    env = runner.curriculum.task_settable_env
    assert env.get_task() == 1 and runner.get_task()["length"] == 8
    first = runner.train()
    assert first["curriculum/task/length"] == 8 and first["curriculum/next_task/length"] == 16
    assert first["curriculum/level"] == 2 and env.get_task() == 2
    np.testing.assert_array_equal(env.get_tasks(), [2] * env.num_envs)
    # past the last level: a clear error that leaves the trial on its level
    with pytest.raises(TaskError, match="level 3 is outside env.levels, which has levels 0..2"):
        runner.train()
    assert env.get_task() == 2
    # held at the last level instead, as the config says (an init-only change: no rebuild)
    assert runner.reconfigure({**config, "env": {**config["env"], "level_overflow": "clamp"}}) is False
    levels = [runner.train()["curriculum/level"] for _ in range(3)]
    assert levels == [2.0, 2.0, 2.0]
    # per-env levels, and a mapping still works (a task that is no level reads as -1 / an error)
    env.set_task([0, 1, 2, 0, 1, 2, 0, 1])
    assert env.get_task() == 0 and env.get_tasks().tolist() == [0, 1, 2, 0, 1, 2, 0, 1]
    env.set_task({"length": 5})
    assert env.get_tasks().tolist() == [-1] * 8
    with pytest.raises(TaskError, match="is none of env.levels"):
        env.get_task()
    assert runner.loop.compilations == 1


def test_level_numbers_without_levels_are_a_clear_error():
    runner = Runner(corridor_config())
    with pytest.raises(TaskError, match="level numbers need env.levels"):
        runner.set_task(2)
    with pytest.raises(TaskError, match="get_level needs env.levels"):
        runner.get_level()
