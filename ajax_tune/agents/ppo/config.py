"""PPO hyperparameters, each marked static (fixes shapes: changing it rebuilds the program) or
traced (an array in the training state: Tune may change it between calls for free).

The defaults solve cartpole from a config that names only the env (every seed group tried; see
tests/test_learning.py): a learning rate decayed linearly from 2.5e-3, as Rejax's cartpole
setting, and raw observations. Under the earlier defaults (running observation statistics, a
constant 3e-4) and under Rejax's rate with observation statistics, some seed groups reached 500
and then slid back late in the run."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from ajax_tune.agents.encoders import EncoderConfig
from ajax_tune.agents.hparams import hparams_type
from ajax_tune.agents.networks import ACTIVATIONS
from ajax_tune.errors import ConfigError
from ajax_tune.fields import check_keys, config_section, static, traced, validate
from ajax_tune.schedules import Schedule

CELLS = ("gru", "lstm")


@config_section("agent.recurrent")
class RecurrentConfig:
    """PPO with memory: a recurrent cell between the observation and the policy and value heads."""

    cell: str = static("gru", choices=CELLS, doc="the recurrent cell shared by the policy and the value heads")
    size: int = static(128, ge=1, doc="the cell's width (its carry per env)")

    @classmethod
    def parse(cls, value) -> RecurrentConfig | None:
        if value is None or isinstance(value, cls):
            return value
        if not isinstance(value, Mapping):
            raise ConfigError(f"agent.recurrent must be a mapping such as {{cell: gru, size: 128}} or null, got {value!r}")
        check_keys(value, [f.name for f in dataclasses.fields(cls)], "agent.recurrent.")
        return cls(**value)


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
    recurrent: RecurrentConfig | None = static(
        None,
        doc="null: feed-forward MLPs; {cell: gru | lstm, size: N}: a recurrent cell before both heads, "
        "trained by backpropagation through each unroll, minibatches over envs (`agent.recurrent` below)",
    )
    encoder: EncoderConfig | None = static(
        None,
        doc="null: observations go to the MLPs (or the cell) as they are; {kind: conv, channels: [16], kernel: 3}: "
        "conv layers read the env's image first (envs that declare image_shape; `agent.encoder` below)",
    )

    def __post_init__(self):
        object.__setattr__(self, "recurrent", RecurrentConfig.parse(self.recurrent))
        object.__setattr__(self, "encoder", EncoderConfig.parse(self.encoder))
        validate(self, "agent")
        if self.recurrent is not None:
            if self.num_envs % self.num_minibatches:
                raise ConfigError(
                    f"agent.num_minibatches ({self.num_minibatches}) must divide num_envs ({self.num_envs}): "
                    "a recurrent PPO's minibatches are whole envs' unrolls"
                )
            return
        batch = self.num_envs * self.unroll_length
        if batch % self.num_minibatches:
            raise ConfigError(
                f"agent.num_minibatches ({self.num_minibatches}) must divide num_envs * unroll_length "
                f"({self.num_envs} * {self.unroll_length} = {batch})"
            )


PPOHparams = hparams_type(PPOConfig)
