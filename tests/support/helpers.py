"""Small builders shared by the tests (kept tiny so that compiles stay cheap)."""

import contextlib

import jax
import numpy as np
import pytest

from ajax_tune import compat
from ajax_tune.agents import PPO, PPOConfig
from ajax_tune.envs import make_env
from ajax_tune.loop import LoopConfig, TrainLoop

CORRIDOR = dict(max_length=16, max_episode_steps=24, default_length=4)


@contextlib.contextmanager
def fully_optimised():
    """Compile with every XLA pass, the build users run, while inside (the suite compiles with
    few by default, see tests/conftest.py). A `learning` or `optimised` test gets it from
    conftest's function-scoped fixture; a module fixture is set up before that one, so one that
    trains must enter this itself."""
    before = jax.config.read("jax_disable_most_optimizations")
    jax.config.update("jax_disable_most_optimizations", False)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", before)


def corridor_loop(agent=None, **loop_overrides) -> TrainLoop:
    env = make_env("corridor", **CORRIDOR)
    agent_cfg = PPOConfig(
        **{
            "num_envs": 8,
            "unroll_length": 16,
            "num_minibatches": 2,
            "update_epochs": 2,
            "hidden_sizes": (32, 32),
            **(agent or {}),
        }
    )
    loop_cfg = dict(
        total_timesteps=20_000, timesteps_per_iteration=8 * 16 * 2, eval_every=8 * 16 * 2, eval_episodes=4, num_seeds=2
    )
    loop_cfg.update(loop_overrides)
    return TrainLoop(env, PPO(agent_cfg, env.observation_space, env.action_space), LoopConfig(**loop_cfg))


def host(tree):
    return jax.tree.map(np.asarray, jax.device_get(tree))


def assert_trees_equal(a, b):
    a, b = host(a), host(b)
    assert jax.tree.structure(a) == jax.tree.structure(b)
    for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)):
        np.testing.assert_array_equal(x, y)


def assert_restores_bit_for_bit(runner, directory) -> tuple[dict, dict]:
    """Save `runner`, train it one more call, restore the checkpoint into a fresh runner of the
    same config and train that one call: the level algorithm's state comes back as saved and both
    end in the same state, bit for bit, with no compilation beyond the first. Returns the two
    calls' results."""
    runner.save(directory)
    saved = host(runner.state)
    after = runner.train()
    restored = type(runner)(runner.config)
    restored.restore(directory)
    assert_trees_equal(host(restored.state), saved)
    again = restored.train()
    assert_trees_equal(host(restored.state), host(runner.state))
    assert again["perf/compilations"] == 1
    return after, again


def corridor_config(length=4, lr=3e-3, **sections):
    """A small Tune/Runner config on the corridor; `sections` override whole keys."""
    config = {
        "env": {"name": "corridor", "kwargs": {"max_length": 32, "max_episode_steps": 40}, "task": {"length": length}},
        "agent": {
            "num_envs": 8,
            "unroll_length": 16,
            "num_minibatches": 2,
            "update_epochs": 2,
            "hidden_sizes": [32, 32],
            "lr": lr,
        },
        "train": {"total_timesteps": 50_000, "timesteps_per_iteration": 8 * 16 * 4, "num_seeds": 2, "eval_episodes": 4},
    }
    for key, value in sections.items():
        if isinstance(value, dict) and isinstance(config.get(key), dict):
            config[key] = {**config[key], **value}
        else:
            config[key] = value
    return config


TINY_OFF_POLICY = {
    "sac": {
        "env": {"name": "point_reach", "kwargs": {"max_episode_steps": 5}},
        "agent": {
            "name": "sac",
            "num_envs": 2,
            "unroll_length": 8,
            "utd_ratio": 0.5,
            "batch_size": 16,
            "capacity": 80,
            "learning_starts": 32,
            "hidden_sizes": [16, 16],
        },
    },
    "dqn": {
        "env": {"name": "cartpole"},
        "agent": {
            "name": "dqn",
            "num_envs": 2,
            "unroll_length": 8,
            "batch_size": 16,
            "capacity": 80,
            "learning_starts": 16,
            "hidden_sizes": [16, 16],
        },
    },
}


