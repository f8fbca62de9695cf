"""Config fields that say whether they are static or traced, and check their own values.

Static fields fix shapes or program structure: changing one means building a new program.
Traced fields become arrays in the training state, so they may change between calls without
recompiling. Init-only fields (a seed, a starting task) are read when a run starts. Each field also
carries its allowed values, checked when the config is built, so a bad value is reported by name before anything compiles.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from collections.abc import Mapping
from typing import Any

import jax.numpy as jnp

from ajax_tune.errors import ConfigError
from ajax_tune.imports import did_you_mean
from ajax_tune.schedules import Schedule


def static(default: Any, *, doc: str = "", **checks) -> Any:
    return _field(default, "static", doc, checks)


def traced(default: Any, *, doc: str = "", **checks) -> Any:
    return _field(default, "traced", doc, checks)


def init_only(default: Any, *, doc: str = "", **checks) -> Any:
    """A field read once when the state is created (a new value means a new run)."""
    return _field(default, "init", doc, checks)


def _field(default, kind, doc, checks):
    meta = {"kind": kind, "doc": doc, **checks}
    if isinstance(default, (list, dict)):
        return dataclasses.field(default_factory=lambda: copy.deepcopy(default), metadata=meta)
    return dataclasses.field(default=default, metadata=meta)


def config_section(name: str):
    """Make a class a frozen config dataclass whose fields are checked (`validate`) as the section
    `name` when it is built: for sections that need no check beyond their fields'."""

    def make(cls):
        def __post_init__(self):
            validate(self, name)

        cls.__post_init__ = __post_init__
        return dataclasses.dataclass(frozen=True)(cls)

    return make


def check_keys(values, allowed, prefix: str) -> None:
    """Reject unknown keys of a config section, naming the nearest valid one."""
    for key in values:
        if key not in allowed:
            hint = did_you_mean(key, allowed, cutoff=0.5, prefix=prefix)
            raise ConfigError(f"unknown key {prefix}{key!r}{hint or '.'} Valid keys: {', '.join(allowed)}")


def parse_section(config_cls, values: Any, section: str):
    """Build one config dataclass from a mapping, with errors that name the key: the one way every
    section of a trial config is read."""
    if isinstance(values, config_cls):
        return values
    if not isinstance(values, Mapping):
        raise ConfigError(f"{section} must be a mapping, got {values!r}")
    names = [f.name for f in dataclasses.fields(config_cls)]
    check_keys(values, names, f"{section}.")
    try:
        return config_cls(**values)
    except ConfigError as exc:
        message = str(exc)  # a nested section's unknown key names its whole path already
        named = message.startswith((section, f"unknown key {section}."))
        raise ConfigError(message if named else f"{section}.{message}") from None


def field_kind(f: dataclasses.Field) -> str:
    return f.metadata.get("kind", "static")


def validate(config: Any, section: str) -> None:
    """Normalise, then check every field of a config dataclass against its type and bounds."""
    for f in dataclasses.fields(config):
        where = f"{section}.{f.name}"
        value = _normalize(where, str(f.type), getattr(config, f.name))
        object.__setattr__(config, f.name, value)  # configs are frozen; this runs in __post_init__
        _check_type(where, str(f.type), value)
        m = f.metadata
        if "choices" in m and value not in m["choices"]:
            raise ConfigError(f"{where} must be one of {list(m['choices'])}, got {value!r}")
        for op, test, word in (
            ("ge", lambda v, b: v >= b, ">="),
            ("gt", lambda v, b: v > b, ">"),
            ("le", lambda v, b: v <= b, "<="),
            ("lt", lambda v, b: v < b, "<"),
        ):
            if op in m and value is not None:
                values = value if isinstance(value, tuple) else (value,)
                if not all(test(v, m[op]) for v in values):
                    raise ConfigError(f"{where} must be {word} {m[op]}, got {value!r}")


#: How an optional field's annotation ends (`float | None`): None stands for "not given".
OPTIONAL = " | None"


def _check_type(where: str, annotation: Any, value: Any) -> None:
    ann = str(annotation)
    if ann.endswith(OPTIONAL):  # None (left out), or a value of the type
        if value is None:
            return
        ann = ann.removesuffix(OPTIONAL)
    if ann == "bool":
        ok = isinstance(value, bool)
    elif ann == "int":
        ok = isinstance(value, int) and not isinstance(value, bool)
    elif ann == "float":
        ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    elif ann == "dict":
        ok = isinstance(value, dict)
    elif ann == "str":
        ok = isinstance(value, str)
    elif ann.startswith("tuple[int"):
        ok = isinstance(value, tuple) and all(isinstance(v, int) and not isinstance(v, bool) for v in value)
    elif ann.startswith("tuple[float"):
        ok = isinstance(value, tuple) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    elif ann == "Schedule":
        ok = isinstance(value, Schedule)
    else:
        ok = True
    if not ok:
        expected = {
            "tuple[int, ...]": "a list of integers",
            "tuple[float, ...]": "a list of numbers",
            "int": "an integer",
            "float": "a number",
            "bool": "true or false",
            "str": "a string",
            "dict": "a mapping",
        }.get(ann, f"a {ann}")
        raise ConfigError(f"{where} must be {expected}, got {value!r} ({type(value).__name__})")


def _normalize(where: str, annotation: str, value: Any) -> Any:
    """Values written the simple way YAML and Python users write them: a list for a tuple, an int
    for a float, a whole float (`1e6`) for an int, a number or a mapping for a schedule."""
    annotation = annotation.removesuffix(OPTIONAL)
    if annotation == "float" and isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    if annotation == "int" and isinstance(value, float) and value.is_integer():
        return int(value)
    if annotation.startswith("tuple") and isinstance(value, list):
        value = tuple(value)
    if annotation.startswith("tuple[float") and isinstance(value, tuple):  # whole numbers as floats, as a float field's
        return tuple(float(v) if isinstance(v, int) and not isinstance(v, bool) else v for v in value)
    if annotation == "Schedule" and not isinstance(value, Schedule):
        try:
            return Schedule.parse(value)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return value


def traced_values(config: Any, xp=jnp) -> dict[str, Any]:
    """The traced fields as float32 arrays (schedules as their parameter pytree): JAX's, or with
    `xp=np` NumPy's (the same values, made on the host)."""
    out = {}
    for f in dataclasses.fields(config):
        if field_kind(f) != "traced":
            continue
        value = getattr(config, f.name)
        out[f.name] = value.to_params(xp) if isinstance(value, Schedule) else xp.asarray(value, xp.float32)
    return out


def static_values(config: Any) -> dict[str, Any]:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if field_kind(f) == "static"}


def fingerprint(*parts: Any) -> str:
    """A short stable hash of static settings, to tell whether a checkpoint fits a program."""
    blob = json.dumps(parts, sort_keys=True, default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
