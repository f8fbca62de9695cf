"""The local running statistics and tanh-normal distribution compute exactly what brax's do, so
agents can use them without importing brax (and MuJoCo with it) in every Ray worker."""

import jax
import jax.numpy as jnp
import numpy as np
from brax.training import distribution as brax_distribution
from brax.training.acme import running_statistics as brax_running_statistics

from ajax_tune.agents import _running_stats, _tanh_normal


def test_running_statistics_match_brax_bit_for_bit():
    key = jax.random.PRNGKey(0)
    ours = _running_stats.init_state(jnp.zeros((3,)))
    theirs = brax_running_statistics.init_state(jnp.zeros((3,)))
    ours_scalar = _running_stats.init_state(jnp.zeros(()))
    theirs_scalar = brax_running_statistics.init_state(jnp.zeros(()))
    update_ours, update_theirs = jax.jit(_running_stats.update), jax.jit(brax_running_statistics.update)
    for i in range(5):
        key, k_batch, k_mask = jax.random.split(key, 3)
        batch = jax.random.normal(k_batch, (16, 8, 3)) * (i + 1) + 5.0  # a shifting, widening stream
        weights = (jax.random.uniform(k_mask, (16, 8)) > 0.3).astype(jnp.float32)
        ours, theirs = update_ours(ours, batch, weights=weights), update_theirs(theirs, batch, weights=weights)
        ours_scalar = update_ours(ours_scalar, batch[..., 0].reshape(-1))
        theirs_scalar = update_theirs(theirs_scalar, batch[..., 0].reshape(-1))
        for a, b in ((ours, theirs), (ours_scalar, theirs_scalar)):
            np.testing.assert_array_equal(a.mean, b.mean)
            np.testing.assert_array_equal(a.summed_variance, b.summed_variance)
            np.testing.assert_array_equal(a.std, b.std)
            assert int(a.count_lo) == int(b.count.lo) and int(a.count_hi) == int(b.count.hi)
        np.testing.assert_array_equal(_running_stats.normalize(batch, ours),
                                      brax_running_statistics.normalize(batch, theirs))
    assert int(ours_scalar.count_lo) == 5 * 16 * 8
    np.testing.assert_allclose(ours.mean, 5.0, atol=0.5)  # it does estimate the stream's mean


def test_count_carries_past_two_to_the_32():
    state = _running_stats.init_state(jnp.zeros(()))
    state = state.replace(count_lo=jnp.uint32(2**32 - 3))
    state = _running_stats.update(state, jnp.ones((5,)))
    assert int(state.count_hi) == 1 and int(state.count_lo) == 2
    assert float(state.count) == np.float32(2.0**32 + 2)  # as float32 (what the statistics divide by)


def test_tanh_normal_matches_brax_bit_for_bit():
    ours, theirs = _tanh_normal.NormalTanhDistribution(2), brax_distribution.NormalTanhDistribution(2)
    assert ours.param_size == theirs.param_size == 4
    params = jax.random.normal(jax.random.PRNGKey(1), (32, 4)) * 3.0
    seed = jax.random.PRNGKey(2)

    def everything(dist):
        raw = dist.sample_no_postprocessing(params, seed)
        return (raw, dist.postprocess(raw), dist.mode(params), dist.log_prob(params, raw),
                dist.entropy(params, seed), dist.sample(params, seed))

    for a, b in zip(jax.jit(lambda: everything(ours))(), jax.jit(lambda: everything(theirs))()):
        np.testing.assert_array_equal(a, b)
