"""Config fields that say whether they are static or traced, and check their own values.

Static fields fix shapes or program structure: changing one means building a new program.
Traced fields become arrays in the training state, so they may change between calls without
recompiling. Init-only fields (a seed, a starting task) are read when a run starts. Each field also carries its allowed values, checked when the config is built, so a
bad value is reported by name before anything compiles.
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
from typing import Any, Sequence

import jax.numpy as jnp

from ajax_tune.errors import ConfigError
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


def field_kind(f: dataclasses.Field) -> str:
    return f.metadata.get("kind", "static")


def validate(config: Any, section: str) -> None:
    """Check every field of a config dataclass against its type and declared bounds."""
    hints = {f.name: f.type for f in dataclasses.fields(config)}
    for f in dataclasses.fields(config):
        value = getattr(config, f.name)
        where = f"{section}.{f.name}"
        _check_type(where, hints[f.name], value)
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


def _check_type(where: str, annotation: Any, value: Any) -> None:
    ann = str(annotation)
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
    elif ann == "Schedule":
        ok = isinstance(value, Schedule)
    else:
        ok = True
    if not ok:
        expected = {"tuple[int, ...]": "a list of integers", "int": "an integer", "float": "a number",
                    "bool": "true or false", "str": "a string", "dict": "a mapping"}.get(ann, f"a {ann}")
        raise ConfigError(f"{where} must be {expected}, got {value!r} ({type(value).__name__})")


def coerce(config_cls, values: dict) -> dict:
    """Turn YAML/JSON-shaped values into the field types (lists to tuples, ints to floats)."""
    out = dict(values)
    for f in dataclasses.fields(config_cls):
        if f.name not in out:
            continue
        v = out[f.name]
        ann = str(f.type)
        if ann == "float" and isinstance(v, int) and not isinstance(v, bool):
            out[f.name] = float(v)
        elif ann.startswith("tuple") and isinstance(v, list):
            out[f.name] = tuple(v)
        elif ann == "Schedule":
            try:
                out[f.name] = Schedule.parse(v)
            except ValueError as exc:
                raise ConfigError(f"{f.name}: {exc}") from None
    return out


def traced_values(config: Any) -> dict[str, Any]:
    """The traced fields as float32 arrays (schedules as their parameter pytree)."""
    out = {}
    for f in dataclasses.fields(config):
        if field_kind(f) != "traced":
            continue
        value = getattr(config, f.name)
        out[f.name] = value.to_params() if isinstance(value, Schedule) else jnp.asarray(value, jnp.float32)
    return out


def static_values(config: Any) -> dict[str, Any]:
    return {f.name: getattr(config, f.name) for f in dataclasses.fields(config) if field_kind(f) == "static"}


def fingerprint(*parts: Any) -> str:
    """A short stable hash of static settings, to tell whether a checkpoint fits a program."""
    blob = json.dumps(parts, sort_keys=True, default=repr)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def field_names(config_cls) -> Sequence[str]:
    return [f.name for f in dataclasses.fields(config_cls)]
