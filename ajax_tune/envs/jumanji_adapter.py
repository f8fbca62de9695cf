"""Jumanji (`jumanji`) environments as `Env`s; task-free.

- Ids are jumanji's (`jumanji.registered_environments()`): `Snake-v1`, `Game2048-v1`,
  `Maze-v0`, ... with `env.kwargs` going to `jumanji.make`. Those whose actions are Discrete
  are offered (MultiDiscrete ones are refused in one line: the agents here take Discrete and
  Box actions).
- No task: a jumanji env takes its sizes, time limit and generators as constructor arguments,
  Python values fixed when it is built, so none can change without recompiling. A held-out set
  or a task sampler on one is refused (docs/envs.md).
- Episodes: a step with discount 0 is `terminated`. Jumanji's own time limit (`time_limit`,
  where the env has one) is this env's `max_episode_steps` (else 1000), owned by the episode
  wrapper. Jumanji folds that limit into a termination (Snake and Maze end with discount 0 at
  their limit), so the steps go to a shallow copy of the env whose `time_limit` no episode
  reaches (its step reads it; its specs keep the real one): only the wrapper ends an episode on
  time, as a truncation that bootstraps.
- Observations: every field of jumanji's observation (action mask included), flattened in the
  observation's own order into one float32 vector; bounds come from jumanji's specs. Where the
  first field is a (height, width, channels) grid (Snake's), `image_shape` says so.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import jumanji
import numpy as np
from jumanji.specs import jumanji_specs_to_gym_spaces

from ajax_tune.envs.base import EnvState
from ajax_tune.envs.suite import NEVER, SuiteEnv, checked_steps, unknown_id
from ajax_tune.errors import ConfigError

DEFAULT_TIME_LIMIT = 1000  # for envs with no `time_limit` of their own


class JumanjiEnv(SuiteEnv):
    """`jumanji.make(env_id, **kwargs)`; jumanji's (state, timestep) pair is `EnvState.physics`."""

    def __init__(self, env_id: str, max_episode_steps: int | None = None, **jumanji_kwargs):
        known = sorted(jumanji.registered_environments())
        if env_id not in known:
            raise unknown_id("jumanji", env_id, known)
        self.name = f"jumanji/{env_id}"
        self.jumanji_env = jumanji.make(env_id, **jumanji_kwargs)
        own_limit = getattr(self.jumanji_env, "time_limit", None)
        self.max_episode_steps = checked_steps(self.name, max_episode_steps) or int(own_limit or DEFAULT_TIME_LIMIT)
        self._stepper = self.jumanji_env
        if own_limit is not None:  # the wrapper owns the limit (see the module docstring)
            self._stepper = copy.copy(self.jumanji_env)
            self._stepper.time_limit = NEVER
        self.task_spec = {}

        action = jumanji_specs_to_gym_spaces(self.jumanji_env.action_spec)
        if not isinstance(action, gymnasium.spaces.Discrete):
            raise ConfigError(f"{self.name}: its actions are {action}; the agents here take Discrete and Box actions")
        self.action_space = gymnasium.spaces.Discrete(int(action.n))
        example = jax.eval_shape(lambda k: self.jumanji_env.reset(k)[1].observation, jax.random.PRNGKey(0))
        bounds = _bounds(example, jumanji_specs_to_gym_spaces(self.jumanji_env.observation_spec))
        low = np.concatenate([lo for lo, _ in bounds]).astype(np.float32)
        high = np.concatenate([hi for _, hi in bounds]).astype(np.float32)
        self.observation_space = gymnasium.spaces.Box(low, high, low.shape, np.float32)
        first = jax.tree.leaves(example)[0]
        self.image_shape = tuple(first.shape) if len(first.shape) == 3 else None

    def observe(self, observation) -> jax.Array:
        return jnp.concatenate([jnp.asarray(x, jnp.float32).reshape(-1) for x in jax.tree.leaves(observation)])

    def reset(self, key, task) -> EnvState:
        state, timestep = self.jumanji_env.reset(key)
        return self.first(timestep.observation, task, (state, timestep))

    def step(self, state, action, key) -> EnvState:
        inner, timestep = self._stepper.step(state.physics[0], self.action(action))
        return self.stepped(
            state, timestep.observation, timestep.reward, timestep.last() & (timestep.discount == 0), (inner, timestep)
        )


def _fields(value: Any) -> list[tuple[str, Any]] | None:
    """The named fields of an observation (a NamedTuple, a dataclass, a dict), in its order."""
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return [(name, getattr(value, name)) for name in value._fields]
    if dataclasses.is_dataclass(value):
        return [(f.name, getattr(value, f.name)) for f in dataclasses.fields(value)]
    if isinstance(value, dict):
        return list(value.items())
    return None


def _bounds(value: Any, space: gymnasium.spaces.Space) -> list[tuple[np.ndarray, np.ndarray]]:
    """(low, high) of each leaf of `value`, flattened, in `jax.tree.leaves` order."""
    fields = _fields(value)
    if fields is not None:
        if isinstance(value, dict):  # jax orders a dict's leaves by key
            fields = sorted(fields)
        return [bound for name, field in fields for bound in _bounds(field, space[name])]
    size = int(np.prod(value.shape, dtype=np.int64))
    if isinstance(space, gymnasium.spaces.Discrete):
        low, high = np.full(size, space.start), np.full(size, space.start + space.n - 1)
    elif isinstance(space, gymnasium.spaces.Box):
        low = np.broadcast_to(np.asarray(space.low, np.float64), value.shape).reshape(-1)
        high = np.broadcast_to(np.asarray(space.high, np.float64), value.shape).reshape(-1)
    else:
        raise ConfigError(f"a jumanji observation field of space {space} is not offered")
    return [(low, high)]
