"""Any brax environment as an `Env`, with its dynamics as the task.

Brax envs have no task, so the adapter makes one out of the physical system: each task field is
a hook that rewrites part of the brax `System` from a traced value. Every reset and step builds
the modified system from `state.task` and runs a shallow copy of the brax env whose `sys` is
replaced (the trick brax's own `DomainRandomizationVmapWrapper` uses), so changing the task,
even per env in a `VecEnv`, changes values and never recompiles.

Task hooks (see `TASK_HOOKS`):

- `gravity_scale` multiplies gravity: `sys.gravity` (read by the generalized, spring and
  positional pipelines) and `sys.opt.gravity` (read by the mjx pipeline). 0 is weightlessness.
- `mass_scale` multiplies the mass and rotational inertia of every body, as if every body's
  density changed: `sys.link.inertia` (generalized, spring, positional) and `body_mass`,
  `body_subtreemass`, `body_inertia` and the inverse weights derived from them (mjx). Gravity
  acts in proportion to mass, so unforced motion barely changes; what changes is how strongly the
  actuators, whose force limits stay fixed, move the bodies.

The hooks change the physics only; constants a brax env computed from `sys` when it was built
(some envs keep a few) stay as they were.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable

import brax.envs
import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from brax.base import System

from ajax_tune import compat
from ajax_tune.envs.base import Env, EnvState, Task, TaskField
from ajax_tune.imports import did_you_mean


@dataclasses.dataclass(frozen=True)
class SysHook:
    """A task field and how its value rewrites a brax `System`."""

    field: TaskField
    apply: Callable[[System, jax.Array], System]


def _scale_gravity(sys: System, scale: jax.Array) -> System:
    return sys.replace(gravity=sys.gravity * scale, opt=sys.opt.replace(gravity=sys.opt.gravity * scale))


def _scale_mass(sys: System, scale: jax.Array) -> System:
    inertia = sys.link.inertia
    link = sys.link.replace(inertia=inertia.replace(mass=inertia.mass * scale, i=inertia.i * scale))
    return sys.replace(
        link=link,
        body_mass=sys.body_mass * scale,
        body_subtreemass=sys.body_subtreemass * scale,
        body_inertia=sys.body_inertia * scale,
        body_invweight0=sys.body_invweight0 / scale,
        dof_invweight0=sys.dof_invweight0 / scale,
    )


TASK_HOOKS: dict[str, SysHook] = {
    "gravity_scale": SysHook(
        TaskField(default=1.0, low=0.0, high=5.0, dtype=np.float32, doc="multiplies gravity"),
        _scale_gravity,
    ),
    "mass_scale": SysHook(
        TaskField(default=1.0, low=0.1, high=10.0, dtype=np.float32, doc="multiplies every body's mass and inertia"),
        _scale_mass,
    ),
}


class BraxEnv(Env):
    """`brax.envs.get_environment(brax_name, **brax_kwargs)` with a time limit and task hooks.

    The brax `State` is kept whole in `EnvState.physics`, so envs that keep an rng or metrics in
    it work unchanged. Brax steps are deterministic given that state; the step key is unused.
    """

    def __init__(self, brax_name: str, max_episode_steps: int = 1000, **brax_kwargs):
        try:
            env = brax.envs.get_environment(brax_name, **brax_kwargs)
        except KeyError:
            known = compat.brax_env_names()
            hint = did_you_mean(f"brax/{brax_name}", [f"brax/{name}" for name in known])
            raise KeyError(f"unknown brax env {brax_name!r}{hint} brax has: {', '.join(known)}") from None
        if not isinstance(getattr(env, "sys", None), System):
            raise TypeError(f"brax/{brax_name}: task hooks need a brax PipelineEnv with a `sys`, got {type(env).__name__}")
        self.name = f"brax/{brax_name}"
        self.brax_env = env
        self.max_episode_steps = int(max_episode_steps)
        # Traced, not run: a real reset would compile the physics just to learn a shape.
        obs = jax.eval_shape(env.reset, jax.random.PRNGKey(0)).obs
        if not isinstance(obs, jax.ShapeDtypeStruct) or len(obs.shape) != 1:
            raise TypeError(f"{self.name}: only flat array observations are supported, got {obs}")
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, obs.shape, np.float32)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (env.action_size,), np.float32)
        self.task_spec = {name: hook.field for name, hook in TASK_HOOKS.items()}

    def system(self, task: Task) -> System:
        """The brax `System` that `task` describes (what a step under it simulates)."""
        sys = self.brax_env.sys
        for name, hook in TASK_HOOKS.items():
            sys = hook.apply(sys, jnp.asarray(task[name], jnp.float32))
        return sys

    def _env_for(self, task: Task):
        """A shallow copy of the brax env stepping the system `task` describes."""
        env = copy.copy(self.brax_env)
        env.sys = self.system(task)
        return env

    def _state(self, brax_state, task: Task, base: EnvState | None) -> EnvState:
        # Brax envs return python floats and weakly typed scalars (a step's reward is often the
        # literal 1.0); make every leaf a strongly typed array so the state has the same type
        # before and after a step, as scan carries and `where` between states need.
        brax_state = jax.tree.map(lambda x: jnp.asarray(x, jnp.asarray(x).dtype), brax_state)
        brax_state = brax_state.replace(reward=brax_state.reward.astype(jnp.float32), done=brax_state.done.astype(jnp.float32))
        obs = jnp.asarray(brax_state.obs, jnp.float32)
        if base is None:
            return EnvState.create(obs=obs, task=task, physics=brax_state)
        return base.replace(
            obs=obs,
            reward=brax_state.reward,
            terminated=brax_state.done > 0.5,
            physics=brax_state,
        )

    def reset(self, key, task) -> EnvState:
        return self._state(self._env_for(task).reset(key), task, None)

    def step(self, state, action, key) -> EnvState:
        action = jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        return self._state(self._env_for(state.task).step(state.physics, action), state.task, state)
