"""Behaviour-cloning hyperparameters."""

from __future__ import annotations

import dataclasses

from ajax_tune.agents.hparams import hparams_type
from ajax_tune.agents.networks import ACTIVATIONS
from ajax_tune.agents.offline import OfflineConfig
from ajax_tune.fields import static, traced
from ajax_tune.schedules import Schedule


@dataclasses.dataclass(frozen=True)
class BCConfig(OfflineConfig):
    hidden_sizes: tuple[int, ...] = static((256, 256), ge=1, doc="widths of the policy MLP")
    activation: str = static("relu", choices=tuple(ACTIVATIONS), doc="hidden-layer activation")
    lr: Schedule = traced(Schedule(kind="constant", peak=1e-3), doc="learning-rate schedule")
    max_grad_norm: float = traced(1000.0, gt=0.0, doc="global-norm clipping of each gradient")


BCHparams = hparams_type(BCConfig)
