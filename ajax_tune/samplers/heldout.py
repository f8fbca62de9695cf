"""Held-out tasks: a fixed set evaluated inside every evaluation, so generalisation is a metric.

Written in a trial config as a list of tasks, or as draws from a space (seeded, so every trial
of an experiment evaluates the same set):

    heldout: {tasks: [{length: 6}, {length: 20}, {length: 30}]}
    heldout: {space: {length: [4, 32], exit_reward: 0.1}, num_tasks: 8, seed: 0}
    heldout: {set: handmade, num_tasks: 10}      # a set of tasks the env knows by name

A task in the list may be a name the env knows (a shipped level). From a set, `num_tasks` equal
to the set's size takes it whole, in its order; fewer are drawn without replacement (seeded) and
kept in the set's order.

The loop evaluates the K tasks beside the current one (K is static, the tasks are data) and its
summary reports the call's last evaluation per task (`eval/heldout/<i>/return`,
`eval/heldout/<i>/success_rate`) and as means over tasks and seeds
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

KEYS = ("tasks", "space", "set", "num_tasks", "seed")


@dataclasses.dataclass(frozen=True)
class HeldOut:
    """The `heldout` section, parsed once when the config is: how many tasks it holds (known
    before any env is built: the loop's static batch of held-out tasks), and either the fixed
    list or the space and seed they are drawn from."""

    count: int
    tasks: tuple[dict, ...] | None = None
    space: dict | None = None
    seed: int = 0
    set: str | None = None

    @classmethod
    def parse(cls, spec: Any) -> HeldOut | None:
        """The section as written (None: no held-out set), checked for its shape."""
        if spec is None or isinstance(spec, HeldOut):
            return spec
        if not isinstance(spec, Mapping):
            raise ConfigError(f"heldout must be a mapping, {{tasks: [...]}} or {{space: ..., num_tasks: K}}, got {spec!r}")
        check_keys(spec, KEYS, "heldout.")
        if sum(key in spec for key in ("tasks", "space", "set")) != 1:
            raise ConfigError(
                "heldout needs exactly one of tasks (a list of tasks), space (with num_tasks and seed) "
                "or set (a set of tasks the env knows by name, with num_tasks)"
            )
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
        if "set" in spec:
            if not isinstance(spec["set"], str) or not spec["set"]:
                raise ConfigError(f"heldout.set must name a set of tasks the env knows, got {spec['set']!r}")
            return cls(count=num_tasks, set=spec["set"], seed=seed)
        return cls(count=num_tasks, space=spec["space"], seed=seed)

    def to_dict(self) -> dict:
        """The section as a config writes it (what `parse` reads back)."""
        if self.tasks is not None:
            return {"tasks": list(self.tasks)}
        if self.set is not None:
            return {"set": self.set, "num_tasks": self.count, "seed": self.seed}
        return {"space": self.space, "num_tasks": self.count, "seed": self.seed}

    def batch(self, env, base: Mapping | None = None) -> dict[str, np.ndarray]:
        """The held-out set as one batch (field -> [count, *shape]), checked against the env.

        Fields a task leaves out take the trial's starting task (`base`)."""
        base = env.validate_task(base or {})
        if self.tasks is not None:
            checked = []
            for i, task in enumerate(self.tasks):
                try:
                    checked.append(env.validate_task(task, current=base))
                except TaskError as exc:
                    raise ConfigError(f"heldout.tasks[{i}]: {exc}") from None
            return {k: np.stack([t[k] for t in checked]) for k in checked[0]}
        if self.set is not None:
            return self._from_set(env)
        space = TaskSpace(self.space, where="heldout").bind(env, base=base)
        drawn = space.draw(np.random.default_rng(self.seed), self.count)
        return {k: np.stack([v] * self.count) if k not in drawn else drawn[k] for k, v in base.items()}

    def _from_set(self, env) -> dict[str, np.ndarray]:
        try:
            tasks = env.task_set(self.set)
        except TaskError as exc:
            raise ConfigError(f"heldout.set: {exc}") from None
        if self.count > len(tasks):
            raise ConfigError(f"heldout.num_tasks is {self.count}, but {env.name}'s set {self.set!r} holds {len(tasks)} tasks")
        chosen = range(len(tasks))
        if self.count < len(tasks):
            chosen = sorted(np.random.default_rng(self.seed).choice(len(tasks), self.count, replace=False).tolist())
        picked = [env.validate_task(tasks[i]) for i in chosen]
        return {k: np.stack([t[k] for t in picked]) for k in picked[0]}
