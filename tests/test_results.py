"""The declared result keys: `result_keys(config)` names exactly what `Runner.train` reports,
without compiling; `check_metric` refuses a name outside them with the nearest one."""

import jax
import pytest

from ajax_tune.agents import PPO, PPOConfig
from ajax_tune.errors import ConfigError
from ajax_tune.expected_keys import check_metric, result_keys
from ajax_tune.loop import TrainLoop
from ajax_tune.loop.compiled import Compiled
from ajax_tune.runner import Runner
from tests.support.helpers import corridor_config, tiny_off_policy_config

LEVELS = {"length": [4, 8, 12]}
CONFIGS = {
    "ppo_levels_heldout_callback": corridor_config(
        env={"levels": LEVELS, "level": 1},
        train={"eval_at_start": True},
        heldout={"tasks": [{"length": 6}, {"length": 20}]},
        callbacks=[{"class": "ajax_tune.curriculum:ThresholdCurriculum", "kwargs": {"levels": LEVELS, "mix_earlier": 0.25}}],
    ),
    "ppo_sampler": corridor_config(task_sampler={"name": "plr", "kwargs": {"space": {"length": [4, 12]}}}),
    "sac": tiny_off_policy_config("sac", agent={"normalize_observations": True}, train={"eval_every": 48, "num_seeds": 2}),
    "dqn": tiny_off_policy_config("dqn"),
}
# Populations: each member's keys and the population's beside the headline (a member's own).
CONFIGS["ppo_population_levels_heldout"] = corridor_config(
    env={"levels": LEVELS, "level": 1},
    heldout={"tasks": [{"length": 6}, {"length": 20}]},
    population={"members": [{"agent": {"lr": 1e-3}}, {"agent": {"lr": {"kind": "cosine", "peak": 3e-3}}}]},
)
CONFIGS["dqn_population"] = {
    **CONFIGS["dqn"],
    "population": {
        "size": 3,
        "space": {"agent": {"lr": {"loguniform": [1e-4, 1e-3]}}, "train": {"total_timesteps": {"choice": [800, 1000]}}},
        "select": {"metric": "loss/q", "mode": "min"},
    },
}


COMPILES = []
jax.monitoring.register_event_duration_secs_listener(
    lambda event, seconds, **_: COMPILES.append(event) if event.endswith("backend_compile_duration") else None
)


@pytest.mark.parametrize("name", ["ppo_sampler", "ppo_levels_heldout_callback"])
def test_result_keys_compile_nothing(name, monkeypatch):
    """First in this file, so that no earlier compilation in the process hides one of its own."""
    monkeypatch.setattr(Compiled, "_counted_call", lambda *a: pytest.fail("the training program was traced"))
    before = len(COMPILES)
    keys = result_keys(CONFIGS[name])
    assert len(COMPILES) == before
    assert {"eval/return_mean", "curriculum/next_task/length", "lr", "loss/policy"} <= keys


@pytest.mark.parametrize("name", sorted(CONFIGS))
@pytest.mark.heavy
def test_result_keys_are_the_keys_a_result_holds(name):
    config = CONFIGS[name]
    declared = result_keys(config)
    result = Runner(config).train()
    assert declared == frozenset(result), (sorted(declared - set(result)), sorted(set(result) - declared))


def test_check_metric_suggests_the_nearest_key():
    keys = result_keys(CONFIGS["ppo_sampler"])
    check_metric("eval/return_mean", keys, "tune.metric")
    with pytest.raises(
        ConfigError,
        match=r"^tune\.metric: metric 'eval/retrun_mean' is not in any result; "
        r"did you mean 'eval/return_mean'\?",
    ) as info:
        check_metric("eval/retrun_mean", keys, "tune.metric")
    assert "\n" not in str(info.value)


class DeclaredPPO(PPO):
    """An agent that declares its metric names: they are read, not traced."""

    Config = PPOConfig
    metric_keys = ("lr", "loss/policy", "declared/only")


def test_declared_metric_keys_are_read_without_tracing_a_call(monkeypatch):
    monkeypatch.setattr(TrainLoop, "call", lambda *a: pytest.fail("a call was traced for declared metric keys"))
    keys = result_keys(corridor_config(agent={"name": "tests.test_results:DeclaredPPO"}))
    assert {"declared/only", "loss/policy", "lr"} <= keys and "loss/value" not in keys
    assert {"health/params_nonfinite_at", "health/opt_state_nonfinite_at", "health/loss_nonfinite_at"} <= keys


def test_tune_keys_are_among_those_ray_tune_fills_in():
    from ray.tune.result import AUTO_RESULT_KEYS

    from ajax_tune.results.keys import TUNE_KEYS

    assert set(TUNE_KEYS) <= set(AUTO_RESULT_KEYS)
    keys = result_keys(CONFIGS["ppo_sampler"], tune=True)
    assert {"training_iteration", "time_total_s", "eval/return_mean"} <= keys
    assert "training_iteration" not in result_keys(CONFIGS["ppo_sampler"])
