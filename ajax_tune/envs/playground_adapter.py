"""MuJoCo Playground (`playground`, module `mujoco_playground`) dm_control-suite envs as `Env`s,
with their physics as the task, beside `brax/<name>`.

- Ids: the 25 envs of Playground's `dm_control_suite` (`CartpoleBalance`, `CheetahRun`,
  `PendulumSwingup`, ...). Playground's locomotion and manipulation envs fetch MuJoCo Menagerie
  at run time and are not offered. `env.kwargs.config_overrides` go to Playground's config (they
  are read when the env is built: changing one recompiles).
- MJX runs with `impl: jax` unless told otherwise: Playground's default, Warp, runs about 70
  times slower on a CPU.
- Task fields, as for brax envs: `gravity_scale` multiplies gravity and `mass_scale` every
  body's mass and inertia (with the quantities MJX derives from them), rewriting the `mjx.Model`
  from traced values at every reset and step, so a new task, even per env, never recompiles.
  Constants the env computed from its model when it was built stay as they were.
- Episodes: Playground's `done` (a state gone non-finite, or an env's own end) is `terminated`;
  its episode length (`episode_length`, 1000 in the suite) is `max_episode_steps`, owned by the
  episode wrapper (Playground's own training wrapper does the same with brax's).
- Observations: the state vector (float32); envs with a dict of observations are not offered.
  Actions: Box(-1, 1), clipped.
"""

from __future__ import annotations

import gymnasium
import numpy as np
from mujoco_playground import dm_control_suite, registry

from ajax_tune import compat
from ajax_tune.envs.base import Task
from ajax_tune.envs.brax_adapter import PhysicsTaskEnv, scaled_mjx_model
from ajax_tune.envs.suite import checked_steps, unknown_id
from ajax_tune.errors import ConfigError


class PlaygroundEnv(PhysicsTaskEnv):
    """`mujoco_playground.registry.load(env_id)` with a time limit and its physics as the task;
    Playground's `State` is kept whole in `EnvState.physics`."""

    def __init__(
        self, env_id: str, max_episode_steps: int | None = None, impl: str = "jax", config_overrides: dict | None = None
    ):
        offered = list(dm_control_suite.ALL_ENVS)
        if env_id not in offered:
            if env_id in registry.ALL_ENVS:
                raise ConfigError(
                    f"playground/{env_id} needs MuJoCo Menagerie, which Playground downloads at run time; "
                    f"the dm_control-suite envs are offered: {', '.join(offered)}"
                )
            raise unknown_id("playground", env_id, offered, "Offered (its dm_control suite)")
        self.name = f"playground/{env_id}"
        config = registry.get_default_config(env_id)
        config.update({"impl": impl, **(config_overrides or {})})
        self.playground_env = registry.load(env_id, config=config)
        self.max_episode_steps = checked_steps(self.name, max_episode_steps) or int(config.episode_length)
        size = self.playground_env.observation_size
        if not isinstance(size, int):
            raise ConfigError(f"{self.name}: its observation is a dict ({size}); only vector observations are offered")
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (int(self.playground_env.action_size),), np.float32)

    def _env_for(self, task: Task):
        return compat.playground_env_with_model(self.playground_env, scaled_mjx_model(self.playground_env.mjx_model, task))
