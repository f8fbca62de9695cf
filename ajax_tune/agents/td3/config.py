"""TD3 hyperparameters, each marked static (fixes shapes or the program: changing it rebuilds)
or traced (an array in the agent's state: Tune may change it between calls for free). The
checks that the replay settings fit together are the off-policy base's."""

from __future__ import annotations

import dataclasses

from ajax_tune.agents.hparams import hparams_type
from ajax_tune.agents.networks import ACTIVATIONS
from ajax_tune.agents.offpolicy import OffPolicyConfig
from ajax_tune.fields import static, traced
from ajax_tune.schedules import Schedule


@dataclasses.dataclass(frozen=True)
class TD3Config(OffPolicyConfig):
    policy_delay: int = static(
        2, ge=1, doc="critic steps per actor step (the actor and the targets move on every policy_delay-th gradient step)"
    )
    hidden_sizes: tuple[int, ...] = static((256, 256), ge=1, doc="widths of the actor and critic MLPs")
    activation: str = static("relu", choices=tuple(ACTIVATIONS), doc="hidden-layer activation")
    normalize_observations: bool = static(False, doc="running mean and std of observations")
    lr: Schedule = traced(Schedule(kind="constant", peak=1e-3), doc="learning-rate schedule (actor and critics)")
    gamma: float = traced(0.99, ge=0.0, le=1.0, doc="discount factor")
    tau: float = traced(0.005, gt=0.0, le=1.0, doc="soft target update: target += tau * (online - target)")
    exploration_noise: float = traced(0.1, ge=0.0, doc="std of the Gaussian noise added to acting, in [-1, 1] action units")
    target_noise: float = traced(0.2, ge=0.0, doc="std of the noise smoothing the target policy's action")
    target_noise_clip: float = traced(0.5, ge=0.0, doc="the target policy's noise is clipped to +-this")
    max_grad_norm: float = traced(
        1000.0, gt=0.0, doc="global-norm clipping of each gradient; high by default, so only runaway gradients are clipped"
    )


TD3Hparams = hparams_type(TD3Config)
