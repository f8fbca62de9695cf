"""Prioritised level replay's memory as a pytree and pure functions over it, so that one jitted
loop (the program's, or a user's own) keeps a buffer of levels without any Python-side state.

The rules are JaxUED's `LevelSampler`'s (Jiang et al. 2021's), and on the same buffer, scores,
timestamps and keys these functions decide exactly as it does (`tests/test_ued_parity.py`):

- Replay weight: `(1 - staleness_coef) * by_rank + staleness_coef * by_staleness`. A filled slot
  of rank r (1 for the best score; ties and -inf scores ranked by slot order) weighs
  `(1/r) ** (1/temperature)`, normalised; by staleness, a slot weighs `clock - last_seen`,
  normalised (uniform over the filled slots while every one was seen just now).
- Replay draws one slot after another, each from the weights as the draw before it left them:
  a drawn slot is seen now (`clock` + 1, its `last_seen` = the new clock).
- A new level goes to the next free slot, else to the slot of least replay weight, and only when
  its score is higher than that slot's (so a level whose rollout completed no episode, scored
  -inf, never enters). Every level offered advances the clock, written or not.
- With `duplicate_check`, a level equal to one in the buffer (every leaf equal) updates that
  slot's score and extras, whatever the score, and is seen now.

Where ours differs: an empty buffer weighs every slot 0 (JaxUED's weights are NaN there: there is
nothing to draw either way), and `update` skips slot -1 (JaxUED's would write the last slot), so
`insert`'s "not written" can be handed on as it is. The settings are arguments, not attributes,
so they may be traced: PBT changes them between calls without recompiling.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from ajax_tune.errors import ConfigError


@struct.dataclass
class LevelBuffer:
    levels: Any  # the level pytree, leading axis [capacity]
    scores: jax.Array  # float32 [capacity], -inf where empty
    extra: dict  # {name: [capacity, ...]}: what the caller keeps beside each level (MaxMC's "max_return")
    last_seen: jax.Array  # int32 [capacity]: `clock` when each slot was last written or replayed
    size: jax.Array  # int32: slots filled (always the first `size`)
    clock: jax.Array  # int32: levels replayed or offered so far


def empty(level: Any, capacity: int, extra: dict | None = None) -> LevelBuffer:
    """A buffer of `capacity` slots shaped as `level` (one level, no batch axis); `extra` names
    what each slot keeps beside its level, with a placeholder value of its shape and dtype."""

    def per_slot(x):
        x = jnp.asarray(x)
        return jnp.broadcast_to(jnp.asarray(x, x.dtype), (capacity, *x.shape))  # strongly typed, for scans

    return LevelBuffer(
        levels=jax.tree.map(per_slot, level),
        scores=jnp.full((capacity,), -jnp.inf, jnp.float32),
        extra=jax.tree.map(per_slot, dict(extra or {})),
        last_seen=jnp.zeros((capacity,), jnp.int32),
        size=jnp.zeros((), jnp.int32),
        clock=jnp.zeros((), jnp.int32),
    )


def capacity(buffer: LevelBuffer) -> int:
    return buffer.scores.shape[0]


def _filled(buffer: LevelBuffer) -> jax.Array:
    return jnp.arange(capacity(buffer)) < buffer.size


def _by_rank(buffer: LevelBuffer, temperature) -> jax.Array:
    filled = _filled(buffer)
    order = jnp.argsort(-jnp.where(filled, buffer.scores, -jnp.inf))
    rank = jnp.zeros(capacity(buffer), jnp.int32).at[order].set(jnp.arange(1, capacity(buffer) + 1, dtype=jnp.int32))
    w = jnp.where(filled, 1.0 / rank, 0.0) ** (1.0 / temperature)
    total = w.sum()
    return w / jnp.where(total > 0, total, 1.0)


def _by_staleness(filled: jax.Array, size: jax.Array, clock: jax.Array, last_seen: jax.Array) -> jax.Array:
    stale = jnp.where(filled, clock - last_seen, 0)
    total = stale.sum()
    return jnp.where(total > 0, stale / jnp.where(total > 0, total, 1), filled / jnp.maximum(size, 1))


def weights(buffer: LevelBuffer, temperature, staleness_coef) -> jax.Array:
    """Each slot's replay probability, float32 [capacity] (0 for empty slots)."""
    by_staleness = _by_staleness(_filled(buffer), buffer.size, buffer.clock, buffer.last_seen)
    return (1 - staleness_coef) * _by_rank(buffer, temperature) + staleness_coef * by_staleness


def ready(buffer: LevelBuffer, minimum_fill) -> jax.Array:
    """Whether the buffer is full enough to replay from: filled share >= `minimum_fill`."""
    return buffer.size / capacity(buffer) >= minimum_fill


