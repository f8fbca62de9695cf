"""The functional environment contract.

An `Env` is a static object: its methods are pure functions of their arguments, so a jitted
training loop can close over it. Everything that changes while training lives in `EnvState`,
including the task. A task is a flat mapping of field name to array, described by `TaskField`s;
setting a different task changes values, never shapes, so nothing that steps the env recompiles.
A field may be a scalar knob (a length, a gravity) or a structured part of a level of any shape
(a maze's boolean wall grid, an integer position): both are validated, batched per env and
checkpointed the same way.
"""

from __future__ import annotations

import abc
import dataclasses
import inspect
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from ajax_tune.errors import ConfigError, TaskError
from ajax_tune.imports import did_you_mean

Task = dict[str, jax.Array]


@struct.dataclass
class Episode:
    """Bookkeeping of the episode an env is in (filled by `EpisodeWrapper`).

    `done` stays true from the step that ended the episode until the env is reset at the start
    of the next unroll. `post_done` marks a transition that happened after `done`: the env was
    frozen and the transition carries no information, so learners mask it.
    """

    step: jax.Array  # int32: steps taken in this episode (its length once done)
    done: jax.Array  # bool: terminated or truncated at this step or an earlier one
    post_done: jax.Array  # bool: this transition happened after the episode ended
    ret: jax.Array  # float32: undiscounted return of this episode so far

    @classmethod
    def zeros(cls) -> Episode:
        return cls(
            step=jnp.zeros((), jnp.int32),
            done=jnp.zeros((), jnp.bool_),
            post_done=jnp.zeros((), jnp.bool_),
            ret=jnp.zeros((), jnp.float32),
        )


@struct.dataclass
class EnvState:
    """One env's state. Batched envs carry the same structure with a leading env axis."""

    obs: jax.Array
    reward: jax.Array  # float32 reward of the transition that produced this state
    terminated: jax.Array  # bool: natural end of the episode (no bootstrap)
    truncated: jax.Array  # bool: time limit reached (bootstrap from obs)
    task: Task
    physics: Any  # env-private dynamic state
    info: dict[str, jax.Array]  # fixed keys per env, e.g. {"success": float32}
    episode: Episode

    @classmethod
    def create(cls, obs, task: Task, physics, info: dict[str, jax.Array] | None = None) -> EnvState:
        return cls(
            obs=obs,
            reward=jnp.zeros((), jnp.float32),
            terminated=jnp.zeros((), jnp.bool_),
            truncated=jnp.zeros((), jnp.bool_),
            task=task,
            physics=physics,
            info={} if info is None else info,
            episode=Episode.zeros(),
        )


@dataclasses.dataclass(frozen=True)
class TaskField:
    """One field of an env's task: its default, dtype, shape and allowed closed range.

    A boolean field (`dtype=np.bool_`, a wall grid) takes booleans, or 0 and 1; its range is
    [0, 1] whatever `low` and `high` say."""

    default: float | int | bool | tuple
    low: float
    high: float
    dtype: type = np.float32
    shape: tuple[int, ...] = ()
    doc: str = ""

    @property
    def is_integer(self) -> bool:
        return np.issubdtype(self.dtype, np.integer)

    @property
    def is_bool(self) -> bool:
        return np.dtype(self.dtype) == np.bool_

    @property
    def size(self) -> int:
        """Values per env (1 for a scalar)."""
        return int(np.prod(self.shape, dtype=np.int64))

    def describe(self) -> str:
        shape = "scalar" if not self.shape else f"shape {self.shape}"
        if self.is_bool:
            return f"boolean {shape}"
        kind = "integer" if self.is_integer else "float"
        return f"{kind} {shape} in [{self.low:g}, {self.high:g}]"


