"""Held-out tasks: a fixed set evaluated inside every evaluation, so generalisation is a metric.

Written in a trial config as a list of tasks, as draws from a space (seeded, so every trial
of an experiment evaluates the same set), or as a set the env names (`Env.named_tasks`):

    heldout: {tasks: [{length: 6}, {length: 20}, {length: 30}]}
    heldout: {space: {length: [4, 32], exit_reward: 0.1}, num_tasks: 8, seed: 0}
    heldout: {named: jaxued_mazes}

The loop evaluates the K tasks beside the current one (K is static, the tasks are data) and its
summary reports the call's last evaluation per task (`eval/heldout/<i>/return`,
`eval/heldout/<i>/success_rate`; a named set's tasks by their names,
`eval/heldout/SixteenRooms/success_rate`) and as means over tasks and seeds
(`eval/heldout/return_mean`, `eval/heldout/success_rate_mean`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from ajax_tune.errors import ConfigError, TaskError
from ajax_tune.fields import check_keys
from ajax_tune.samplers.space import TaskSpace

KEYS = ("tasks", "space", "num_tasks", "seed", "named")
FORMS = ("tasks", "space", "named")


@dataclasses.dataclass(frozen=True)
class HeldOut:
    """The `heldout` section, parsed once when the config is: how many tasks it holds (the
    loop's static batch of held-out tasks: known before any env is built for a list or a space;
    a named set's size is its env's, `labels(env)`), and the fixed list, the space and seed they
    are drawn from, or the set's name."""

    count: int | None
    tasks: tuple[dict, ...] | None = None
    space: dict | None = None
    seed: int = 0
    named: str | None = None

    @classmethod
    def parse(cls, spec: Any) -> HeldOut | None:
        """The section as written (None: no held-out set), checked for its shape."""
        if spec is None or isinstance(spec, HeldOut):
            return spec
        if not isinstance(spec, Mapping):
            raise ConfigError(
                f"heldout must be a mapping, {{tasks: [...]}}, {{space: ..., num_tasks: K}} or {{named: <set>}}, got {spec!r}"
            )
        check_keys(spec, KEYS, "heldout.")
        if sum(form in spec for form in FORMS) != 1:
            raise ConfigError(
                "heldout needs exactly one of tasks (a list of tasks), space (with num_tasks and seed) "
                "or named (a set the env names, such as jaxued_mazes)"
            )
        if "named" in spec:
            extra = sorted(set(spec) - {"named"})
            if extra:
                raise ConfigError(f"heldout.named is a set the env names; {extra} do not apply to it")
            if not isinstance(spec["named"], str) or not spec["named"]:
                raise ConfigError(f"heldout.named must be the name of a task set, got {spec['named']!r}")
            return cls(count=None, named=spec["named"])
        if "tasks" in spec:
            extra = sorted(set(spec) & {"num_tasks", "seed"})
            if extra:
                raise ConfigError(f"heldout.tasks is a fixed list; {extra} apply only to heldout.space")
            tasks = spec["tasks"]
            if not isinstance(tasks, (list, tuple)) or not tasks:
                raise ConfigError(f"heldout.tasks must be a non-empty list of tasks, got {tasks!r}")
            return cls(count=len(tasks), tasks=tuple(tasks))
        num_tasks, seed = spec.get("num_tasks"), spec.get("seed", 0)
        if isinstance(num_tasks, bool) or not isinstance(num_tasks, int) or num_tasks < 1:
            raise ConfigError(f"heldout.num_tasks must be an integer >= 1 (how many tasks to draw), got {num_tasks!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"heldout.seed must be an integer >= 0, got {seed!r}")
        return cls(count=num_tasks, space=spec["space"], seed=seed)

    def to_dict(self) -> dict:
        """The section as a config writes it (what `parse` reads back)."""
        if self.named is not None:
            return {"named": self.named}
        if self.tasks is not None:
            return {"tasks": list(self.tasks)}
        return {"space": self.space, "num_tasks": self.count, "seed": self.seed}

    @property
    def static_key(self) -> int | str:
        """What fixes the loop's program: the number of tasks, or the named set."""
        return self.count if self.named is None else f"named:{self.named}"

    def labels(self, env) -> tuple[str, ...]:
        """Each task's name in results: a named set's own names, else its index."""
        if self.named is not None:
            return tuple(env.named_tasks(self.named)[0])
        return tuple(str(i) for i in range(self.count))

    def batch(self, env, base: Mapping | None = None) -> dict[str, np.ndarray]:
        """The held-out set as one batch (field -> [count, *shape]), checked against the env.

        Fields a task leaves out take the trial's starting task (`base`)."""
        if self.named is not None:
            try:
                return env.named_tasks(self.named)[1]
            except TaskError as exc:
                raise ConfigError(f"heldout.named {self.named!r}: {exc}") from None
        base = env.validate_task(base or {})
        if self.tasks is not None:
            checked = []
            for i, task in enumerate(self.tasks):
                try:
                    checked.append(env.validate_task(task, current=base))
                except TaskError as exc:
                    raise ConfigError(f"heldout.tasks[{i}]: {exc}") from None
            return {k: np.stack([t[k] for t in checked]) for k in checked[0]}
        space = TaskSpace(self.space, where="heldout").bind(env, base=base)
        drawn = space.draw(np.random.default_rng(self.seed), self.count)
        return {k: np.stack([v] * self.count) if k not in drawn else drawn[k] for k, v in base.items()}
