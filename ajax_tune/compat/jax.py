"""jax's private APIs: a jitted function's cache, per-program compiler options, the monitoring
listener's removal, whether the backends have started, and the lowering registry."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ajax_tune.compat.base import gone, private, warn_once

__all__ = [
    "backends_are_initialized",
    "jit_cache_size",
    "jit_with_options",
    "registered_lowerings",
    "unregister_event_duration_listener",
]


def jit_cache_size(fn: Callable) -> int:
    """How many programs a `jax.jit`-wrapped function has compiled: its cache's size.

    Counts recompilations that do not retrace (an argument with another placement or sharding),
    which counting traces misses. jax exposes it only as the private `_cache_size()`."""
    cache_size = getattr(fn, "_cache_size", None)
    if not callable(cache_size):
        raise gone("jax.jit(...)._cache_size()", "jax")
    return int(cache_size())


def jit_with_options(fn: Callable, options: dict[str, Any]) -> Callable:
    """`jax.jit(fn)` whose one program is compiled with XLA debug `options` (per program: nothing
    else in the process changes). `jax.jit(compiler_options=...)` is young: where it is missing,
    the program compiles with JAX's defaults instead (the same results, a slower compile), with
    one warning. The option names are XLA's own; the supported jax range is where they hold."""
    import inspect

    import jax

    if "compiler_options" not in inspect.signature(jax.jit).parameters:
        warn_once("jit_with_options", "ajax_tune: this jax has no jit(compiler_options=...); init compiles with every pass")
        return jax.jit(fn)
    return jax.jit(fn, compiler_options=options)


def unregister_event_duration_listener(listener: Callable) -> None:
    """Stop calling a listener that `jax.monitoring.register_event_duration_secs_listener` added.
    Public from jax 0.8.1 on; before, only `jax._src.monitoring` has it, by another name."""
    import jax.monitoring

    unregister = getattr(jax.monitoring, "unregister_event_duration_listener", None)
    if unregister is None:
        unregister = private("jax._src.monitoring", "_unregister_event_duration_listener_by_callback", "jax")
    unregister(listener)


def backends_are_initialized() -> bool:
    """Whether JAX has started its backends (after which platform and memory settings no
    longer apply). jax has no public way to ask without starting them."""
    return bool(private("jax._src.xla_bridge", "backends_are_initialized", "jax")())


def registered_lowerings() -> dict[tuple[str | None, Any], Any]:
    """Every MLIR lowering rule registered in this process, by (platform, primitive); platform
    None for a rule of every platform. Registering one is process-wide, which a library in a
    user's process must not do unasked: `tests/test_guest.py` compares this before and after.
    jax keeps them in `jax._src.interpreters.mlir`'s private dicts, as the rule itself (jax 0.6) or
    in an entry that holds it as `.rule` (later): the rule is returned either way."""
    common = private("jax._src.interpreters.mlir", "_lowerings", "jax")
    by_platform = private("jax._src.interpreters.mlir", "_platform_specific_lowerings", "jax")
    if not isinstance(common, dict) or not isinstance(by_platform, dict):
        raise gone("jax._src.interpreters.mlir's lowering dicts", "jax")
    rules = {(None, primitive): _rule(entry) for primitive, entry in common.items()}
    for platform, entries in by_platform.items():
        rules.update({(platform, primitive): _rule(entry) for primitive, entry in entries.items()})
    return rules


def _rule(entry: Any) -> Any:
    return getattr(entry, "rule", entry)