def sample(buffer: LevelBuffer, key: jax.Array, count: int, temperature, staleness_coef) -> tuple[LevelBuffer, jax.Array, Any]:
    """`count` replay draws, one after another (a slot may come up more than once); returns the
    buffer with the drawn slots seen, the slots [count] and their levels.

    Draw i uses `jax.random.split(key, count)[i]`, as JaxUED's `sample_replay_levels` does, so the
    slots are JaxUED's. Scores do not change while drawing: the rank part of the weights is
    computed once, and only staleness (a pass over the slots) between draws."""
    by_rank = _by_rank(buffer, temperature)
    filled = _filled(buffer)

    def draw(seen, k):
        last_seen, clock = seen
        w = (1 - staleness_coef) * by_rank + staleness_coef * _by_staleness(filled, buffer.size, clock, last_seen)
        slot = jax.random.choice(k, capacity(buffer), p=w)
        clock = clock + 1
        return (last_seen.at[slot].set(clock), clock), slot

    (last_seen, clock), slots = jax.lax.scan(draw, (buffer.last_seen, buffer.clock), jax.random.split(key, count))
    buffer = buffer.replace(last_seen=last_seen, clock=clock)
    return buffer, slots, jax.tree.map(lambda x: x[slots], buffer.levels)


def find(buffer: LevelBuffer, level: Any) -> jax.Array:
    """The first filled slot holding exactly `level` (every leaf equal), or -1."""
    same = _filled(buffer)
    for stored, new in zip(jax.tree.leaves(buffer.levels), jax.tree.leaves(level), strict=True):
        same = same & jnp.all((stored == new).reshape(capacity(buffer), -1), axis=1)
    return jnp.where(same.any(), jnp.argmax(same), -1)


def _extra(buffer: LevelBuffer, extra: dict | None, caller: str, batch: int) -> dict | None:
    """`extra` checked against what the buffer keeps, as arrays of a batch."""
    if extra is None:
        return None
    if set(extra) != set(buffer.extra):
        raise ConfigError(
            f"ued.buffer.{caller}: extra names {sorted(extra)}, the buffer keeps {sorted(buffer.extra)} beside each level"
        )
    out = {}
    for name, values in extra.items():
        values = jnp.asarray(values, buffer.extra[name].dtype)
        if values.shape != (batch, *buffer.extra[name].shape[1:]):
            raise ConfigError(
                f"ued.buffer.{caller}: extra[{name!r}] has shape {values.shape}, expected "
                f"{(batch, *buffer.extra[name].shape[1:])} (one per level)"
            )
        out[name] = values
    return out


def insert(
    buffer: LevelBuffer,
    levels: Any,
    scores: jax.Array,
    *,
    temperature,
    staleness_coef,
    duplicate_check: bool = True,
    extra: dict | None = None,
) -> tuple[LevelBuffer, jax.Array]:
    """Offer a batch of levels (leading axis: the batch) with their scores, one after another;
    returns the buffer and the slot each went to ([batch], -1 where it was not written).
    `extra`: {name: [batch, ...]}, required when the buffer keeps extras."""
    batch = jnp.shape(scores)[0]
    extra = _extra(buffer, extra, "insert", batch)
    if extra is None and buffer.extra:
        raise ConfigError(f"ued.buffer.insert: the buffer keeps {sorted(buffer.extra)} beside each level; give extra")
    cap = capacity(buffer)

    def offer(buf: LevelBuffer, item):
        level, score, more = item
        clock = buf.clock + 1
        free = jnp.where(buf.size < cap, buf.size, jnp.argmin(weights(buf, temperature, staleness_coef)))
        beats = buf.scores[free] < score
        if duplicate_check:
            found = find(buf, level)
            slot, write, grows = jnp.where(found >= 0, found, free), (found >= 0) | beats, (found < 0) & beats
        else:
            slot, write, grows = free, beats, beats
        at = jnp.where(write, slot, cap)  # out of range: dropped

        def put(whole, x):
            return whole.at[at].set(x, mode="drop")

        buf = buf.replace(
            levels=jax.tree.map(put, buf.levels, level),
            scores=put(buf.scores, score),
            extra=jax.tree.map(put, buf.extra, more),
            last_seen=put(buf.last_seen, clock),
            size=jnp.minimum(buf.size + grows.astype(jnp.int32), cap),
            clock=clock,
        )
        return buf, jnp.where(write, slot, -1).astype(jnp.int32)

    scores = jnp.asarray(scores, jnp.float32)
    return jax.lax.scan(offer, buffer, (levels, scores, extra or {}))


def update(buffer: LevelBuffer, slots: jax.Array, scores: jax.Array, extra: dict | None = None) -> LevelBuffer:
    """New scores (and extras, where given) for `slots` ([n]; -1 skipped; where a slot repeats,
    its last entry counts), as after replaying their levels. The score is written whatever it is:
    a replay that completed no episode scores -inf and its level then ranks last, first to be
    replaced, as JaxUED's `update_batch` does. Staleness is `sample`'s business: nothing here
    changes `last_seen` or the clock."""
    n, cap = jnp.shape(slots)[0], capacity(buffer)
    extra = _extra(buffer, extra, "update", n)
    order = jnp.arange(n)
    repeated_later = jnp.any((slots[:, None] == slots[None, :]) & (order[:, None] < order[None, :]), axis=1)
    at = jnp.where((slots >= 0) & (slots < cap) & ~repeated_later, slots, cap)

    def put(whole, x):
        return whole.at[at].set(x, mode="drop")

    return buffer.replace(
        scores=put(buffer.scores, jnp.asarray(scores, jnp.float32)),
        extra=buffer.extra if extra is None else jax.tree.map(put, buffer.extra, extra),
    )
