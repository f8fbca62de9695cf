"""What every adapter of another library's envs shares, so that each adapter holds only what differs.

- A suite by name (`Suite`): its adapter is imported when its name is first used, and a suite
  that is not installed is one line naming what to install, before anything compiles.
- Names: an unknown id is one line with the nearest known one.
- States are strongly typed. Suites return Python scalars and weakly typed arrays (a reset's
  `time=0`, a reward literal); a scan carry, or a `where` between a finished and a fresh state,
  needs a state of one type before and after a step.
- Time limits belong to `EpisodeWrapper`, which truncates (and bootstraps from the real final
  observation). A suite's own limit becomes the wrapper's `max_episode_steps`; the suite steps
  with it where it reads it (a reward scaled by the time left) and otherwise with a limit no
  episode reaches. Where a suite folds its limit into `done`, the natural end comes from the same
  step with the limit out of reach (`natural_end`; XLA shares the two calls' work).
- Actions: a suite's Discrete space stays Discrete and a 1-D Box stays a float32 Box; an action
  reaches the suite as int32, or as float32 of the space's shape (clipped to its bounds where the
  suite does not clip itself).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib
import importlib.util
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune.envs.base import Env, EnvState, Task, check_integer
from ajax_tune.errors import ConfigError
from ajax_tune.imports import did_you_mean

NEVER = int(np.iinfo(np.int32).max)  # a time limit no episode reaches
GYMNAX_TIME_LIMIT = "max_steps_in_episode"  # the time limit's field in gymnax's params, and JaxUED's


@dataclasses.dataclass(frozen=True)
class Suite:
    """One prefix of env names (`craftax/<id>`): the adapter that takes the rest of the name, the
    module the suite installs (looked for without importing it: some suites' imports start JAX's
    backends, which a config check must not) and how to install it."""

    adapter: str  # "module:attribute", called with the rest of the name and the env's kwargs
    requires: str
    install: str
    form: str = "<id>"  # the rest of the name, as listed

    def factory(self, prefix: str, rest: str) -> Callable[..., Env]:
        name = f"{prefix}{rest}"
        self.check(name)
        module_name, _, attribute = self.adapter.partition(":")
        try:
            module = importlib.import_module(module_name)
        except ImportError as exc:  # installed, but a module it needs is not
            raise self.missing(name, str(exc)) from None
        return functools.partial(getattr(module, attribute), rest)

    def check(self, name: str) -> None:
        """One line naming what to install, where the suite is not installed."""
        if importlib.util.find_spec(self.requires) is None:
            raise self.missing(name, f"{self.requires} is not installed")

    def missing(self, name: str, why: str) -> ImportError:
        suite = name.partition("/")[0]
        return ImportError(f"{name} needs the {suite} suite ({why}); {self.install}")


def unknown_id(suite: str, env_id: str, known: Sequence[str], listing: str = "") -> KeyError:
    """An id the suite does not have, with the nearest one it has and what it has."""
    hint = did_you_mean(f"{suite}/{env_id}", [f"{suite}/{name}" for name in known])
    return KeyError(f"unknown {suite} env {env_id!r}{hint} {listing or f'{suite} has'}: {', '.join(known)}")


def strongly_typed(tree: Any, like: Any = None) -> Any:
    """Every leaf a strongly typed array of its own dtype, or of `like`'s (a state before the step)."""
    if like is None:
        return jax.tree.map(lambda x: jnp.asarray(x, jnp.asarray(x).dtype), tree)
    return jax.tree.map(lambda new, old: jnp.asarray(new).astype(old.dtype), tree, like)


def time_limit(name: str, params: Any, field: str, max_episode_steps: Any, *, keep: bool) -> tuple[int, Any]:
    """The time limit the episode wrapper owns (`max_episode_steps` where given, else the suite's
    own `params.<field>`) and the params to step with: carrying that limit where the suite reads
    it (`keep`), else a limit no episode reaches."""
    steps = checked_steps(name, max_episode_steps)
    steps = int(getattr(params, field)) if steps is None else steps
    return steps, params.replace(**{field: steps if keep else NEVER})


