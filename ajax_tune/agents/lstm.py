"""An LSTM over a whole unroll, with its backward pass written out.

Differentiating a `lax.scan` of the cell makes JAX accumulate the recurrent kernel's gradient
inside the reverse loop: one `[H, B] x [B, 4H]` product per step, added to a carried `[H, 4H]`
sum. Here the reverse loop only carries the state's gradient back (one `[B, 4H] x [4H, H]`
product per step) and records each step's gate gradients; the kernel's gradient is then one
product over the whole unroll, `[H, T*B] x [T*B, 4H]`, of rows (`networks.weight_grad`; as an
einsum over the two axes `t, b` XLA's CPU backend computes it more slowly). Every step is `cell`, the one the
trunk acts and replays with (flax's `OptimizedLSTMCell` layout: gates i, f, g, o; the bias on
the carry side); the gradients are JAX's to float32 rounding (`tests/test_recurrent_ppo.py`),
only the order of the sums differs.

`encoded` is the input side of every step, `x W_i`, computed outside the loop for the whole
unroll (`RecurrentTrunk.encode`); its gradient is the gates' gradient, handed back to that
product. A step where `reset` holds starts from zeros, the trunk's fresh carry.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ajax_tune.agents.networks import weight_grad


def _fresh(reset, x):
    return jnp.where(reset[:, None], 0.0, x)


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


def _forward(kernel, bias, start, encoded, reset):
    """Every step's output and what the backward pass reads: the carry it began from (after any
    reset), its gate activations and tanh of its cell state."""

    def step(carry, xs):
        x, r = xs
        carry = (_fresh(r, carry[0]), _fresh(r, carry[1]))
        new, activations = cell(kernel, bias, carry, x)
        return new, (new[1], (*carry, *activations))

    _, (outputs, saved) = jax.lax.scan(step, start, (encoded, reset))
    return outputs, saved


@jax.custom_vjp
def lstm_features(kernel, bias, start, encoded, reset):
    """The cell's outputs `[T, B, H]` over an unroll, from the `(c, h)` carries `start` ([B, H]
    each), the recurrent `kernel` [H, 4H] and `bias` [4H], the input side `encoded` [T, B, 4H]
    and where the carry restarts, `reset` [T, B]."""
    return _forward(kernel, bias, start, encoded, reset)[0]


def _features_fwd(kernel, bias, start, encoded, reset):
    outputs, saved = _forward(kernel, bias, start, encoded, reset)
    return outputs, (kernel, reset, saved)


def _features_bwd(residuals, d_outputs):
    kernel, reset, saved = residuals
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
    h_rows, d_rows = saved[1].reshape(-1, kernel.shape[0]), d_gates.reshape(-1, kernel.shape[1])
    return weight_grad(h_rows, d_rows), jnp.sum(d_rows, axis=0), d_start, d_gates, None


lstm_features.defvjp(_features_fwd, _features_bwd)
