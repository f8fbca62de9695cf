"""Learning-rate schedules as traced functions of the absolute timestep.

A schedule's parameters, its kind included, are arrays in the training state rather than
Python constants. Every kind is evaluated from the same parameters and the kind selects one, so
population-based training may change the peak, the end, the warm-up or the kind itself between
calls and the rest of the run follows the new schedule from the current timestep without
recompiling. Progress is measured against the run's horizon (`total_timesteps`), never against
one call's budget, so a run split into calls follows the same curve as one long call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

KINDS = ("constant", "linear", "cosine", "warmup_cosine", "step")


@dataclasses.dataclass(frozen=True)
class Schedule:
    """A learning-rate schedule, as written in a config.

    - constant: `peak` throughout.
    - linear: from `peak` to `peak * end_fraction` over the horizon.
    - cosine: cosine decay from `peak` to `peak * end_fraction`.
    - warmup_cosine: linear rise from 0 to `peak` over `warmup_fraction` of the horizon, then
      cosine decay to `peak * end_fraction`.
    - step: `peak * step_factor ** k` after k intervals of `step_every` of the horizon.
    """

    kind: str = "constant"
    peak: float = 3e-4
    end_fraction: float = 0.0
    warmup_fraction: float = 0.0
    step_every: float = 0.25
    step_factor: float = 0.5

    def __post_init__(self):
        problems = []
        if self.kind not in KINDS:
            problems.append(f"kind must be one of {list(KINDS)}, got {self.kind!r}")
        for name, lo, hi in (
            ("peak", 0.0, None),
            ("end_fraction", 0.0, None),
            ("warmup_fraction", 0.0, 1.0),
            ("step_every", 1e-9, 1.0),
            ("step_factor", 0.0, 1.0),
        ):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                problems.append(f"{name} must be a number, got {value!r}")
            elif value < lo or (hi is not None and value > hi):
                bound = f">= {lo:g}" if hi is None else f"in [{lo:g}, {hi:g}]"
                problems.append(f"{name} must be {bound}, got {value!r}")
        if problems:
            raise ValueError("learning-rate schedule: " + "; ".join(problems))

    @classmethod
    def parse(cls, value: Any) -> Schedule:
        """A number means a constant rate; a mapping names the fields of a schedule."""
        if isinstance(value, Schedule):
            return value
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            return cls(kind="constant", peak=float(value))
        if isinstance(value, Mapping):
            known = {f.name for f in dataclasses.fields(cls)}
            unknown = sorted(set(value) - known)
            if unknown:
                raise ValueError(f"learning-rate schedule: unknown field(s) {unknown}; expected some of {sorted(known)}")
            fields = {
                k: (float(v) if k != "kind" and isinstance(v, int) and not isinstance(v, bool) else v) for k, v in value.items()
            }
            return cls(**fields)
        raise ValueError(f"learning-rate schedule: expected a number or a mapping, got {value!r}")

    def to_params(self, xp=jnp) -> ScheduleParams:
        """The schedule as arrays: JAX's (`xp=jnp`) or, for work on the host, NumPy's."""
        return ScheduleParams(
            kind=xp.asarray(KINDS.index(self.kind), xp.int32),
            peak=xp.asarray(self.peak, xp.float32),
            end_fraction=xp.asarray(self.end_fraction, xp.float32),
            warmup_fraction=xp.asarray(self.warmup_fraction, xp.float32),
            step_every=xp.asarray(self.step_every, xp.float32),
            step_factor=xp.asarray(self.step_factor, xp.float32),
        )


@struct.dataclass
class ScheduleParams:
    """The traced form of `Schedule`: every field an array."""

    kind: jax.Array
    peak: jax.Array
    end_fraction: jax.Array
    warmup_fraction: jax.Array
    step_every: jax.Array
    step_factor: jax.Array


def learning_rate(p: ScheduleParams, timestep: jax.Array, horizon: jax.Array) -> jax.Array:
    """The learning rate at absolute `timestep` of a run of `horizon` env steps."""
    progress = jnp.clip(jnp.asarray(timestep, jnp.float32) / jnp.maximum(horizon, 1.0), 0.0, 1.0)
    end = p.peak * p.end_fraction

    def cosine(x):
        return end + (p.peak - end) * 0.5 * (1.0 + jnp.cos(jnp.pi * jnp.clip(x, 0.0, 1.0)))

    warm = p.warmup_fraction
    after_warmup = (progress - warm) / jnp.maximum(1.0 - warm, 1e-8)
    warmup_cosine = jnp.where(progress < warm, p.peak * progress / jnp.maximum(warm, 1e-8), cosine(after_warmup))
    rates = jnp.stack(
        [
            p.peak,
            p.peak + (end - p.peak) * progress,
            cosine(progress),
            warmup_cosine,
            p.peak * p.step_factor ** jnp.floor(progress / p.step_every),
        ]
    )
    return rates[p.kind]
