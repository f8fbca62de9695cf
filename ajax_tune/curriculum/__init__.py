"""Curricula: RLlib's `env_task_fn` API, callbacks, and the built-in ones.

After every `train()` the trial's `Curriculum` (`ajax_tune.curriculum.curriculum`) hands the result
to `env_task_fn(train_results, task_settable_env, env_ctx)` and then to each callback's
`on_train_result(control, result)`, where `control` is the trial's `TaskControl`: its tasks
(`get_task`, `set_task`, `num_envs`, `task_spec`, `validate_task`, `levels`), never the runner.
Either may set a new task; it is validated first, so a task that does not fit leaves the trial
untouched. A callback's own state (a level, its counters) goes into every checkpoint, so a
curriculum survives a restore and travels with a PBT exploit.

Nothing here imports Ray: the same curriculum drives a `Runner` in a notebook.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ajax_tune.curriculum.curriculum import Curriculum, CurriculumError
from ajax_tune.curriculum.task_control import EnvContext, TaskControl, TaskSettableEnv
from ajax_tune.envs.level_list import level_list
from ajax_tune.errors import ConfigError
from ajax_tune.imports import resolve_import
from ajax_tune.results import keys

__all__ = [
    "Callback",
    "Curriculum",
    "CurriculumError",
    "EnvContext",
    "TaskControl",
    "TaskSettableEnv",
    "ThresholdCurriculum",
    "grow_when_solved",
    "make_callback",
]


class Callback:
    """Hooks into a trial's life. Override what you need; all default to doing nothing.

    Each hook's first argument is the trial's `TaskControl`: its tasks, and for callbacks that
    inspect more, its `state`, `iteration`, `trial_id` and the curriculum's `sampler`.
    State returned by `get_state` must be JSON-serialisable; it is saved with every checkpoint
    and handed back to `set_state` on restore. `metrics` adds keys to every result (the same keys
    every time).
    """

    def on_setup(self, control: TaskControl) -> None: ...

    def on_train_result(self, control: TaskControl, result: dict) -> None: ...

    def on_task_change(self, control: TaskControl, old_task: dict, new_task: dict) -> None: ...

    def on_checkpoint_save(self, control: TaskControl, checkpoint_dir: str) -> None: ...

    def on_checkpoint_load(self, control: TaskControl, checkpoint_dir: str) -> None: ...

    def get_state(self) -> dict:
        return {}

    def set_state(self, state: dict) -> None: ...

    def metrics(self) -> dict[str, float]:
        return {}


class ThresholdCurriculum(Callback):
    """Walk up a ladder of tasks as a metric passes a threshold.

    - promote: after `patience` consecutive results with `metric >= threshold`, go one level up;
    - demote: after `demote_patience` consecutive results with `metric < demote_below` (when
      set), go one level down, so a collapse sends the agent back to something it can learn from;
    - mix: with `mix_earlier > 0`, that share of envs trains on earlier levels (drawn at random at
      each change) to keep them from being forgotten; env 0 and evaluations use the current level.

    A result without the metric (NaN: no evaluation in that call) changes nothing.
    """

    def __init__(
        self,
        levels: Sequence[Mapping] | Mapping[str, Sequence],
        metric: str = "eval/success_rate_mean",
        threshold: float = 0.9,
        patience: int = 1,
        demote_below: float | None = None,
        demote_patience: int = 1,
        mix_earlier: float = 0.0,
        seed: int = 0,
    ):
        self.levels = level_list(levels, "ThresholdCurriculum levels")
        if patience < 1 or demote_patience < 1:
            raise ConfigError("ThresholdCurriculum: patience and demote_patience must be >= 1")
        if not 0.0 <= mix_earlier < 1.0:
            raise ConfigError(f"ThresholdCurriculum: mix_earlier must be in [0, 1), got {mix_earlier}")
        self.metric, self.threshold, self.patience = metric, float(threshold), int(patience)
        self.demote_below = None if demote_below is None else float(demote_below)
        self.demote_patience, self.mix_earlier, self.seed = int(demote_patience), float(mix_earlier), int(seed)
        self.level, self.above, self.below, self.changes = 0, 0, 0, 0

    def on_setup(self, control):
        for i, level in enumerate(self.levels):  # every level must fit the env, before training
            try:
                control.validate_task(level)
            except ValueError as exc:
                raise ConfigError(f"ThresholdCurriculum level {i}: {exc}") from None
        self._apply(control)

    def on_train_result(self, control, result):
        value = result.get(self.metric)
        if value is None:
            raise KeyError(
                f"ThresholdCurriculum: metric {self.metric!r} is not in the result; "
                f"available: {sorted(k for k in result if '/' in k)}"
            )
        if math.isnan(value):
            return
        self.above = self.above + 1 if value >= self.threshold else 0
        self.below = self.below + 1 if self.demote_below is not None and value < self.demote_below else 0
        if self.above >= self.patience and self.level < len(self.levels) - 1:
            self.level += 1
        elif self.below >= self.demote_patience and self.level > 0:
            self.level -= 1
        else:
            return
        self.above = self.below = 0
        self.changes += 1
        self._apply(control)

    def _apply(self, control):
        current = self.levels[self.level]
        if self.mix_earlier <= 0.0 or self.level == 0:
            control.set_task(current)
            return
        num_envs = control.num_envs
        rng = np.random.default_rng([self.seed, self.level, self.changes])
        earlier = int(round(self.mix_earlier * num_envs))
        picks = [self.level] * (num_envs - earlier) + list(rng.integers(0, self.level, earlier))
        tasks = [control.validate_task(self.levels[i], current=control.get_task()) for i in picks]
        batch = {k: np.stack([t[k] for t in tasks]) for k in tasks[0]}
        control.set_task(batch, eval_task=current)

    def get_state(self):
        return {"level": self.level, "above": self.above, "below": self.below, "changes": self.changes}

    def set_state(self, state):
        self.level, self.above = int(state["level"]), int(state["above"])
        self.below, self.changes = int(state["below"]), int(state["changes"])

    def metrics(self):
        return {keys.LEVEL: float(self.level)}


def grow_when_solved(
    train_results: dict,
    task_settable_env: TaskSettableEnv,
    env_ctx: EnvContext,
    *,
    field: str,
    step: float = 0.0,
    factor: float = 1.0,
    maximum: float | None = None,
    metric: str = "eval/success_rate_mean",
    threshold: float = 1.0,
):
    """A generic env_task_fn: when `metric` reaches `threshold`, `field` becomes
    `min(value * factor + step, maximum)`. Configure it from YAML as
    `env_task_fn: {function: "ajax_tune.curriculum:grow_when_solved", kwargs: {field: length, step: 4}}`.
    """
    value = train_results.get(metric, math.nan)
    if math.isnan(value) or value < threshold:
        return None
    current = task_settable_env.get_task()[field]
    grown = current * factor + step
    if maximum is not None:
        grown = min(grown, maximum)
    if task_settable_env.task_spec[field].is_integer:
        grown = int(round(grown))
    return {field: grown}


def make_callback(spec: Any) -> Callback:
    """A callback from an instance, a class, a "module:Class" string, or
    {"class": ..., "kwargs": {...}} as written in YAML."""
    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - {"class", "kwargs"})
        if unknown or "class" not in spec:
            raise ConfigError(f"a callback given as a mapping needs 'class' (and optional 'kwargs'), got keys {sorted(spec)}")
        cls = resolve_import(spec["class"], "callbacks[].class")
        try:
            return _check_callback(cls(**spec.get("kwargs", {})))
        except TypeError as exc:
            raise ConfigError(f"callback {spec['class']}: {exc}") from None
    target = resolve_import(spec, "callbacks[]")
    if isinstance(target, type):
        target = target()
    return _check_callback(target)


def _check_callback(callback) -> Callback:
    hooks = ("on_setup", "on_train_result", "on_task_change", "on_checkpoint_save", "on_checkpoint_load")
    if not any(callable(getattr(callback, h, None)) for h in hooks):
        raise ConfigError(f"{callback!r} is not a callback: it has none of {hooks}")
    return callback
