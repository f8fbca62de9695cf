"""CartPole: gymnasium's CartPole-v1 with its physics as task data.

Under the default task every transition, reward, termination and reset distribution is that of
CartPole-v1 (Euler integrator, reward 1 on every step including the terminating one, 500-step
limit applied by `EpisodeWrapper`), computed in float32. A shorter pole falls faster, and a
weaker push or stronger gravity leave less margin for correction, so `pole_length`, `force_mag`
and `gravity` are the curriculum's difficulty knobs.

`hide_velocities=True` observes only the cart's position and the pole's angle: the standard
partially observed CartPole, which a policy solves only by remembering earlier observations
(recurrent PPO). Its gymnasium twin is CartPole-v1 behind `gymnasium_wrapper()`.
"""

from __future__ import annotations

import math

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune.envs.base import Env, EnvState, TaskField

MASSCART = 1.0
MASSPOLE = 0.1
TAU = 0.02  # seconds per step
X_LIMIT = 2.4
THETA_LIMIT = 12 * 2 * math.pi / 360
RESET_BOUND = 0.05


def _first_float32_above(limit: float) -> np.float32:
    """The least float32 strictly above `limit`.

    Gymnasium compares float64 states with float64 limits. For a float32 value `v`,
    `v > limit` holds exactly when `v >= _first_float32_above(limit)`, so a state sitting on a
    limit ends the episode here exactly when it does in gymnasium.
    """
    f = np.float32(limit)
    return f if float(f) > limit else np.nextafter(f, np.float32(np.inf))


X_END = _first_float32_above(X_LIMIT)
THETA_END = _first_float32_above(THETA_LIMIT)


class CartPole(Env):
    def __init__(self, max_episode_steps: int = 500, hide_velocities: bool = False):
        if not isinstance(hide_velocities, bool):
            raise ValueError(f"cartpole: hide_velocities must be true or false, got {hide_velocities!r}")
        self.name = "cartpole"
        self.max_episode_steps = int(max_episode_steps)
        self.hide_velocities = hide_velocities
        #: which entries of the physics state (x, x_dot, theta, theta_dot) the agent observes
        self.observed = (0, 2) if hide_velocities else (0, 1, 2, 3)
        # Twice the termination limits, like gymnasium, so the final observation is in bounds.
        high = np.array([X_LIMIT * 2, np.inf, THETA_LIMIT * 2, np.inf], np.float32)[list(self.observed)]
        self.observation_space = gymnasium.spaces.Box(-high, high, dtype=np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)  # 0: push left, 1: push right
        self.task_spec = {
            "pole_length": TaskField(
                default=0.5, low=0.1, high=2.0, doc="half the pole's length (gymnasium's `length`); shorter poles fall faster"
            ),
            "force_mag": TaskField(default=10.0, low=1.0, high=30.0, doc="magnitude of the push on the cart"),
            "gravity": TaskField(default=9.8, low=0.0, high=20.0, doc="gravitational acceleration pulling the pole down"),
        }

    def reset(self, key, task) -> EnvState:
        physics = jax.random.uniform(key, (4,), jnp.float32, -RESET_BOUND, RESET_BOUND)
        return EnvState.create(obs=self._obs(physics), task=task, physics=physics)

    def _obs(self, physics):
        return physics[jnp.array(self.observed)] if self.hide_velocities else physics

    def gymnasium_wrapper(self):
        """What makes gymnasium's CartPole-v1 observe as this env does (None: nothing to hide)."""
        if not self.hide_velocities:
            return None
        from ajax_tune.envs.gymnasium_adapter import SelectObservation

        return lambda env: SelectObservation(env, self.observed)

    def step(self, state, action, key) -> EnvState:
        task = state.task
        length, gravity = task["pole_length"], task["gravity"]
        x, x_dot, theta, theta_dot = state.physics
        force = jnp.where(action == 1, task["force_mag"], -task["force_mag"])
        costheta, sintheta = jnp.cos(theta), jnp.sin(theta)
        # Same expression order as gymnasium, so float32 results stay within rounding of its float64.
        total_mass = MASSPOLE + MASSCART
        polemass_length = MASSPOLE * length
        temp = (force + polemass_length * jnp.square(theta_dot) * sintheta) / total_mass
        thetaacc = (gravity * sintheta - costheta * temp) / (length * (4.0 / 3.0 - MASSPOLE * jnp.square(costheta) / total_mass))
        xacc = temp - polemass_length * thetaacc * costheta / total_mass
        physics = jnp.stack(
            [
                x + TAU * x_dot,
                x_dot + TAU * xacc,
                theta + TAU * theta_dot,
                theta_dot + TAU * thetaacc,
            ]
        ).astype(jnp.float32)
        terminated = (jnp.abs(physics[0]) >= X_END) | (jnp.abs(physics[2]) >= THETA_END)
        return state.replace(
            obs=self._obs(physics),
            reward=jnp.ones((), jnp.float32),
            terminated=terminated,
            physics=physics,
        )
