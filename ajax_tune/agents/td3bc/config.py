"""TD3+BC hyperparameters: TD3's, without the replay and exploration settings (it learns from a
dataset), and `alpha`, the weight of the critic against behaviour cloning, traced."""

from __future__ import annotations

import dataclasses

from ajax_tune.agents.hparams import hparams_type
from ajax_tune.agents.networks import ACTIVATIONS
from ajax_tune.agents.offline import OfflineConfig
from ajax_tune.fields import static, traced
from ajax_tune.schedules import Schedule


@dataclasses.dataclass(frozen=True)
class TD3BCConfig(OfflineConfig):
    policy_delay: int = static(
        2, ge=1, doc="critic steps per actor step (the actor and the targets move on every policy_delay-th)"
    )
    hidden_sizes: tuple[int, ...] = static((256, 256), ge=1, doc="widths of the actor and critic MLPs")
    activation: str = static("relu", choices=tuple(ACTIVATIONS), doc="hidden-layer activation")
    lr: Schedule = traced(Schedule(kind="constant", peak=3e-4), doc="learning-rate schedule (actor and critics)")
    alpha: float = traced(
        2.5, gt=0.0, doc="weight of the critic's value against behaviour cloning (lower: closer to the dataset's actions)"
    )
    gamma: float = traced(0.99, ge=0.0, le=1.0, doc="discount factor")
    tau: float = traced(0.005, gt=0.0, le=1.0, doc="soft target update: target += tau * (online - target)")
    target_noise: float = traced(0.2, ge=0.0, doc="std of the noise smoothing the target policy's action")
    target_noise_clip: float = traced(0.5, ge=0.0, doc="the target policy's noise is clipped to +-this")
    max_grad_norm: float = traced(1000.0, gt=0.0, doc="global-norm clipping of each gradient")


TD3BCHparams = hparams_type(TD3BCConfig)