def tiny_off_policy_config(name: str, /, **sections):
    """A few-second SAC (point_reach) or DQN (cartpole) config; `sections` update its sections."""
    config = {key: dict(value) for key, value in TINY_OFF_POLICY[name].items()}
    config["train"] = {"total_timesteps": 1_000, "timesteps_per_iteration": 32, "eval_episodes": 2}
    for key, value in sections.items():
        config[key] = {**config[key], **value} if isinstance(value, dict) and isinstance(config.get(key), dict) else value
    return config


#: JAX's events for lowering a program and compiling it: either means a program was being built
#: (a lowering comes first even where the persistent cache then holds the executable). Tracing
#: alone is not building: checks may `eval_shape` an agent's update to learn its metric names.
BUILD_EVENTS = ("/jax/core/compile/jaxpr_to_mlir_module_duration", "/jax/core/compile/backend_compile_duration")


@contextlib.contextmanager
def programs_built():
    """The JAX build events (`BUILD_EVENTS`) that fire inside the block, in a list."""
    events = []

    def listener(event, seconds, **_):
        if event in BUILD_EVENTS:
            events.append(event)

    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        yield events
    finally:
        compat.unregister_event_duration_listener(listener)


def assert_refused_before_compiling(config, message):
    """`config` is refused with a one-line ConfigError matching `message`, by `Runner.check` and
    where a trial would start (`Runner(config)`), before any program is lowered or compiled."""
    from ajax_tune.errors import ConfigError
    from ajax_tune.runner import Runner

    with pytest.raises(ConfigError, match=message) as info:
        Runner.check(config)
    assert "\n" not in str(info.value)
    with programs_built() as built, pytest.raises(ConfigError, match=message):
        Runner(config)
    assert built == [], f"refused only after building: {built}"


def import_extra(module: str, extra: str, in_dev: bool = True):
    """`module`, which the `extra` installs (and `dev` with it). Missing, it fails the tests that
    need it: a broken install must not pass as skipped tests. A user who installed without the
    extra on purpose skips them by naming it in AJAX_TUNE_TESTS_WITHOUT (comma-separated), except
    in CI, where nothing may be left out.

    An extra that `dev` cannot hold (`in_dev=False`: kinetix, playground; docs/testing.md says
    why) is installed by a step of its own, so its tests skip where it is missing, unless
    AJAX_TUNE_TESTS_REQUIRE names it (comma-separated, or `all`), as CI's step that installs it
    does: there, missing, they fail."""
    import importlib
    import os

    try:
        return importlib.import_module(module)
    except ImportError as exc:
        reason = f"{module} does not import ({exc})"
    if not in_dev:
        required = os.environ.get("AJAX_TUNE_TESTS_REQUIRE", "").replace(" ", "").split(",")
        if extra not in required and "all" not in required:
            pytest.skip(
                f"{reason}; the {extra} extra is not part of dev (set AJAX_TUNE_TESTS_REQUIRE={extra} to require it)",
                allow_module_level=True,
            )
        pytest.fail(f"{reason}, and AJAX_TUNE_TESTS_REQUIRE names {extra}: install it as docs/envs.md says", pytrace=False)
    opted_out = extra in os.environ.get("AJAX_TUNE_TESTS_WITHOUT", "").replace(" ", "").split(",")
    if opted_out and not os.environ.get("CI"):
        pytest.skip(f"{reason}; skipped as AJAX_TUNE_TESTS_WITHOUT asks", allow_module_level=True)
    pytest.fail(
        f"{reason}: install it with pip install 'ajax-tune[{extra}]' (or '.[dev]'), or set "
        f"AJAX_TUNE_TESTS_WITHOUT={extra} to skip the tests that need it",
        pytrace=False,
    )
