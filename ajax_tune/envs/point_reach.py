"""PointReach: a continuous-control curriculum toy.

A damped point mass starts at rest at the origin and must reach a target placed `distance` away
in a random direction; it succeeds once it comes within `radius` of the target. Progress toward
the target is rewarded densely, so near, wide targets are learned quickly, while a far target
with a small radius needs precise steering learned elsewhere first: `distance` and `radius` are
the curriculum's difficulty knobs.
"""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from ajax_tune.envs.base import Env, EnvState, TaskField

DT = 0.1  # seconds per step
FORCE = 1.5  # acceleration at full throttle
DAMPING = 1.5  # 1/s: bounds the speed at FORCE / DAMPING = 1, so a distance-1 target takes ~16 steps
SUCCESS_BONUS = 1.0


@struct.dataclass
class PointState:
    pos: jax.Array  # (2,) float32
    vel: jax.Array  # (2,) float32
    target: jax.Array  # (2,) float32


def _segment_distance(start: jax.Array, end: jax.Array, point: jax.Array) -> jax.Array:
    """Closest approach to `point` along the step from `start` to `end`.

    Success is judged on the whole step, not its end point, so a fast point cannot jump over a
    target smaller than one step's travel.
    """
    seg = end - start
    t = jnp.clip(jnp.dot(point - start, seg) / jnp.maximum(jnp.dot(seg, seg), 1e-12), 0.0, 1.0)
    return jnp.linalg.norm(start + t * seg - point)


class PointReach(Env):
    info_keys = ("success",)

    def __init__(self, max_episode_steps: int = 100, default_distance: float = 1.0, default_radius: float = 0.1):
        self.name = "point_reach"
        self.max_episode_steps = int(max_episode_steps)
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, (6,), np.float32)
        self.action_space = gymnasium.spaces.Box(-1.0, 1.0, (2,), np.float32)  # force along x, y
        self.task_spec = {
            "distance": TaskField(default_distance, 0.05, 5.0, doc="initial distance from the point to the target"),
            "radius": TaskField(default_radius, 0.01, 2.0, doc="how close the point must come to the target to succeed"),
        }
        # Let the field ranges reject bad defaults with their usual message.
        self.validate_task({"distance": default_distance, "radius": default_radius})

    def _obs(self, p: PointState) -> jax.Array:
        return jnp.concatenate([p.pos, p.vel, p.target - p.pos]).astype(jnp.float32)

    def reset(self, key, task) -> EnvState:
        angle = jax.random.uniform(key, (), jnp.float32, 0.0, 2.0 * jnp.pi)
        direction = jnp.stack([jnp.cos(angle), jnp.sin(angle)])
        zero = jnp.zeros((2,), jnp.float32)
        physics = PointState(pos=zero, vel=zero, target=task["distance"] * direction)
        return EnvState.create(
            obs=self._obs(physics),
            task=task,
            physics=physics,
            info={"success": jnp.zeros((), jnp.float32)},
        )

    def step(self, state, action, key) -> EnvState:
        p: PointState = state.physics
        force = FORCE * jnp.clip(jnp.asarray(action, jnp.float32), -1.0, 1.0)
        vel = p.vel * (1.0 - DAMPING * DT) + force * DT
        pos = p.pos + vel * DT
        progress = jnp.linalg.norm(p.target - p.pos) - jnp.linalg.norm(p.target - pos)
        arrived = _segment_distance(p.pos, pos, p.target) <= state.task["radius"]
        physics = p.replace(pos=pos, vel=vel)
        return state.replace(
            obs=self._obs(physics),
            reward=(progress + SUCCESS_BONUS * arrived).astype(jnp.float32),
            terminated=arrived,
            physics=physics,
            info={"success": arrived.astype(jnp.float32)},
        )
