"""One local Ray and one Tune trial of a trainable that does nothing (project interpreter):
how long Ray's start, the trial's first result and Ray's stop take, with Ray's own defaults or
with ajax_tune's (no prestarted idle workers, no API server or autoscaler monitor on the head
(`compat.without_idle_head_processes`), `compat.stop_local_ray_at_once`)."""

from __future__ import annotations

import contextlib
import os
import tempfile
import time

import protocol

s = protocol.settings()
start = time.perf_counter()

import psutil  # noqa: E402
import ray  # noqa: E402
from ray import tune  # noqa: E402

from ajax_tune import compat  # noqa: E402

imported = time.perf_counter()
ours = s["side"].startswith("ajax_tune")  # "ajax_tune_with_head": ours, but the head's API server and monitor kept
with compat.without_idle_head_processes() if s["side"] == "ajax_tune" else contextlib.nullcontext():
    ray.init(
        address="local",
        num_cpus=s["num_cpus"],
        include_dashboard=False,
        log_to_driver=False,
        _system_config=compat.LOCAL_RAY_SYSTEM_CONFIG if ours else None,
    )
ray_up = time.perf_counter()


class Nothing(tune.Trainable):
    def step(self):
        return {"at": time.time(), "pid": os.getpid()}


def workers() -> list[int]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            argv = child.cmdline()
            if argv and argv[0].startswith("ray::") and not argv[0].endswith("Agent"):
                found.append(child.pid)
        except psutil.Error:
            pass
    return found


idle = workers()  # before the trial: what Ray prestarted
fit_start, fit_start_wall = time.perf_counter(), time.time()
storage = tempfile.mkdtemp(prefix="ajax_tune_ray_start_")
results = tune.Tuner(Nothing, run_config=tune.RunConfig(storage_path=storage, verbose=0, stop={"training_iteration": 1})).fit()
fitted = time.perf_counter()
first_result = results[0].metrics["at"] - fit_start_wall
trial_in_prestarted = results[0].metrics["pid"] in idle
if ours:
    compat.stop_local_ray_at_once()
else:
    ray.shutdown()
stopped = time.perf_counter()
protocol.emit(
    {
        "side": s["side"],
        "import_s": imported - start,
        "ray_start_s": ray_up - imported,
        "first_result_s": fit_start - imported + first_result,
        "fit_s": fitted - fit_start,
        "stop_s": stopped - fitted,
        "total_s": stopped - start,
        "prestarted_workers": len(idle),
        "trial_in_a_prestarted_worker": trial_in_prestarted,
        "versions": protocol.versions("ray"),
    }
)
