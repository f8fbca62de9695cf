"""The private APIs of jax and ray this project relies on, each behind one small function.

When a new release moves one, the failure is here, with a message, rather than somewhere deep in
a trial (tests/test_compat.py checks every function against the installed versions)."""

from __future__ import annotations


def jit_cache_size(jitted) -> int:
    """Programs compiled so far by a `jax.jit` function (jit's cache size)."""
    size = getattr(jitted, "_cache_size", None)
    if not callable(size):
        raise RuntimeError("jax.jit functions no longer expose _cache_size(); update ajax_tune.compat")
    return int(size())


def jax_backends_started() -> bool:
    """Whether JAX has initialised its backends (after which platform flags no longer apply)."""
    from jax._src import xla_bridge

    return bool(xla_bridge.backends_are_initialized())
