"""The `train` section of a trial config: how a run proceeds, and its static shape.

Each field says whether it is static (changing it builds a new program), traced (an array in the
state, changed for free) or read once at init (`ajax_tune.fields`).
"""

from __future__ import annotations

import dataclasses

from ajax_tune.fields import init_only, static, traced, validate

ON_NONFINITE = ("stop", "error", "continue")
RESET_MODES = ("next_step", "unroll_start")
LEARNING_SIGNAL = ("auto", "always")
EVAL_POLICIES = ("deterministic", "sampled")


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    total_timesteps: int = traced(1_000_000, ge=1, doc="the run's horizon: schedules span it")
    timesteps_per_iteration: int = static(
        49_152, ge=1, doc="env steps per seed in one train() call (the default: whole unrolls of every built-in agent's defaults)"
    )
    eval_every: int = static(0, ge=0, doc="env steps between evaluations; 0: once per call")
    eval_episodes: int = static(10, ge=1, doc="episodes per evaluation (and per held-out task), per seed")
    eval_policy: str = static(
        "deterministic",
        choices=EVAL_POLICIES,
        doc="the policy evaluations run: its most likely action, or sampled as in training (JaxUED's protocol)",
    )
    eval_at_start: bool = static(False, doc="evaluate the untrained policy before the first update: eval/start/* (NaN after)")
    num_seeds: int = static(1, ge=1, doc="independent seeds trained side by side")
    devices: int = static(
        0, ge=0, doc="devices the lanes are split over (one program); 0: as many of JAX's devices as divide the lanes evenly"
    )
    reset_mode: str = static(
        "next_step",
        choices=RESET_MODES,
        doc="when a finished env starts its next episode: on the very next step, or frozen (masked) until the next unroll starts",
    )
    learning_signal: str = static(
        "auto",
        choices=LEARNING_SIGNAL,
        doc="the agent's learning signal in each call's statistics (what PLR ranks levels by): auto "
        "computes it where the task sampler reads it (an off-policy agent's TD errors cost network "
        "passes; PPO's is free and always kept), always whatever the sampler, so that changing "
        "between samplers keeps one program",
    )
    dataset: str = init_only(
        "",
        doc="a dataset directory (docs/offline.md): train on it alone with an offline agent; "
        "timesteps then count gradient updates, not env steps. Another dataset of the same shape "
        "keeps the compiled program; another shape builds a new one",
    )
    seed: int = init_only(0, ge=0, doc="the random seed of the run; its seeds are splits of it")
    on_nonfinite: str = init_only(
        "stop",
        choices=ON_NONFINITE,
        doc="when parameters, optimiser state or metrics stop being finite: stop the trial (its result "
        "says where), raise an error, or continue (a PBT exploit may replace the state); scores "
        "read as the worst in every case",
    )

    def __post_init__(self):
        validate(self, "train")

    @property
    def eval_interval(self) -> int:
        return self.eval_every or self.timesteps_per_iteration
