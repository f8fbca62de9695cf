"""A trained policy outside JAX: numpy observations in, actions out, for one env.

`Runner.policy()` hands one out; `ajax-tune evaluate --gymnasium` runs it in a real gymnasium env.
"""

from __future__ import annotations

import jax
import numpy as np

from ajax_tune.agents.base import is_recurrent


class HostPolicy:
    """A deterministic policy for one env outside JAX: numpy observation in, action out.

    Stateful where the agent is recurrent: it keeps the carry from one call to the next, and
    `reset()` starts a new episode's carry (a feed-forward policy's `reset` does nothing)."""

    def __init__(self, agent, agent_state):
        self.recurrent = is_recurrent(agent)
        key = jax.random.PRNGKey(0)
        if self.recurrent:

            def act(obs, carry):  # one env: a batch of one
                action, _, carry = agent.act(agent_state, obs[None], key, deterministic=True, carry=carry)
                return action[0], carry

            self._act = jax.jit(act)
            self._init_carry = jax.jit(lambda: agent.init_carry(1))
        else:
            self._act = jax.jit(lambda obs: agent.act(agent_state, obs, key, deterministic=True)[0])
        self.carry = None
        self.reset()

    def reset(self) -> None:
        if self.recurrent:
            self.carry = self._init_carry()

    def __call__(self, obs) -> np.ndarray:
        obs = np.asarray(obs, np.float32)
        if not self.recurrent:
            return np.asarray(self._act(obs))
        action, self.carry = self._act(obs, self.carry)
        return np.asarray(action)


def episode_statistics(returns, lengths, successes=None) -> dict:
    """What `ajax-tune evaluate` reports of a set of episodes: returns `[seeds, episodes]` (or
    `[episodes]`), their lengths and, where the env reports it, success."""
    returns = np.asarray(returns, np.float64)
    per_seed = returns.reshape(-1, returns.shape[-1])
    stats = {
        "episodes": int(returns.shape[-1]),
        **({"seeds": int(per_seed.shape[0])} if returns.ndim > 1 else {}),
        "return_mean": float(returns.mean()),
        "return_std": float(returns.std()),
        "return_min": float(returns.min()),
        "return_max": float(returns.max()),
        **({"return_mean_per_seed": [float(x) for x in per_seed.mean(axis=1)]} if returns.ndim > 1 else {}),
        "length_mean": float(np.mean(lengths)),
    }
    if successes is not None:
        stats["success_rate"] = float(np.mean(successes))
    return stats
