"""What every module of `ajax_tune.compat` shares: the error a vanished private API raises, naming
it and the installed version, and the one-warning fallback of an opt-in speed-up."""

from __future__ import annotations

from typing import Any


class CompatError(RuntimeError):
    """An installed library no longer has a private API ajax_tune uses."""


def gone(what: str, library: str, error: Exception | None = None) -> CompatError:
    import importlib.metadata

    try:
        version = importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    detail = f" ({type(error).__name__}: {error})" if error else ""
    return CompatError(
        f"{what} is not available in {library} {version}{detail}; ajax_tune.compat must be updated for this version"
    )


def private(module: str, name: str, library: str) -> Any:
    """`module.name`, imported only when asked for; its absence is a `CompatError` naming it."""
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise gone(f"{module}.{name}", library, exc) from None


#: the fallbacks that have warned in this process (one warning each)
warned: set[str] = set()


def warn_once(what: str, message: str) -> None:
    """One warning per process for an opt-in speed-up that fell back to the library's own way."""
    if what not in warned:
        import warnings

        warned.add(what)
        warnings.warn(message, RuntimeWarning, stacklevel=3)