def checked_steps(name: str, max_episode_steps: Any) -> int | None:
    """`env.kwargs.max_episode_steps`, a positive integer or None (the suite's own limit)."""
    if max_episode_steps is None:
        return None
    return check_integer(name, "max_episode_steps", max_episode_steps, 1)


def checked_bounds(name: str, field: str, given: Any, default: np.ndarray) -> tuple[float, float]:
    """`env.kwargs.task_bounds[field]`: two numbers, low <= high, around the field's default."""
    try:
        low, high = (float(b) for b in given)
    except (TypeError, ValueError):
        raise ConfigError(f"{name}: task_bounds[{field!r}] must be [low, high], got {given!r}") from None
    if not low <= np.min(default) <= np.max(default) <= high:
        raise ConfigError(
            f"{name}: task_bounds[{field!r}] is [{low:g}, {high:g}], which leaves out its default {default.tolist()}"
        )
    return low, high


def natural_end(step_env: Callable, field: str, key, state, action, params) -> jax.Array:
    """`done` of a gymnax-style `step_env(key, state, action, params)` with the time limit
    (`params.<field>`) out of reach: the episode's natural end, for a suite that folds its
    limit into `done`."""
    return step_env(key, state, action, params.replace(**{field: NEVER}))[3]


def action_space(space: Any, name: str) -> gymnasium.spaces.Space:
    """A suite's action space (gymnax's or alike: `n`, or `shape`, `low`, `high`) as gymnasium's."""
    n = getattr(space, "n", None)
    if n is not None:
        return gymnasium.spaces.Discrete(int(n))
    shape = tuple(getattr(space, "shape", ()) or ())
    if len(shape) == 1:
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape)
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape)
        return gymnasium.spaces.Box(low, high, shape, np.float32)
    raise TypeError(f"{name}: only Discrete and 1-D Box action spaces are supported, got {space!r}")


def to_action(space: gymnasium.spaces.Space, action, clip: bool = False) -> jax.Array:
    """An action as the suite takes it: int32 for a Discrete space, else float32 of the space's
    shape, clipped to its bounds with `clip`."""
    if isinstance(space, gymnasium.spaces.Discrete):
        return jnp.asarray(action, jnp.int32)
    action = jnp.asarray(action, jnp.float32).reshape(space.shape)
    return jnp.clip(action, space.low, space.high) if clip else action


def zero_action(space: gymnasium.spaces.Space) -> jax.Array:
    """An action of the space's type and shape (to trace a step with)."""
    return to_action(space, np.zeros(() if isinstance(space, gymnasium.spaces.Discrete) else space.shape))


def flat(obs) -> jax.Array:
    return jnp.asarray(obs, jnp.float32).reshape(-1)


class SuiteEnv(Env):
    """An `Env` over a suite's env: the shared ends of `reset` and `step`. A subclass steps the
    suite and hands the result to `first` and `stepped`; it sets `clip_actions` where the suite
    takes actions outside its bounds as they are."""

    clip_actions: bool = False

    def action(self, action) -> jax.Array:
        return to_action(self.action_space, action, self.clip_actions)

    def observe(self, obs) -> jax.Array:
        """The suite's observation as this env's flat float32 vector."""
        return flat(obs)

    def params_for(self, task: Task) -> Any:
        """The suite's params for an (unbatched) task whose fields are fields of `self.params`."""
        return self.params.replace(**{name: task[name] for name in self.task_spec})

    def first(self, obs, task: Task, physics, info: dict[str, jax.Array] | None = None) -> EnvState:
        """A fresh episode's state: `obs` as given to `observe`, the suite's state whole."""
        return EnvState.create(obs=self.observe(obs), task=task, physics=strongly_typed(physics), info=info)

    def stepped(self, state: EnvState, obs, reward, terminated, physics, info: dict[str, jax.Array] | None = None) -> EnvState:
        """`state` after a step: the suite's observation, reward, natural end and state (and
        `info`, where given)."""
        return state.replace(
            obs=self.observe(obs),
            reward=jnp.asarray(reward, jnp.float32).reshape(()),
            terminated=jnp.asarray(terminated, jnp.bool_).reshape(()),
            physics=strongly_typed(physics),
            info=state.info if info is None else info,
        )
