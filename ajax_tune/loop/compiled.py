"""A program under jit: its state donated, its compilations counted, its states on one device.

`init` runs once per state and compiles with few of XLA's passes (it runs in milliseconds either
way, while every pass made it the slowest compile before a trial's first result after the
training program's; the retired init_compile study, benchmarks/README.md). `call` compiles once with the build's own
settings and takes the state donated, so XLA reuses its buffers instead of copying them.
"""

from __future__ import annotations

from collections.abc import Callable

import jax

from ajax_tune import compat
from ajax_tune.loop.program import Program

#: How `init` compiles (per program; nothing else in the process changes): few passes, as
#: `JAX_DISABLE_MOST_OPTIMIZATIONS` builds, and without XLA's CPU fusion emitters.
ONCE_COMPILER_OPTIONS = {
    "xla_backend_optimization_level": 0,
    "xla_llvm_disable_expensive_passes": True,
    "xla_cpu_use_fusion_emitters": False,
}


class Compiled:
    def __init__(self, program: Program):
        self.program = program
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
        """Where states live: JAX's default device. Looked up on first use, not when the program
        is built, so that validating a config never starts JAX's backends (a driver that has
        started them warns at every fork Ray makes)."""
        return jax.devices()[0]

    def train(self, state, *inputs):
        """One call, `state` donated. Every state is committed to the device first (free when it
        already is), so a state fresh from `init`, restored from a checkpoint or edited on the
        host all match the one compiled program."""
        return self.call(jax.device_put(state, self.device), *inputs)
