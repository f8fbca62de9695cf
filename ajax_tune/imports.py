"""Objects named by import path ("module:attribute"), for configs that must travel as text.

A Tune worker builds its trial from the config alone, so a user's env, agent or curriculum
named by import path needs no registration step in the worker. Kept free of heavy imports, so
every layer (the env registry included) can use it.
"""

from __future__ import annotations

import difflib
import importlib
from typing import Any

from ajax_tune.errors import ConfigError


def is_import_path(spec: Any) -> bool:
    """Whether `spec` is written as "module:attribute" (it may still fail to import)."""
    return isinstance(spec, str) and ":" in spec


def resolve_import(spec: Any, what: str) -> Any:
    """A callable or class given directly or as an importable "module:attribute" string.

    A missing attribute names the nearest one the module has; `what` names the config key in
    every message."""
    if not isinstance(spec, str):
        return spec
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise ConfigError(f"{what} must be a callable or a 'module:attribute' string, got {spec!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{what}: cannot import module {module_name!r} ({exc})") from None
    target = module
    for i, part in enumerate(attr.split(".")):
        if not hasattr(target, part):
            owner = ".".join([module_name, *attr.split(".")[:i]])
            names = [n for n in dir(target) if not n.startswith("_")]
            close = difflib.get_close_matches(part, names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{what}: {owner!r} has no attribute {part!r}{hint}")
        target = getattr(target, part)
    return target
