"""Multi-layer perceptrons with orthogonal initialisation, as PPO implementations use them, the
state-action critic the continuous off-policy agents share, and the dense layer under them.

`Dense` is flax's `nn.Dense` (the same parameters, names and initialisation) with one change to
its gradient on the CPU. Autodiff writes a layer's weight gradient as `x^T g`, a product that
contracts the batch axis of both operands; XLA's CPU backend hands such a product to its
generic dot rather than to the YNNPACK kernels it uses for plain products, which is slower
(the retired ppo_ablation study, benchmarks/README.md: a one-seed PPO update took 1.25x as long
without it in its 2-process run, within noise with eight seeds).
On the CPU the backward pass therefore transposes `x` into its own buffer first and multiplies
plainly; on other platforms it is autodiff's product. `dense` defines its reverse-mode gradient
(a custom VJP), so forward-mode differentiation through these networks (`jax.jvp`,
`jax.jacfwd`) is not available; no agent here uses it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

ACTIVATIONS: dict[str, Callable] = {
    "tanh": nn.tanh,
    "relu": nn.relu,
    "gelu": nn.gelu,
    "swish": nn.swish,
    "elu": nn.elu,
}


def _affine(x, kernel, bias):
    y = jax.lax.dot_general(x, kernel, (((x.ndim - 1,), (0,)), ((), ())))
    return y if bias is None else y + bias


@jax.custom_vjp
def dense(x: jax.Array, kernel: jax.Array, bias: jax.Array | None = None) -> jax.Array:
    """`x @ kernel + bias` over the last axis of `x` (any leading shape), with the CPU's
    weight gradient described in the module's docstring."""
    return _affine(x, kernel, bias)


def _dense_fwd(x, kernel, bias):
    return _affine(x, kernel, bias), (x, kernel, bias is None)


def _kernel_grad(x, g):
    return jax.lax.dot_general(x, g, (((0,), (0,)), ((), ())))


def _kernel_grad_cpu(x, g):
    # The barrier keeps XLA from folding the transpose back into the product.
    return jax.lax.optimization_barrier(x.T) @ g


@jax.custom_batching.custom_vmap
def weight_grad(x, g):
    """`x^T g` for rows `x` [N, I] and `g` [N, O]: a layer's weight gradient, as the module's
    docstring describes it for the CPU (the LSTM's kernels take their gradients here too)."""
    return jax.lax.platform_dependent(x, g, cpu=_kernel_grad_cpu, default=_kernel_grad)


@weight_grad.def_vmap
def _kernel_grad_batched(axis_size, in_batched, x, g):
    # Batched over several lanes the transposed copy buys nothing: XLA's batched product takes
    # as long in either layout (8 x 512 x 64 here), so it is autodiff's. A batch of one (a
    # loop of one seed) is the plain product again.
    if axis_size == 1:
        squeeze = lambda a, batched: a[0] if batched else a  # noqa: E731
        return weight_grad(squeeze(x, in_batched[0]), squeeze(g, in_batched[1]))[None], True
    x = x if in_batched[0] else jnp.broadcast_to(x, (axis_size, *x.shape))
    g = g if in_batched[1] else jnp.broadcast_to(g, (axis_size, *g.shape))
    return jnp.einsum("sbi,sbo->sio", x, g), True


def dense_grads(x, kernel, g):
    """The gradients `(d_x, d_kernel)` of `x @ kernel` (any leading shape) for the gradient `g`
    of its output: `dense`'s, also for a product whose backward pass is written out elsewhere
    (the LSTM's input side, `agents/lstm.py`)."""
    d_x = jax.lax.dot_general(g, kernel, (((g.ndim - 1,), (1,)), ((), ())))
    return d_x, weight_grad(x.reshape(-1, x.shape[-1]), g.reshape(-1, g.shape[-1]))


def _dense_bwd(res, g):
    x, kernel, no_bias = res
    d_x, d_kernel = dense_grads(x, kernel, g)
    return d_x, d_kernel, None if no_bias else jnp.sum(g.reshape(-1, g.shape[-1]), axis=0)


dense.defvjp(_dense_fwd, _dense_bwd)


class Dense(nn.Module):
    """`nn.Dense` computed by `dense`: same parameter names, shapes and initialisation."""

    features: int
    kernel_init: Callable = nn.initializers.lecun_normal()
    bias_init: Callable = nn.initializers.zeros_init()

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        kernel = self.param("kernel", self.kernel_init, (x.shape[-1], self.features), jnp.float32)
        bias = self.param("bias", self.bias_init, (self.features,), jnp.float32)
        return dense(x, kernel, bias)


class MLP(nn.Module):
    hidden_sizes: Sequence[int]
    out_size: int
    activation: str = "tanh"
    out_scale: float = 1.0

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        act = ACTIVATIONS[self.activation]
        for size in self.hidden_sizes:
            x = act(Dense(size, kernel_init=nn.initializers.orthogonal(np.sqrt(2.0)))(x))
        out = Dense(self.out_size, kernel_init=nn.initializers.orthogonal(self.out_scale))(x)
        return out


class QNetwork(nn.Module):
    """Q(obs, action): an MLP over the two, concatenated."""

    hidden_sizes: Sequence[int]
    activation: str = "relu"

    @nn.compact
    def __call__(self, obs, action):
        return MLP(self.hidden_sizes, 1, self.activation)(jnp.concatenate([obs, action], axis=-1))[..., 0]


def deterministic_actor_critic(config, action_dim: int) -> tuple[MLP, TwinQ]:
    """The networks of TD3-style agents (and offline ones built on them): an actor whose tanh
    acts, and twin critics."""
    return MLP(config.hidden_sizes, action_dim, config.activation, out_scale=0.01), TwinQ(config.hidden_sizes, config.activation)


def init_actor_critic(actor, critic, key: jax.Array, obs_shape: tuple, action_dim: int) -> dict:
    """Fresh parameters of `deterministic_actor_critic`'s networks, from one key."""
    k_actor, k_q1, k_q2 = jax.random.split(key, 3)
    obs, action = jnp.zeros((1, *obs_shape), jnp.float32), jnp.zeros((1, action_dim), jnp.float32)
    return {"actor": actor.init(k_actor, obs), "critic": critic.init(k_q1, k_q2, obs, action)}


class TwinQ:
    """Two critics, their parameters stacked on a leading axis of 2, valued together (`[2, ...]`)
    so the bootstrap can take their minimum (clipped double Q-learning)."""

    def __init__(self, hidden_sizes: Sequence[int], activation: str = "relu"):
        self.net = QNetwork(hidden_sizes, activation)

    def init(self, key_1: jax.Array, key_2: jax.Array, obs: jax.Array, action: jax.Array):
        # Two separate initialisations, stacked: vmapping the orthogonal initialiser would batch
        # LAPACK's QR (see the loop's note on init).
        return jax.tree.map(lambda a, b: jnp.stack([a, b]), self.net.init(key_1, obs, action), self.net.init(key_2, obs, action))

    def __call__(self, params, obs: jax.Array, action: jax.Array) -> jax.Array:
        return jax.vmap(self.net.apply, in_axes=(0, None, None))(params, obs, action)
