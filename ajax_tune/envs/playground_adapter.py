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
import jax
import jax.numpy as jnp
import numpy as np
from mujoco_playground import dm_control_suite, registry

from ajax_tune import compat
from ajax_tune.envs.base import Env, EnvState, Task, TaskField
from ajax_tune.errors import ConfigError
from ajax_tune.imports import did_you_mean

TASK_FIELDS = {
    "gravity_scale": TaskField(default=1.0, low=0.0, high=5.0, dtype=np.float32, doc="multiplies gravity"),
    "mass_scale": TaskField(default=1.0, low=0.1, high=10.0, dtype=np.float32, doc="multiplies every body's mass and inertia"),
}


def scaled_model(model, task: Task):
    """The `mjx.Model` a task describes (gravity and masses scaled)."""
    gravity, mass = jnp.asarray(task["gravity_scale"], jnp.float32), jnp.asarray(task["mass_scale"], jnp.float32)
    return model.tree_replace(
        {
            "opt.gravity": model.opt.gravity * gravity,
            "body_mass": model.body_mass * mass,
            "body_subtreemass": model.body_subtreemass * mass,
            "body_inertia": model.body_inertia * mass,
            "body_invweight0": model.body_invweight0 / mass,
            "dof_invweight0": model.dof_invweight0 / mass,
        }
    )


class PlaygroundEnv(Env):
    """`mujoco_playground.registry.load(env_id)` with a time limit and task hooks; Playground's
    `State` is kept whole in `EnvState.physics`."""

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
            hint = did_you_mean(f"playground/{env_id}", [f"playground/{name}" for name in offered])
            raise KeyError(f"unknown playground env {env_id!r}{hint} Offered (its dm_control suite): {', '.join(offered)}")
        self.name = f"playground/{env_id}"
        config = registry.get_default_config(env_id)
        config.update({"impl": impl, **(config_overrides or {})})
        self.playground_env = registry.load(env_id, config=config)
        self.max_episode_steps = int(max_episode_steps or config.episode_length)
        size = self.playground_env.observation_size
        if not isinstance(size, int):
            raise ConfigError(f"{self.name}: its observation is a dict ({size}); only vector observations are offered")
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (size,), np.float32)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (int(self.playground_env.action_size),), np.float32)
        self.task_spec = dict(TASK_FIELDS)

    def _env_for(self, task: Task):
        return compat.playground_env_with_model(self.playground_env, scaled_model(self.playground_env.mjx_model, task))

    def _typed(self, state):
        # Playground returns weakly typed scalars (a reset's reward 0.0); a scan carry needs one type
        state = jax.tree.map(lambda x: jnp.asarray(x, jnp.asarray(x).dtype), state)
        return state.replace(reward=state.reward.astype(jnp.float32), done=state.done.astype(jnp.float32))

    def reset(self, key, task) -> EnvState:
        state = self._typed(self._env_for(task).reset(key))
        return EnvState.create(obs=jnp.asarray(state.obs, jnp.float32), task=task, physics=state)

    def step(self, state, action, key) -> EnvState:
        action = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        physics = self._typed(self._env_for(state.task).step(state.physics, action))
        return state.replace(
            obs=jnp.asarray(physics.obs, jnp.float32),
            reward=physics.reward,
            terminated=physics.done > 0.5,
            physics=physics,
        )
