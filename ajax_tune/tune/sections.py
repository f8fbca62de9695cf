"""The sections of an experiment outside `trial`, each parsed and checked on its own: `tune`,
`checkpoint`, `failure`, `stop`, `wandb`, the experiment's name, and `--set` overrides."""

from __future__ import annotations

import copy
import inspect
import math
from collections.abc import Mapping
from typing import Any

import yaml

from ajax_tune import yaml_loader
from ajax_tune.errors import ConfigError
from ajax_tune.fields import config_section, static
from ajax_tune.imports import did_you_mean
from ajax_tune.results import keys as K


@config_section("tune")
class TuneSection:
    metric: str = static("eval/return_mean", doc="the result key searchers, schedulers and checkpoint scores read")
    mode: str = static("max", choices=("min", "max"), doc="whether a higher or a lower metric is better")
    num_samples: int = static(1, ge=1, doc="trials to draw (each grid point this many times)")
    search: Any = static("random", doc="a name, or {name: ..., kwargs: {...}} (options may also be inline)")
    scheduler: Any = static("none", doc="a name, or {name: ..., kwargs: {...}}")
    max_concurrent_trials: int = static(0, ge=0, doc="trials running at once; 0: as many as resources allow")
    reuse_actors: bool = static(False, doc="start a new trial in a finished trial's actor (no recompiling)")
    seed: int = static(0, ge=0, doc="the search's seed, unless its options give one")
    population: int = static(
        0, ge=0, doc="configs per trial: K suggestions packed as one trial's members (population_search.py); 0: one per trial"
    )
    time_budget_s: float | None = static(
        None,
        gt=0.0,
        doc="the experiment's wall-clock budget in seconds (Tune's time_budget_s): every trial stops then; left out: none",
    )


@config_section("checkpoint")
class CheckpointSection:
    frequency: int = static(0, ge=0, doc="checkpoint every this many iterations; 0: never in between")
    at_end: bool = static(True, doc="checkpoint when a trial ends")
    num_to_keep: int | None = static(None, ge=1, doc="the best checkpoints kept by tune.metric (and the latest); left out: all")


@config_section("failure")
class FailureSection:
    max_failures: int = static(0, ge=-1, doc="restarts of a failed trial from its last checkpoint; -1: no limit")


def experiment_name(value: Any, default: str) -> str:
    if value is None or value == "":
        return default
    if not isinstance(value, str) or "/" in value or value in (".", ".."):
        raise ConfigError(f"name must be a directory name (a string without '/'), got {value!r}")
    return value


def section_mapping(raw: Mapping, key: str) -> Mapping:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key} must be a mapping, got {value!r}")
    return value


def parse_stop(value: Any) -> dict:
    """`stop`: result key -> the value at which a trial ends (Tune stops at the first result at
    or past it). Its keys are checked as metrics once the trial's result keys are known."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(
            f"stop must be a mapping of result key to the value that ends a trial "
            f"(for example {{training_iteration: 12}}), got {value!r}"
        )
    for key, limit in value.items():
        if not isinstance(limit, (int, float)) or isinstance(limit, bool):
            raise ConfigError(f"stop.{key} must be a number (a trial ends at the first result with {key} >= it), got {limit!r}")
        if not math.isfinite(limit):
            raise ConfigError(
                f"stop.{key} must be a finite number, got {limit!r}: a NaN never ends a trial, an infinity never "
                f"or at its first result"
            )
        if key in COUNTERS and limit <= 0:
            raise ConfigError(
                f"stop.{key} must be > 0, got {limit!r}: {key} is already past it at the first result, "
                f"so every trial would still train one iteration"
            )
    return dict(value)


#: Result keys that count up from the first result on: a stop at 0 or below ends nothing sooner.
COUNTERS = frozenset({*K.TUNE_KEYS, "env_steps", "useful_env_steps", "gradient_steps", "timesteps_this_iter"} - {"timestamp"})


WANDB_OWN = ("project", "group", "mode")
WANDB_MODES = ("online", "offline", "disabled")


def parse_wandb(value: Any) -> dict | None:
    """`wandb`: the keyword arguments of `wandb_callback`, `WandbLoggerCallback` or `wandb.init`;
    a misspelt one would reach `wandb.init` inside every trial's logging actor."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigError(f"wandb must be a mapping (for example {{project: my-project}}), got {value!r}")
    if not value:
        return {}
    valid = wandb_options()
    for key in value:
        if key not in valid:
            hint = did_you_mean(key, valid, cutoff=0.5)
            raise ConfigError(f"wandb: unknown option {key!r}{hint} Options: {', '.join(valid)}")
    for key in ("project", "group"):
        if value.get(key) is not None and not isinstance(value[key], str):
            raise ConfigError(f"wandb.{key} must be a string, got {value[key]!r}")
    if value.get("mode") is not None and value["mode"] not in WANDB_MODES:
        raise ConfigError(f"wandb.mode must be one of {list(WANDB_MODES)}, got {value['mode']!r}")
    return dict(value)


def option_names(cls) -> list[str]:
    """The keyword arguments `cls` takes, from its signature. Every class in `tune.choices.CHOICES`
    names all of its options (no **kwargs), so this is the whole list (tests/test_compat.py checks it)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [n for n, p in inspect.signature(cls).parameters.items() if p.kind in kinds]


def wandb_options() -> list[str]:
    """What the `wandb` section may set: `wandb_callback`'s own arguments, then Ray's callback's,
    then `wandb.init`'s (where the rest go)."""
    import wandb
    from ray.air.integrations.wandb import WandbLoggerCallback

    names = [*WANDB_OWN, *option_names(WandbLoggerCallback), *option_names(wandb.init)]
    return list(dict.fromkeys(names))


def parse_assignment(item: str, flag: str, form: str = "key.path=value") -> tuple[str, Any]:
    """`key=value` as the command line gives it: the value read as YAML (numbers as in a file),
    or kept as text where it is not YAML."""
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"{flag} expects {form}, got {item!r}")
    try:
        return key, yaml_loader.load(text)
    except yaml.YAMLError:
        return key, text


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """`--set key.path=value` assignments onto the loaded experiment."""
    raw = copy.deepcopy(raw)
    for item in overrides:
        key, value = parse_assignment(item, "--set")
        node = raw
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"--set {key}: {part!r} is not a section")
            node = child
        node[parts[-1]] = value
    return raw
