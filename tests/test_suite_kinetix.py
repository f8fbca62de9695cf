"""Kinetix by name: `kinetix/<size>[/<level>]`, the level as the task (one vector, traced), its
shipped levels by name and its hand-made levels as a held-out set. Kinetix is not part of dev
(kinetix-env pins jax<=0.9: docs/envs.md), so these tests skip where it is missing unless
AJAX_TUNE_TESTS_REQUIRE names kinetix, as CI's step that installs it does."""

import numpy as np
import pytest

from tests.support.helpers import import_extra
from tests.support.suites import gymnasium_check, refused, smoke, tiny

import_extra("kinetix", extra="kinetix", in_dev=False)

from ajax_tune.envs import make_env  # noqa: E402

pytestmark = pytest.mark.slow  # importing kinetix and loading a level take seconds each


def test_the_level_is_the_task_and_levels_have_names():
    env = make_env("kinetix/s/h4_thrust_aim")
    assert list(env.task_spec) == ["level"] and env.task_spec["level"].shape == (env.level_size,)
    assert env.observation_space.shape == (140,) and env.action_space.shape == (6,) and env.max_episode_steps == 256
    start = env.default_task()["level"]
    np.testing.assert_array_equal(start, env.validate_task("s/h4_thrust_aim")["level"])
    np.testing.assert_array_equal(env.validate_task({})["level"], start)  # a task without a level keeps the start
    assert not np.array_equal(env.validate_task("h0_weak_thrust")["level"], start)
    assert env.named_task_sets() == ("handmade", "all")
    assert [n for n in env.task_names() if "/h" in n][:2] == ["s/h0_weak_thrust", "s/h1_thrust_over_ball"]
    assert make_env("kinetix/s", actions="discrete").action_space.n == 11


@pytest.mark.parametrize(
    "env, message",
    [
        ({"name": "kinetix/xl"}, "unknown kinetix env 'xl'"),
        ({"name": "kinetix/s/h4_thrust_aimm"}, "did you mean 'kinetix/s/h4_thrust_aim'"),
        (
            {"name": "kinetix/s", "task": "m/h0_unicycle"},
            "level 'm/h0_unicycle' is of size 'm'; this env holds levels of size 's'",
        ),
        ({"name": "kinetix/s", "task": {"level": [0.0, 1.0]}}, r"task field 'level' expected shape \(\d+,\)"),
        ({"name": "kinetix/s", "kwargs": {"actions": "multi_discrete"}}, "actions must be one of"),
    ],
)
def test_bad_input_is_one_line_before_compiling(env, message):
    refused(tiny(env), message)


def test_trains_saves_restores_and_a_new_level_does_not_recompile(tmp_path):
    config = tiny({"name": "kinetix/s/h0_weak_thrust"}, heldout={"named": "handmade", "num_tasks": 2, "seed": 0})
    runner = smoke(config, tmp_path, new_task="s/h2_one_wheel_car")
    result = runner.train()
    drawn = [key for key in result if key.startswith("eval/heldout/s/h") and key.endswith("/return")]
    assert len(drawn) == 2  # two hand-made levels, reported by name
    assert not any(key.startswith("curriculum/task/") for key in result)  # a level is data, not reported


def test_passes_gymnasiums_checker():
    gymnasium_check("kinetix/s")
