"""A program under jit: its state donated, its compilations counted, its lanes on its devices.

`init` runs once per state and compiles with few of XLA's passes (it runs in milliseconds either
way, while every pass made it the slowest compile before a trial's first result after the
training program's; the retired init_compile study in benchmarks/README.md). `call` compiles
once with the build's own settings and takes the state donated, so XLA reuses its buffers
instead of copying them.

With several devices, a state's lanes are split over them along the lane axis (`jax.sharding`):
one program, partitioned by XLA, each device holding and stepping its share of the lanes; what
the call takes besides the state (a dataset) is copied to each. Lanes never read one another, so
the results are the unsplit run's. A `train.devices` that cannot be honoured is refused before
anything compiles: one that does not divide the lanes when the program is built, one above what
JAX sees when the first state is made, and, for a Tune trial, one above what its resources give
it while the experiment is checked (`trial_devices`: the driver must not start JAX's backends).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Callable

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ajax_tune import compat
from ajax_tune.errors import ConfigError
from ajax_tune.loop.frame import Program

#: How `init` compiles (per program; nothing else in the process changes): few passes, as
#: `JAX_DISABLE_MOST_OPTIMIZATIONS` builds, and without XLA's CPU fusion emitters.
ONCE_COMPILER_OPTIONS = {
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
    "xla_cpu_use_fusion_emitters": False,
}


#: The XLA flag that makes JAX's CPU backend show N devices (how the tests split lanes on a CPU).
FORCED_CPU_DEVICES = re.compile(r"--xla_force_host_platform_device_count=(\d+)")


def check_devices(asked: int, num_lanes: int, available: int | None = None, seen: str = "", more: str = "") -> None:
    """Refuse a `train.devices` that does not divide the lanes, or (where `available` is known)
    that asks for more devices than `seen` describes, in one line saying what would fit and, as
    `more`, how to get more devices."""
    if asked and num_lanes % asked:
        fits = [n for n in range(1, num_lanes + 1) if num_lanes % n == 0 and (available is None or n <= available)]
        raise ConfigError(
            f"train.devices ({asked}) must divide the trial's lanes (members x seeds = {num_lanes}): "
            f"one of {fits}, or 0 for as many of JAX's devices as divide them"
        )
    if available is not None and asked > available:
        raise ConfigError(
            f"train.devices: {asked} asked, but {seen}; lower train.devices (0: as many as divide the lanes)"
            + (f" or {more}" if more else "")
        )


def trial_devices(gpu: float, xla_flags: str | None = None) -> tuple[int, str, str]:
    """The devices JAX will see in a Tune trial with `resources.gpu` = `gpu`, known without
    starting JAX here: its GPUs (part of one is one device); without a GPU the trial runs JAX on
    the CPU (`jax_setup.configure_jax`), one device unless XLA_FLAGS (which a local Ray's
    workers inherit from this process) forces more. Returns the count, what it is in words, and
    how to get more (`check_devices`'s `seen` and `more`)."""
    if gpu >= 1:
        return int(gpu), f"a trial with resources.gpu {gpu:g} sees {int(gpu)} GPU(s)", "raise resources.gpu"
    if gpu > 0:
        return 1, f"a trial with resources.gpu {gpu:g} shares one GPU", "ask for whole GPUs (resources.gpu: N)"
    flags = os.environ.get("XLA_FLAGS", "") if xla_flags is None else xla_flags
    forced = FORCED_CPU_DEVICES.findall(flags)
    count = int(forced[-1]) if forced else 1
    seen = (
        f"a trial with resources.gpu 0 runs JAX on {count} CPU device(s) "
        f"(XLA_FLAGS=--xla_force_host_platform_device_count=N makes N)"
    )
    return count, seen, "ask for resources.gpu"


class Compiled:
    def __init__(self, program: Program, num_lanes: int = 1, devices: int = 0):
        check_devices(devices, num_lanes)  # the rest needs JAX's devices: see `devices`
        self.program, self.num_lanes, self.devices_asked = program, num_lanes, devices
        self.traces = 0
        self._init: Callable = compat.jit_with_options(program.init, ONCE_COMPILER_OPTIONS)
        self.call: Callable = jax.jit(self._counted_call, donate_argnums=0)

    @property
    def init(self) -> Callable:
        """`program.init` under jit. The devices are looked up first, so a `train.devices` this
        process cannot honour is refused before the first program compiles."""
        _ = self.devices
        return self._init

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
        seen = f"JAX sees {len(available)} {available[0].platform} device(s) in this process"
        check_devices(self.devices_asked, self.num_lanes, len(available), seen)
        if self.devices_asked:
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
