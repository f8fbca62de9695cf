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
            raise ConfigError(f"{what}: {owner!r} has no attribute {part!r}{did_you_mean(part, names)}")
        target = getattr(target, part)
    return target


def did_you_mean(name: Any, names, cutoff: float = 0.6, prefix: str = "") -> str:
    """ "; did you mean 'x'?" for the nearest of `names`, or nothing when none is near; `prefix`
    is written before the name, as in "did you mean agent.'lr'?"."""
    close = difflib.get_close_matches(str(name), [str(n) for n in names], n=1, cutoff=cutoff)
    return f"; did you mean {prefix}{close[0]!r}?" if close else ""


class UnknownName(ConfigError, KeyError):
    """A name that no registry entry has: bad input (ConfigError), and a failed lookup (KeyError)
    for code that looks names up as in a mapping."""

    __str__ = BaseException.__str__  # the message as written, not KeyError's quoted repr


class Registry:
    """The names a config may pick from, in one table, plus "module:attribute" import paths.

    `entries` is held, not copied: what is added to it later (a `register` call, a test's
    monkeypatch) is known at once. A value that is an import path string is imported when its
    name is first looked up, so listing built-ins costs nothing. `prefixes` route names such as
    "brax/ant" to a factory taking the rest of the name ("ant"), keyed by the form they are
    listed as ("brax/<name>"); `imports` is the form an import
    path takes in messages ("module:Class"), or "" where import paths are not accepted.

    An unknown name is refused with the nearest known one: "`what` must be one of [...] or a
    'module:Class' import path, got 'x'; did you mean 'y'?", or, where `unknown` gives the
    message's start (as the env registry, whose caller adds the key), "`unknown` 'x'; did you
    mean 'y'? Known: ...".
    """

    def __init__(
        self, what: str, entries: dict, *, imports: str = "module:attribute", unknown: str = "", prefixes: dict | None = None
    ):
        self.what, self.entries, self.imports, self.unknown_phrase = what, entries, imports, unknown
        self.prefixes = {form.partition("<")[0]: (form, factory) for form, factory in (prefixes or {}).items()}

    def names(self) -> list[str]:
        """Every name, with each prefix's listed form ("brax/<name>")."""
        return [*self.entries, *(form for form, _ in self.prefixes.values())]

    def __contains__(self, name: Any) -> bool:
        return isinstance(name, str) and (name in self.entries or name.startswith(tuple(self.prefixes)))

    def is_import_path(self, name: Any) -> bool:
        return bool(self.imports) and is_import_path(name) and name not in self

    def resolve(self, name: Any) -> Any:
        """The entry named `name` (imported if it is a path), what a prefix's factory makes of
        the rest of the name, or the object an import path names."""
        if not isinstance(name, str):
            raise ConfigError(f"{self.what} must be a string, got {name!r}")
        if name in self.entries:
            value = self.entries[name]
            return resolve_import(value, self.what) if isinstance(value, str) and is_import_path(value) else value
        for prefix, (_, factory) in self.prefixes.items():
            if name.startswith(prefix):
                return factory(name[len(prefix) :])
        if self.is_import_path(name):
            return resolve_import(name, self.what)
        raise self.unknown(name)

    def unknown(self, name: Any) -> UnknownName:
        names = self.names()
        hint = did_you_mean(name, names)
        if self.unknown_phrase:
            paths = f", or a {self.imports!r} import path" if self.imports else ""
            return UnknownName(f"{self.unknown_phrase} {name!r}{hint} Known: {', '.join(names)}{paths}")
        paths = f" or a {self.imports!r} import path" if self.imports else ""
        return UnknownName(f"{self.what} must be one of {names}{paths}, got {name!r}{hint}")
