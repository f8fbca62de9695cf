"""A program under jit: its state donated, its compilations counted, its lanes on its devices.

`init` runs once per state and compiles with few of XLA's passes (it runs in milliseconds either
way, while every pass made it the slowest compile before a trial's first result after the
training program's; the retired init_compile study in benchmarks/README.md). `call` compiles
once with the build's own settings and takes the state donated, so XLA reuses its buffers
instead of copying them.

With several devices, a state's lanes are split over them along the lane axis (`jax.sharding`):
one program, partitioned by XLA, each device holding and stepping its share of the lanes; what
the call takes besides the state (a dataset) is copied to each. Lanes never read one another, so
the results are the unsplit run's.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ajax_tune import compat
from ajax_tune.fields import ConfigError
from ajax_tune.loop.frame import Program

#: How `init` compiles (per program; nothing else in the process changes): few passes, as
#: `JAX_DISABLE_MOST_OPTIMIZATIONS` builds, and without XLA's CPU fusion emitters.
ONCE_COMPILER_OPTIONS = {
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
    "xla_cpu_use_fusion_emitters": False,
}


class Compiled:
    def __init__(self, program: Program, num_lanes: int = 1, devices: int = 0):
        self.program, self.num_lanes, self.devices_asked = program, num_lanes, devices
        self.traces = 0
        self.init: Callable = compat.jit_with_options(program.init, ONCE_COMPILER_OPTIONS)
        self.call: Callable = jax.jit(self._counted_call, donate_argnums=0)

    def _counted_call(self, state, *inputs):
        self.traces += 1  # runs only while tracing
        return self.program.call(state, *inputs)

    @property
    def compilations(self) -> int:
        """Programs compiled for `call` so far: 1 unless something forced a recompilation.

        Counted from jit's own cache, which also sees recompilations without a retrace (an
        argument with another placement), and never fewer than the traces."""
        return max(self.traces, compat.jit_cache_size(self.call))

    @property
    def device(self):
        """JAX's default device: where a state lives on one device."""
        return jax.devices()[0]

    @functools.cached_property
    def devices(self) -> list:
        """The devices the lanes are split over. Looked up on first use, not when the program is
        built, so that validating a config never starts JAX's backends (a driver that has started
        them warns at every fork Ray makes)."""
        available = jax.devices()
        if self.devices_asked > len(available):
            raise ConfigError(f"train.devices: {self.devices_asked} asked, JAX sees {len(available)} ({available[0].platform})")
        if self.devices_asked:
            if self.num_lanes % self.devices_asked:
                raise ConfigError(
                    f"train.devices ({self.devices_asked}) must divide the trial's lanes (members x seeds = {self.num_lanes})"
                )
            return available[: self.devices_asked]
        count = max(n for n in range(1, len(available) + 1) if self.num_lanes % n == 0)
        return available[:count]

    @functools.cached_property
    def placement(self):
        """Where a state goes: the one device, or its lanes split over the devices."""
        if len(self.devices) == 1:
            return self.devices[0]
        return NamedSharding(Mesh(np.array(self.devices), ("lanes",)), PartitionSpec("lanes"))

    @functools.cached_property
    def input_placement(self):
        """Where what a call takes besides the state goes: the one device, or a copy on each."""
        if len(self.devices) == 1:
            return self.devices[0]
        return NamedSharding(self.placement.mesh, PartitionSpec())

    def train(self, state, *inputs):
        """One call, `state` donated. Every state is placed first (free when it already is), so
        a state fresh from `init`, restored from a checkpoint or edited on the host all match the
        one compiled program."""
        return self.call(jax.device_put(state, self.placement), *inputs)
