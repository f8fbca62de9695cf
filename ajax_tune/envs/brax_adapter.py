"""Any brax environment as an `Env`, with its dynamics as the task.

Brax envs have no task, so the adapter makes one out of the physical system: each task field is
a hook that rewrites part of the brax `System` from a traced value. Every reset and step builds
the modified system from `state.task` and runs a shallow copy of the brax env whose `sys` is
replaced (the trick brax's own `DomainRandomizationVmapWrapper` uses), so changing the task,
even per env in a `VecEnv`, changes values and never recompiles.

The task (`PHYSICS_TASK`, which Playground's envs share):

- `gravity_scale` multiplies gravity: `sys.gravity` (read by the generalized, spring and
  positional pipelines) and `sys.opt.gravity` (read by the mjx pipeline). 0 is weightlessness.
- `mass_scale` multiplies the mass and rotational inertia of every body, as if every body's
  density changed: `sys.link.inertia` (generalized, spring, positional) and `body_mass`,
  `body_subtreemass`, `body_inertia` and the inverse weights derived from them (mjx). Gravity
  acts in proportion to mass, so unforced motion barely changes; what changes is how strongly the
  actuators, whose force limits stay fixed, move the bodies.

The task changes the physics only; constants a brax env computed from `sys` when it was built
(some envs keep a few) stay as they were.
"""

from __future__ import annotations

import abc
import copy

import brax.envs
import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from brax.base import System

from ajax_tune import compat
from ajax_tune.envs.base import EnvState, Task, TaskField
from ajax_tune.envs.suite import SuiteEnv, checked_steps, strongly_typed, unknown_id

DEFAULT_TIME_LIMIT = 1000  # brax's own training wrapper's default episode length
PHYSICS_TASK = {
    "gravity_scale": TaskField(default=1.0, low=0.0, high=5.0, dtype=np.float32, doc="multiplies gravity"),
    "mass_scale": TaskField(default=1.0, low=0.1, high=10.0, dtype=np.float32, doc="multiplies every body's mass and inertia"),
}


def scaled_mjx_model(model, task: Task):
    """An `mjx.Model` (a brax `System` is one) with gravity and the bodies' masses scaled as
    `task` says, and the quantities MJX derives from the masses with them."""
    gravity, mass = (jnp.asarray(task[name], jnp.float32) for name in PHYSICS_TASK)
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


def typed_state(state):
    """A brax-style `State` strongly typed, its reward and `done` float32: brax and Playground
    return Python floats and weakly typed scalars (a step's reward is often the literal 1.0)."""
    state = strongly_typed(state)
    return state.replace(reward=state.reward.astype(jnp.float32), done=state.done.astype(jnp.float32))


class PhysicsTaskEnv(SuiteEnv):
    """An env of brax's form (`reset(key)`, `step(state, action)`, a `State` with `obs`, `reward`
    and `done`) whose physics `PHYSICS_TASK` rewrites: a subclass says which env a task steps."""

    clip_actions = True
    task_spec = PHYSICS_TASK

    @abc.abstractmethod
    def _env_for(self, task: Task):
        """The env stepping the physics `task` describes."""

    def reset(self, key, task) -> EnvState:
        physics = typed_state(self._env_for(task).reset(key))
        return self.first(physics.obs, task, physics)

    def step(self, state, action, key) -> EnvState:
        physics = typed_state(self._env_for(state.task).step(state.physics, self.action(action)))
        return self.stepped(state, physics.obs, physics.reward, physics.done > 0.5, physics)


class BraxEnv(PhysicsTaskEnv):
    """`brax.envs.get_environment(brax_name, **brax_kwargs)` with a time limit and its physics as
    the task.

    The brax `State` is kept whole in `EnvState.physics`, so envs that keep an rng or metrics in
    it work unchanged. Brax steps are deterministic given that state; the step key is unused.
    """

    def __init__(self, brax_name: str, max_episode_steps: int | None = None, **brax_kwargs):
        try:
            env = brax.envs.get_environment(brax_name, **brax_kwargs)
        except KeyError:
            raise unknown_id("brax", brax_name, compat.brax_env_names()) from None
        if not isinstance(getattr(env, "sys", None), System):
            raise TypeError(f"brax/{brax_name}: task hooks need a brax PipelineEnv with a `sys`, got {type(env).__name__}")
        self.name = f"brax/{brax_name}"
        self.brax_env = env
        self.max_episode_steps = checked_steps(self.name, max_episode_steps) or DEFAULT_TIME_LIMIT
        # Traced, not run: a real reset would compile the physics just to learn a shape.
        obs = jax.eval_shape(env.reset, jax.random.PRNGKey(0)).obs
        if not isinstance(obs, jax.ShapeDtypeStruct) or len(obs.shape) != 1:
            raise TypeError(f"{self.name}: only flat array observations are supported, got {obs}")
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, obs.shape, np.float32)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (env.action_size,), np.float32)

    def system(self, task: Task) -> System:
        """The brax `System` that `task` describes (what a step under it simulates)."""
        sys = scaled_mjx_model(self.brax_env.sys, task)
        mass = jnp.asarray(task["mass_scale"], jnp.float32)
        inertia = sys.link.inertia.replace(mass=sys.link.inertia.mass * mass, i=sys.link.inertia.i * mass)
        return sys.replace(
            gravity=sys.gravity * jnp.asarray(task["gravity_scale"], jnp.float32), link=sys.link.replace(inertia=inertia)
        )

    def _env_for(self, task: Task):
        """A shallow copy of the brax env stepping the system `task` describes."""
        env = copy.copy(self.brax_env)
        env.sys = self.system(task)
        return env
