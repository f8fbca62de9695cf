"""Kinetix by name: `kinetix/<size>[/<level>]`, the level as the task (one vector, traced), its
shipped levels by name and its hand-made levels as a held-out set. Kinetix is not part of dev
(kinetix-env pins jax<=0.9: docs/envs.md), so these tests skip where it is missing unless
AJAX_TUNE_TESTS_REQUIRE names kinetix, as CI's step that installs it does."""

import numpy as np
import pytest

from tests.support.helpers import host, import_extra
from tests.support.suites import assert_task_changes_behaviour, episode_rollout, gymnasium_check, refused, smoke, step_keys, tiny

import_extra("kinetix", extra="kinetix", in_dev=False)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from ajax_tune.envs import EpisodeWrapper, make_env  # noqa: E402

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


LIMIT = 32
THRUST = jnp.ones((LIMIT, 6), jnp.float32)  # every motor and thruster at full power


@pytest.fixture(scope="module")
def small():
    """Size s under a 32-step limit, its rollouts, and one step of it beside one step of
    kinetix's own `step_env` (its time limit as given) from the same state."""
    env = make_env("kinetix/s", max_episode_steps=LIMIT)
    wrapped = EpisodeWrapper(env)

    @jax.jit
    def beside(state, action, key, limit):
        params = env.params.replace(max_timesteps=limit)
        return wrapped.step(state, action, key), env.kinetix_env.step_env(key, state.physics, action, params)

    return episode_rollout(env), beside


def test_a_new_level_changes_how_the_env_steps(small):
    """Two shipped levels, the same keys and full thrust: another trajectory, in one program; on
    h0 the thrust carries the green shape to the blue one (a paid natural end), on h3 it does not."""
    run, _ = small
    (_, h0), (_, h3) = assert_task_changes_behaviour(run, "s/h0_weak_thrust", "s/h3_point_the_thruster", THRUST)
    assert h0.terminated.any() and h0.reward[h0.terminated][0] > 0.9 and not h3.terminated.any()


def test_episodes_end_as_kinetixs_own_step_says(small):
    """A green shape reaching the blue one (kinetix: done, under its own 256-step limit) is
    `terminated`; the time limit, which kinetix folds into `done`, is `truncated`, keeping
    kinetix's final observation to bootstrap from."""
    run, beside = small
    _, keys = step_keys(0, LIMIT)
    _, reached = run("s/h0_weak_thrust", THRUST)
    end = int(np.argmax(reached.terminated))
    assert 0 < end < LIMIT - 1 and not reached.truncated.any() and reached.episode.post_done[end + 1 :].all()
    ours, (obs, _, _, done, _) = host(beside(jax.tree.map(lambda x: x[end - 1], reached), THRUST[0], keys[end], 256))
    assert bool(done) and bool(ours.terminated) and not bool(ours.truncated)
    np.testing.assert_array_equal(reached.obs[end], np.asarray(obs, np.float32).reshape(-1))

    _, missed = run("s/h3_point_the_thruster", THRUST)
    assert missed.truncated.tolist() == [False] * (LIMIT - 1) + [True] and not missed.terminated.any()
    before = jax.tree.map(lambda x: x[LIMIT - 2], missed)
    ours, (obs, _, _, done, _) = host(beside(before, THRUST[0], keys[-1], LIMIT))
    assert bool(done) and bool(ours.truncated) and not bool(ours.terminated)
    np.testing.assert_array_equal(missed.obs[-1], np.asarray(obs, np.float32).reshape(-1))


def test_trains_saves_restores_and_a_new_level_does_not_recompile(tmp_path):
    config = tiny({"name": "kinetix/s/h0_weak_thrust"}, heldout={"named": "handmade", "num_tasks": 2, "seed": 0})
    runner = smoke(config, tmp_path, new_task="s/h2_one_wheel_car")
    result = runner.train()
    drawn = [key for key in result if key.startswith("eval/heldout/s/h") and key.endswith("/return")]
    assert len(drawn) == 2  # two hand-made levels, reported by name
    assert not any(key.startswith("curriculum/task/") for key in result)  # a level is data, not reported


def test_passes_gymnasiums_checker():
    gymnasium_check("kinetix/s")
