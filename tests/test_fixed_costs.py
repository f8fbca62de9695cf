"""`ajax-tune run` starts its local Ray in the background once the experiment has passed every
check, builds the Tuner meanwhile, and stops that Ray as soon as the results are reported: a
failure while it starts still exits 2 with its one line and leaves no Ray, and a run on it
finishes and leaves none. Each scenario runs in a fresh process (`tests/support/background_ray.py`),
which starts without a Ray, as a user's `ajax-tune run` does."""

from __future__ import annotations

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

NO_RAY = {"ray_initialized": False, "ray_processes": []}


def scenario(name: str, tmp_path) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    env.pop("RAY_ADDRESS", None)
    env.pop("RAY_prestart_worker_first_driver", None)  # the suite's own setting: here `ajax-tune run`'s counts
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.background_ray", name, str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_failure_while_ray_starts_in_the_background_exits_2_and_stops_that_ray(tmp_path):
    seen = scenario("failing_start", tmp_path)
    assert seen["before"] == NO_RAY
    assert seen["code"] == 2 and seen["started"] == [True]  # Ray's processes were up when the failure came
    assert seen["last_error_line"] == "ajax-tune run: error: wandb.project: refused here, after every check passed"
    assert not seen["ray_initialized_after"] and seen["ray_processes_after"] == []


@pytest.mark.slow
def test_a_run_on_a_ray_started_in_the_background_finishes_and_leaves_no_ray(tmp_path):
    seen = scenario("finishing_run", tmp_path)
    assert seen["before"] == NO_RAY
    assert seen["code"] == 0 and seen["reported_best"]
    assert seen["rows"] == 2  # Ray's processes lived through the fit
    # Ray prestarts no idle workers for the driver (one per CPU, 2 here): every worker hosted the trial.
    assert seen["workers"] >= 1 and seen["idle_workers"] == []
    # Nor an API server or an autoscaler monitor on its head (`compat.without_idle_head_processes`);
    # the log monitor still forwards the trial's output.
    assert seen["head_programs"] == ["gcs_server", "log_monitor.py", "raylet"]
    assert not seen["ray_initialized_after"] and seen["ray_processes_after"] == []
