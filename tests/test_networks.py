"""The dense layer under every MLP: flax's `nn.Dense` with a CPU-friendly weight gradient."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune.agents.networks import MLP, dense


class FlaxMLP(nn.Module):
    """What `MLP` was before it had its own dense layer."""

    @nn.compact
    def __call__(self, x):
        for size in (64, 64):
            x = jnp.tanh(nn.Dense(size, kernel_init=nn.initializers.orthogonal(np.sqrt(2.0)))(x))
        return nn.Dense(2, kernel_init=nn.initializers.orthogonal(0.01))(x)


def _max_diff(a, b):
    return max(float(jnp.max(jnp.abs(x - y))) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b)))


def test_parameters_and_outputs_are_flaxs():
    x = jax.random.normal(jax.random.key(1), (5, 4))
    ours, theirs = MLP((64, 64), 2, "tanh", out_scale=0.01), FlaxMLP()
    params = ours.init(jax.random.key(0), x)
    assert jax.tree.structure(params) == jax.tree.structure(theirs.init(jax.random.key(0), x))
    assert _max_diff(params, theirs.init(jax.random.key(0), x)) == 0.0
    np.testing.assert_array_equal(ours.apply(params, x), theirs.apply(params, x))


@pytest.mark.parametrize("lanes", [None, 1, 8], ids=["unbatched", "one lane", "eight lanes"])
def test_gradients_match_autodiffs(lanes):
    x = jax.random.normal(jax.random.key(1), (3, 7, 4) if lanes is None else (lanes, 3, 7, 4))  # leading shape [3, 7]
    params = FlaxMLP().init(jax.random.key(0), x)

    def grad(module):
        fn = jax.grad(lambda p, x: jnp.sum(jnp.sin(module.apply(p, x))), argnums=(0, 1))
        return jax.jit(fn if lanes is None else jax.vmap(fn, in_axes=(None, 0)))

    ours, theirs = grad(MLP((64, 64), 2, "tanh", out_scale=0.01))(params, x), grad(FlaxMLP())(params, x)
    assert _max_diff(ours, theirs) < 1e-6


def test_a_layer_without_bias():
    x, kernel = jax.random.normal(jax.random.key(1), (6, 4)), jax.random.normal(jax.random.key(2), (4, 3))
    ours = jax.grad(lambda x, k: jnp.sum(jnp.sin(dense(x, k))), argnums=(0, 1))(x, kernel)
    theirs = jax.grad(lambda x, k: jnp.sum(jnp.sin(x @ k)), argnums=(0, 1))(x, kernel)
    assert _max_diff(ours, theirs) < 1e-6


@pytest.mark.parametrize(("lanes", "transposed_copy"), [(None, True), (1, True), (8, False)])
def test_the_cpu_multiplies_a_transposed_copy_where_it_pays(lanes, transposed_copy):
    """On the CPU the weight gradient multiplies a transposed copy of the layer's input (an
    optimisation barrier keeps it), except across several lanes, where XLA's batched product
    is as fast either way."""
    x = jnp.zeros((512, 4) if lanes is None else (lanes, 512, 4))
    params = FlaxMLP().init(jax.random.key(0), x)
    loss = lambda p, x: jnp.sum(MLP((64, 64), 2, "tanh", out_scale=0.01).apply(p, x))  # noqa: E731
    fn = jax.grad(loss) if lanes is None else jax.vmap(jax.grad(loss), in_axes=(None, 0))
    hlo = jax.jit(fn).lower(params, x).as_text()
    assert ("optimization_barrier" in hlo) is transposed_copy
