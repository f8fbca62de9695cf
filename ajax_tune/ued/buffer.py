"""A buffer of levels with their scores and staleness: prioritised level replay's memory, as pure
functions over one lane's struct (vmapped over lanes by the program).

Replay weights mix rank prioritisation of the scores with staleness (Jiang et al. 2021): a level
of rank r weighs (1/r)^(1/temperature), a level last replayed long ago weighs by how long ago;
`staleness_coef` mixes the two. A new level takes a free slot while there is one, then the slot
of least replay weight, and only when its score beats that slot's. With `duplicate_check`, a
level already in the buffer updates its own entry instead. Levels that completed no episode in
their rollout score -inf and are never written.

This follows JaxUED's `LevelSampler` in its rules; replayed levels are drawn together from one
set of weights (JaxUED draws them one after another, updating staleness between draws).
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct


@struct.dataclass
class LevelBuffer:
    levels: Any  # the env's task pytree, leading axis [capacity]
    scores: jax.Array  # float32 [capacity], -inf where empty
    max_returns: jax.Array  # float32 [capacity]: the best episode return seen on each level (MaxMC)
    last_seen: jax.Array  # int32 [capacity]: `clock` when each level was last replayed or written
    size: jax.Array  # int32: slots filled
    clock: jax.Array  # int32: levels replayed or offered so far


def empty(level: Any, capacity: int) -> LevelBuffer:
    """A buffer of `capacity` slots shaped as `level` (one task, no env axis)."""
    return LevelBuffer(
        levels=jax.tree.map(lambda x: jnp.broadcast_to(x, (capacity, *jnp.shape(x))), level),
        scores=jnp.full((capacity,), -jnp.inf, jnp.float32),
        max_returns=jnp.full((capacity,), -jnp.inf, jnp.float32),
        last_seen=jnp.zeros((capacity,), jnp.int32),
        size=jnp.zeros((), jnp.int32),
        clock=jnp.zeros((), jnp.int32),
    )


def capacity(buffer: LevelBuffer) -> int:
    return buffer.scores.shape[0]


def weights(buffer: LevelBuffer, temperature, staleness_coef) -> jax.Array:
    """Each slot's replay probability (0 for empty slots; uniform over filled ones while every
    score is the same)."""
    filled = jnp.arange(capacity(buffer)) < buffer.size
    scores = jnp.where(filled, buffer.scores, -jnp.inf)
    rank = jnp.empty_like(buffer.last_seen).at[jnp.argsort(-scores)].set(jnp.arange(1, capacity(buffer) + 1, dtype=jnp.int32))
    by_score = jnp.where(filled, (1.0 / rank) ** (1.0 / temperature), 0.0)
    by_score = by_score / jnp.maximum(by_score.sum(), 1e-12)
    staleness = jnp.where(filled, (buffer.clock - buffer.last_seen).astype(jnp.float32), 0.0)
    total = staleness.sum()
    by_staleness = jnp.where(total > 0, staleness / jnp.maximum(total, 1e-12), filled / jnp.maximum(buffer.size, 1))
    return (1.0 - staleness_coef) * by_score + staleness_coef * by_staleness


def sample(buffer: LevelBuffer, key: jax.Array, count: int, temperature, staleness_coef) -> tuple[LevelBuffer, jax.Array, Any]:
    """`count` slots drawn by replay weight (with replacement), marked as seen now; returns the
    buffer, the slots and their levels."""
    w = weights(buffer, temperature, staleness_coef)
    slots = jax.random.choice(key, capacity(buffer), (count,), p=w)
    clock = buffer.clock + count
    buffer = buffer.replace(last_seen=buffer.last_seen.at[slots].set(clock), clock=clock)
    return buffer, slots, jax.tree.map(lambda x: x[slots], buffer.levels)


def find(buffer: LevelBuffer, level: Any) -> jax.Array:
    """The slot holding exactly `level`, or -1."""
    same = jnp.arange(capacity(buffer)) < buffer.size
    for stored, new in zip(jax.tree.leaves(buffer.levels), jax.tree.leaves(level)):
        same = same & jnp.all((stored == new).reshape(capacity(buffer), -1), axis=1)
    return jnp.where(same.any(), jnp.argmax(same), -1)


def insert(buffer: LevelBuffer, levels: Any, scores: jax.Array, max_returns: jax.Array, hp, duplicate_check: bool):
    """Offer each of a batch of levels (leading axis: the batch) with its score, in turn; returns
    the buffer and, per level, the slot it went to (-1: not written)."""

    def offer(buffer: LevelBuffer, item):
        level, score, best = item
        clock = buffer.clock + 1
        full = buffer.size >= capacity(buffer)
        least = jnp.argmin(
            jnp.where(jnp.arange(capacity(buffer)) < buffer.size, weights(buffer, hp.temperature, hp.staleness_coef), jnp.inf)
        )
        slot = jnp.where(full, least, buffer.size)
        write = jnp.isfinite(score) & (score > buffer.scores[slot])
        if duplicate_check:
            found = find(buffer, level)
            slot, write = jnp.where(found >= 0, found, slot), jnp.where(found >= 0, jnp.isfinite(score), write)
            grows = (found < 0) & write & ~full
        else:
            grows = write & ~full
        stored = jnp.where(write, slot, capacity(buffer))  # out of range: `.at[].set` drops it
        buffer = buffer.replace(
            levels=jax.tree.map(lambda whole, x: whole.at[stored].set(x, mode="drop"), buffer.levels, level),
            scores=buffer.scores.at[stored].set(score, mode="drop"),
            max_returns=buffer.max_returns.at[stored].set(best, mode="drop"),
            last_seen=buffer.last_seen.at[stored].set(clock, mode="drop"),
            size=buffer.size + grows.astype(jnp.int32),
            clock=clock,
        )
        return buffer, jnp.where(write, slot, -1)

    return jax.lax.scan(offer, buffer, (levels, scores, max_returns))


def rescore(buffer: LevelBuffer, slots: jax.Array, scores: jax.Array, max_returns: jax.Array) -> LevelBuffer:
    """New scores (and best returns, kept at their maximum) for replayed slots; a replay that
    completed no episode leaves its slot's score as it was."""
    keep = ~jnp.isfinite(scores)
    return buffer.replace(
        scores=buffer.scores.at[slots].set(jnp.where(keep, buffer.scores[slots], scores)),
        max_returns=buffer.max_returns.at[slots].max(max_returns),
    )
