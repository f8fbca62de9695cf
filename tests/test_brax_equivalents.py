"""The shared observation statistics and tanh-normal distribution compute what brax's do, so
agents use them without importing brax (and its physics stack) in every Ray worker."""

import jax
import jax.numpy as jnp
import numpy as np
from brax.training import distribution as brax_distribution
from brax.training.acme import running_statistics as brax_running_statistics

from ajax_tune.agents.distributions import TanhNormal
from ajax_tune.agents.normalization import RunningNormalizer


def test_running_statistics_match_brax():
    key = jax.random.PRNGKey(0)
    norm = RunningNormalizer((3,))
    ours, theirs = norm.init(), brax_running_statistics.init_state(jnp.zeros((3,)))
    update_ours, update_theirs = jax.jit(norm.update), jax.jit(brax_running_statistics.update)
    for i in range(5):
        key, k_batch, k_mask = jax.random.split(key, 3)
        batch = jax.random.normal(k_batch, (16, 8, 3)) * (i + 1) + 5.0  # a shifting, widening stream
        weights = (jax.random.uniform(k_mask, (16, 8)) > 0.3).astype(jnp.float32)
        ours, theirs = update_ours(ours, batch, weights), update_theirs(theirs, batch, weights=weights)
        np.testing.assert_allclose(ours.mean, theirs.mean, rtol=1e-5)
        np.testing.assert_allclose(ours.std, theirs.std, rtol=1e-4)
        assert float(ours.count) == int(theirs.count.lo) + (int(theirs.count.hi) << 32)
        np.testing.assert_allclose(norm(ours, batch), brax_running_statistics.normalize(batch, theirs), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ours.mean, 5.0, atol=0.5)  # it does estimate the stream's mean


def test_masked_samples_do_not_count():
    norm = RunningNormalizer(())
    stats = norm.update(norm.init(), jnp.array([1.0, 1.0, 100.0]), jnp.array([1.0, 1.0, 0.0]))
    assert float(stats.count) == 2.0 and float(stats.mean) == 1.0


def test_tanh_normal_matches_brax():
    ours, theirs = TanhNormal(2), brax_distribution.NormalTanhDistribution(2)
    assert ours.param_size == theirs.param_size == 4
    params = jax.random.normal(jax.random.PRNGKey(1), (32, 4)) * 3.0
    seed = jax.random.PRNGKey(2)

    def everything(dist):
        raw = dist.sample_no_postprocessing(params, seed)
        return (raw, dist.postprocess(raw), dist.mode(params), dist.log_prob(params, raw), dist.entropy(params, seed))

    for a, b in zip(jax.jit(lambda: everything(ours))(), jax.jit(lambda: everything(theirs))()):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
