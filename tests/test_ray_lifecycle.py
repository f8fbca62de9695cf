"""`ajax-tune run` starts its local Ray (`ray.init`) once the experiment has passed every check
and stops it (`ray.shutdown`) once the results are reported: a failure after it started still
exits 2 with its one line and leaves no Ray, and a run finishes and leaves none. Each scenario
runs in a fresh process (`tests/support/ray_lifecycle.py`), which starts without a Ray, as a
user's `ajax-tune run` does."""

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
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.ray_lifecycle", name, str(tmp_path)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_a_failure_after_ray_started_exits_2_and_stops_that_ray(tmp_path):
    seen = scenario("failing_start", tmp_path)
    assert seen["before"] == NO_RAY
    assert seen["code"] == 2 and seen["started"] == [True]  # Ray's processes were up when the failure came
    assert seen["last_error_line"] == "ajax-tune run: error: wandb.project: refused here, after every check passed"
    assert not seen["ray_initialized_after"] and seen["ray_processes_after"] == []


@pytest.mark.slow
def test_a_run_finishes_and_leaves_no_ray(tmp_path):
    seen = scenario("finishing_run", tmp_path)
    assert seen["before"] == NO_RAY
    assert seen["code"] == 0 and seen["reported_best"]
    assert seen["rows"] == 2  # Ray's processes lived through the fit
    assert not seen["ray_initialized_after"] and seen["ray_processes_after"] == []
