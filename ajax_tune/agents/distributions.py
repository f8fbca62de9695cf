"""Action distributions. Continuous actions use brax's tanh-squashed normal; discrete actions
use a categorical with the same interface (sample before post-processing, log-prob of that
sample, entropy, mode after post-processing), so PPO treats both alike."""

from __future__ import annotations

import gymnasium
import jax
import jax.numpy as jnp
from brax.training.distribution import NormalTanhDistribution


class CategoricalDistribution:
    def __init__(self, num_actions: int):
        self.param_size = num_actions

    def sample_no_postprocessing(self, logits, seed):
        return jax.random.categorical(seed, logits)

    def postprocess(self, action):
        return action

    def mode(self, logits):
        return jnp.argmax(logits, axis=-1)

    def log_prob(self, logits, action):
        logp = jax.nn.log_softmax(logits)
        return jnp.take_along_axis(logp, action[..., None].astype(jnp.int32), axis=-1)[..., 0]

    def entropy(self, logits, seed=None):
        logp = jax.nn.log_softmax(logits)
        return -jnp.sum(jnp.exp(logp) * logp, axis=-1)


def for_space(space: gymnasium.spaces.Space):
    if isinstance(space, gymnasium.spaces.Discrete):
        return CategoricalDistribution(int(space.n))
    if isinstance(space, gymnasium.spaces.Box) and len(space.shape) == 1:
        return NormalTanhDistribution(event_size=int(space.shape[0]))
    raise ValueError(f"unsupported action space {space}: expected Discrete or a 1-D Box")
