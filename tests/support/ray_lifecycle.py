"""The Ray-lifecycle scenarios of `tests/test_ray_lifecycle.py`, each run in a fresh process
(`python -m tests.support.ray_lifecycle SCENARIO DIR`), because what they check, that no Ray is
left, needs a process that had none: a pytest worker may share the session's Ray. Prints one
JSON object of what it saw."""

from __future__ import annotations

import contextlib
import io
import json
import pathlib
import sys
import time

import psutil

RAY_PROGRAMS = ("gcs_server", "raylet", "dashboard", "log_monitor", "monitor.py", "runtime_env", "default_worker")


def ray_descendants() -> list[str]:
    """This process's live descendants that are Ray's (the watcher `ajax_tune.cli.reaper` is ours)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            line = " ".join(child.cmdline())
            if child.status() != psutil.STATUS_ZOMBIE and any(p in line for p in RAY_PROGRAMS):
                found.append(line[:120])
        except psutil.Error:
            pass
    return found


def ray_left_after(seconds: float) -> list[str]:
    deadline = time.monotonic() + seconds
    while ray_descendants() and time.monotonic() < deadline:
        time.sleep(0.2)
    return ray_descendants()


def run(argv: list[str]) -> tuple[int, str, str]:
    from ajax_tune.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


def failing_start(directory: pathlib.Path) -> dict:
    """The Tuner's construction fails after Ray started, as a bad callback would."""
    import ray

    from ajax_tune.errors import ConfigError
    from ajax_tune.tune.experiment import Experiment

    before = {"ray_initialized": ray.is_initialized(), "ray_processes": ray_descendants()}
    started = []
    real_tuner = Experiment.tuner

    def tuner(self, *args, **kwargs):
        real_tuner(self, *args, **kwargs)
        started.append(bool(ray_descendants()))
        raise ConfigError("wandb.project: refused here, after every check passed")

    Experiment.tuner = tuner
    config = directory / "small.yaml"
    config.write_text("trial: {env: {name: corridor}, train: {total_timesteps: 4096, timesteps_per_iteration: 2048}}\n")
    code, _, err = run(["run", str(config), "--storage-path", str(directory / "r"), "--no-plots", "--num-cpus", "1"])
    return {
        "before": before,
        "code": code,
        "started": started,
        "last_error_line": err.strip().splitlines()[-1],
        "ray_initialized_after": ray.is_initialized(),
        "ray_processes_after": ray_left_after(10),
    }


def finishing_run(directory: pathlib.Path) -> dict:
    import ray

    before = {"ray_initialized": ray.is_initialized(), "ray_processes": ray_descendants()}
    config = directory / "small.yaml"
    config.write_text(
        "trial: {env: {name: corridor}, agent: {num_envs: 8, unroll_length: 16}, "
        "train: {total_timesteps: 256, timesteps_per_iteration: 128, eval_episodes: 2}}\nstop: {training_iteration: 2}\n"
    )
    code, out, _ = run(["run", str(config), "--storage-path", str(directory / "r"), "--no-plots", "--num-cpus", "2"])
    rows = [line for line in next((directory / "r").glob("small/*/result.json")).read_text().splitlines() if line.strip()]
    return {
        "before": before,
        "code": code,
        "reported_best": "Best trial:" in out,
        "rows": len(rows),
        "ray_initialized_after": ray.is_initialized(),
        "ray_processes_after": ray_left_after(10),
    }


if __name__ == "__main__":
    scenario, directory = sys.argv[1], pathlib.Path(sys.argv[2])
    seen = {"failing_start": failing_start, "finishing_run": finishing_run}[scenario](directory)
    print(json.dumps(seen))
