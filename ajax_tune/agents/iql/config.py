"""IQL hyperparameters; the expectile and the temperature are traced, so Tune and PBT may change
them between calls without recompiling."""

from __future__ import annotations

import dataclasses

from ajax_tune.agents.hparams import hparams_type
from ajax_tune.agents.networks import ACTIVATIONS
from ajax_tune.agents.offline import OfflineConfig
from ajax_tune.fields import static, traced
from ajax_tune.schedules import Schedule


@dataclasses.dataclass(frozen=True)
class IQLConfig(OfflineConfig):
    hidden_sizes: tuple[int, ...] = static((256, 256), ge=1, doc="widths of the actor, critic and value MLPs")
    activation: str = static("relu", choices=tuple(ACTIVATIONS), doc="hidden-layer activation")
    lr: Schedule = traced(Schedule(kind="constant", peak=3e-4), doc="learning-rate schedule (actor, critics and value)")
    expectile: float = traced(
        0.7, gt=0.0, lt=1.0, doc="the value's expectile of the critics' values (0.5: their mean; towards 1: their maximum)"
    )
    temperature: float = traced(
        0.3,
        ge=0.0,
        doc="inverse temperature of advantage weighting (0: behaviour cloning; higher: greedier; "
        "the paper's 3.0 grew unstable on pendulum, docs/offline.md)",
    )
    max_weight: float = traced(100.0, gt=0.0, doc="the advantage weights are clipped to at most this")
    gamma: float = traced(0.99, ge=0.0, le=1.0, doc="discount factor")
    tau: float = traced(0.005, gt=0.0, le=1.0, doc="soft target update of the critics: target += tau * (online - target)")
    max_grad_norm: float = traced(1000.0, gt=0.0, doc="global-norm clipping of each gradient")


IQLHparams = hparams_type(IQLConfig)
