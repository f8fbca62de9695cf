"""The task sampler interface: a curriculum over a distribution of tasks, run on the host.

Between two `train()` calls the runner hands the sampler the call's per-env statistics
(`update`), then asks it for the next call's tasks, one per env (`sample`), and sets them: a
task is data, so nothing recompiles. A sampler is seeded; its random state is part of
`get_state`, which goes into every checkpoint, so a restored trial draws exactly the tasks the
uninterrupted one would have. Everything in the state is JSON: it travels in the checkpoint's
metadata, and with a PBT exploit.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from ajax_tune.errors import ConfigError
from ajax_tune.samplers.stats import EnvStats
from ajax_tune.task_space import TaskSpace


class TaskSampler:
    """Subclasses implement `_sample` and may override `_update`, `_state`, `_load`, `_metrics`.

    The constructor takes the space to draw from (`space`, or `levels`; neither means the env's
    own `env.levels`), a `seed`, and its own hyperparameters, each checked on the spot.
    """

    #: Whether `update` reads `EnvStats.learning_signal`. The training program computes the
    #: agent's signal only for a sampler that does (a TD error costs SAC 5-10% of its compile);
    #: without it the signal is NaN. A sampler that never reads it says so with False.
    reads_learning_signal = True

    def __new__(cls, *args, **kwargs):
        # Remember the constructor's arguments, so a sampler built in Python can be written back
        # into a config (and a checkpoint's record of it) as {"class": ..., "kwargs": ...}.
        self = super().__new__(cls)
        try:
            bound = inspect.signature(cls.__init__).bind(None, *args, **kwargs)
            self._arguments = {k: v for k, v in bound.arguments.items() if k != "self"}
        except TypeError:
            self._arguments = dict(kwargs)
        return self

    def __init__(self, space: Mapping | None = None, levels: Any = None, *, bins: int | Mapping = 1, seed: int = 0):
        where = f"task_sampler ({type(self).__name__})"
        self.space = TaskSpace(space, levels, bins=bins, where=where)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"{where}: seed must be an integer >= 0, got {seed!r}")
        self.seed = seed
        self.rng = np.random.default_rng(seed)
        self.draws = 0  # sample() calls in this run's lineage: checkpoints and PBT exploits carry it

    # -- life cycle ----------------------------------------------------------------------

    def bind(self, env, base: Mapping | None = None, env_levels: list | None = None) -> TaskSampler:
        """Check the space against the env's task fields (before anything compiles)."""
        self.space.bind(env, base=base, env_levels=env_levels)
        self._bound()
        return self

    def _bound(self) -> None:
        """Allocate what depends on the space (per-bin tables, say)."""

    def sample(self, num_envs: int) -> dict[str, np.ndarray]:
        """One task per env: field -> array with a leading axis of `num_envs`."""
        self._check_bound()
        self.draws += 1
        return self._sample(int(num_envs))

    def update(self, stats: EnvStats) -> None:
        """Learn from one call's per-env statistics."""
        self._check_bound()
        self._update(stats)

    def metrics(self) -> dict[str, float]:
        """Keys added to every result: the same keys every call, NaN where undefined."""
        return {"sampler/draws": float(self.draws), **self._metrics()}

    def get_state(self) -> dict:
        return {"rng": _rng_state(self.rng), "draws": self.draws, **self._state()}

    def set_state(self, state: Mapping) -> None:
        self.rng = np.random.default_rng()
        self.rng.bit_generator.state = _rng_from_state(state["rng"])
        self.draws = int(state.get("draws", 0))
        self._load(state)

    def reseed(self, salt: int) -> None:
        """Another trial continues from this state (a PBT exploit): same statistics, its own draws."""
        self.rng = np.random.default_rng([int(salt), int(self.rng.integers(2**63))])

    def config(self) -> dict:
        """This sampler as a config entry: {"class": "module:Class", "kwargs": {...}}."""
        cls = type(self)
        return {"class": f"{cls.__module__}:{cls.__qualname__}", "kwargs": dict(self._arguments)}

    # -- for subclasses ------------------------------------------------------------------

    def _sample(self, num_envs: int) -> dict[str, np.ndarray]:
        raise NotImplementedError

    def _update(self, stats: EnvStats) -> None: ...

    def _metrics(self) -> dict[str, float]:
        return {}

    def _state(self) -> dict:
        return {}

    def _load(self, state: Mapping) -> None: ...

    def _check_bound(self) -> None:
        if not self.space.bound:
            raise RuntimeError(f"{type(self).__name__} is not bound to an env: call bind(env) first")


def check_number(
    where: str, name: str, value: Any, *, low: float, high: float = math.inf, low_open: bool = False, integer: bool = False
) -> Any:
    """A hyperparameter in its range, or a one-line ConfigError naming it."""
    ok_type = isinstance(value, int) if integer else isinstance(value, (int, float))
    if isinstance(value, bool) or not ok_type or not math.isfinite(value):
        raise ConfigError(f"{where}: {name} must be {'an integer' if integer else 'a number'}, got {value!r}")
    above = value > low if low_open else value >= low
    if not above or value > high:
        bracket = "(" if low_open else "["
        top = "inf)" if high == math.inf else f"{high:g}]"
        raise ConfigError(f"{where}: {name} must be in {bracket}{low:g}, {top}, got {value!r}")
    return value


def normalized_entropy(p: np.ndarray) -> float:
    """Entropy of a distribution over n outcomes divided by log(n): 1 is uniform, 0 is one outcome."""
    p = np.asarray(p, np.float64)
    if len(p) < 2:
        return math.nan
    nz = p[p > 0]
    return float(-(nz * np.log(nz)).sum() / math.log(len(p)))


def _rng_state(rng: np.random.Generator) -> dict:
    # PCG64's 128-bit integers as strings: exact through any JSON reader.
    state = rng.bit_generator.state
    return {
        "bit_generator": state["bit_generator"],
        "state": {k: str(v) for k, v in state["state"].items()},
        "has_uint32": int(state["has_uint32"]),
        "uinteger": int(state["uinteger"]),
    }


def _rng_from_state(saved: Mapping) -> dict:
    return {
        "bit_generator": saved["bit_generator"],
        "state": {k: int(v) for k, v in saved["state"].items()},
        "has_uint32": int(saved["has_uint32"]),
        "uinteger": int(saved["uinteger"]),
    }


def tasks_to_json(tasks: Mapping[str, np.ndarray]) -> dict[str, list]:
    return {k: np.asarray(v).tolist() for k, v in tasks.items()}


def tasks_from_json(tasks: Mapping[str, list], spec) -> dict[str, np.ndarray]:
    return {k: np.asarray(v, spec[k].dtype) for k, v in tasks.items()}
