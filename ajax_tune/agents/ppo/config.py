"""PPO hyperparameters, each marked static (fixes shapes: changing it rebuilds the program) or
traced (an array in the training state: Tune may change it between calls for free).

The defaults solve cartpole from a config that names only the env (every seed group tried; see
tests/test_learning.py): a learning rate decayed linearly from 2.5e-3, as Rejax's cartpole
setting, and raw observations. Under the earlier defaults (running observation statistics, a
constant 3e-4) and under Rejax's rate with observation statistics, some seed groups reached 500
and then slid back late in the run."""

from __future__ import annotations

import dataclasses

from ajax_tune.agents.hparams import hparams_type
from ajax_tune.agents.networks import ACTIVATIONS
from ajax_tune.fields import ConfigError, static, traced, validate
from ajax_tune.schedules import Schedule


@dataclasses.dataclass(frozen=True)
class PPOConfig:
    num_envs: int = static(16, ge=1, doc="envs stepped in lock-step per seed")
    unroll_length: int = static(128, ge=1, doc="steps per env between updates")
    num_minibatches: int = static(4, ge=1, doc="minibatches per epoch, each a share of the unroll's transitions")
    update_epochs: int = static(4, ge=1, doc="passes over each unroll's transitions, reshuffled each time")
    hidden_sizes: tuple[int, ...] = static((64, 64), ge=1, doc="widths of the policy and value MLPs")
    activation: str = static("tanh", choices=tuple(ACTIVATIONS), doc="hidden-layer activation")
    normalize_observations: bool = static(False, doc="normalise observations by their running mean and std")
    normalize_rewards: bool = static(False, doc="scale rewards by the std of the discounted return")
    lr: Schedule = traced(Schedule(kind="linear", peak=2.5e-3), doc="learning-rate schedule (policy and value)")
    ent_coef: float = traced(0.01, ge=0.0, doc="weight of the entropy bonus in the loss")
    vf_coef: float = traced(0.5, ge=0.0, doc="weight of the value loss")
    clip_eps: float = traced(0.2, gt=0.0, doc="the probability ratio is clipped to [1 - clip_eps, 1 + clip_eps]")
    gamma: float = traced(0.99, ge=0.0, le=1.0, doc="discount factor")
    gae_lambda: float = traced(
        0.95, ge=0.0, le=1.0, doc="GAE's lambda: 0 bootstraps after one step, 1 takes the discounted return to the unroll's end"
    )
    max_grad_norm: float = traced(0.5, gt=0.0, doc="global-norm clipping of each gradient")

    def __post_init__(self):
        validate(self, "agent")
        batch = self.num_envs * self.unroll_length
        if batch % self.num_minibatches:
            raise ConfigError(
                f"agent.num_minibatches ({self.num_minibatches}) must divide num_envs * unroll_length "
                f"({self.num_envs} * {self.unroll_length} = {batch})"
            )


PPOHparams = hparams_type(PPOConfig)
