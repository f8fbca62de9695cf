"""Navix (`navix`: MiniGrid in JAX) environments as `Env`s; task-free.

- Ids are navix's (`navix.registry()`): `Navix-Empty-5x5-v0`, `Navix-DoorKey-8x8-v0`, ...
- No task: a navix env keeps every setting (size, time limit, reward, termination) as a Python
  constant of the env object, so nothing of it can change without recompiling; an env id is one
  task. A held-out set or a task sampler on one is refused (docs/envs.md).
- Episodes: navix's natural end (its `step_type` 2) is `terminated`; its time limit
  (`max_steps`, 100 as `navix.make` sets it, unless `max_episode_steps` is given) is this env's
  `max_episode_steps`, which the episode wrapper owns. Navix resets a finished episode inside
  its own `step`; the episode wrapper never steps a finished env on (it keeps it frozen), so that
  reset never shows.
- Observations: navix's symbolic grid (height, width, 3: each cell's entity, colour and state),
  fully observed, flattened to float32 with `image_shape` set to the grid's shape. Navix's own
  space for it says values stay below 9; they reach 10, so the space here is [0, 255] (uint8).
"""

from __future__ import annotations

import gymnasium
import navix
import numpy as np

from ajax_tune.envs.base import EnvState
from ajax_tune.envs.suite import SuiteEnv, checked_steps, unknown_id

TERMINATION = 2  # navix's StepType: 0 transition, 1 truncation, 2 termination


class NavixEnv(SuiteEnv):
    """`navix.make(env_id, max_steps=...)`; navix's `Timestep` is kept whole in `EnvState.physics`."""

    def __init__(self, env_id: str, max_episode_steps: int | None = None):
        known = sorted(navix.registry())
        if env_id not in known:
            raise unknown_id("navix", env_id, known)
        self.name = f"navix/{env_id}"
        steps = checked_steps(self.name, max_episode_steps)
        kwargs = {} if steps is None else {"max_steps": steps}
        self.navix_env = navix.make(env_id, observation_fn=navix.observations.symbolic, **kwargs)
        self.max_episode_steps = int(self.navix_env.max_steps)
        self.task_spec = {}
        self.image_shape = (int(self.navix_env.height), int(self.navix_env.width), 3)
        size = int(np.prod(self.image_shape))
        self.observation_space = gymnasium.spaces.Box(0.0, 255.0, (size,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(int(self.navix_env.action_space.maximum) + 1)

    def reset(self, key, task) -> EnvState:
        timestep = self.navix_env.reset(key)
        return self.first(timestep.observation, task, timestep)

    def step(self, state, action, key) -> EnvState:
        timestep = self.navix_env.step(state.physics, self.action(action))
        return self.stepped(state, timestep.observation, timestep.reward, timestep.step_type == TERMINATION, timestep)
