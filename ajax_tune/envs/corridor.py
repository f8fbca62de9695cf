"""Corridor: the classic curriculum toy.

The agent starts at cell 0 of a corridor and must reach its far end, cell `length`, within a
fixed time limit; arriving is worth 1. Random exploration reaches the end of a corridor of
length L in about L**2 steps, so once L**2 is well beyond the time limit the goal is practically
never found by chance.

A policy-gradient agent is not a random walker, though: with no reward at all, its policy drifts
and may settle on "always right" by luck, which solves any corridor. The task's `exit_reward`
makes long corridors deceptive instead: when positive, the door behind the start is open, and
stepping out through it ends the episode with that small reward. Direct training on a long
corridor then learns to leave through the door and never finds the far end; a curriculum that
starts with short corridors finds the far end first, learns to walk right, and keeps it as the
corridor grows.
"""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune.envs.base import Env, EnvState, TaskField, check_lengths


class Corridor(Env):
    info_keys = ("success",)

    def __init__(self, max_length: int = 64, max_episode_steps: int = 80, default_length: int = 8):
        self.name = "corridor"
        check_lengths(self.name, max_length, default_length, max_episode_steps)
        self.max_length = int(max_length)
        self.max_level_edits = self.max_length  # mutate_level's edits past it are no-ops
        self.max_episode_steps = int(max_episode_steps)
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (2,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)  # 0: left, 1: right
        self.task_spec = {
            "length": TaskField(default_length, 1, max_length, np.int32, doc="cells between the start and the goal"),
            "exit_reward": TaskField(0.0, 0.0, 1.0, doc="reward for leaving through the start; 0 keeps the door closed (a wall)"),
        }

    def generate_level(self, key) -> dict:
        """A corridor of uniformly random length, its door closed (a level for `ued`)."""
        length = jax.random.randint(key, (), 1, self.max_length + 1, jnp.int32)
        return {"length": length, "exit_reward": jnp.zeros((), jnp.float32)}

    def mutate_level(self, key, level: dict, num_edits) -> dict:
        """`num_edits` steps of one cell each, longer or shorter at random (ACCEL's edits)."""
        steps = jax.random.choice(key, jnp.array([-1, 1], jnp.int32), (self.max_length,))
        delta = jnp.sum(jnp.where(jnp.arange(self.max_length) < num_edits, steps, 0))
        return {**level, "length": jnp.clip(level["length"] + delta, 1, self.max_length).astype(jnp.int32)}

    def _obs(self, position, length):
        return jnp.stack([position, length]).astype(jnp.float32) / self.max_length

    def reset(self, key, task) -> EnvState:
        position = jnp.zeros((), jnp.int32)
        return EnvState.create(
            obs=self._obs(position, task["length"]),
            task=task,
            physics=position,
            info={"success": jnp.zeros((), jnp.float32)},
        )

    def step(self, state, action, key) -> EnvState:
        length, exit_reward = state.task["length"], state.task["exit_reward"]
        move = jnp.where(action == 1, 1, -1).astype(jnp.int32)
        exited = (state.physics + move < 0) & (exit_reward > 0)
        position = jnp.clip(state.physics + move, 0, length)
        arrived = position >= length
        return state.replace(
            obs=self._obs(position, length),
            reward=arrived.astype(jnp.float32) + exited * exit_reward,
            terminated=arrived | exited,
            physics=position,
            info={"success": arrived.astype(jnp.float32)},
        )
