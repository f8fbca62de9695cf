"""Task samplers: curricula over distributions of tasks, learned on the host between calls.

`Uniform` (domain randomisation), `LearningProgress` (binned), `ALPGMM` (learning progress
over a continuous space) and `PrioritizedTaskReplay` (`plr`: prioritized level replay over the
sampler's tasks, between calls; not the level algorithm `ued.algorithm: plr`), all
implementing `TaskSampler`. A trial config names one under `task_sampler`, by short name or
import path:

    task_sampler: {name: plr, kwargs: {space: {length: [4, 32]}, temperature: 0.3}}
    task_sampler: {class: "my_module:MySampler", kwargs: {...}}
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from ajax_tune.errors import ConfigError
from ajax_tune.fields import check_keys
from ajax_tune.imports import Registry
from ajax_tune.samplers.alp_gmm import ALPGMM
from ajax_tune.samplers.base import TaskSampler
from ajax_tune.samplers.learning_progress import LearningProgress
from ajax_tune.samplers.stats import EnvStats, TaskHistogram
from ajax_tune.samplers.task_replay import PrioritizedTaskReplay
from ajax_tune.samplers.uniform import Uniform
from ajax_tune.task_space import TaskSpace

SAMPLERS = {"uniform": Uniform, "learning_progress": LearningProgress, "alp_gmm": ALPGMM, "plr": PrioritizedTaskReplay}
_REGISTRY = Registry("task_sampler", SAMPLERS, imports="module:Class", unknown="task_sampler: unknown sampler")

__all__ = [
    "ALPGMM",
    "SAMPLERS",
    "EnvStats",
    "LearningProgress",
    "PrioritizedTaskReplay",
    "TaskHistogram",
    "TaskSampler",
    "TaskSpace",
    "Uniform",
    "make_sampler",
]


def make_sampler(spec: Any) -> TaskSampler:
    """A fresh sampler from an instance (copied, so runs never share one), a class, a name, a
    "module:Class" string, or {"name" | "class": ..., "kwargs": {...}} as written in YAML."""
    if isinstance(spec, TaskSampler):
        return copy.deepcopy(spec)
    cls, kwargs = _class_and_kwargs(spec)
    try:
        return cls(**kwargs)
    except TypeError as exc:
        raise ConfigError(f"task_sampler ({cls.__name__}): {exc}") from None


def reads_learning_signal(spec: Any) -> bool:
    """Whether the sampler a spec names (as `make_sampler` takes it) reads the agent's learning
    signal; False without a sampler."""
    if spec is None:
        return False
    if isinstance(spec, TaskSampler):
        return bool(spec.reads_learning_signal)
    return bool(_class_and_kwargs(spec)[0].reads_learning_signal)


def _class_and_kwargs(spec: Any) -> tuple[type, Mapping]:
    kwargs: Mapping = {}
    if isinstance(spec, Mapping):
        check_keys(spec, ("name", "class", "kwargs"), "task_sampler.")
        if ("name" in spec) == ("class" in spec):
            raise ConfigError(
                f"task_sampler needs exactly one of 'name' ({', '.join(SAMPLERS)}) or 'class' "
                f"('module:Class'), and optional 'kwargs'; got keys {sorted(spec)}"
            )
        kwargs = spec.get("kwargs") or {}
        if not isinstance(kwargs, Mapping):
            raise ConfigError(f"task_sampler.kwargs must be a mapping, got {kwargs!r}")
        spec = spec.get("name", spec.get("class"))
    cls = _REGISTRY.resolve(spec) if isinstance(spec, str) else spec
    if not (isinstance(cls, type) and issubclass(cls, TaskSampler)):
        raise ConfigError(f"task_sampler: {cls!r} is not a TaskSampler subclass")
    return cls, kwargs
