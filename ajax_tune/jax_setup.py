"""Per-process JAX set-up for a trial, applied before JAX starts its backend.

Tune runs each trial in its own worker process. Before the first array is made there, the trial
gets the CPU platform when it has no GPU (so JAX does not grab a GPU it was not given), a
memory fraction when it holds part of a GPU, single-threaded XLA when it was given one CPU (so
co-located trials do not fight over cores), and the shared persistent compilation cache, so the
second trial of a configuration loads the program the first one compiled.
"""

from __future__ import annotations

import logging
import os
import pathlib

import jax

from ajax_tune import compat

logger = logging.getLogger(__name__)

CACHE_ENV = "AJAX_TUNE_COMPILATION_CACHE"
#: Programs that took at least this long to compile are written to the persistent cache. Reading
#: one back takes milliseconds, so a tenth of a second is worth keeping: at JAX's default (1 s)
#: or at 0.5 s, the small programs of a short run (and the test suite's cheap build) compile
#: again in every process. In alternated warm runs of the suite's fast tier, each on a cache
#: filled at its own threshold, XLA compiled 54-58 s in all at 0.1 s against 70-71 s at 0.5 s,
#: and the runs took 128 and 140 s against 141 and 145 s.
CACHE_MIN_COMPILE_S = 0.1


def default_cache_dir() -> str:
    return os.environ.get(CACHE_ENV) or str(pathlib.Path.home() / ".cache" / "ajax_tune" / "jax")


def backend_started() -> bool:
    return compat.backends_are_initialized()


def configure_jax(cpus: float = 1.0, gpus: float = 0.0, cache_dir: str | None = None) -> dict[str, str]:
    """Set the process's JAX options for a trial's resources; returns what was set.

    Options that only act at backend start are skipped (with a log line) when the backend is
    already running, as in a driver process that has used JAX before.
    """
    applied: dict[str, str] = {}
    if not backend_started():
        if gpus <= 0:
            os.environ["JAX_PLATFORMS"] = "cpu"
            jax.config.update("jax_platforms", "cpu")
            applied["JAX_PLATFORMS"] = "cpu"
        elif gpus < 1:
            fraction = f"{0.9 * gpus:.3f}"
            os.environ["XLA_PYTHON_CLIENT_MEM_FRACTION"] = fraction
            applied["XLA_PYTHON_CLIENT_MEM_FRACTION"] = fraction
        if gpus <= 0 and cpus <= 1:
            flags = os.environ.get("XLA_FLAGS", "")
            if "xla_cpu_multi_thread_eigen" not in flags:
                flags = f"{flags} --xla_cpu_multi_thread_eigen=false".strip()
                os.environ["XLA_FLAGS"] = flags
                applied["XLA_FLAGS"] = flags
    else:
        logger.info("JAX backend already started: platform, memory and thread settings left as they are")
    cache = cache_dir or default_cache_dir()
    pathlib.Path(cache).mkdir(parents=True, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", cache)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", CACHE_MIN_COMPILE_S)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    applied["jax_compilation_cache_dir"] = cache
    return applied
