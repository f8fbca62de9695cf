"""Traced hyperparameters and the optimiser every agent uses.

Traced settings (learning-rate schedule, coefficients, gamma, tau, epsilon...) are arrays in the
agent's state, so Tune may change them between calls without recompiling. The optimiser is
optax's Adam behind `inject_hyperparams`: the learning rate and the gradient-clipping norm are
arrays in the optimiser state, written before every step from the traced settings and the run's
clock, so a schedule continues from the current timestep whatever changed.
"""

from __future__ import annotations

from typing import Any

import jax
import jax.numpy as jnp
import optax

from ajax_tune.agents.base import Clock
from ajax_tune.fields import traced_values
from ajax_tune.schedules import ScheduleParams, learning_rate


def init_hparams(config: Any) -> dict[str, Any]:
    """The traced fields of an agent config, as arrays (schedules as `ScheduleParams`)."""
    return traced_values(config)


def replace_hparams(hp: dict[str, Any], config: Any) -> dict[str, Any]:
    """`hp` with the values of `config`, keeping every array's shape and dtype (so the state
    still fits the compiled program)."""
    return jax.tree.map(lambda old, new: jnp.broadcast_to(new, jnp.shape(old)).astype(old.dtype),
                        hp, traced_values(config))


def scheduled(schedule: ScheduleParams, clock: Clock) -> jax.Array:
    return learning_rate(schedule, clock.timestep, clock.horizon)


def _adam_with_clipping(learning_rate, max_grad_norm, eps):
    return optax.chain(
        optax.clip_by_global_norm(max_grad_norm),
        optax.scale_by_adam(eps=eps),
        optax.scale_by_learning_rate(learning_rate),
    )


class Optimizer:
    """Adam with global-norm clipping; learning rate and clipping norm are traced arrays."""

    def __init__(self, eps: float = 1e-8):
        self.tx = optax.inject_hyperparams(_adam_with_clipping, static_args=("eps",))(
            learning_rate=0.0, max_grad_norm=1.0, eps=eps)

    def init(self, params) -> optax.OptState:
        return self.tx.init(params)

    def step(self, params, grads, opt_state, lr: jax.Array, max_grad_norm: jax.Array):
        """One update at rate `lr`; returns new params, optimiser state and the gradient norm
        before clipping."""
        hyper = dict(opt_state.hyperparams)
        hyper["learning_rate"] = jnp.asarray(lr, hyper["learning_rate"].dtype)
        hyper["max_grad_norm"] = jnp.asarray(max_grad_norm, hyper["max_grad_norm"].dtype)
        opt_state = opt_state._replace(hyperparams=hyper)
        updates, opt_state = self.tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, optax.global_norm(grads)


def all_finite(tree) -> jax.Array:
    """True when every floating leaf of `tree` is finite (one fused reduction)."""
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree)
              if jnp.issubdtype(jnp.result_type(x), jnp.floating)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.ones((), jnp.bool_)
