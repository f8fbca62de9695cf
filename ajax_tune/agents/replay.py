"""A uniform replay buffer that lives in the agent's state.

Flashbax's item buffer is a fixed-capacity circular array: inserting writes over the oldest
items, sampling draws uniformly from the filled part. Its state is a plain pytree, so it is
carried (donated) through the jitted loop, vmapped over seeds, checkpointed with the rest of
the state and handed to another trial by a PBT exploit like the parameters.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


class ReplayBuffer:
    """`capacity` transitions shaped like `example` (one unbatched transition: arrays or
    `jax.ShapeDtypeStruct`s; only shapes and dtypes are read, so building a buffer computes nothing
    and starts no JAX backend)."""

    def __init__(self, capacity: int, batch_size: int, example: Any):
        import flashbax

        self.capacity, self.batch_size = int(capacity), int(batch_size)
        self.example = jax.tree.map(lambda x: jax.ShapeDtypeStruct(np.shape(x), np.dtype(x.dtype)), example)
        self._buffer = flashbax.make_item_buffer(
            max_length=self.capacity, min_length=1, sample_batch_size=self.batch_size, add_sequences=True, add_batches=False
        )

    def init(self):
        return self._buffer.init(jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), self.example))

    def add(self, state, transitions):
        """Insert `[T, N, ...]` transitions (all of them: filter before, not after)."""
        flat = jax.tree.map(lambda x: x.reshape(-1, *x.shape[2:]), transitions)
        return self._buffer.add(state, flat)

    def sample(self, state, key):
        """`batch_size` transitions drawn uniformly, with replacement, from what is stored."""
        return self._buffer.sample(state, key).experience

    def size(self, state) -> jax.Array:
        return jnp.where(state.is_full, self.capacity, state.current_index)
