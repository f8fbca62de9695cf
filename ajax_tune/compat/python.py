"""CPython's private APIs: how many exit functions `atexit` holds (it lists none publicly)."""

from __future__ import annotations

from ajax_tune.compat.base import gone

__all__ = ["atexit_callback_count"]


def atexit_callback_count() -> int:
    """The functions `atexit` will run at exit, counted: a library that registers one unasked
    changes how the user's process ends (`tests/test_guest.py` compares this before and after)."""
    import atexit

    count = getattr(atexit, "_ncallbacks", None)
    if not callable(count):
        raise gone("atexit._ncallbacks()", "python")
    return int(count())
