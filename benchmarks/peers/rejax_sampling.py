"""One minibatch draw from a replay buffer, timed two ways in Rejax's interpreter: Rejax's own
(`jax.random.choice` without replacement, weighted over the whole capacity) and a uniform draw
with replacement (what flashbax's item buffer does). Settings: {"shapes": [{"capacity", "batch"}],
"draws": N}."""

from __future__ import annotations

import statistics
import time

import protocol

s = protocol.settings()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402


def without_replacement(key, capacity, batch):
    p = (jnp.arange(capacity) < capacity) / capacity  # a full buffer, as in rejax.buffers.ReplayBuffer.sample
    return jax.random.choice(key, capacity, (batch,), replace=False, p=p)


def uniform(key, capacity, batch):
    return jax.random.randint(key, (batch,), 0, capacity)


def time_draw(fn, capacity, batch, draws):
    draw = jax.jit(fn, static_argnums=(1, 2))
    key = jax.random.PRNGKey(0)
    draw(key, capacity, batch).block_until_ready()
    times = []
    for i in range(draws):
        k = jax.random.fold_in(key, i)
        start = time.perf_counter()
        draw(k, capacity, batch).block_until_ready()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


rows = []
for shape in s["shapes"]:
    c, b = shape["capacity"], shape["batch"]
    rows.append(
        {
            "capacity": c,
            "batch": b,
            "without_replacement_ms": time_draw(without_replacement, c, b, s["draws"]),
            "uniform_ms": time_draw(uniform, c, b, s["draws"]),
        }
    )
protocol.emit(
    {
        "side": "rejax_sampling",
        "draws": rows,
        "device": str(jax.devices()[0]),
        "versions": protocol.versions("rejax", "jax", "jaxlib"),
    }
)
