"""Traced hyperparameters and the optimiser every agent uses.

Traced settings (learning-rate schedule, coefficients, gamma, tau, epsilon...) are arrays in the
agent's state, so Tune may change them between calls without recompiling. They sit in a struct
made from the config's traced fields, one attribute each, so a misspelt name (`hp.gama`) fails
while the program is traced instead of reading a key that was never there. The optimiser is
optax's Adam behind `inject_hyperparams`: the learning rate and the gradient-clipping norm are
arrays in the optimiser state, written before every step from the traced settings and the run's
clock, so a schedule continues from the current timestep whatever changed.
"""

from __future__ import annotations

import dataclasses
import difflib
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax
from flax import struct

from ajax_tune.fields import field_kind, traced_values
from ajax_tune.schedules import Schedule, ScheduleParams

_TYPES: dict[type, type] = {}


def hparams_type(config_cls: type) -> type:
    """The struct holding `config_cls`'s traced fields (one per config class). A config module
    binds it to a module-level name (`PPOHparams = hparams_type(PPOConfig)`), so the struct
    pickles like any class and can annotate a state."""
    if config_cls not in _TYPES:
        fields = [f for f in dataclasses.fields(config_cls) if field_kind(f) == "traced"]
        name = config_cls.__name__.removesuffix("Config") + "Hparams"
        namespace = {
            "__annotations__": {f.name: ScheduleParams if f.type in (Schedule, "Schedule") else jax.Array for f in fields},
            "__module__": config_cls.__module__,
            "__doc__": f"The traced settings of `{config_cls.__name__}`, as arrays.",
            "__getattr__": _missing_setting,
        }
        _TYPES[config_cls] = struct.dataclass(type(name, (), namespace))
    return _TYPES[config_cls]


def _missing_setting(self, name: str):
    """Only reached for a name that is not a field: say which ones there are (private names, which
    libraries probe for, get the plain error)."""
    if name.startswith("_"):
        raise AttributeError(name)
    names = list(type(self).__dataclass_fields__)
    close = difflib.get_close_matches(name, names, n=1)
    hint = f"; did you mean {close[0]!r}?" if close else ""
    raise AttributeError(f"{type(self).__name__} has no traced setting {name!r}{hint} (it has {', '.join(names)})")


def init_hparams(config: Any):
    """The traced fields of an agent config, as float32 arrays (schedules as `ScheduleParams`)."""
    return hparams_type(type(config))(**traced_values(config))


def lanes_hparams(hp, configs: list, lanes_each: int):
    """`hp` of a whole state (one value per lane on every leaf) with `configs[m]`'s values on
    lanes `m * lanes_each` to `(m + 1) * lanes_each - 1`: the values `replace_hparams` gives each
    lane, made on the host and placed as the old leaf was. A leaf no config changes is returned as
    the very array it was: nothing compiles, and nothing moves but the settings that changed."""
    news = [hparams_type(type(c))(**traced_values(c, xp=np)) for c in configs]

    def place(old, *values):
        current = np.asarray(old)
        lane_shape = current.shape[1:]
        new = np.concatenate(
            [np.broadcast_to(np.broadcast_to(v, lane_shape).astype(current.dtype), (lanes_each, *lane_shape)) for v in values]
        )
        if new.shape == current.shape and np.array_equal(new, current):
            return old
        return jax.device_put(new, old.sharding) if getattr(old, "committed", False) else jnp.asarray(new)

    return jax.tree.map(place, hp, *news)


def replace_hparams(hp, config: Any):
    """`hp` with the values of `config`, keeping every array's shape and dtype (so the state
    still fits the compiled program)."""
    return jax.tree.map(lambda old, new: jnp.broadcast_to(new, jnp.shape(old)).astype(old.dtype), hp, init_hparams(config))


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
            learning_rate=0.0, max_grad_norm=1.0, eps=eps
        )

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
    leaves = [jnp.all(jnp.isfinite(x)) for x in jax.tree.leaves(tree) if jnp.issubdtype(jnp.result_type(x), jnp.floating)]
    return jnp.all(jnp.stack(leaves)) if leaves else jnp.ones((), jnp.bool_)
