"""Level algorithms by name, and the `ued` section of a trial config read into the settings of the
algorithm it names.

    ued:
      algorithm: accel           # a built-in's name, or 'module:Class' (a LevelAlgorithm of your own)
      buffer_size: 4000          # then the algorithm's own settings (its `Settings` fields)
      edits: 5

A built-in is named as agents, samplers and envs are; a user's algorithm by import path, so a Tune
worker imports it by itself. The section's keys are the named algorithm's settings and no others:
a setting another algorithm has is refused in one line that lists this one's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from ajax_tune.errors import ConfigError
from ajax_tune.fields import parse_section
from ajax_tune.imports import Registry, did_you_mean
from ajax_tune.ued.algorithm import LevelAlgorithm, LevelSettings

BUILT_IN = {
    "dr": "ajax_tune.ued.algorithms.dr:DomainRandomisation",
    "plr": "ajax_tune.ued.algorithms.plr:PLR",
    "robust_plr": "ajax_tune.ued.algorithms.plr:RobustPLR",
    "accel": "ajax_tune.ued.algorithms.accel:ACCEL",
    "sfl": "ajax_tune.ued.algorithms.sfl:SFL",
}
ALGORITHMS = Registry("ued.algorithm", BUILT_IN, imports="module:Class")
DEFAULT = LevelSettings.algorithm


def resolve_algorithm(name: Any) -> type[LevelAlgorithm]:
    """The class `ued.algorithm` names, checked to be a level algorithm (one line if not)."""
    found = ALGORITHMS.resolve(name)
    settings = getattr(found, "Settings", None)
    methods = [m for m in ("init", "choose", "observe", "rows", "needs", "check") if not callable(getattr(found, m, None))]
    if (
        not isinstance(found, type)
        or methods
        or not (isinstance(settings, type) and dataclasses.is_dataclass(settings) and issubclass(settings, LevelSettings))
    ):
        raise ConfigError(
            f"ued.algorithm {name!r} must name a level algorithm: a class with init, choose and observe (subclass "
            f"ajax_tune.ued.LevelAlgorithm) whose `Settings` is a dataclass subclassing ajax_tune.ued.LevelSettings, "
            f"got {found!r}"
        )
    return found


def parse_settings(values: Any) -> LevelSettings:
    """The `ued` section as the settings of the algorithm it names."""
    if isinstance(values, LevelSettings):
        return values
    if not isinstance(values, Mapping):
        raise ConfigError(f"ued must be a mapping with an algorithm and its settings, got {values!r}")
    name = values.get("algorithm", DEFAULT)
    cls = resolve_algorithm(name)
    names = [f.name for f in dataclasses.fields(cls.Settings)]
    for key in values:
        if key not in names:
            hint = did_you_mean(key, names, cutoff=0.5, prefix="ued.")
            raise ConfigError(f"ued.{key} is not a setting of ued.algorithm {name!r}{hint} Its settings: {', '.join(names)}")
    return parse_section(cls.Settings, {**values, "algorithm": name}, "ued")


def settings_class(values: Any) -> type[LevelSettings]:
    """The settings class of the algorithm a `ued` section (or its settings) names."""
    name = values.algorithm if isinstance(values, LevelSettings) else (values or {}).get("algorithm", DEFAULT)
    return resolve_algorithm(name).Settings


def to_dict(settings: LevelSettings) -> dict:
    """What `parse_settings` reads back to the same settings."""
    return dataclasses.asdict(settings)
