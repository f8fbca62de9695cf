"""Start-up tracing for `benchmarks/time_to_solve.py`, loaded by every Python process of a run
(the `ajax-tune` driver, Ray's workers, the trial) through PYTHONPATH when
`AJAX_TUNE_BENCH_TRACE` names a file; without it this module does nothing.

Each process appends JSON lines `{"pid", "t", "event", ...}` (t: seconds since the epoch, so
processes line up): when the process started, when chosen modules began and finished importing,
and the start and end of the steps a first result waits for (validation, Ray's start, the
trial's set-up and its calls), plus JAX's compile and compilation-cache events. Nothing in the
project knows about it: the steps are wrapped from outside, as their modules load.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.util
import json
import os
import sys
import time

PATH = os.environ.get("AJAX_TUNE_BENCH_TRACE")

# Modules whose import is timed (the first import of each in a process).
IMPORTS = (
    "ajax_tune",
    "ajax_tune.cli.run",
    "ajax_tune.tune.experiment",
    "ajax_tune.config",
    "ajax_tune.runner",
    "ajax_tune.tune.trainable",
    "ajax_tune.agents",
    "ajax_tune.loop",
    "ajax_tune.checkpoint",
    "jax",
    "jaxlib",
    "flax",
    "optax",
    "orbax.checkpoint",
    "flashbax",
    "ray",
    "ray.tune",
    "ray.train",
    "brax",
    "mujoco",
    "wandb",
    "gymnasium",
    "matplotlib",
    "pandas",
    "torch",
    "tensorflow",
)

# Functions timed once their module has loaded: module -> [(object path, label)].
CALLS = {
    "ajax_tune.tune.experiment": [("Experiment.load", "validate"), ("Experiment.tuner", "build_tuner")],
    "ajax_tune.cli.report": [("report", "report")],
    # Ray's start (`ray.init`, local or joining a cluster) and its stop (`ray.shutdown`)
    "ajax_tune.cli.launch": [("start_local_ray", "ray_start"), ("join_ray", "ray_start"), ("stop_local_ray", "ray_stop")],
    "ray.tune.tuner": [("Tuner.fit", "tuner_fit")],
    "ray.tune.trainable.trainable": [("Trainable.train", "tune_train")],
    "ajax_tune.tune.trainable": [
        ("AjaxTrainable.setup", "trial_setup"),
        ("AjaxTrainable.step", "trial_step"),
        ("AjaxTrainable.reset_config", "trial_reset_config"),
    ],
    "ajax_tune.jax_setup": [("configure_jax", "configure_jax")],
    "ajax_tune.runner": [
        ("Runner._build_loop", "build_loop"),
        ("Runner._start_run", "init_state"),
        ("Runner.train", "runner_train"),
    ],
}


def emit(event: str, **fields) -> None:
    line = json.dumps({"pid": os.getpid(), "t": time.time(), "event": event, **fields}) + "\n"
    fd = os.open(PATH, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, line.encode())
    finally:
        os.close(fd)


def _timed(fn, label):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        emit(label + ":start")
        try:
            return fn(*args, **kwargs)
        finally:
            emit(label + ":end", rss=_rss())
            if label == "trial_setup":
                _emit_platform()

    return wrapper


def _emit_platform() -> None:
    """The platform a trial's JAX runs on, once its set-up has started the backend."""
    jax = sys.modules.get("jax")
    if jax is not None:
        try:
            emit("jax_platform", platform=jax.devices()[0].platform)
        except Exception as exc:  # no backend: the trace just says so
            emit("jax_platform", platform=f"unknown ({exc})")


def _rss() -> int | None:
    """This process's resident set size in bytes, after each timed step."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return None


def _patch(module) -> None:
    for dotted, label in CALLS.get(module.__name__, ()):
        owner, _, attr = dotted.rpartition(".")
        target = getattr(module, owner) if owner else module
        if hasattr(target, attr):  # an older tree may lack one
            setattr(target, attr, _timed(getattr(target, attr), label))
    if module.__name__ == "jax":
        _listen_to_jax(module)


def _listen_to_jax(jax) -> None:
    def duration(name, seconds, **_):
        if "compil" in name or "cache" in name:
            emit("jax_duration", name=name, seconds=seconds)

    def event(name, **_):
        if "cache" in name or "compil" in name:
            emit("jax_event", name=name)

    try:
        jax.monitoring.register_event_duration_secs_listener(duration)
        jax.monitoring.register_event_listener(event)
    except Exception as exc:  # a JAX without these hooks: the trace just has no compile events
        emit("jax_listeners_failed", error=str(exc))


class _Watcher(importlib.abc.MetaPathFinder):
    def __init__(self):
        self.busy: set[str] = set()

    def find_spec(self, name, path=None, target=None):
        if (name not in IMPORTS and name not in CALLS) or name in self.busy:
            return None
        self.busy.add(name)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            self.busy.discard(name)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        run = spec.loader.exec_module

        def exec_module(module):
            emit("import:start", module=name)
            try:
                run(module)
            finally:
                emit("import:end", module=name)
            _patch(module)

        spec.loader.exec_module = exec_module
        return spec


if PATH:
    try:
        import psutil

        created = psutil.Process().create_time()
    except Exception:
        created = None
    emit("process", created=created, argv=sys.argv[:3], executable=sys.executable)
    sys.meta_path.insert(0, _Watcher())
