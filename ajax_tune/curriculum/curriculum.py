"""`Curriculum`: everything that moves one member's tasks between calls, as one object.

It owns the `env_task_fn`, the callbacks, the task sampler, the histogram of trained tasks and
the levels, and sees the trial only through a `TaskControl`. After a call, `after_call` runs
them in a fixed order (the sampler learns from the call, `env_task_fn`, the callbacks, the
sampler draws the next tasks) and adds their keys to the result. Its state (the callbacks' and
the sampler's) goes into every checkpoint and travels with a PBT exploit. A trial has one
curriculum; a population has one per member (`Runner.curricula`), each over a control of its
member's lanes only, fed that member's results and per-env statistics, as a single run of the
member would feed it. Copying one member's `get_state()` into another's `set_state` (then
`reseed`, so the copy draws its own tasks) moves a curriculum between members.
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ajax_tune.curriculum.task_control import EnvContext, TaskControl, TaskSettableEnv
from ajax_tune.envs.base import flatten_task
from ajax_tune.errors import CheckpointError, TaskError
from ajax_tune.results import keys
from ajax_tune.samplers import TaskHistogram, TaskSampler
from ajax_tune.samplers.stats import EnvStats


class CurriculumError(RuntimeError):
    """An env_task_fn or callback failed after an iteration had trained. `result` holds that
    iteration's result, which was not reported."""

    def __init__(self, message: str, result: dict | None = None):
        super().__init__(message)
        self.result = result


