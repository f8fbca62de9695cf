"""Held-out tasks: a fixed set evaluated inside every evaluation, so generalisation is a metric.

Written in a trial config as a list of tasks, as draws from a space (seeded, so every trial
of an experiment evaluates the same set), or as a set the env names (`Env.named_tasks`):

    heldout: {tasks: [{length: 6}, {length: 20}, {length: 30}]}
    heldout: {space: {length: [4, 32], exit_reward: 0.1}, num_tasks: 8, seed: 0}
    heldout: {named: jaxued_mazes}                 # the whole set, in its order
    heldout: {named: handmade, num_tasks: 10, seed: 0}   # 10 of the set, drawn (seeded)
    heldout: {generated: true, num_tasks: 100, seed: 0}  # 100 levels from the env's generator
    heldout: {generated: true, num_tasks: 1000, cvar: 0.1}   # and their CVaR at 10%

A task in a list may be a name the env knows (a shipped level, `Env.named_task`). From a named
set, `num_tasks` below the set's size draws that many without replacement, kept in the set's
order.

The loop evaluates the K tasks beside the current one (K is static, the tasks are data) and its
summary reports the call's last evaluation per task (`eval/heldout/<i>/return`,
`eval/heldout/<i>/success_rate`; a named set's tasks by their names,
`eval/heldout/SixteenRooms/success_rate`) and as means over tasks and seeds
(`eval/heldout/return_mean`, `eval/heldout/success_rate_mean`), and over the worst tenth of
tasks (`_worst10`), which selects and scores on the same episodes.

`cvar: alpha` adds robustness as SFL (Rutherford et al. 2024) measures it: every held-out
evaluation plays the set twice, on independent keys; the worst `alpha` share of tasks is chosen
by the first set of episodes and scored on the second, so the selection does not bias the
figure (with a sampling policy, the worst of one draw are partly unlucky, not hard). Reported
per seed and averaged over seeds, under `eval/heldout/return_cvar<percent>` and
`eval/heldout/success_rate_cvar<percent>` (`cvar: 0.1` gives `_cvar10`), for a search to
optimise. It doubles the held-out set's evaluation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from ajax_tune.errors import ConfigError, TaskError
from ajax_tune.fields import check_keys
from ajax_tune.task_space import TaskSpace

KEYS = ("tasks", "space", "num_tasks", "seed", "named", "generated", "cvar")
FORMS = ("tasks", "space", "named", "generated")


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
    generated: bool = False
    cvar: float | None = None  # the share of worst tasks whose CVaR is reported (selected and scored apart)

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
        held = cls._form({k: v for k, v in spec.items() if k != "cvar"})
        cvar = spec.get("cvar")
        if cvar is None:
            return held
        percent = 100 * cvar if isinstance(cvar, (int, float)) and not isinstance(cvar, bool) else None
        if percent is None or not 0 < percent < 100 or abs(percent - round(percent)) > 1e-9:
            raise ConfigError(
                f"heldout.cvar must be a share of the tasks in whole percent, 0.01 to 0.99 (such as 0.1), got {cvar!r}"
            )
        return dataclasses.replace(held, cvar=float(cvar))

    @classmethod
    def _form(cls, spec: Mapping) -> HeldOut:
        """Which tasks the section names (everything but `cvar`)."""
        if sum(form in spec for form in FORMS) != 1:
            raise ConfigError(
                "heldout needs exactly one of tasks (a list of tasks), space (with num_tasks and seed) "
                "or named (a set the env names, such as jaxued_mazes) or generated (num_tasks levels from "
                "the env's generator, with seed)"
            )
        if "named" in spec:
            if not isinstance(spec["named"], str) or not spec["named"]:
                raise ConfigError(f"heldout.named must be the name of a task set, got {spec['named']!r}")
            if "num_tasks" not in spec:
                if "seed" in spec:
                    raise ConfigError("heldout.seed draws num_tasks of a named set; without num_tasks the set is taken whole")
                return cls(count=None, named=spec["named"])
        if "tasks" in spec:
            extra = sorted(set(spec) & {"num_tasks", "seed"})
            if extra:
                raise ConfigError(f"heldout.tasks is a fixed list; {extra} apply only to heldout.space")
            tasks = spec["tasks"]
            if not isinstance(tasks, (list, tuple)) or not tasks:
                raise ConfigError(f"heldout.tasks must be a non-empty list of tasks, got {tasks!r}")
            return cls(count=len(tasks), tasks=tuple(tasks))
        if "generated" in spec and spec["generated"] is not True:
            raise ConfigError(f"heldout.generated must be true (with num_tasks and seed), got {spec['generated']!r}")
        num_tasks, seed = spec.get("num_tasks"), spec.get("seed", 0)
        if isinstance(num_tasks, bool) or not isinstance(num_tasks, int) or num_tasks < 1:
            raise ConfigError(f"heldout.num_tasks must be an integer >= 1 (how many tasks to draw), got {num_tasks!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"heldout.seed must be an integer >= 0, got {seed!r}")
        if "named" in spec:
            return cls(count=num_tasks, named=spec["named"], seed=seed)
        if "generated" in spec:
            return cls(count=num_tasks, generated=True, seed=seed)
        return cls(count=num_tasks, space=spec["space"], seed=seed)

    def to_dict(self) -> dict:
        """The section as a config writes it (what `parse` reads back)."""
        if self.named is not None:
            named = (
                {"named": self.named} if self.count is None else {"named": self.named, "num_tasks": self.count, "seed": self.seed}
            )
            return {**named, **self._cvar_dict()}
        if self.tasks is not None:
            return {"tasks": list(self.tasks), **self._cvar_dict()}
        if self.generated:
            return {"generated": True, "num_tasks": self.count, "seed": self.seed, **self._cvar_dict()}
        return {"space": self.space, "num_tasks": self.count, "seed": self.seed, **self._cvar_dict()}

    def _cvar_dict(self) -> dict:
        return {} if self.cvar is None else {"cvar": self.cvar}

    @property
    def static_key(self) -> int | str:
        """What fixes the loop's program: the number of tasks, or the named set, and whether it
        is played a second time for its CVaR."""
        key = self.count if self.named is None else f"named:{self.named}:{self.count}:{self.seed}"
        return key if self.cvar is None else f"{key}:cvar{self.cvar}"

    def labels(self, env) -> tuple[str, ...] | int:
        """Each task's name in results: a named set's own names, else the count of tasks, named
        by index (not spelt out: a set may be too large to hold, which the memory check says)."""
        if self.named is not None:
            names, _ = self._named(env)
            return names
        if self.generated:
            _generator(env)
        return self.count

    def _named(self, env) -> tuple[tuple[str, ...], dict[str, np.ndarray]]:
        """The named set's names and batch, or the `num_tasks` of them drawn with `seed`."""
        try:
            names, batch = env.named_tasks(self.named)
        except TaskError as exc:
            raise ConfigError(str(exc)) from None
        names = tuple(names)
        if self.count is None or self.count == len(names):
            return names, batch
        if self.count > len(names):
            raise ConfigError(f"heldout.num_tasks is {self.count}, but {env.name}'s set {self.named!r} holds {len(names)} tasks")
        chosen = sorted(np.random.default_rng(self.seed).choice(len(names), self.count, replace=False).tolist())
        return tuple(names[i] for i in chosen), {k: np.asarray(v)[chosen] for k, v in batch.items()}

    def batch(self, env, base: Mapping | None = None) -> dict[str, np.ndarray]:
        """The held-out set as one batch (field -> [count, *shape]), checked against the env.

        Fields a task leaves out take the trial's starting task (`base`)."""
        if self.named is not None:
            return self._named(env)[1]
        if self.generated:
            return self._generated(env)
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

    def _generated(self, env) -> dict[str, np.ndarray]:
        """`count` levels from the env's own generator, from `seed`: the same set in every trial."""
        import jax

        keys = jax.random.split(jax.random.key(self.seed), self.count)
        levels = jax.jit(jax.vmap(_generator(env)))(keys)
        return {k: np.asarray(v) for k, v in levels.items()}


def _generator(env):
    """The env's level generator, or the one line saying it has none."""
    generate = getattr(env, "generate_level", None)
    if generate is None:
        raise ConfigError(f"heldout.generated needs an env that generates levels (generate_level); {env.name} does not")
    return generate
