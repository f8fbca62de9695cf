"""Loaded by every Python process that `benchmarks/suite_time.py` starts (this folder leads their
PYTHONPATH): once the process imports `jax._src.monitoring`, each of JAX's compile events (tracing,
lowering, XLA's compile, persistent-cache hits) is appended to `$SUITE_TIME_DIR/<pid>.jsonl`.

Nothing is imported here but the standard library, so a process that never uses JAX pays nothing,
and JAX starts with the settings its process gives it (the suite's conftest sets them before JAX
starts)."""

import importlib.abc
import importlib.util
import json
import os
import sys
import time

_DIR = os.environ.get("SUITE_TIME_DIR")
_EVENTS = ("trace", "mlir", "compile", "cache")


class _AfterMonitoring(importlib.abc.MetaPathFinder):
    """Finds nothing itself: when `jax._src.monitoring` is imported, it lets the normal import
    run, then registers the listener on the module."""

    def find_spec(self, name, path, target=None):
        if name != "jax._src.monitoring":
            return None
        sys.meta_path.remove(self)
        spec = importlib.util.find_spec(name)
        run = spec.loader.exec_module

        def exec_module(module):
            run(module)
            log = open(os.path.join(_DIR, f"{os.getpid()}.jsonl"), "a", buffering=1)  # noqa: SIM115 (open for the process's life)
            log.write(json.dumps({"argv": " ".join(sys.argv)[:200], "t": time.time()}) + "\n")

            def listen(event, duration, **kwargs):
                if any(part in event for part in _EVENTS):
                    row = {"e": event.rsplit("/", 1)[-1], "d": round(duration, 5), "f": kwargs.get("fun_name"), "t": time.time()}
                    log.write(json.dumps(row) + "\n")

            module.register_event_duration_secs_listener(listen)

        spec.loader.exec_module = exec_module
        return spec


if _DIR:
    sys.meta_path.insert(0, _AfterMonitoring())