def check_integer(env: str, what: str, value: Any, least: int, why: str = "") -> int:
    """An env's integer constructor argument (`env.kwargs.<what>`), at least `least`: its value as
    an int, or one ConfigError naming the env, the argument and what it got (`why` says more)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < least:
        raise ConfigError(f"{env}: {what} must be an integer >= {least}{why}, got {value!r}")
    return int(value)


def check_kwargs(env: str, constructor: Any, kwargs: Mapping[str, Any]) -> None:
    """`env.kwargs` against the arguments `constructor` names: an unknown one is one ConfigError
    with the nearest name and the list, before the env is built. A constructor that takes
    `**kwargs` (a suite's own options, passed on) is not checked here."""
    try:
        parameters = inspect.signature(constructor).parameters.values()
    except (TypeError, ValueError):  # a builtin or a C callable: its own call reports the key
        return
    if any(p.kind is p.VAR_KEYWORD for p in parameters):
        return
    names = [p.name for p in parameters if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    for key in kwargs:
        if key not in names:
            hint = did_you_mean(key, names, cutoff=0.5)
            raise ConfigError(f"env.kwargs: {env} takes no argument {key!r}{hint or '.'} It takes: {', '.join(names)}")


def check_lengths(env: str, max_length: Any, default_length: Any, max_episode_steps: Any) -> None:
    """The constructor arguments of an env whose task is a length up to `max_length`
    (`max_episode_steps` None: the env's own limit)."""
    check_integer(env, "max_length", max_length, 1)
    if check_integer(env, "default_length", default_length, 1) > max_length:
        raise ConfigError(f"{env}: default_length must be in [1, {max_length}], got {default_length}")
    if max_episode_steps is not None:
        check_integer(env, "max_episode_steps", max_episode_steps, 1)


class Env(abc.ABC):
    """A pure, jittable environment whose difficulty is data.

    Subclasses set `name`, `observation_space`, `action_space`, `max_episode_steps` and
    `task_spec`, and implement `reset` and `step`. `step` reports the natural end of an episode
    through `terminated`; time limits belong to `EpisodeWrapper`.

    Optional parts, for envs whose tasks are levels (JaxUED's maze, `envs/jaxued_adapter.py`):

    - `image_shape = (H, W, C)`: the first H*W*C entries of the flat observation are an image,
      row-major and channels last; the rest are other features. `agent.encoder` reads it.
    - `generate_level(key) -> task` and `mutate_level(key, task, num_edits) -> task`: pure,
      jittable functions of one (unbatched) task with the task's shapes and dtypes; vmap them
      for a batch. `num_edits` may be a traced int32: edits beyond it are no-ops, so a new count
      never recompiles, and 0 edits return the task unchanged; `max_level_edits` says where
      its edits stop. Level algorithms that make or
      edit levels inside the compiled program (DR, ACCEL) use exactly these two; an env without
      them cannot run them.
    - `named_task_sets()` and `named_tasks(name) -> (names, batch)`: fixed sets of tasks by name
      (JaxUED's eight held-out mazes), each task named, as one validated batch (field ->
      `[K, *shape]`), for `heldout: {named: <set>}`, `env.levels: <set>` and a sampler's
      `levels: <set>` (a suite's hand-made levels, a ruleset benchmark).
    - `task_names()` and `named_task(name) -> task`: single tasks by name (a shipped level), which
      stand for a task wherever one is written (`env.task: s/h4_thrust_aim`).
    """

    name: str
    observation_space: gymnasium.spaces.Box
    action_space: gymnasium.spaces.Space
    max_episode_steps: int
    task_spec: Mapping[str, TaskField]
    #: keys of `EnvState.info` this env reports; "success" enables success rates.
    info_keys: tuple[str, ...] = ()
    #: (H, W, C) when the observation starts with an image (see above); None otherwise.
    image_shape: tuple[int, int, int] | None = None
    #: the most edits `mutate_level` applies in one call (more are no-ops); None where it has no cap.
    max_level_edits: int | None = None

    @abc.abstractmethod
    def reset(self, key: jax.Array, task: Task) -> EnvState:
        """A fresh episode on `task` (an unbatched task)."""

    @abc.abstractmethod
    def step(self, state: EnvState, action: jax.Array, key: jax.Array) -> EnvState:
        """The state after `action`; `reward` and `terminated` describe that transition."""

    @property
    def has_success(self) -> bool:
        return "success" in self.info_keys

    def default_task(self) -> dict[str, np.ndarray]:
        return {
            name: np.broadcast_to(np.asarray(field.default, field.dtype), field.shape).copy()
            for name, field in self.task_spec.items()
        }

    def validate_task(
        self,
        task: Mapping[str, Any] | str,
        num_envs: int | None = None,
        current: Mapping[str, Any] | None = None,
    ) -> dict[str, np.ndarray]:
        """Check a task on the host and return it as numpy arrays; see `validate_task`. A string
        is a task the env knows by name (`named_task`), whole."""
        if isinstance(task, str):
            return self.named_task(task)
        return validate_task(self.name, self.task_spec, task, num_envs=num_envs, current=current)

    # -- tasks by name: an env that ships levels (or reads a benchmark) names them -------------

    def task_names(self) -> Sequence[str]:
        """The names `named_task` knows (for messages; may be long)."""
        return ()

    def named_task(self, name: str) -> dict[str, np.ndarray]:
        """The task named `name` (a shipped level, a benchmark's ruleset), checked, whole."""
        raise TaskError(f"{self.name} knows no task by name (got {name!r}); a task is a mapping of field to value")

    def named_task_sets(self) -> tuple[str, ...]:
        """The names `named_tasks` takes (none unless an env provides sets)."""
        return ()

    def named_tasks(self, name: str) -> tuple[tuple[str, ...], dict[str, np.ndarray]]:
        """The named set `name`: each task's name and the tasks as one batch (see above)."""
        sets = self.named_task_sets()
        if not sets:
            raise TaskError(f"{self.name} has no named sets of tasks (got {name!r})")
        raise TaskError(f"{self.name}: no named task set {name!r}{did_you_mean(name, sets)} Known: {', '.join(sets)}")

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r})"


