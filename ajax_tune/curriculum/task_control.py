"""The narrow view of a trial that a curriculum steers: its envs' tasks, and little else.

A curriculum (an `env_task_fn`, callbacks, a task sampler) reads and sets tasks, asks how many
envs there are and what a task may hold, and speaks level numbers where the env has levels. It
never needs the runner, its loop or its checkpoints; `TaskControl` is all it is given, and what
callbacks receive as their first argument. Callbacks that inspect more may read the trial's
`state` (the training state, leading axis seeds), its `iteration` and `trial_id`, and the
curriculum's `sampler`.

The state itself stays with its owner (the runner): a control reads and replaces it through
`owner.state`, so there is one copy and one writer at a time. In a population each member's
curriculum has a control of its own over that member's lanes (`lanes`): it reads and sets the
tasks of those lanes only, and its `state` is those lanes' slice of the training state.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

import jax
import numpy as np

from ajax_tune.envs.base import QUOTED_SIZE, flatten_task
from ajax_tune.envs.level_list import Levels
from ajax_tune.errors import TaskError


class StateOwner(Protocol):
    """Whoever holds the training state a control steers."""

    state: Any
    iteration: int
    trial_id: str


class TaskControl:
    """Get and set the tasks of one member's envs: one task for all, or one per env.

    `set_task` validates before anything changes, so a task that does not fit leaves the state
    as it was. With `levels`, a level number (or a list of one per env) stands for its task.
    Whoever listens (`on_task_change`) hears of every change, whoever made it.

    `lanes` (a slice of the state's leading axis) restricts it to one member's lanes; None is
    every lane, as in a trial of one member.
    """

    def __init__(self, loop, levels: Levels | None, owner: StateOwner, member: int = 0, lanes: slice | None = None):
        self._loop, self._owner = loop, owner
        self.levels, self.member, self.lanes = levels, member, lanes
        self.sampler = None  # the curriculum's task sampler, for callbacks that look at it
        self._listeners: list[Callable[[dict, dict], None]] = []

    # -- what a curriculum may read --------------------------------------------------------

    @property
    def num_envs(self) -> int:
        return self._loop.venv.num_envs

    @property
    def task_spec(self):
        """The env's task fields (`TaskField`: shape, dtype, range)."""
        return self._loop.env.task_spec

    def validate_task(self, task: Mapping, num_envs: int | None = None, current: Mapping | None = None) -> dict:
        """The env's own check of a task, as `Env.validate_task` (fields left out keep
        `current`'s values)."""
        return self._loop.env.validate_task(task, num_envs=num_envs, current=current)

    # What callbacks may read of the trial beyond its tasks, read through from its owner.
    @property
    def state(self):
        """The training state (leading axis seeds): the member's lanes of it where restricted."""
        state = self._owner.state
        return state if self.lanes is None else jax.tree.map(lambda x: x[self.lanes], state)

    iteration = property(lambda self: self._owner.iteration, doc="the trial's training iteration")
    trial_id = property(lambda self: self._owner.trial_id, doc="the trial's id")

    # -- tasks -----------------------------------------------------------------------------

    def get_task(self, per_env: bool = False) -> dict[str, Any]:
        """The task evaluations run on, or (`per_env`) each env's, as Python scalars or arrays."""
        task = self._loop.get_task(self._owner.state, per_env=per_env, lanes=self.lanes)
        return {k: (v.item() if v.ndim == 0 else v) for k, v in task.items()}

    def get_level(self, per_env: bool = False) -> int | np.ndarray:
        """The level (with `env.levels`) evaluations run on, or one per env (-1: no level)."""
        if self.levels is None:
            raise TaskError("get_level needs env.levels: a list of tasks to number")
        if per_env:
            tasks = self.get_task(per_env=True)
            found = [self.levels.level_of({k: v[i] for k, v in tasks.items()}) for i in range(self.num_envs)]
            return np.array([-1 if level is None else level for level in found])
        task = self.get_task()
        level = self.levels.level_of(task)
        if level is None:
            shown = flatten_task(task, max_size=QUOTED_SIZE)
            raise TaskError(f"the current task {shown} is none of env.levels (it was set as a mapping)")
        return level

    def set_task(self, task: Any, eval_task: Any = None) -> None:
        task = self._as_task(task)
        eval_task = None if eval_task is None else self._as_task(eval_task)
        old = self.get_task()
        self._owner.state = self._loop.set_task(self._owner.state, task, eval_task=eval_task, lanes=self.lanes)
        new = self.get_task()
        if any(not np.array_equal(old[k], new[k]) for k in new):
            for listener in self._listeners:
                listener(old, new)

    def on_task_change(self, listener: Callable[[dict, dict], None]) -> None:
        self._listeners.append(listener)

    def _as_task(self, task: Any) -> Mapping[str, Any]:
        if isinstance(task, Mapping):
            return task
        if self.levels is None:
            raise TaskError(
                f"a task must be a mapping of field name to value, got {task!r}; level numbers "
                "need env.levels (a list of tasks to number)"
            )
        if isinstance(task, (list, tuple, np.ndarray)) and np.ndim(task) == 1:
            if len(task) != self.num_envs:
                raise TaskError(f"a list of levels needs one per env ({self.num_envs}), got {len(task)}")
            return self.levels.batch(task)
        return self.levels.task(task)


class EnvContext(dict):
    """What `env_task_fn` learns about the envs it steers (a dict with attribute access, like
    RLlib's EnvContext): `env_config`, `num_envs`, `num_seeds`, `trial_id`, `worker_index`, and
    `member`, the population member whose envs these are (0 in a trial of one)."""

    def __getattr__(self, name: str) -> Any:
        try:
            return self[name]
        except KeyError:
            raise AttributeError(name) from None


class TaskSettableEnv:
    """A member's envs seen as one RLlib-style TaskSettableEnv, over its `TaskControl`.

    `get_task()` is the task evaluations run on; `get_tasks()` holds one task per env.
    `set_task(task)` applies one task to every env, or a batch (leading axis = number of envs)
    one per env.

    With `env.levels` it speaks level numbers, as RLlib's documented curricula expect:
    `get_task()` returns the level (an int), `get_tasks()` one level per env (-1 where an env
    runs a task that is no level), and `set_task` takes a level, or a list of one per env.
    Mappings are still accepted.
    """

    def __init__(self, control: TaskControl):
        self._control = control

    task_spec = property(lambda self: self._control.task_spec, doc="the env's task fields")
    num_envs = property(lambda self: self._control.num_envs, doc="how many envs the member steps")
    levels = property(lambda self: self._control.levels, doc="the env's `Levels` (None without `env.levels`)")

    def get_task(self) -> dict[str, Any] | int:
        if self._control.levels is not None:
            return self._control.get_level()
        return self._control.get_task()

    def get_tasks(self) -> dict[str, np.ndarray] | np.ndarray:
        if self._control.levels is not None:
            return self._control.get_level(per_env=True)
        return self._control.get_task(per_env=True)

    def set_task(self, task: Any, eval_task: Any = None) -> None:
        self._control.set_task(task, eval_task=eval_task)
