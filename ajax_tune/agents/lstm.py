"""An LSTM over a whole unroll, with its backward pass written out.

Differentiating a `lax.scan` of the cell makes JAX accumulate the recurrent kernel's gradient
inside the reverse loop: one `[H, B] x [B, 4H]` product per step, added to a carried `[H, 4H]`
sum. Here the reverse loop only carries the state's gradient back (one `[B, 4H] x [4H, H]`
product per step) and records each step's gate gradients; the kernel's gradient is then one
product over the whole unroll, `[H, T*B] x [T*B, 4H]`, of rows (`networks.weight_grad`; as an
einsum over the two axes `t, b` XLA's CPU backend computes it more slowly). The input side
`x W_in` is computed for the whole unroll before the loop, and its gradients after it, both as
`networks.dense` computes them. Every step is `cell`, the one the trunk acts and replays with
(flax's `OptimizedLSTMCell` layout: gates i, f, g, o; the bias on the carry side); the gradients
are JAX's to float32 rounding (`tests/test_recurrent_ppo.py`), only the order of the sums differs.

A step where `reset` holds starts from zeros, the trunk's fresh carry.

The forward pass may also be one already computed with the same weights: the gate activations
and carries the rollout recorded while acting (`recorded`). The update's first gradient step,
whose parameters are the rollout's, reads them instead of running the cell again; the backward
pass is the same.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ajax_tune.agents.networks import dense, dense_grads, weight_grad


def _fresh(reset, x):
    return jnp.where(reset[..., None], 0.0, x)


def cell(kernel, bias, carry, encoded):
    """One step of the cell for a batch: the next `(c, h)` carry, and the gate activations and
    tanh of the new cell state, which the backward pass reads (unused elsewhere, so compiled away)."""
    c, h = carry
    gates = jnp.dot(h, kernel) + bias + encoded
    g_i, g_f, g_g, g_o = jnp.split(gates, 4, axis=-1)
    i, f, g, o = jax.nn.sigmoid(g_i), jax.nn.sigmoid(g_f), jnp.tanh(g_g), jax.nn.sigmoid(g_o)
    c = f * c + i * g
    tanh_c = jnp.tanh(c)
    return (c, o * tanh_c), (i, f, g, o, tanh_c)


def _run(w_in, kernel, bias, start, x, reset):
    """Every step's output and what the backward pass reads: the carry it began from (after any
    reset), its gate activations and tanh of its cell state."""
    encoded = dense(x, w_in)

    def step(carry, xs):
        encoded, r = xs
        carry = (_fresh(r, carry[0]), _fresh(r, carry[1]))
        new, activations = cell(kernel, bias, carry, encoded)
        return new, (new[1], (*carry, *activations))

    _, (outputs, saved) = jax.lax.scan(step, start, (encoded, reset))
    return outputs, saved


def _replayed(start, reset, gates, after):
    """`_run`'s outputs from a record of it: the gate activations `[T, B, 4H]` and the carries
    each step left (before any reset), from which the carries each began from follow."""
    c_after, h_after = after
    before = [_fresh(reset, jnp.concatenate([s[None], x[:-1]])) for s, x in zip(start, after)]
    return h_after, (*before, *jnp.split(gates, 4, axis=-1), jnp.tanh(c_after))


def _forward(w_in, kernel, bias, start, x, reset, recorded):
    if recorded is None:
        return _run(w_in, kernel, bias, start, x, reset)
    use, gates, after = recorded
    return jax.lax.cond(use, lambda: _replayed(start, reset, gates, after), lambda: _run(w_in, kernel, bias, start, x, reset))


@jax.custom_vjp
def lstm_features(w_in, kernel, bias, start, x, reset, recorded=None):
    """The cell's outputs `[T, B, H]` over an unroll, from the `(c, h)` carries `start` ([B, H]
    each), the inputs `x` [T, B, I] with the input kernel `w_in` [I, 4H], the recurrent `kernel`
    [H, 4H] and `bias` [4H], and where the carry restarts, `reset` [T, B]. `recorded`: None, or
    `(use, gates, after)`: where `use` holds, the gate activations `[T, B, 4H]` and the carries
    `(c, h)` each step left, recorded under these weights, stand for the forward pass."""
    return _forward(w_in, kernel, bias, start, x, reset, recorded)[0]


def _features_fwd(w_in, kernel, bias, start, x, reset, recorded):
    outputs, saved = _forward(w_in, kernel, bias, start, x, reset, recorded)
    return outputs, (w_in, kernel, x, reset, saved)


def _features_bwd(residuals, d_outputs):
    w_in, kernel, x, reset, saved = residuals
    kernel_t = kernel.T

    def step(d_carry, xs):
        d_out, r, (c, _, i, f, g, o, tanh_c) = xs
        d_c_next, d_h_next = d_carry
        d_h = d_out + d_h_next
        d_c = d_c_next + d_h * o * (1.0 - tanh_c**2)
        d_gates = jnp.concatenate(
            [d_c * g * i * (1.0 - i), d_c * c * f * (1.0 - f), d_c * i * (1.0 - g**2), d_h * tanh_c * o * (1.0 - o)],
            axis=-1,
        )
        d_c_prev, d_h_prev = _fresh(r, d_c * f), _fresh(r, jnp.dot(d_gates, kernel_t))
        return (d_c_prev, d_h_prev), d_gates

    zeros = jnp.zeros_like(d_outputs[0])
    d_start, d_gates = jax.lax.scan(step, (zeros, zeros), (d_outputs, reset, saved), reverse=True)
    d_rows = d_gates.reshape(-1, kernel.shape[1])
    d_kernel = weight_grad(saved[1].reshape(-1, kernel.shape[0]), d_rows)
    d_x, d_w_in = dense_grads(x, w_in, d_gates)
    return d_w_in, d_kernel, jnp.sum(d_rows, axis=0), d_start, d_x, None, None


lstm_features.defvjp(_features_fwd, _features_bwd)
