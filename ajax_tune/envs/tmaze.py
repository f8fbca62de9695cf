"""T-maze: a memory test whose difficulty is data.

The agent starts at the foot of a corridor that ends in a junction with two arms. On the first
step only, the observation shows a cue, which arm pays; after that the corridor looks the same
everywhere until the junction, where a flag shows. Taking the arm the cue named is worth 1 (a
success), the other arm 0; either ends the episode. A policy without memory can do no better
than a coin at the junction (success 0.5), so the success rate above 0.5 measures memory.

The task is the corridor's `length`: the steps the cue must be kept before it is used. Longer
corridors ask for longer memory, so a curriculum (`ThresholdCurriculum` over `length`) can grow
it as the agent learns. Observations: `[cue_up, cue_down, at_junction]`; actions: 0 forward,
1 back, 2 up, 3 down (up and down only do something at the junction).
"""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune.envs.base import Env, EnvState, TaskField, check_lengths

FORWARD, BACK, UP, DOWN = 0, 1, 2, 3


class TMaze(Env):
    info_keys = ("success",)

    def __init__(self, max_length: int = 64, max_episode_steps: int | None = None, default_length: int = 4):
        self.name = "tmaze"
        check_lengths(self.name, max_length, default_length, max_episode_steps)
        self.max_length = int(max_length)
        # Time enough to walk the longest corridor straight and turn, with room for a detour.
        self.max_episode_steps = int(max_episode_steps or 2 * max_length + 8)
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (3,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(4)
        self.task_spec = {
            "length": TaskField(
                default_length,
                1,
                max_length,
                np.int32,
                doc="steps from the cue to the junction: how long the cue must be remembered",
            ),
        }

    def _obs(self, position, length, cue, first):
        at_junction = (position >= length).astype(jnp.float32)
        shown = first.astype(jnp.float32)
        return jnp.stack([shown * (cue == 0), shown * (cue == 1), at_junction]).astype(jnp.float32)

    def reset(self, key, task) -> EnvState:
        cue = jax.random.bernoulli(key).astype(jnp.int32)  # 0: the up arm pays, 1: the down arm
        position = jnp.zeros((), jnp.int32)
        return EnvState.create(
            obs=self._obs(position, task["length"], cue, jnp.ones((), jnp.bool_)),
            task=task,
            physics={"position": position, "cue": cue},
            info={"success": jnp.zeros((), jnp.float32)},
        )

    def step(self, state, action, key) -> EnvState:
        length = state.task["length"]
        position, cue = state.physics["position"], state.physics["cue"]
        at_junction = position >= length
        turned = at_junction & ((action == UP) | (action == DOWN))
        correct = turned & (action - UP == cue)
        move = jnp.where(action == FORWARD, 1, jnp.where(action == BACK, -1, 0)).astype(jnp.int32)
        position = jnp.clip(position + move, 0, length)
        success = correct.astype(jnp.float32)
        return state.replace(
            obs=self._obs(position, length, cue, jnp.zeros((), jnp.bool_)),
            reward=success,
            terminated=turned,
            physics={"position": position, "cue": cue},
            info={"success": success},
        )
