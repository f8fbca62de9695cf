"""Levels as data, and the algorithms that choose them every rollout inside the compiled program
(unsupervised environment design): domain randomisation, prioritised level replay (PLR), robust
PLR, ACCEL and SFL built in, and any other written as a `LevelAlgorithm` and named by import path.

    algorithm.py    the protocol: what the program asks of an algorithm and gives it
    algorithms/     the built-ins, each one implementation of it
    registry.py     algorithms by name or 'module:Class'; the `ued` section read into their settings
    build.py        a trial's algorithm, with what it needs checked before compiling
    buffer.py       a level buffer with scores and staleness, pure JAX, usable on its own
    scores.py       MaxMC, positive value loss, learnability

Nothing here knows about the training loop: `loop/program.py` depends on the protocol only.
"""

from ajax_tune.ued.algorithm import (
    Context,
    Decision,
    LevelAlgorithm,
    LevelSettings,
    LevelState,
    LevelTools,
    Needs,
    Rollout,
    RunShape,
)
from ajax_tune.ued.build import LevelSettingsWarning, make_level_algorithm, row_keys
from ajax_tune.ued.registry import ALGORITHMS, parse_settings, resolve_algorithm, settings_class

__all__ = [
    "ALGORITHMS",
    "Context",
    "Decision",
    "LevelAlgorithm",
    "LevelSettings",
    "LevelSettingsWarning",
    "LevelState",
    "LevelTools",
    "Needs",
    "Rollout",
    "RunShape",
    "make_level_algorithm",
    "parse_settings",
    "resolve_algorithm",
    "row_keys",
    "settings_class",
]