class Curriculum:
    def __init__(
        self,
        control: TaskControl,
        env_ctx: EnvContext,
        *,
        env_task_fn: Callable | None = None,
        callbacks: Sequence = (),
        sampler: TaskSampler | None = None,
        histogram: TaskHistogram | None = None,
    ):
        self.env_task_fn, self.callbacks = env_task_fn, list(callbacks)
        self.sampler, self.histogram = sampler, histogram
        self.env_stats: EnvStats | None = None  # of the last call
        self.rebind(control, env_ctx)

    def rebind(self, control: TaskControl, env_ctx: EnvContext) -> None:
        """Steer another control's lanes from here on, keeping everything else (a population
        whose program was rebuilt for fewer members: each survivor's curriculum goes on as it was)."""
        self.control, self.env_ctx = control, env_ctx
        self.task_settable_env = TaskSettableEnv(control)
        control.sampler = self.sampler
        control.on_task_change(lambda old, new: self._hook("on_task_change", old, new))

    @property
    def levels(self):
        return self.control.levels

    # -- life cycle ------------------------------------------------------------------------

    def setup(self) -> None:
        """A fresh run's first tasks: the sampler's draw, then each callback's `on_setup`."""
        if self.sampler is not None:
            self._sample_tasks()
        self._hook("on_setup")

    def after_call(self, result: dict, stats: EnvStats, diverged: bool = False) -> dict[str, float]:
        """Move the tasks on from one call's result and statistics, and add the curriculum's
        keys to `result` (in place; also returned). A diverged call moves nothing: its scores
        say nothing."""
        self.env_stats = stats
        if self.sampler is not None and not diverged:
            self.sampler.update(stats)
        if self.env_task_fn is not None and not diverged:
            with self._step(f"env_task_fn {callable_name(self.env_task_fn)}", result, "returned"):
                new_task = self.env_task_fn(result, self.task_settable_env, self.env_ctx)
                if new_task is not None:
                    self.control.set_task(new_task)
        for i, cb in enumerate(() if diverged else self.callbacks):
            with self._step(f"callbacks[{i}] ({type(cb).__name__})", result, "set"):
                _hook(cb, "on_train_result", self.control, result)
        if self.sampler is not None and not diverged:
            self._sample_tasks()
        added = self.metrics()
        result.update(added)
        return added

    def metrics(self) -> dict[str, float]:
        """The curriculum's result keys: the sampler's, the histogram of the tasks the last
        call trained on, the level, the callbacks' own and the task of the next call."""
        out: dict[str, float] = {}
        if self.sampler is not None:
            out.update(self.sampler.metrics())
        if self.histogram is not None and self.env_stats is not None:
            out.update(self.histogram(self.env_stats.tasks))
        if self.levels is not None:
            level = self.levels.level_of(self.control.get_task())
            out[keys.LEVEL] = math.nan if level is None else float(level)
        for cb in self.callbacks:
            out.update(_call(cb, "metrics", {}))
        out.update(flatten_task(self.control.get_task(), prefix=keys.NEXT_TASK_PREFIX, max_size=keys.MAX_REPORTED_FIELD_SIZE))
        return out

    # -- state -----------------------------------------------------------------------------

    def get_state(self) -> dict:
        """What a checkpoint keeps: each callback's state and the sampler's (JSON)."""
        return {
            "callbacks": [_call(cb, "get_state", {}) for cb in self.callbacks],
            "sampler": None if self.sampler is None else self.sampler.get_state(),
        }

    def set_state(self, saved: Mapping, where: Any = "the curriculum state given") -> None:
        """The state a checkpoint at `where` kept (or another member's `get_state()`); refused
        whole when it does not fit these callbacks and sampler."""
        states = saved.get("callbacks", [])
        if len(states) != len(self.callbacks):
            raise CheckpointError(f"{where} holds the state of {len(states)} callback(s); this config has {len(self.callbacks)}")
        sampler_state = saved.get("sampler")
        if (sampler_state is None) != (self.sampler is None):
            raise CheckpointError(
                f"{where} {'holds no' if sampler_state is None else 'holds a'} task sampler's state; this "
                f"config has {'one' if self.sampler is not None else 'none'}"
            )
        if self.sampler is not None:
            self.sampler.set_state(sampler_state)
        for cb, state in zip(self.callbacks, states):
            if hasattr(cb, "set_state"):
                cb.set_state(state)

    def reseed(self, salt: int) -> None:
        """Another trial continues from this state (a PBT exploit): its own random draws."""
        if self.sampler is not None:
            self.sampler.reseed(salt)

    def on_checkpoint_save(self, directory: Any) -> None:
        self._hook("on_checkpoint_save", str(directory))

    def on_checkpoint_load(self, directory: Any) -> None:
        """After the trial's state and this curriculum's are both in place."""
        self._hook("on_checkpoint_load", str(directory))

    # -- inside ----------------------------------------------------------------------------

    def _sample_tasks(self) -> None:
        """The sampler's tasks for the next call, one per env. Evaluations stay on the task they
        ran on (the held-out set is what measures the distribution); fields outside the
        sampler's space keep what the env runs, so an env_task_fn may steer those."""
        tasks = self.sampler.sample(self.control.num_envs)
        self.control.set_task(tasks, eval_task=self.control.get_task())

    def _hook(self, name: str, *args) -> None:
        for cb in self.callbacks:
            _hook(cb, name, self.control, *args)

    @contextlib.contextmanager
    def _step(self, who: str, result: dict, verb: str):
        """Errors of a curriculum name it and the iteration, and say that the iteration had
        trained: the trial holds its state, but its result is not reported."""
        where = (
            f"iteration {self.control.iteration} (trained to env_steps {result['env_steps']}; the runner "
            f"keeps that state and the previous task, but the result is not reported, and a Tune trial "
            f"retried after this error restarts from its last checkpoint)"
        )
        try:
            yield
        except TaskError as exc:
            raise TaskError(f"{who} {verb} a task that does not fit after {where}: {exc}") from None
        except Exception as exc:
            raise CurriculumError(f"{who} raised {type(exc).__name__}: {exc} after {where}", result) from exc


def callable_name(fn: Any) -> str:
    """`module:qualname` of a function, through any functools.partial around it."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return f"{getattr(fn, '__module__', '?')}:{getattr(fn, '__qualname__', repr(fn))}"


def _hook(callback, name: str, *args) -> None:
    method = getattr(callback, name, None)
    if callable(method):
        method(*args)


def _call(callback, name: str, default):
    method = getattr(callback, name, None)
    return method() if callable(method) else default
