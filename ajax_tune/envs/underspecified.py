"""Any env with JaxUED's `UnderspecifiedEnv` interface as an `Env`, its level's fields as the task.

JaxUED writes an env as `reset_env_to_level(key, level, params)` and `step_env(key, state,
action, params)`, with no level of its own. That is this project's task exactly: a level's
fields are the task's fields, one per env, and a new level never recompiles.

Episodes: time limits belong to `EpisodeWrapper`. The env computes a step under its own limit
(the maze's reward shrinks with time, scaled by the limit, as in JaxUED), and whether the step
ended the episode naturally comes from the same step with the limit out of reach, so only the
wrapper truncates. `info["success"]` is an episode that ended naturally with a positive reward.

Nothing here imports jaxued: a user's env brings its own modules, and JaxUED's maze
(`envs/jaxued_adapter.py`) imports jaxued only where a program is traced.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune.envs.base import EnvState, Task, TaskField
from ajax_tune.envs.suite import (
    GYMNAX_TIME_LIMIT,
    SuiteEnv,
    action_space,
    checked_bounds,
    checked_steps,
    natural_end,
    strongly_typed,
)
from ajax_tune.errors import ConfigError
from ajax_tune.imports import did_you_mean, resolve_import

PREFIX = "jaxued/"


class UEDEnv(SuiteEnv):
    """An env with JaxUED's `UnderspecifiedEnv` interface, its level's fields as the task.

    `env` is the underspecified env, `level` a level of it (the default task; its fields give the
    task's names, shapes and dtypes). A field listed in `static_fields` keeps the default level's
    value and is no task field. Bounds: booleans are booleans, other fields range over their
    dtype unless `task_bounds` narrows them (`{field: [low, high]}`). `observe` maps the env's
    observation to a flat vector (default: every leaf flattened, in order). `image_shape`,
    `generate_level` and `mutate_level` are the optional parts of the `Env` contract. A level
    whose fields are not all arrays or numbers is refused when the env is built.
    """

    info_keys = ("success",)

    def __init__(
        self,
        env: Any,
        level: Any,
        *,
        name: str = "jaxued/env",
        params: Any = None,
        max_episode_steps: int | None = None,
        task_bounds: Mapping[str, Sequence[float]] | None = None,
        static_fields: Sequence[str] = (),
        observe: Callable | None = None,
        image_shape: tuple[int, int, int] | None = None,
        generate_level: Callable | None = None,
        mutate_level: Callable | None = None,
    ):
        params = env.default_params if params is None else params
        fields = [f.name for f in dataclasses.fields(level)]
        unknown = sorted(set(static_fields) - set(fields))
        if unknown:
            raise ConfigError(f"{name}: static_fields {unknown} are not fields of its level ({', '.join(fields)})")
        # fields flax keeps out of the pytree (`struct.field(pytree_node=False)`) are static too
        static = {f.name for f in dataclasses.fields(level) if f.metadata.get("pytree_node", True) is False}
        dtypes, defaults = {}, {}  # the level's own dtype of each task field, and its default
        for field in fields:
            if field in static or field in static_fields:
                continue
            value = getattr(level, field)
            try:
                arr = np.asarray(value)
            except Exception:  # a nested pytree or an object
                arr = np.asarray(None)
            if arr.dtype.kind not in "biuf":
                raise ConfigError(f"{name}: level field {field!r} is not an array or a number ({type(value).__name__})")
            dtypes[field], defaults[field] = jax.dtypes.canonicalize_dtype(arr.dtype), arr
        self._describe(
            name,
            max_episode_steps,
            getattr(params, GYMNAX_TIME_LIMIT, None),
            dtypes=dtypes,
            static={f: getattr(level, f) for f in fields if f in static or f in static_fields},
            static_leaves=tuple(f for f in static_fields if f not in static),  # pytree leaves, held fixed
            task_spec=_spec_from_level(name, defaults, task_bounds or {}),
            observe=observe or _flat_leaves,
            image_shape=image_shape,
        )
        self._env, self._level_type = env, type(level)
        self._params = params.replace(**{GYMNAX_TIME_LIMIT: self.max_episode_steps}) if self._timed else params
        if generate_level is not None:
            self.generate_level = lambda key: self.task_of(generate_level(key))
        if mutate_level is not None:
            self.mutate_level = lambda key, task, num_edits: self.task_of(mutate_level(key, self.level_of(task), num_edits))
        self.action_space = action_space(env.action_space(self._params), name)
        obs = jax.eval_shape(lambda: self.observe(env.reset_env_to_level(jax.random.PRNGKey(0), level, self._params)[0]))
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, obs.shape, np.float32)

    def _describe(
        self,
        name: str,
        max_episode_steps: int | None,
        own_limit: int | None,
        *,
        dtypes: Mapping[str, Any],
        static: Mapping[str, Any],
        static_leaves: tuple[str, ...],
        task_spec: Mapping[str, TaskField],
        observe: Callable,
        image_shape: tuple[int, int, int] | None,
    ) -> None:
        """What every underspecified env holds, whether read from its env and level (above) or
        known without them (the maze, whose env is made only where a program is traced).

        `dtypes` are the level's own dtypes of the task fields; `static` the level's fields that
        stay fixed, and `static_leaves` those of them that are leaves of the level's pytree (made
        strongly typed arrays). `own_limit` is the params' time limit, None where they have none."""
        steps = checked_steps(name, max_episode_steps)
        if steps is None and own_limit is None:
            raise ConfigError(f"{name}: its params have no {GYMNAX_TIME_LIMIT}; give env.kwargs.max_episode_steps")
        self.name = name
        self.max_episode_steps = int(own_limit) if steps is None else steps
        self._timed = own_limit is not None
        self._dtypes = {field: np.dtype(dtype) for field, dtype in dtypes.items()}
        self._static, self._static_leaves = dict(static), tuple(static_leaves)
        self.task_spec = dict(task_spec)
        self._observe = observe
        self.image_shape = None if image_shape is None else tuple(int(n) for n in image_shape)

    @classmethod
    def from_factory(cls, path: str, max_episode_steps: int | None = None, task_bounds=None, **kwargs) -> UEDEnv:
        """`jaxued/<module>:<factory>`: `factory(**kwargs)` returns `(env, level)`, or a mapping
        with `env` and `level` and any of `params`, `static_fields`, `observe`, `image_shape`,
        `generate_level`, `mutate_level` (this class's arguments)."""
        name = f"{PREFIX}{path}"
        factory = resolve_import(path, "env.name")
        if not callable(factory):
            raise ConfigError(f"env.name {name!r} must name a callable that returns (env, level), got {factory!r}")
        made = factory(**kwargs)
        if isinstance(made, Mapping):
            parts = dict(made)
        elif isinstance(made, tuple) and len(made) == 2:
            parts = {"env": made[0], "level": made[1]}
        else:
            raise ConfigError(f"env.name {name!r} must return (env, level) or a mapping with env and level, got {made!r}")
        allowed = ("env", "level", "params", "static_fields", "observe", "image_shape", "generate_level", "mutate_level")
        if not {"env", "level"} <= set(parts) or set(parts) - set(allowed):
            raise ConfigError(f"env.name {name!r} returned keys {sorted(parts)}; expected env, level and any of {allowed[2:]}")
        for method in ("reset_env_to_level", "step_env", "action_space"):
            if not callable(getattr(parts["env"], method, None)):
                raise ConfigError(f"env.name {name!r}: its env has no {method}(); it must be a JaxUED UnderspecifiedEnv")
        env, level = parts.pop("env"), parts.pop("level")
        return cls(env, level, name=name, max_episode_steps=max_episode_steps, task_bounds=task_bounds, **parts)

    # -- levels and tasks ----------------------------------------------------------------

    # -- levels and tasks ----------------------------------------------------------------

    @property
    def ued_env(self) -> Any:
        """The underspecified env itself."""
        return self._env

    @property
    def params(self) -> Any:
        """Its params, with this env's time limit (`max_episode_steps`)."""
        return self._params

    def level_of(self, task: Task) -> Any:
        """The env's level for an (unbatched) task, in the level's own dtypes."""
        fields = {k: jnp.asarray(task[k]).astype(self._dtypes[k]) for k in self._dtypes}
        static = {
            k: _strong(v) if k in self._static_leaves and isinstance(v, (int, float, bool)) else v
            for k, v in self._static.items()
        }
        return self._level_type(**fields, **static)

    def task_of(self, level: Any) -> Task:
        """The task a level (unbatched) stands for, in the task's dtypes."""
        return {k: jnp.asarray(getattr(level, k)).astype(spec.dtype) for k, spec in self.task_spec.items()}

    def observe(self, obs: Any) -> jax.Array:
        return self._observe(obs)

    # -- stepping ------------------------------------------------------------------------

    def reset(self, key, task) -> EnvState:
        obs, physics = self.ued_env.reset_env_to_level(key, self.level_of(task), self.params)
        return self.first(obs, task, physics, info={"success": jnp.zeros((), jnp.float32)})

    def step(self, state, action, key) -> EnvState:
        action = self.action(action)
        obs, physics, reward, done, _ = self.ued_env.step_env(key, state.physics, action, self.params)
        if self._timed:
            done = natural_end(self.ued_env.step_env, GYMNAX_TIME_LIMIT, key, state.physics, action, self.params)
        reward = jnp.asarray(reward, jnp.float32).reshape(())
        terminated = jnp.asarray(done, jnp.bool_).reshape(())
        success = (terminated & (reward > 0)).astype(jnp.float32)
        return self.stepped(state, obs, reward, terminated, strongly_typed(physics, like=state.physics), {"success": success})


