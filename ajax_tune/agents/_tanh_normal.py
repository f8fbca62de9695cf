"""The tanh-squashed normal action distribution, as brax's `NormalTanhDistribution` defines it.

Same parameters, same numbers: the policy outputs a location and a raw scale per action
dimension; the scale is `softplus(raw) + min_std`; samples are drawn before the squashing
(`sample_no_postprocessing`), squashed by `postprocess`, and log-probabilities and entropies
include the tanh's log-Jacobian. It exists for the same reason as `_running_stats`: importing
`brax.training.distribution` imports all of brax (MuJoCo's MJX included), which every Ray worker
would pay for every trial. This module needs only JAX.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp

_HALF_LOG_2PI = 0.5 * math.log(2.0 * math.pi)


def _tanh_log_det_jacobian(x):
    # log(1 - tanh(x)**2), written so that it stays finite for large |x|
    return 2.0 * (jnp.log(2.0) - x - jax.nn.softplus(-2.0 * x))


class NormalTanhDistribution:
    def __init__(self, event_size: int, min_std: float = 0.001, var_scale: float = 1.0):
        self.param_size = 2 * event_size
        self._min_std = min_std
        self._var_scale = var_scale

    def _loc_scale(self, parameters):
        loc, raw_scale = jnp.split(parameters, 2, axis=-1)
        return loc, (jax.nn.softplus(raw_scale) + self._min_std) * self._var_scale

    def sample_no_postprocessing(self, parameters, seed):
        loc, scale = self._loc_scale(parameters)
        return jax.random.normal(seed, shape=loc.shape) * scale + loc

    def postprocess(self, action):
        return jnp.tanh(action)

    def sample(self, parameters, seed):
        return self.postprocess(self.sample_no_postprocessing(parameters, seed))

    def mode(self, parameters):
        return jnp.tanh(self._loc_scale(parameters)[0])

    def log_prob(self, parameters, actions):
        """Log-density of pre-squash `actions` after the squashing, summed over dimensions."""
        loc, scale = self._loc_scale(parameters)
        log_density = -0.5 * jnp.square(actions / scale - loc / scale) - (_HALF_LOG_2PI + jnp.log(scale))
        return jnp.sum(log_density - _tanh_log_det_jacobian(actions), axis=-1)

    def entropy(self, parameters, seed):
        """The normal's entropy plus the squashing's log-Jacobian at one sample (an estimate)."""
        loc, scale = self._loc_scale(parameters)
        entropy = (0.5 + _HALF_LOG_2PI + jnp.log(scale)) * jnp.ones_like(loc)
        sample = jax.random.normal(seed, shape=loc.shape) * scale + loc
        return jnp.sum(entropy + _tanh_log_det_jacobian(sample), axis=-1)
