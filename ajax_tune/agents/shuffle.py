"""Random permutations for minibatching, by sorting single 32-bit words.

`jax.random.permutation` sorts (random key, index) pairs with a two-operand comparator. On the
CPU, XLA runs such a sort through a generic compiled comparator, several times slower than a
sort of one array of plain integers, and PPO draws one per epoch (the retired ppo_ablation study,
benchmarks/README.md: a PPO update took 1.32x as long with `jax.random.permutation`).
This draws the same kind of permutation from one-operand sorts: each round packs random high
bits above a position in the low bits of one word, sorts the words, and reads the positions
back out.

Uniformity is the argument `jax.random.permutation` rests on too: sorting by independent random
keys gives a uniform permutation wherever the keys differ. Where two keys tie, the packed
position keeps the order of the previous round, which was itself random; a pair of elements is
ordered by anything but chance only if it ties in every round. `rounds_for` takes enough rounds
that the expected number of such pairs is below 2^-20.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

#: positions need this many bits at most; beyond it too few random bits would be left per word.
MAX_INDEX_BITS = 24
#: the expected number of pairs tied in every round is below 2 ** -TIE_BITS.
TIE_BITS = 20


def rounds_for(n: int) -> int:
    """Sorting rounds for `n` elements: enough random bits that, over all rounds, the expected
    number of pairs tied in every one (n^2 / 2 pairs, each tied with probability 2^-bits per
    round) is below 2^-TIE_BITS."""
    index_bits = max(1, (n - 1).bit_length())
    random_bits = 32 - index_bits
    return max(1, math.ceil((2 * index_bits + TIE_BITS) / random_bits))


def permutation(key: jax.Array, n: int) -> jax.Array:
    """A uniformly random permutation of `range(n)` (int32), drawn with one-operand sorts.

    Falls back to `jax.random.permutation` above 2^24 elements."""
    index_bits = max(1, (n - 1).bit_length())
    if index_bits > MAX_INDEX_BITS:
        return jax.random.permutation(key, n)
    position = jnp.arange(n, dtype=jnp.uint32)
    low = jnp.uint32((1 << index_bits) - 1)
    order = jnp.arange(n, dtype=jnp.int32)
    for round_key in jax.random.split(key, rounds_for(n)):
        bits = jax.random.bits(round_key, (n,), jnp.uint32)
        words = jnp.left_shift(bits, jnp.uint32(index_bits)) | position
        order = order[(jax.lax.sort(words) & low).astype(jnp.int32)]
    return order
