"""Test session set-up: JAX on the CPU with a persistent compilation cache, set before JAX starts."""

import os
import pathlib

os.environ.setdefault("JAX_PLATFORMS", "cpu")
_CACHE = pathlib.Path(__file__).resolve().parent.parent / ".jax_cache"
os.environ.setdefault("AJAX_TUNE_COMPILATION_CACHE", str(_CACHE))

import jax  # noqa: E402

jax.config.update("jax_compilation_cache_dir", os.environ["AJAX_TUNE_COMPILATION_CACHE"])
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
