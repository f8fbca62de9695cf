"""SAC hyperparameters, each marked static (fixes shapes or the program: changing it rebuilds)
or traced (an array in the training state: Tune may change it between calls for free).

`learning_starts` is static on purpose: the update compares it with the loop's clock, which all
seeds share, so "learn or only store" stays a real branch rather than running both sides. The
checks that the replay settings fit together are the off-policy base's.
"""

from __future__ import annotations

import dataclasses

from ajax_tune.agents.hparams import hparams_type
from ajax_tune.agents.networks import ACTIVATIONS
from ajax_tune.agents.offpolicy import OffPolicyConfig
from ajax_tune.fields import static, traced
from ajax_tune.schedules import Schedule


@dataclasses.dataclass(frozen=True)
class SACConfig(OffPolicyConfig):
    hidden_sizes: tuple[int, ...] = static((256, 256), ge=1, doc="widths of the actor and critic MLPs")
    activation: str = static("relu", choices=tuple(ACTIVATIONS), doc="hidden-layer activation")
    normalize_observations: bool = static(False, doc="running mean and std of observations")
    init_alpha: float = static(1.0, gt=0.0, doc="entropy temperature at the start of a run")
    lr: Schedule = traced(Schedule(kind="constant", peak=3e-4), doc="learning-rate schedule (actor, critics and temperature)")
    gamma: float = traced(0.99, ge=0.0, le=1.0, doc="discount factor")
    tau: float = traced(0.005, gt=0.0, le=1.0, doc="soft target update: target += tau * (online - target)")
    target_entropy_scale: float = traced(
        1.0, ge=-0.5, doc="target entropy = scale * -action_dim; the temperature is learned toward it"
    )
    max_grad_norm: float = traced(
        1000.0, gt=0.0, doc="global-norm clipping of each gradient; high by default, so only runaway gradients are clipped"
    )


SACHparams = hparams_type(SACConfig)