def _spec_from_level(
    name: str, defaults: Mapping[str, np.ndarray], bounds: Mapping[str, Sequence[float]]
) -> dict[str, TaskField]:
    unknown = sorted(set(bounds) - set(defaults))
    if unknown:
        raise ConfigError(f"{name}: task_bounds names {unknown}, which are not task fields{did_you_mean(unknown[0], defaults)}")
    spec = {}
    for field, default in defaults.items():
        if default.dtype.kind == "b":
            dtype, low, high = np.bool_, 0.0, 1.0
        elif default.dtype.kind in "iu":
            info = np.iinfo(np.int32)
            dtype, low, high = (
                np.int32,
                float(max(np.iinfo(default.dtype).min, info.min)),
                float(min(np.iinfo(default.dtype).max, info.max)),
            )
        else:
            dtype, low, high = np.float32, -np.inf, np.inf
        if field in bounds:
            low, high = checked_bounds(name, field, bounds[field], default)
        value = default.item() if default.ndim == 0 else default.tolist()
        spec[field] = TaskField(_as_tuple(value), low, high, dtype, default.shape, f"the level's {field}")
    return spec


def _as_tuple(value):
    return tuple(_as_tuple(v) for v in value) if isinstance(value, list) else value


def _strong(value: int | float | bool) -> jax.Array:
    """A Python number as a strongly typed array: a level's static size (JaxUED keeps it as a
    Python int) would otherwise be weakly typed, and a scan over levels would retrace."""
    return jnp.asarray(value, jnp.result_type(type(value)))


def _flat_leaves(obs) -> jax.Array:
    return jnp.concatenate([jnp.asarray(leaf, jnp.float32).reshape(-1) for leaf in jax.tree.leaves(obs)])
