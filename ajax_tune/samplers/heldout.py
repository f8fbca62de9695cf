"""Held-out tasks: a fixed set evaluated inside every evaluation, so generalisation is a metric.

Written in a trial config as a list of tasks, or as draws from a space (seeded, so every trial
of an experiment evaluates the same set):

    heldout: {tasks: [{length: 6}, {length: 20}, {length: 30}]}
    heldout: {space: {length: [4, 32], exit_reward: 0.1}, num_tasks: 8, seed: 0}

The loop evaluates the K tasks beside the current one (K is static, the tasks are data) and its
summary reports the call's last evaluation per task (`eval/heldout/<i>/return`,
`eval/heldout/<i>/success_rate`) and as means over tasks and seeds
(`eval/heldout/return_mean`, `eval/heldout/success_rate_mean`).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ajax_tune.errors import ConfigError, TaskError
from ajax_tune.samplers.space import TaskSpace

KEYS = ("tasks", "space", "num_tasks", "seed")


def heldout_count(spec: Mapping | None) -> int:
    """How many tasks the held-out set holds (0 without one), from the spec's shape alone: the
    loop's static batch of held-out tasks, known before any env is built."""
    if spec is None:
        return 0
    from ajax_tune.config import check_keys

    if not isinstance(spec, Mapping):
        raise ConfigError(f"heldout must be a mapping, {{tasks: [...]}} or {{space: ..., num_tasks: K}}, got {spec!r}")
    check_keys(spec, KEYS, "heldout.")
    if ("tasks" in spec) == ("space" in spec):
        raise ConfigError("heldout needs exactly one of tasks (a list of tasks) or space (with num_tasks and seed)")
    if "tasks" in spec:
        extra = sorted(set(spec) & {"num_tasks", "seed"})
        if extra:
            raise ConfigError(f"heldout.tasks is a fixed list; {extra} apply only to heldout.space")
        tasks = spec["tasks"]
        if not isinstance(tasks, (list, tuple)) or not tasks:
            raise ConfigError(f"heldout.tasks must be a non-empty list of tasks, got {tasks!r}")
        return len(tasks)
    num_tasks, seed = spec.get("num_tasks"), spec.get("seed", 0)
    if isinstance(num_tasks, bool) or not isinstance(num_tasks, int) or num_tasks < 1:
        raise ConfigError(f"heldout.num_tasks must be an integer >= 1 (how many tasks to draw), got {num_tasks!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"heldout.seed must be an integer >= 0, got {seed!r}")
    return num_tasks


def heldout_tasks(spec: Mapping | None, env, base: Mapping | None = None) -> dict[str, np.ndarray] | None:
    """The held-out set as one batch (field -> [K, *shape]), checked against the env; None if unset.

    Fields a task leaves out take the trial's starting task (`base`)."""
    num_tasks = heldout_count(spec)
    if not num_tasks:
        return None
    base = env.validate_task(base or {})
    if "tasks" in spec:
        checked = []
        for i, task in enumerate(spec["tasks"]):
            try:
                checked.append(env.validate_task(task, current=base))
            except TaskError as exc:
                raise ConfigError(f"heldout.tasks[{i}]: {exc}") from None
        return {k: np.stack([t[k] for t in checked]) for k in checked[0]}
    space = TaskSpace(spec["space"], where="heldout").bind(env, base=base)
    drawn = space.draw(np.random.default_rng(spec.get("seed", 0)), num_tasks)
    return {k: np.stack([v] * num_tasks) if k not in drawn else drawn[k] for k, v in base.items()}
