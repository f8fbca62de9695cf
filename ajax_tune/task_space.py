"""The support of a task distribution: what a sampler may draw from, and how it is cut into bins.

Written in a config as one entry per task field, or as a finite list of levels:

    space: {length: [4, 32], exit_reward: 0.1, radius: {values: [0.1, 0.3]}}
    levels: [{length: 4}, {length: 8}]          # or a ladder: {length: [4, 8, 16]}

`[low, high]` is a range (integers from low to high inclusive for an integer field, floats in
[low, high) otherwise), a bare value is fixed, `{values: [...]}` is a finite set. Fields left
out keep the trial's starting task. The syntax avoids one-key mappings named like Tune's search
spaces (`uniform`, `choice`, ...), so a space inside an experiment is never mistaken for one.

Bins (for samplers that learn per region) are a grid: `bins` cuts each range into that many
equal parts (whole integers each), each value of a set is its own bin, a level is its own bin.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ajax_tune.envs.level_list import env_levels as env_levels_of
from ajax_tune.envs.level_list import level_list
from ajax_tune.errors import ConfigError, TaskError


class TaskSpace:
    def __init__(self, space: Mapping | None = None, levels: Any = None, bins: int | Mapping = 1, where: str = "task_sampler"):
        self.where = where
        if space is not None and levels is not None:
            raise ConfigError(f"{where}: give either space (ranges per field) or levels (a list of tasks), not both")
        if space is not None and (not isinstance(space, Mapping) or not space):
            raise ConfigError(
                f"{where}.space must be a non-empty mapping of task field to [low, high], a value, "
                f"or {{values: [...]}}, got {space!r}"
            )
        self._space = None if space is None else {str(k): _parse_entry(f"{where}.space.{k}", v) for k, v in space.items()}
        # a string names a set of tasks the env knows, resolved when the space is bound to it
        self._levels = None if levels is None or isinstance(levels, str) else level_list(levels, f"{where}.levels")
        self._level_set = levels if isinstance(levels, str) else None
        if isinstance(bins, Mapping):
            unknown = sorted(set(bins) - set(self._space or {}))
            if unknown:
                raise ConfigError(f"{where}.bins names {unknown}, which are not ranges of {where}.space")
            self._bins = {k: _positive_int(f"{where}.bins.{k}", v) for k, v in bins.items()}
        else:
            self._bins = _positive_int(f"{where}.bins", bins)
        self.spec = self.levels = self.entries = None

    @property
    def bound(self) -> bool:
        return self.spec is not None and (self.levels is not None or self.entries is not None)

    # -- binding to an env ---------------------------------------------------------------

    def bind(self, env, base: Mapping | None = None, env_levels: list[Mapping] | None = None) -> TaskSpace:
        """Check every entry against the env's task fields; complete levels with `base`.

        Without a space or levels of its own, the env's levels (`env.levels`) are used."""
        where, spec = self.where, env.task_spec
        self.spec = spec
        base = env.validate_task(base or {})
        if self._level_set is not None:
            self._levels = env_levels_of(env, self._level_set, f"{where}.levels")
        if self._space is None and self._levels is None:
            if env_levels is None:
                raise ConfigError(f"{where} needs a space ({{field: [low, high], ...}}) or levels, or env.levels")
            self._levels = [dict(level) for level in env_levels]
        if self._levels is not None:
            self.levels = []
            for i, level in enumerate(self._levels):
                try:
                    self.levels.append(env.validate_task(level, current=base))
                except TaskError as exc:
                    raise ConfigError(f"{where}.levels[{i}]: {exc}") from None
            self.fields = sorted({k for level in self._levels for k in (spec if isinstance(level, str) else level)})
            self._stacked = {k: np.stack([level[k] for level in self.levels]) for k in self.fields}
            self._index = {_level_key(self._stacked, i, self.fields): i for i in reversed(range(len(self.levels)))}
            self.entries = None
            self.bin_counts = [len(self.levels)]
        else:
            self.levels, self.entries = None, {}
            for name, (kind, value) in self._space.items():
                if name not in spec:
                    raise ConfigError(
                        f"{where}.space.{name}: {env.name} has no task field {name!r}; its fields are {sorted(spec)}"
                    )
                self.entries[name] = _check_entry(f"{where}.space.{name}", env, name, spec[name], kind, value)
            self.fields = list(self.entries)
            self.bin_counts = [self._entry_bins(name, entry) for name, entry in self.entries.items()]
        return self

    def _entry_bins(self, name: str, entry) -> int:
        kind, value = entry
        if kind == "fixed":
            return 1
        if kind == "values":
            return len(value)
        low, high = value
        wanted = self._bins.get(name, 1) if isinstance(self._bins, dict) else self._bins
        if self.spec[name].is_integer:
            return min(wanted, int(high - low) + 1)
        return wanted

    @property
    def num_bins(self) -> int:
        return int(np.prod(self.bin_counts))

    # -- drawing -------------------------------------------------------------------------

    def draw(self, rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
        """`n` tasks drawn uniformly from the space (a level: uniformly among the levels)."""
        if self.levels is not None:
            return self.level_tasks(rng.integers(0, len(self.levels), n))
        out = {}
        for name, (kind, value) in self.entries.items():
            field = self.spec[name]
            if kind == "fixed":
                out[name] = np.broadcast_to(value, (n, *field.shape)).copy()
            elif kind == "values":
                out[name] = value[rng.integers(0, len(value), n)]
            elif field.is_integer:
                out[name] = rng.integers(int(value[0]), int(value[1]) + 1, n).astype(field.dtype)
            else:
                out[name] = rng.uniform(value[0], value[1], n).astype(field.dtype)
        return out

    def draw_in_bins(self, rng: np.random.Generator, bins: np.ndarray) -> dict[str, np.ndarray]:
        """One task per entry of `bins`, drawn uniformly inside that bin."""
        bins = np.asarray(bins, np.int64)
        if self.levels is not None:
            return self.level_tasks(bins)
        per_field = np.unravel_index(bins, self.bin_counts) if len(self.bin_counts) else ()
        out = {}
        for (name, (kind, value)), index in zip(self.entries.items(), per_field):
            field = self.spec[name]
            if kind == "fixed":
                out[name] = np.broadcast_to(value, (len(bins), *field.shape)).copy()
            elif kind == "values":
                out[name] = value[index]
            elif field.is_integer:
                lows, highs = self._int_bins(name)
                out[name] = rng.integers(lows[index], highs[index] + 1).astype(field.dtype)
            else:
                edges = self._float_edges(name)
                out[name] = rng.uniform(edges[index], edges[index + 1]).astype(field.dtype)
        return out

    def level_tasks(self, indices) -> dict[str, np.ndarray]:
        indices = np.asarray(indices, np.int64)
        return {k: self._stacked[k][indices] for k in self.fields}

    # -- binning -------------------------------------------------------------------------

    def bin_of(self, tasks: Mapping[str, np.ndarray]) -> np.ndarray:
        """The bin of each task in a batch (leading axis), -1 for a task outside the space."""
        if self.levels is not None:  # the first level each task is (a lookup: a set may hold thousands)
            batch = {k: np.asarray(tasks[k]).astype(self._stacked[k].dtype) for k in self.fields}
            count = len(batch[self.fields[0]])
            return np.array([self._index.get(_level_key(batch, i, self.fields), -1) for i in range(count)], np.int64)
        indices, valid = [], None
        for name, (kind, value) in self.entries.items():
            field = self.spec[name]
            x = np.asarray(tasks[name]).astype(field.dtype)
            count = len(x)
            valid = np.ones(count, bool) if valid is None else valid
            if kind == "fixed":
                valid &= np.all(x.reshape(count, -1) == np.asarray(value).reshape(1, -1), axis=1)
                index = np.zeros(count, np.int64)
            elif kind == "values":
                hits = x[:, None] == value[None, :]
                valid &= hits.any(axis=1)
                index = np.argmax(hits, axis=1)
            elif field.is_integer:
                lows, highs = self._int_bins(name)
                valid &= (x >= lows[0]) & (x <= highs[-1])
                index = np.clip(np.searchsorted(lows, x, side="right") - 1, 0, len(lows) - 1)
            else:
                low, high = np.float32(value[0]), np.float32(value[1])
                valid &= (x >= low) & (x <= high)
                nb = len(self._float_edges(name)) - 1
                index = np.clip(np.floor((x.astype(np.float64) - value[0]) / (value[1] - value[0]) * nb), 0, nb - 1)
            indices.append(index.astype(np.int64))
        flat = np.ravel_multi_index(tuple(indices), self.bin_counts)
        return np.where(valid, flat, -1)

    def _int_bins(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        low, high = self.entries[name][1]
        groups = np.array_split(np.arange(int(low), int(high) + 1), self.bin_counts[self.fields.index(name)])
        return np.array([g[0] for g in groups]), np.array([g[-1] for g in groups])

    def _float_edges(self, name: str) -> np.ndarray:
        low, high = self.entries[name][1]
        return np.linspace(low, high, self.bin_counts[self.fields.index(name)] + 1)

    def ranges(self) -> dict[str, tuple[float, float]]:
        """Per scalar field the smallest interval holding every task of the space (for histograms)."""
        out = {}
        if self.levels is not None:
            for k in self.fields:
                values = np.array([level[k] for level in self.levels], np.float64)
                if values.ndim == 1:
                    out[k] = (float(values.min()), float(values.max()))
            return out
        for name, (kind, value) in self.entries.items():
            if kind == "range":
                out[name] = (float(value[0]), float(value[1]))
            elif kind == "values":
                out[name] = (float(value.min()), float(value.max()))
        return out


def _level_key(stacked: Mapping[str, np.ndarray], i: int, fields) -> tuple:
    """Entry `i` of a batch of tasks, hashable and equal where the values are."""
    values = (stacked[k][i] for k in fields)
    return tuple(np.ascontiguousarray(v + 0 if v.dtype.kind == "f" else v).tobytes() for v in values)  # + 0: -0.0 is 0.0


def _positive_int(where: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where} must be an integer >= 1, got {value!r}")
    return value


def _parse_entry(where: str, value: Any) -> tuple[str, Any]:
    if isinstance(value, Mapping):
        if set(value) != {"values"}:
            raise ConfigError(f"{where}: a mapping must be {{values: [...]}} (a finite set), got keys {sorted(value)}")
        values = value["values"]
        if not isinstance(values, (list, tuple)) or not values or not all(_is_number(v) for v in values):
            raise ConfigError(f"{where}.values must be a non-empty list of numbers, got {values!r}")
        return "values", [float(v) for v in values]
    if isinstance(value, (list, tuple)):
        if len(value) != 2 or not all(_is_number(v) for v in value):
            raise ConfigError(f"{where} as a list must be a range [low, high] of two numbers, got {list(value)!r}")
        low, high = float(value[0]), float(value[1])
        if not low < high:
            raise ConfigError(f"{where}: a range [low, high] needs low < high, got {list(value)!r}")
        return "range", (low, high)
    if _is_number(value):
        return "fixed", float(value)
    raise ConfigError(f"{where} must be [low, high], a number, or {{values: [...]}}, got {value!r}")


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _check_entry(where: str, env, name: str, field, kind: str, value):
    """An entry checked against its task field; values come back in the field's dtype."""
    if kind == "fixed":
        try:
            checked = env.validate_task({name: value})[name]
        except TaskError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        return kind, checked
    if field.shape:
        raise ConfigError(
            f"{where}: ranges and value sets are for scalar fields; {name!r} has shape {field.shape} "
            "(give a fixed value, or levels)"
        )
    numbers = list(value)
    if field.is_integer and not all(float(v).is_integer() for v in numbers):
        raise ConfigError(f"{where}: {name!r} is an integer field, got {numbers!r}")
    if min(numbers) < field.low or max(numbers) > field.high:
        raise ConfigError(f"{where}: {numbers!r} is outside {env.name}'s {name!r}, {field.describe()}")
    if kind == "values":
        array = np.asarray(numbers).astype(field.dtype)
        if len(np.unique(array)) != len(array):
            raise ConfigError(f"{where}.values repeats a value: {numbers!r}")
        return kind, array
    return kind, (value[0], value[1])