def validate_task(
    env_name: str,
    spec: Mapping[str, TaskField],
    task: Any,
    num_envs: int | None = None,
    current: Mapping[str, Any] | None = None,
) -> dict[str, np.ndarray]:
    """Validate `task` against `spec` before anything is traced or applied.

    Fields missing from `task` are taken from `current` (or the default). A field may be given
    once (shape `field.shape`) or, when `num_envs` is given, once per env (shape
    `(num_envs, *field.shape)`). The result holds every field with the shape it was given in.
    """
    expected = ", ".join(f"{k}: {f.describe()}" for k, f in spec.items()) or "no fields"
    if not isinstance(task, Mapping):
        raise TaskError(
            f"{env_name}: a task must be a mapping of field name to value ({{{expected}}}), got {type(task).__name__}"
        )
    unknown = sorted(set(task) - set(spec))
    if unknown:
        raise TaskError(f"{env_name}: unknown task field(s) {unknown}; the task of {env_name} has {{{expected}}}")
    out: dict[str, np.ndarray] = {}
    for name, field in spec.items():
        if name in task:
            out[name] = _check_field(env_name, name, field, task[name], num_envs)
        elif current is not None and name in current:
            out[name] = np.asarray(current[name], field.dtype)
        else:
            out[name] = np.broadcast_to(np.asarray(field.default, field.dtype), field.shape).copy()
    return out


def _check_field(env_name: str, name: str, field: TaskField, value: Any, num_envs: int | None):
    where = f"{env_name}: task field {name!r}"
    if isinstance(value, jax.Array):
        value = np.asarray(value)
    try:
        arr = np.asarray(value)
    except Exception as exc:  # ragged lists and the like
        raise TaskError(f"{where} expected {field.describe()}, got {_shown(value)} ({_one_line(exc)})") from None
    if arr.dtype == object or arr.dtype.kind not in "biuf":
        raise TaskError(f"{where} expected {field.describe()}, got {_shown(value, arr)} of type {arr.dtype}")
    if arr.dtype.kind == "b" and not field.is_bool:
        raise TaskError(f"{where} expected {field.describe()}, got a boolean {_shown(value, arr)}")
    shapes = [field.shape] + ([(num_envs, *field.shape)] if num_envs is not None else [])
    if arr.shape not in shapes:
        allowed = " or ".join(str(s) for s in shapes)
        raise TaskError(f"{where} expected shape {allowed}, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise TaskError(f"{where} expected finite values, got {_shown(value, arr, ~np.isfinite(arr))}")
    fractional = arr != np.round(arr)
    if (field.is_integer or field.is_bool) and arr.dtype.kind == "f" and np.any(fractional):
        kind = "an integer" if field.is_integer else "a boolean"
        raise TaskError(f"{where} expected {kind}, got {_shown(value, arr, fractional)}")
    low, high = (0, 1) if field.is_bool else (field.low, field.high)
    outside = (arr < low) | (arr > high)
    if np.any(outside):
        raise TaskError(f"{where} expected {field.describe()}, got {_shown(value, arr, outside)}")
    return arr.astype(field.dtype)


#: A value with at most this many elements is quoted whole in an error; a larger one (a wall
#: grid) by its shape and its first offending element, so every error stays one line.
QUOTED_SIZE = 8


def _one_line(text: Any) -> str:
    return " ".join(str(text).split())


def _shown(value: Any, arr: np.ndarray | None = None, bad: np.ndarray | None = None) -> str:
    """`value` for an error message, on one line: quoted whole when small, else by its shape
    (and where `bad` marks offending elements, the first one and its index)."""
    if arr is None or (arr.size <= QUOTED_SIZE and arr.ndim <= 1):
        return _one_line(repr(value))
    text = f"an array of shape {arr.shape}"
    if bad is not None and np.any(bad):
        index = tuple(int(i) for i in np.argwhere(bad)[0])
        text += f" with {int(np.sum(bad))} such value(s), the first {arr[index].item()!r} at index {list(index)}"
    return text


def task_to_jax(task: Mapping[str, np.ndarray]) -> Task:
    return {k: jnp.asarray(v) for k, v in task.items()}


def stack_tasks(tasks: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Checked tasks as one batch (field -> `[K, *shape]`), as `Env.named_tasks` returns a set."""
    return {k: np.stack([np.asarray(t[k]) for t in tasks]) for k in tasks[0]}


def unstack_tasks(batch: Mapping[str, np.ndarray]) -> list[dict[str, np.ndarray]]:
    """A batch of tasks (field -> `[K, *shape]`) as K tasks."""
    count = len(next(iter(batch.values())))
    return [{k: np.asarray(v[i]) for k, v in batch.items()} for i in range(count)]


def flatten_task(task: Mapping[str, Any], prefix: str = "", max_size: int | None = None) -> dict[str, float]:
    """A task as plain floats under stable keys (`length`, `target_0`, ...), for results; with
    `max_size`, only the fields of at most that many values (a wall grid is no result key)."""
    flat: dict[str, float] = {}
    for name, value in task.items():
        arr = np.asarray(value, np.float64)
        if max_size is not None and arr.size > max_size:
            continue
        if arr.ndim == 0:
            flat[f"{prefix}{name}"] = float(arr)
        else:
            for i, v in enumerate(arr.reshape(-1)):
                flat[f"{prefix}{name}_{i}"] = float(v)
    return flat
