"""Any gymnax environment as an `Env`, with its `EnvParams` as the task.

gymnax already keeps an env's settings apart from its state, in `EnvParams`; here they become
the task, so every gymnax env is curriculum-ready without code:

- Task fields: every numeric field of `EnvParams` holding a scalar or a small array (at most
  `MAX_FIELD_SIZE` values), with gymnax's default, except `max_steps_in_episode` (a time limit,
  which `EpisodeWrapper` owns) and fields the env uses as Python constants (a shape, a branch
  taken while tracing): those are found by tracing the env with each field as an array, and
  kept at their default. Boolean fields are switches, not difficulties, and stay as they are.
- Bounds, by one rule, as a guard against typos rather than a statement of physics: a field
  may range from a tenth to ten times its default (for a negative default, from ten times to a
  tenth of it; for a default of 0, over [-1, 1]); integer bounds are rounded inwards. An array
  field takes the widest such range over its elements. `task_bounds={"field": [low, high]}`
  replaces the rule for a field (gravity 0 in CartPole, say).
- Episodes: our `EpisodeWrapper` owns time limits and resets, so the adapter calls gymnax's
  non-resetting `step_env`, never `step` (which resets on the spot). `terminated` is the env's
  natural end only: gymnax 1.x reports it apart from the time limit; gymnax 0.x folded
  `state.time >= max_steps_in_episode` into `done`, so there the flag comes from the same step
  with that limit out of reach (XLA shares the two calls' work). The time limit is gymnax's
  `max_steps_in_episode` unless `max_episode_steps` is given, and `EnvParams` carries the same
  value (a few envs read it, e.g. to show the time left).
- Spaces are gymnasium's, taken from the default params: a Discrete action space stays
  Discrete, a Box stays a float32 Box. Observations are flattened to float32 vectors, as the
  agents here take vectors (a discrete observation becomes a one-hot vector).

The step key goes to `step_env` unchanged, so from the same state, key and params the adapter
steps exactly as gymnax does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import gymnasium
import gymnax
import jax
import jax.numpy as jnp
import numpy as np
from gymnax.environments import environment as gymnax_environment
from gymnax.environments import spaces as gymnax_spaces

from ajax_tune.envs.base import EnvState, TaskField
from ajax_tune.envs.suite import (
    GYMNAX_TIME_LIMIT,
    SuiteEnv,
    action_space,
    checked_bounds,
    natural_end,
    time_limit,
    unknown_id,
    zero_action,
)
from ajax_tune.errors import ConfigError
from ajax_tune.imports import did_you_mean

MAX_FIELD_SIZE = 16  # larger arrays in EnvParams are data (a maze, a table), not knobs
FOLDS_TIME_LIMIT = not hasattr(gymnax_environment.Environment, "is_truncated")  # gymnax < 1.0


def default_bounds(default: np.ndarray) -> tuple[float, float]:
    """The range a task field may take, from its default (see the module docstring)."""
    lows, highs = [], []
    for d in np.asarray(default, np.float64).reshape(-1):
        if d > 0:
            low, high = d / 10, d * 10
        elif d < 0:
            low, high = d * 10, d / 10
        else:
            low, high = -1.0, 1.0
        lows.append(low)
        highs.append(high)
    low, high = min(lows), max(highs)
    if np.issubdtype(np.asarray(default).dtype, np.integer):
        low, high = math.ceil(low), math.floor(high)
    return float(low), float(high)


class GymnaxEnv(SuiteEnv):
    """`gymnax.make(gymnax_id, **gymnax_kwargs)`, or a gymnax environment object, as an `Env`.

    Its dynamic state is gymnax's `EnvState`, kept whole in `EnvState.physics`.
    """

    #: gymnax < 1.0 folds the time limit into `step_env`'s `done`
    folds_time_limit: bool = FOLDS_TIME_LIMIT

    def __init__(
        self,
        gymnax_id: str | gymnax_environment.Environment,
        max_episode_steps: int | None = None,
        task_bounds: Mapping[str, Sequence[float]] | None = None,
        **gymnax_kwargs,
    ):
        if isinstance(gymnax_id, str):
            if gymnax_id not in gymnax.registered_envs:
                raise unknown_id("gymnax", gymnax_id, gymnax.registered_envs)
            env, params = gymnax.make(gymnax_id, **gymnax_kwargs)
        else:
            if gymnax_kwargs:
                raise TypeError(f"keyword arguments {sorted(gymnax_kwargs)} are for gymnax.make; this env is already built")
            env, params = gymnax_id, gymnax_id.default_params
            gymnax_id = env.name
        self.name = f"gymnax/{gymnax_id}"
        self.gymnax_env = env
        # EnvParams carries the wrapper's limit: a few envs read it (to show the time left)
        self.max_episode_steps, self.params = time_limit(self.name, params, GYMNAX_TIME_LIMIT, max_episode_steps, keep=True)

        self.action_space = action_space(env.action_space(params), self.name)
        self._obs_space = env.observation_space(params)
        self.observation_space = _observation_space(self._obs_space, self.name)
        self.task_spec = self._task_spec(task_bounds or {})

    # -- the task ------------------------------------------------------------------------

    def _task_spec(self, bounds: Mapping[str, Sequence[float]]) -> dict[str, TaskField]:
        candidates = {}
        for name in type(self.params).__dataclass_fields__:
            if name == GYMNAX_TIME_LIMIT:
                continue
            value = getattr(self.params, name)
            if isinstance(value, (bool, np.bool_)):
                continue
            try:
                arr = np.asarray(value)
            except Exception:  # objects that are not arrays
                continue
            if arr.dtype.kind in "iuf" and arr.size <= MAX_FIELD_SIZE:
                candidates[name] = arr
        traceable = self._traceable(candidates)
        unknown = sorted(set(bounds) - set(traceable))
        if unknown:
            hint = did_you_mean(unknown[0], traceable)
            raise ConfigError(
                f"{self.name}: task_bounds names {unknown}, which are not task fields{hint} "
                f"Task fields: {', '.join(traceable) or 'none'}"
            )
        spec = {}
        for name in traceable:
            default = candidates[name]
            low, high = checked_bounds(self.name, name, bounds[name], default) if name in bounds else default_bounds(default)
            spec[name] = TaskField(
                default=default.item() if default.ndim == 0 else tuple(default.tolist()),
                low=float(low),
                high=float(high),
                dtype=_task_dtype(default),
                shape=default.shape,
                doc=f"gymnax EnvParams.{name}",
            )
        return spec

    def _traceable(self, candidates: dict[str, np.ndarray]) -> list[str]:
        """The candidate fields that may be traced arrays: a reset and a step trace with them."""

        def traces(names) -> bool:
            shapes = {n: jax.ShapeDtypeStruct(candidates[n].shape, _task_dtype(candidates[n])) for n in names}
            try:
                jax.eval_shape(self._reset_and_step, shapes)
            except Exception:  # tracing with these fields as constants works (checked below)
                return False
            return True

        names = list(candidates)
        if traces(names):
            return names
        jax.eval_shape(self._reset_and_step, {})  # a failure here is the env's own, not a field's
        return [n for n in names if traces([n])]

    def _reset_and_step(self, values):
        params = self.params.replace(**values)
        key = jax.random.PRNGKey(0)
        _, state = self.gymnax_env.reset_env(key, params)
        return self.gymnax_env.step_env(key, state, zero_action(self.action_space), params)

    # -- stepping ------------------------------------------------------------------------

    def observe(self, obs) -> jax.Array:
        """A gymnax observation as this env's flat float32 vector (a discrete one one-hot)."""
        if isinstance(self._obs_space, gymnax_spaces.Discrete):
            return jax.nn.one_hot(obs, self._obs_space.n, dtype=jnp.float32).reshape(-1)
        return super().observe(obs)

    def reset(self, key, task) -> EnvState:
        obs, state = self.gymnax_env.reset_env(key, self.params_for(task))
        return self.first(obs, task, state)

    def step(self, state, action, key) -> EnvState:
        params, action = self.params_for(state.task), self.action(action)
        obs, physics, reward, done, _ = self.gymnax_env.step_env(key, state.physics, action, params)
        if self.folds_time_limit:
            done = natural_end(self.gymnax_env.step_env, GYMNAX_TIME_LIMIT, key, state.physics, action, params)
        return self.stepped(state, obs, reward, done, physics)


def _task_dtype(default: np.ndarray) -> type:
    return np.int32 if default.dtype.kind in "iu" else np.float32


def _observation_space(space, name: str) -> gymnasium.spaces.Box:
    if isinstance(space, gymnax_spaces.Discrete):
        return gymnasium.spaces.Box(0.0, 1.0, (int(space.n),), np.float32)
    if isinstance(space, gymnax_spaces.Box):
        shape = tuple(space.shape)
        size = int(np.prod(shape, dtype=np.int64))
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape).reshape(size)
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape).reshape(size)
        return gymnasium.spaces.Box(low, high, (size,), np.float32)
    raise TypeError(f"{name}: only Box and Discrete observation spaces are supported, got {space!r}")
