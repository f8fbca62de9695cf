"""Domain randomisation: every rollout plays fresh levels from the generator, and the agent
learns from every one. The baseline every other level algorithm is measured against."""

from __future__ import annotations

import jax.numpy as jnp

from ajax_tune.ued.algorithm import Decision, LevelAlgorithm


class DomainRandomisation(LevelAlgorithm):
    """Domain randomisation: fresh levels from the generator every rollout; the agent learns from
    every one."""

    def init(self, level, key):
        return ()  # nothing to remember

    def choose(self, state, hp, key, context):
        return state, Decision(levels=self.fresh_levels(key), learn=jnp.bool_(True))
