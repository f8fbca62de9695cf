"""Kinetix (`kinetix-env`: 2-D physics levels in Jax2D) as an `Env`, with the level as the task.

- Names: `kinetix/<size>` (`s`, `m` or `l`: how many shapes, joints and thrusters a level may
  hold) or `kinetix/<size>/<level>` with one of the levels kinetix ships (`kinetix/s/h4_thrust_aim`),
  which is then the starting task (otherwise the size's first hand-made level).
- The task is one field, `level`: the whole level (kinetix's `EnvState` of that size: every
  polygon, circle, joint and thruster, their roles, gravity...) as one float32 vector. Every
  level of a size has the same shape, so a new level, even one per env, is data and never
  recompiles. A task is given by name: a shipped level (`s/h0_weak_thrust`, or `h0_weak_thrust`
  within its size), from the env's sets `handmade` (the size's hand-made `h*` levels, kinetix's
  held-out evaluation levels: `heldout: {named: handmade, num_tasks: 10}` for `s`) and `all`
  (every shipped level of the size); or as a vector (`level_vector`), for levels made by
  kinetix's generators.
- Episodes: `terminated` is kinetix's natural end (a green shape touched a blue one, or a red
  one, or the state stopped being finite); its time limit (`max_timesteps`, 256), which kinetix
  folds into `done`, is `max_episode_steps`, owned by the episode wrapper.
- Observations: kinetix's flat symbolic vector. Actions: `actions: continuous` (the default;
  Box(-1, 1) per motor and thruster) or `discrete` (kinetix's Discrete actions). Kinetix's
  multi-discrete actions are not offered (the agents here take Discrete and Box actions).
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping, Sequence

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from kinetix.environment import ActionType, EnvParams, ObservationType, make_kinetix_env, static_env_params_from_size
from kinetix.environment.utils import create_empty_env
from kinetix.util.saving import BASE_DIR, load_evaluation_levels, load_from_json_file

from ajax_tune.envs.base import EnvState, TaskField, stack_tasks
from ajax_tune.envs.suite import SuiteEnv, time_limit
from ajax_tune.errors import ConfigError, TaskError
from ajax_tune.imports import did_you_mean

SIZES = ("s", "m", "l")
ACTIONS = {"continuous": ActionType.CONTINUOUS, "discrete": ActionType.DISCRETE}
SETS = ("handmade", "all")


def shipped_levels(size: str) -> list[str]:
    """The levels kinetix ships for a size, hand-made ones (h0, h1, ...) first, in their order."""
    names = [os.path.relpath(p, BASE_DIR)[: -len(".json")] for p in glob.glob(os.path.join(BASE_DIR, size, "*.json"))]
    return sorted(names, key=lambda n: (0, int(m.group(1))) if (m := re.match(rf"{size}/h(\d+)_", n)) else (1, n))


class KinetixEnv(SuiteEnv):
    """Kinetix's env of one size without its auto-reset; its `EnvState` is `EnvState.physics`."""

    clip_actions = True

    def __init__(self, name: str, max_episode_steps: int | None = None, actions: str = "continuous"):
        size, _, level = name.partition("/")
        if size not in SIZES:
            hint = did_you_mean(f"kinetix/{name}", [f"kinetix/{s}" for s in SIZES])
            raise KeyError(f"unknown kinetix env {name!r}{hint} kinetix/<size> or kinetix/<size>/<level>, size one of {SIZES}")
        if actions not in ACTIONS:
            raise ConfigError(f"kinetix/{name}: actions must be one of {list(ACTIONS)}, got {actions!r}")
        self.size = size
        self.levels = shipped_levels(size)
        if level and f"{size}/{level}" not in self.levels:
            hint = did_you_mean(f"kinetix/{size}/{level}", [f"kinetix/{n}" for n in self.levels])
            raise KeyError(f"kinetix has no level {size}/{level!r}{hint} Its {size} levels: {', '.join(self.levels)}")
        self.name = f"kinetix/{name}"
        self.static_params = static_env_params_from_size(size)
        defaults = EnvParams()
        self.max_episode_steps, self.params = time_limit(self.name, defaults, "max_timesteps", max_episode_steps, keep=False)
        self.kinetix_env = make_kinetix_env(
            ACTIONS[actions], ObservationType.SYMBOLIC_FLAT, None, defaults, self.static_params, auto_reset=False
        )
        self.start_level = f"{size}/{level}" if level else self.levels[0]

        # the level's layout, from its shapes alone (nothing is loaded or run for it)
        example = jax.eval_shape(lambda: create_empty_env(self.static_params))
        leaves, self._treedef = jax.tree.flatten(example)
        self._shapes = [(tuple(x.shape), x.dtype) for x in leaves]
        self.level_size = int(sum(np.prod(s, dtype=np.int64) for s, _ in self._shapes))
        self.task_spec = {
            "level": TaskField(0.0, -np.inf, np.inf, np.float32, (self.level_size,), "the whole level, as one vector")
        }

        space = self.kinetix_env.observation_space(defaults)
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (int(np.prod(space.shape)),), np.float32)
        action_space = self.kinetix_env.action_space(defaults)
        if actions == "discrete":
            self.action_space = gymnasium.spaces.Discrete(int(action_space.n))
        else:
            shape = tuple(action_space.shape)
            self.action_space = gymnasium.spaces.Box(-1.0, 1.0, shape, np.float32)

    # -- the task: a level ---------------------------------------------------------------

    def default_task(self) -> dict[str, np.ndarray]:
        return self.named_task(self.start_level)

    def validate_task(self, task, num_envs=None, current=None) -> dict[str, np.ndarray]:
        if isinstance(task, Mapping) and "level" not in task and current is None:
            current = self.default_task()  # a task without a level keeps the starting one, not zeros
        return super().validate_task(task, num_envs=num_envs, current=current)

    def level_vector(self, level) -> np.ndarray:
        """A kinetix level (an `EnvState` of this env's size) as this env's task vector."""
        leaves = jax.tree.leaves(level)
        shapes = [(tuple(np.shape(x))) for x in leaves]
        if shapes != [s for s, _ in self._shapes]:
            raise TaskError(f"{self.name}: that level is not one of size {self.size!r} (its arrays have other shapes)")
        return np.concatenate([np.asarray(x, np.float32).reshape(-1) for x in leaves])

    def level_of(self, vector) -> object:
        """The kinetix level (`EnvState`) a task vector stands for (traced or not)."""
        parts, start = [], 0
        for shape, dtype in self._shapes:
            size = int(np.prod(shape, dtype=np.int64))
            parts.append(jnp.asarray(vector[start : start + size]).reshape(shape).astype(dtype))
            start += size
        return jax.tree.unflatten(self._treedef, parts)

    def task_names(self) -> Sequence[str]:
        return self.levels

    def named_task(self, name: str) -> dict[str, np.ndarray]:
        full = name if "/" in name else f"{self.size}/{name}"
        if full not in self.levels:
            other = full.split("/")[0]
            if other in SIZES and other != self.size:
                raise TaskError(f"{self.name}: level {name!r} is of size {other!r}; this env holds levels of size {self.size!r}")
            raise TaskError(
                f"{self.name} has no level {name!r}{did_you_mean(full, self.levels)} Its levels: {', '.join(self.levels)}"
            )
        return {"level": self.level_vector(_load(full, self.static_params))}

    def named_task_sets(self) -> tuple[str, ...]:
        return tuple(SETS)

    def named_tasks(self, name: str) -> tuple[tuple[str, ...], dict[str, np.ndarray]]:
        if name == "handmade":
            names = tuple(n for n in self.levels if re.match(rf"{self.size}/h\d+_", n))
        elif name == "all":
            names = tuple(self.levels)
        else:
            return super().named_tasks(name)
        return names, stack_tasks([self.named_task(n) for n in names])

    # -- stepping ------------------------------------------------------------------------

    def reset(self, key, task) -> EnvState:
        obs, state = self.kinetix_env.reset_env(key, self.params, override_reset_state=self.level_of(task["level"]))
        return self.first(obs, task, state)

    def step(self, state, action, key) -> EnvState:
        obs, physics, reward, done, _ = self.kinetix_env.step_env(key, state.physics, self.action(action), self.params)
        return self.stepped(state, obs, reward, done, physics)


_LEVELS: dict[tuple[str, object], object] = {}


def _load(name: str, static_params):
    """A shipped level as numpy arrays, at the env's size (loaded once a process)."""
    key = (name, static_params)
    if key not in _LEVELS:
        level, level_static, _ = load_from_json_file(name)
        if level_static != static_params:
            level, _ = load_evaluation_levels([name], static_env_params_override=static_params)
            level = jax.tree.map(lambda x: x[0], level)
        _LEVELS[key] = jax.tree.map(np.asarray, level)
    return _LEVELS[key]
