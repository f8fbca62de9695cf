"""A level algorithm's part of each update, between the program and the algorithm's protocol
(`ajax_tune.ued.algorithm`).

Before the unroll, the algorithm chooses every env's level and every env starts an episode on it
(a finished episode replays its level until the next choice). After it, the agent learns from the
unroll only where the decision says so (a rollout it only scores reports NaN losses and computes
no update where the lane's branches stay branches), and the algorithm observes what the rollout
showed. Its rows go into the update's row with `ued/agent_updates`, 1 where the agent learned.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp

from ajax_tune.agents.base import is_recurrent, reset_carry
from ajax_tune.agents.hparams import init_hparams
from ajax_tune.envs.wrappers import VecEnv
from ajax_tune.ued import Context, Decision, LevelAlgorithm, LevelState, Rollout

#: Summed over a call rather than averaged: how many of its updates the agent learned from.
AGENT_UPDATES = "ued/agent_updates"


class LevelUpdate:
    def __init__(self, algorithm: LevelAlgorithm, agent, venv: VecEnv):
        self.algorithm, self.agent, self.venv = algorithm, agent, venv
        self.needs_values = algorithm.needs(algorithm.settings).values
        self.recurrent = is_recurrent(agent)

    def init(self, level, key) -> LevelState:
        """The algorithm's fresh state in a lane, with its traced settings as the config has them."""
        return LevelState(
            own=self.algorithm.init(level, key), hp=init_hparams(self.algorithm.settings), scoring_steps=jnp.zeros((), jnp.int32)
        )

    def start(self, state: LevelState, agent_state, carry, key, iteration) -> tuple[LevelState, Decision, Any, Any, Any]:
        """Every env on the level the algorithm chooses for it, a recurrent agent's carries fresh.
        Returns the state, the decision, the envs, the carries and which of them are fresh."""
        k_choose, k_reset = jax.random.split(key)
        own, decision = self.algorithm.choose(
            state.own, state.hp, k_choose, Context(agent_state=agent_state, iteration=iteration)
        )
        state = state.replace(own=own, scoring_steps=state.scoring_steps + decision.scoring_steps)
        env_state = self.venv.reset(k_reset, decision.levels)
        fresh = None
        if self.recurrent:
            fresh = jnp.ones((self.venv.num_envs,), jnp.bool_)
            carry = reset_carry(self.agent, carry, fresh)
        return state, decision, env_state, carry, fresh

    def learn(
        self, state: LevelState, decision: Decision, agent_state, transitions, steps: dict, update: Callable, carries: dict, clock
    ) -> tuple[LevelState, Any, dict, jax.Array, dict]:
        """The agent's update where the decision says to learn, then the algorithm's observation
        of the rollout. `update(**kwargs)` is the agent's update of this unroll; `steps` the
        unroll's per-step `done`, `reward`, `success` and `valid`. Returns the state, the agent's
        state, its metrics with the algorithm's rows, its learning signal and its health."""
        values = advantages = None
        reuse = {}
        if self.needs_values:  # before learning: what the rollout's levels were worth to the agent that played them
            values, advantages = self.agent.value_estimates(agent_state, transitions, clock, **carries)
            if getattr(self.agent, "reuses_estimates", False):  # the update's own, so it need not compute them again
                reuse = {"estimates": (values, advantages)}
        learned = lambda: update(**reuse)  # noqa: E731
        skipped = jax.tree.map(lambda x: jnp.full(x.shape, jnp.nan, x.dtype), jax.eval_shape(learned)[1:])
        agent_state, metrics, signal = jax.lax.cond(decision.learn, learned, lambda: (agent_state, *skipped))
        # a rollout the agent only scored reports NaN losses, and its health reads what was computed: nothing
        health = self.agent.health(agent_state, jax.tree.map(lambda m: jnp.where(decision.learn, m, 0), metrics))
        rollout = Rollout(**steps, values=values, advantages=advantages)
        own = self.algorithm.observe(state.own, state.hp, decision, rollout)
        rows = {**self.algorithm.rows(own, decision), AGENT_UPDATES: decision.learn.astype(jnp.float32)}
        return state.replace(own=own), agent_state, {**metrics, **rows}, signal, health
