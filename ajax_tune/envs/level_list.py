"""Levels: a ladder of tasks addressed by number, so curricula written for RLlib run as they are.

RLlib's TaskSettableEnv speaks level numbers: `get_task()` returns an int and a curriculum
function returns `current_task + 1`. Our tasks are mappings of field to value, so an env given
`env.levels` (a list of tasks, or one list of values per field) gets a numbered view of them:
level `i` is the `i`-th task, completed with the starting task for the fields it leaves out.
Asking for a level past either end is an error, or is held at the nearest end, as
`env.level_overflow` says.

Only numpy here: levels are resolved on the host before anything is traced.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ajax_tune.envs.base import unstack_tasks
from ajax_tune.errors import ConfigError, TaskError

OVERFLOW = ("error", "clamp")


def level_list(levels: Any, where: str = "levels") -> list[dict]:
    """Levels as a list of (partial) tasks, from a list of tasks (a task may be a name the env
    knows, resolved when the env is) or one list of values per field."""
    if isinstance(levels, Mapping):
        if not levels:
            raise ConfigError(f"{where}: need at least one field with a list of values, got {{}}")
        for field, values in levels.items():
            if not isinstance(values, (list, tuple)) or not values:
                raise ConfigError(f"{where}.{field} must be a non-empty list of values (one per level), got {values!r}")
        lengths = {len(v) for v in levels.values()}
        if len(lengths) != 1:
            counts = {k: len(v) for k, v in levels.items()}
            raise ConfigError(f"{where}: every field needs the same number of values (one per level), got {counts}")
        return [{k: v[i] for k, v in levels.items()} for i in range(lengths.pop())]
    if not isinstance(levels, (list, tuple)) or not levels:
        raise ConfigError(f"{where} must be a non-empty list of tasks or a mapping of field to a list of values, got {levels!r}")
    for i, level in enumerate(levels):
        if not isinstance(level, (Mapping, str)):
            raise ConfigError(
                f"{where}[{i}] must be a task (a mapping of field to value, or a name the env knows), got {level!r}"
            )
    return [level if isinstance(level, str) else dict(level) for level in levels]


def env_levels(env, levels: Any, where: str = "levels") -> list:
    """`level_list`, where `levels` may also name a set of tasks the env knows (`env.named_tasks`)."""
    if isinstance(levels, str):
        try:
            return unstack_tasks(env.named_tasks(levels)[1])
        except TaskError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return level_list(levels, where)


def level_number(value: Any) -> int | None:
    """`value` as a level number if it is one (an int, or an integral float or 0-d array), else None."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, np.ndarray) and value.ndim == 0:
        value = value.item()
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real) and float(value).is_integer():
        return int(value)
    return None


class Levels:
    """The numbered tasks of one env: `task(i)` is level `i`, `level_of(task)` the reverse."""

    def __init__(self, env, levels: Any, base: Mapping[str, Any] | None = None, overflow: str = "error"):
        if overflow not in OVERFLOW:
            raise ConfigError(f"env.level_overflow must be one of {list(OVERFLOW)}, got {overflow!r}")
        self.overflow = overflow
        base = env.validate_task(base or {})
        self.tasks: list[dict[str, np.ndarray]] = []
        for i, level in enumerate(env_levels(env, levels, "env.levels")):
            try:
                self.tasks.append(env.validate_task(level, current=base))
            except TaskError as exc:
                raise ConfigError(f"env.levels[{i}]: {exc}") from None
        for i, task in enumerate(self.tasks):
            for j in range(i):
                if _same(task, self.tasks[j]):
                    raise ConfigError(
                        f"env.levels[{i}] is the same task as env.levels[{j}]; levels must differ, "
                        "or a level number would not say which one an env runs"
                    )

    def __len__(self) -> int:
        return len(self.tasks)

    @property
    def last(self) -> int:
        return len(self.tasks) - 1

    def index(self, level: Any) -> int:
        """A valid level number for `level`, or a clear error (clamped if so configured)."""
        number = level_number(level)
        if number is None:
            raise TaskError(
                f"a level must be an integer in [0, {self.last}] (env.levels has {len(self)}), "
                f"got {level!r} ({type(level).__name__})"
            )
        if 0 <= number <= self.last:
            return number
        if self.overflow == "clamp":
            return min(max(number, 0), self.last)
        raise TaskError(
            f"level {number} is outside env.levels, which has levels 0..{self.last}; "
            "set env.level_overflow: clamp to hold it at the nearest level"
        )

    def task(self, level: Any) -> dict[str, np.ndarray]:
        return {k: v.copy() for k, v in self.tasks[self.index(level)].items()}

    def batch(self, levels: Sequence[Any]) -> dict[str, np.ndarray]:
        """One task per env from one level number per env."""
        tasks = [self.task(level) for level in levels]
        return {k: np.stack([t[k] for t in tasks]) for k in tasks[0]}

    def level_of(self, task: Mapping[str, Any]) -> int | None:
        """The level whose task `task` is, or None when it is none of them."""
        for i, level in enumerate(self.tasks):
            if _same(level, task):
                return i
        return None


def _same(a: Mapping[str, Any], b: Mapping[str, Any]) -> bool:
    return all(np.array_equal(np.asarray(a[k]), np.asarray(b[k])) for k in a)
