"""Multi-layer perceptrons with orthogonal initialisation, as PPO implementations use them, and
the state-action critic the continuous off-policy agents share."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

ACTIVATIONS: dict[str, Callable] = {
    "tanh": nn.tanh,
    "relu": nn.relu,
    "gelu": nn.gelu,
    "swish": nn.swish,
    "elu": nn.elu,
}


class MLP(nn.Module):
    hidden_sizes: Sequence[int]
    out_size: int
    activation: str = "tanh"
    out_scale: float = 1.0

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        for size in self.hidden_sizes:
            x = act(nn.Dense(size, kernel_init=nn.initializers.orthogonal(np.sqrt(2.0)))(x))
        out = nn.Dense(self.out_size, kernel_init=nn.initializers.orthogonal(self.out_scale))(x)
        return out


class QNetwork(nn.Module):
    """Q(obs, action): an MLP over the two, concatenated."""

    hidden_sizes: Sequence[int]
    activation: str = "relu"

    @nn.compact
    def __call__(self, obs, action):
        return MLP(self.hidden_sizes, 1, self.activation)(jnp.concatenate([obs, action], axis=-1))[..., 0]


class TwinQ:
    """Two critics, their parameters stacked on a leading axis of 2, valued together (`[2, ...]`)
    so the bootstrap can take their minimum (clipped double Q-learning)."""

    def __init__(self, hidden_sizes: Sequence[int], activation: str = "relu"):
        self.net = QNetwork(hidden_sizes, activation)

    def init(self, key_1: jax.Array, key_2: jax.Array, obs: jax.Array, action: jax.Array):
        # Two separate initialisations, stacked: vmapping the orthogonal initialiser would batch
        # LAPACK's QR (see the loop's note on init).
        return jax.tree.map(lambda a, b: jnp.stack([a, b]), self.net.init(key_1, obs, action), self.net.init(key_2, obs, action))

    def __call__(self, params, obs: jax.Array, action: jax.Array) -> jax.Array:
        return jax.vmap(self.net.apply, in_axes=(0, None, None))(params, obs, action)
