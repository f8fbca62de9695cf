"""Threefry-2x32 on the CPU as straight-line code instead of a loop.

Every `jax.random` draw and split hashes with Threefry-2x32 (20 rounds in 5 groups of 4). On the
CPU, JAX lowers the hash as a loop over the 5 groups, to keep programs small; XLA then copies the
loop's key tuple at every iteration, and each draw becomes a while loop of its own. A training
program draws in many places (the step keys of an unroll, actions, resets, shuffles,
evaluation), so PPO's loop held 22 while loops and 591 fusions, about a third of them Threefry's.
Lowered as the straight-line 20 rounds, as JAX already does on GPUs, the same program has 5 while
loops and 447 fusions, compiles faster and runs faster (`python benchmarks/ppo_ablation.py`;
figures in docs/benchmarks.md).

The lowering emits the 20 rounds' StableHLO ops directly (the same ops tracing
`threefry2x32` gives, one constant per value) instead of tracing the function at every call site:
a trial's programs trace and lower 0.13-0.17 s sooner (`python benchmarks/lowering.py`).

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


class _Emitted:
    """A uint32 array of the program being lowered, with the operators `threefry2x32` uses, each
    emitting one StableHLO op. Shapes broadcast as NumPy's do, only where two operands differ
    (the key schedule stays on the keys' shape); NumPy scalars become constants."""

    __slots__ = ("value", "shape", "site")

    def __init__(self, value, shape: tuple, site: _Site):
        self.value, self.shape, self.site = value, tuple(shape), site

    def _binary(self, op, other):
        if not isinstance(other, _Emitted):
            other = self.site.constant(other)
        shape = np.broadcast_shapes(self.shape, other.shape)
        return _Emitted(op(self.site.spread(self, shape), self.site.spread(other, shape)), shape, self.site)

    def __add__(self, other):
        return self._binary(self.site.hlo.add, other)

    def __xor__(self, other):
        return self._binary(self.site.hlo.xor, other)

    def __or__(self, other):
        return self._binary(self.site.hlo.or_, other)

    def __lshift__(self, other):
        return self._binary(self.site.hlo.shift_left, other)

    def __rshift__(self, other):  # uint32: a logical shift, as NumPy's and JAX's
        return self._binary(self.site.hlo.shift_right_logical, other)


class _Site:
    """One threefry2x32 call site being lowered: its module and its constants (one op per value)."""

    def __init__(self, ctx):
        from jax.extend.mlir.dialects import stablehlo
        from jax.interpreters import mlir

        self.hlo, self.mlir, self.ctx = stablehlo, mlir, ctx
        self.constants: dict[int, _Emitted] = {}

    def spread(self, x: _Emitted, shape: tuple):
        """`x`'s value broadcast to `shape`, trailing axes aligned."""
        if x.shape == shape:
            return x.value
        aval = self.ctx.avals_out[0].update(shape=shape)
        dims = self.mlir.dense_int_array(list(range(len(shape) - len(x.shape), len(shape))))
        return self.hlo.broadcast_in_dim(self.mlir.aval_to_ir_type(self.ctx.module_context, aval), x.value, dims)

    def constant(self, c) -> _Emitted:
        c = int(c)
        if c not in self.constants:
            self.constants[c] = _Emitted(self.mlir.ir_constant(np.uint32(c)), (), self)
        return self.constants[c]


def _lower(ctx, key1, key2, x1, x2):
    """The straight-line hash emitted op by op: `threefry2x32` run on emitted values, so the
    program is the one tracing it would give, without tracing it at every call site."""
    site = _Site(ctx)
    args = [_Emitted(v, a.shape, site) for v, a in zip((key1, key2, x1, x2), ctx.avals_in)]
    shape = ctx.avals_out[0].shape
    return [site.spread(out, shape) for out in threefry2x32(*args)]


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

    mlir.register_lowering(threefry2x32_p, _lower, platform="cpu")
    _installed = True
    return True
