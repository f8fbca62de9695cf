"""DQN hyperparameters, each marked static (fixes shapes or the program: changing it rebuilds)
or traced (an array in the agent's state: Tune may change it between calls for free). The
checks that the replay settings fit together are the off-policy base's."""

from __future__ import annotations

import dataclasses

from ajax_tune.agents.encoders import EncoderConfig
from ajax_tune.agents.hparams import hparams_type
from ajax_tune.agents.networks import ACTIVATIONS
from ajax_tune.agents.offpolicy import OffPolicyConfig
from ajax_tune.fields import static, traced
from ajax_tune.schedules import Schedule


@dataclasses.dataclass(frozen=True)
class DQNConfig(OffPolicyConfig):
    num_envs: int = static(16, ge=1, doc="envs stepped in lock-step per seed")
    utd_ratio: float = static(0.25, gt=0.0, doc="gradient steps per env step (update-to-data ratio)")
    batch_size: int = static(128, ge=1, doc="transitions per gradient step")
    capacity: int = static(50_000, ge=1, doc="replay buffer size per seed, in transitions")
    learning_starts: int = static(2_000, ge=0, doc="env steps collected before the first gradient step")
    target_update_every: int = static(1, ge=1, doc="gradient steps between target-network updates")
    hidden_sizes: tuple[int, ...] = static((64, 64), ge=1, doc="widths of the Q-network")
    activation: str = static("relu", choices=tuple(ACTIVATIONS), doc="hidden-layer activation")
    normalize_observations: bool = static(False, doc="running mean and std of observations")
    lr: Schedule = traced(
        Schedule(kind="linear", peak=1e-3),
        doc="learning-rate schedule; decaying to 0 over the run lets the greedy policy settle "
        "instead of oscillating with the moving target",
    )
    gamma: float = traced(0.99, ge=0.0, le=1.0, doc="discount factor")
    tau: float = traced(0.005, gt=0.0, le=1.0, doc="target update rate: 1 copies the online network")
    max_grad_norm: float = traced(10.0, gt=0.0, doc="global-norm clipping of each gradient")
    huber_delta: float = traced(100.0, gt=0.0, doc="TD errors beyond it get a constant gradient in the Huber loss")
    epsilon_start: float = traced(1.0, ge=0.0, le=1.0, doc="exploration at the start of the run")
    epsilon_end: float = traced(0.05, ge=0.0, le=1.0, doc="exploration once the decay is over")
    epsilon_decay_fraction: float = traced(
        0.25, ge=0.0, le=1.0, doc="share of total_timesteps over which epsilon decays linearly"
    )
    encoder: EncoderConfig | None = static(
        None, doc="null: the Q-network reads observations as they are; {kind: conv, ...}: conv layers read the env's image first"
    )

    def __post_init__(self):
        object.__setattr__(self, "encoder", EncoderConfig.parse(self.encoder))
        super().__post_init__()


DQNHparams = hparams_type(DQNConfig)
