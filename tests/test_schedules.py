"""Traced learning-rate schedules."""

import jax
import jax.numpy as jnp
import pytest

from ajax_tune.compat import jit_cache_size
from ajax_tune.schedules import KINDS, Schedule, learning_rate

H = 1000.0


def lr(schedule, t):
    return float(learning_rate(schedule.to_params(), jnp.float32(t), jnp.float32(H)))


@pytest.mark.parametrize(
    "kind, points",
    [
        ("constant", {0: 1.0, 500: 1.0, 1000: 1.0}),
        ("linear", {0: 1.0, 500: 0.55, 1000: 0.1}),
        ("cosine", {0: 1.0, 500: 0.55, 1000: 0.1}),
        ("warmup_cosine", {0: 0.0, 100: 0.5, 200: 1.0, 600: 0.55, 1000: 0.1}),
        ("step", {0: 1.0, 249: 1.0, 250: 0.5, 600: 0.25, 1000: 0.0625}),
    ],
)
def test_schedule_values(kind, points):
    s = Schedule(kind=kind, peak=1.0, end_fraction=0.1, warmup_fraction=0.2, step_every=0.25, step_factor=0.5)
    for t, expected in points.items():
        assert lr(s, t) == pytest.approx(expected, abs=1e-6), (kind, t)


def test_all_kinds_share_one_compiled_function():
    f = jax.jit(learning_rate)
    values = [float(f(Schedule(kind=k, peak=2.0).to_params(), 300.0, H)) for k in KINDS]
    assert jit_cache_size(f) == 1
    assert len(set(values)) >= 3  # the kinds really differ


def test_parse_and_errors():
    assert Schedule.parse(1e-3) == Schedule(kind="constant", peak=1e-3)
    assert Schedule.parse({"kind": "cosine", "peak": 1}).peak == 1.0
    with pytest.raises(ValueError, match="kind must be one of"):
        Schedule(kind="exp")
    with pytest.raises(ValueError, match="warmup_fraction must be in"):
        Schedule(warmup_fraction=1.5)
    with pytest.raises(ValueError, match="unknown field"):
        Schedule.parse({"peek": 1e-3})
    with pytest.raises(ValueError, match="expected a number or a mapping"):
        Schedule.parse("fast")


def test_configs_take_the_simple_forms():
    from ajax_tune.agents import PPOConfig
    from ajax_tune.errors import ConfigError

    config = PPOConfig(lr=1e-3, hidden_sizes=[8, 8], gamma=1)
    assert config.lr == Schedule(kind="constant", peak=1e-3)
    assert config.hidden_sizes == (8, 8) and config.gamma == 1.0 and isinstance(config.gamma, float)
    assert PPOConfig(lr={"kind": "cosine", "peak": 2e-3}).lr.kind == "cosine"
    with pytest.raises(ConfigError, match="agent.lr: learning-rate schedule: kind must be one of"):
        PPOConfig(lr={"kind": "exp"})
