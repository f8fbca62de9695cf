"""Threefry-2x32 on the CPU as straight-line code instead of a loop.

Every `jax.random` draw and split hashes with Threefry-2x32 (20 rounds in 5 groups of 4). On the
CPU, JAX lowers the hash as a loop over the 5 groups, to keep programs small; XLA then copies the
loop's key tuple at every iteration, and each draw becomes a while loop of its own. A training
program draws in many places (the step keys of an unroll, actions, resets, shuffles,
evaluation), so PPO's loop held 22 while loops and 591 fusions, about a third of them Threefry's.
Lowered as the straight-line 20 rounds, as JAX already does on GPUs, the same program has 5 while
loops and 447 fusions, compiles faster and runs faster (`python benchmarks/ppo_ablation.py`;
figures in docs/benchmarks.md).

The hash is the same function, bit for bit (`tests/test_threefry.py` checks it against
Random123's known answers, and every kind of draw against JAX's own lowering in a second
process), so every key and every draw is unchanged.
`install()` registers the lowering for the CPU once per process; `TrainLoop` calls it, and
`AJAX_TUNE_ROLLED_THREEFRY=1` leaves JAX's own in place.
"""

from __future__ import annotations

import os

import numpy as np

ROLLED_ENV = "AJAX_TUNE_ROLLED_THREEFRY"
ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))
PARITY = 0x1BD11BDA

_installed = False


def _rotate_left(x, d: int):
    return (x << np.uint32(d)) | (x >> np.uint32(32 - d))


def threefry2x32(key1, key2, x1, x2):
    """Threefry-2x32 with 20 rounds on uint32 arrays of one shape, written out in full. Works on
    jax and NumPy arrays alike (uint32 arithmetic wraps)."""
    ks = (key1, key2, key1 ^ key2 ^ np.uint32(PARITY))
    x1, x2 = x1 + ks[0], x2 + ks[1]
    for group in range(5):
        for r in ROTATIONS[group % 2]:
            x1 = x1 + x2
            x2 = _rotate_left(x2, r) ^ x1
        x1 = x1 + ks[(group + 1) % 3]
        x2 = x2 + ks[(group + 2) % 3] + np.uint32(group + 1)
    return x1, x2


def install() -> bool:
    """Lower Threefry unrolled on the CPU from now on, in this process; returns whether it is
    in place. Programs compiled before keep theirs (the hash is the same either way)."""
    global _installed
    if _installed:
        return True
    if os.environ.get(ROLLED_ENV, "") not in ("", "0"):
        return False
    from jax.extend.random import threefry2x32_p
    from jax.interpreters import mlir

    mlir.register_lowering(
        threefry2x32_p, mlir.lower_fun(lambda *a: list(threefry2x32(*a)), multiple_results=True), platform="cpu"
    )
    _installed = True
    return True
