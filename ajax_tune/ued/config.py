"""The `ued` section of a trial config: which level algorithm decides every rollout's levels.

    ued:
      algorithm: robust_plr     # dr | plr | robust_plr | accel | sfl
      buffer_size: 4000         # static: the level buffer's shape
      score: maxmc              # maxmc | pvl (PLR, robust PLR, ACCEL)
      replay_prob: 0.8          # traced: PBT may change it between calls
      temperature: 0.3
      staleness_coef: 0.3
      minimum_fill: 0.5
      edits: 5                  # ACCEL's edits of a replayed level

Static fields fix the program (the buffer's shape, which branches it holds); traced ones are
arrays in each lane's state, so Tune's PBT and PBT inside a trial change them without
recompiling, and members of a population may differ in them.
"""

from __future__ import annotations

import dataclasses

from ajax_tune.errors import ConfigError
from ajax_tune.fields import static, traced, validate

ALGORITHMS = ("dr", "plr", "robust_plr", "accel", "sfl")
SCORES = ("maxmc", "pvl")
#: Algorithms that keep a buffer of levels scored by the agent, replayed by priority.
PRIORITISED = ("plr", "robust_plr", "accel")


@dataclasses.dataclass(frozen=True)
class UEDConfig:
    algorithm: str = static("robust_plr", choices=ALGORITHMS, doc="how each rollout's levels are chosen")
    buffer_size: int = static(4000, ge=1, doc="levels the buffer holds (PLR, robust PLR, ACCEL; SFL keeps sfl_keep)")
    score: str = static("maxmc", choices=SCORES, doc="the score a level is replayed by: MaxMC regret or positive value loss")
    duplicate_check: bool = static(True, doc="a generated level already in the buffer updates its entry instead of a new one")
    generator: str = static("", doc="'module:function' key -> level (default: the env's generate_level)")
    mutator: str = static("", doc="'module:function' (key, level, num_edits) -> level (default: the env's mutate_level)")
    sfl_levels: int = static(256, ge=1, doc="SFL: random levels scored by learnability at each refresh")
    sfl_keep: int = static(64, ge=1, doc="SFL: the most learnable levels kept")
    sfl_rollouts: int = static(4, ge=1, doc="SFL: episodes per level to estimate its success rate")
    sfl_every: int = static(10, ge=1, doc="SFL: updates between refreshes")
    replay_prob: float = traced(0.8, ge=0.0, le=1.0, doc="probability that a rollout replays buffer levels")
    temperature: float = traced(0.3, gt=0.0, doc="rank prioritisation's temperature: lower replays the top more")
    staleness_coef: float = traced(0.3, ge=0.0, le=1.0, doc="weight of staleness against score in replay")
    minimum_fill: float = traced(0.5, ge=0.0, le=1.0, doc="share of the buffer filled before replay starts")
    edits: int = traced(5, ge=0, doc="ACCEL: edits applied to each replayed level")
    sfl_fraction: float = traced(0.5, ge=0.0, le=1.0, doc="SFL: share of each batch drawn from the kept levels")

    def __post_init__(self):
        validate(self, "ued")
        if self.sfl_keep > self.sfl_levels:
            raise ConfigError(f"ued.sfl_keep ({self.sfl_keep}) must be <= ued.sfl_levels ({self.sfl_levels})")

    @property
    def robust(self) -> bool:
        """Gradient updates on replayed levels only (robust PLR; ACCEL as JaxUED runs it)."""
        return self.algorithm in ("robust_plr", "accel")

    @property
    def prioritised(self) -> bool:
        return self.algorithm in PRIORITISED
