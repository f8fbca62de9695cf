"""Multi-layer perceptrons with orthogonal initialisation, as PPO implementations use them."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import flax.linen as nn
import jax
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
