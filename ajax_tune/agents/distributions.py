"""Action distributions with one interface for discrete and continuous actions.

Continuous actions follow a normal distribution squashed by tanh into [-1, 1] (the parametric
form brax's training code uses: scale = softplus(raw) + min_std). Policies sample and score the
pre-squash value, and `log_prob` adds the tanh Jacobian, because tanh saturates and cannot be
inverted reliably near +-1. Written here rather than imported from brax because importing any
brax module starts the whole physics stack (several seconds in every trial process).
"""

from __future__ import annotations

import math

import gymnasium
import jax
import jax.numpy as jnp


class Categorical:
    def __init__(self, num_actions: int):
        self.param_size = num_actions

    def sample_no_postprocessing(self, logits, key):
        return jax.random.categorical(key, logits)

    def postprocess(self, action):
        return action

    def mode(self, logits):
        return jnp.argmax(logits, axis=-1)

    def log_prob(self, logits, action):
        logp = jax.nn.log_softmax(logits)
        return jnp.take_along_axis(logp, action[..., None].astype(jnp.int32), axis=-1)[..., 0]

    def entropy(self, logits, key=None):
        logp = jax.nn.log_softmax(logits)
        return -jnp.sum(jnp.exp(logp) * logp, axis=-1)


class TanhNormal:
    """A diagonal normal over `event_size` dimensions, followed by tanh."""

    def __init__(self, event_size: int, min_std: float = 1e-3):
        self.event_size = event_size
        self.param_size = 2 * event_size
        self.min_std = min_std

    def _loc_scale(self, params):
        loc, raw_scale = jnp.split(params, 2, axis=-1)
        return loc, jax.nn.softplus(raw_scale) + self.min_std

    def sample_no_postprocessing(self, params, key):
        loc, scale = self._loc_scale(params)
        return loc + scale * jax.random.normal(key, loc.shape, loc.dtype)

    def postprocess(self, raw):
        return jnp.tanh(raw)

    def mode(self, params):
        return jnp.tanh(self._loc_scale(params)[0])

    @staticmethod
    def _log_det_jacobian(raw):
        # log(1 - tanh(x)^2), written to stay finite for large |x|
        return 2.0 * (math.log(2.0) - raw - jax.nn.softplus(-2.0 * raw))

    def log_prob(self, params, raw):
        """Log-density of the squashed action `tanh(raw)`."""
        loc, scale = self._loc_scale(params)
        z = (raw - loc) / scale
        normal = -0.5 * z**2 - jnp.log(scale) - 0.5 * math.log(2.0 * math.pi)
        return jnp.sum(normal - self._log_det_jacobian(raw), axis=-1)

    def entropy(self, params, key):
        """The normal's entropy plus a one-sample estimate of the squash's Jacobian term."""
        _, scale = self._loc_scale(params)
        normal = 0.5 + 0.5 * math.log(2.0 * math.pi) + jnp.log(scale)
        raw = self.sample_no_postprocessing(params, key)
        return jnp.sum(normal + self._log_det_jacobian(raw), axis=-1)


def for_space(space: gymnasium.spaces.Space):
    if isinstance(space, gymnasium.spaces.Discrete):
        return Categorical(int(space.n))
    if isinstance(space, gymnasium.spaces.Box) and len(space.shape) == 1:
        return TanhNormal(event_size=int(space.shape[0]))
    raise ValueError(f"unsupported action space {space}: expected Discrete or a 1-D Box")
