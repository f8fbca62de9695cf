"""`ajax-tune run` starts its local Ray in the background once the experiment has passed every
check, builds the Tuner meanwhile, and stops that Ray as soon as the results are reported: a
failure while it starts still exits 2 with its one line and leaves no Ray, and a run on it
finishes and leaves none."""

from __future__ import annotations

import time

import psutil
import pytest

from ajax_tune.cli import main
from ajax_tune.errors import ConfigError

RAY_PROGRAMS = ("gcs_server", "raylet", "dashboard", "log_monitor", "monitor.py", "runtime_env", "default_worker")


def ray_descendants() -> list[str]:
    """This process's descendants that are Ray's (the watcher `ajax_tune.reaper` is ours)."""
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            line = " ".join(child.cmdline())
            if child.status() != psutil.STATUS_ZOMBIE and any(p in line for p in RAY_PROGRAMS):
                found.append(line[:120])
        except psutil.Error:
            pass
    return found


@pytest.mark.slow
def test_a_failure_while_ray_starts_in_the_background_exits_2_and_stops_that_ray(tmp_path, capsys, monkeypatch):
    import ray

    from ajax_tune.experiment import Experiment

    assert not ray.is_initialized() and not ray_descendants()
    started = []
    real_tuner = Experiment.tuner

    def tuner(self, *args, **kwargs):  # fails while Ray starts beside it, as a bad callback would
        real_tuner(self, *args, **kwargs)
        deadline = time.monotonic() + 60
        while not ray_descendants() and time.monotonic() < deadline:  # Ray's processes are starting beside us
            time.sleep(0.1)
        started.append(bool(ray_descendants()))
        raise ConfigError("wandb.project: refused here, after every check passed")

    monkeypatch.setattr(Experiment, "tuner", tuner)
    config = tmp_path / "small.yaml"
    config.write_text("trial: {env: {name: corridor}, train: {total_timesteps: 4096, timesteps_per_iteration: 2048}}\n")
    code = main(["run", str(config), "--storage-path", str(tmp_path / "r"), "--no-plots", "--num-cpus", "1"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and started == [True]
    assert err[-1] == "ajax-tune run: error: wandb.project: refused here, after every check passed"
    assert not ray.is_initialized()
    deadline = time.monotonic() + 10
    while ray_descendants() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not ray_descendants()


@pytest.mark.slow
def test_a_run_on_a_ray_started_in_the_background_finishes_and_leaves_no_ray(tmp_path, capsys):
    import ray

    assert not ray.is_initialized() and not ray_descendants()
    config = tmp_path / "small.yaml"
    config.write_text(
        "trial: {env: {name: corridor}, agent: {num_envs: 8, unroll_length: 16}, "
        "train: {total_timesteps: 256, timesteps_per_iteration: 128, eval_episodes: 2}}\nstop: {training_iteration: 2}\n"
    )
    code = main(["run", str(config), "--storage-path", str(tmp_path / "r"), "--no-plots", "--num-cpus", "1"])
    out = capsys.readouterr().out
    assert code == 0 and "Best trial:" in out
    rows = [line for line in next((tmp_path / "r").glob("small/*/result.json")).read_text().splitlines() if line.strip()]
    assert len(rows) == 2  # Ray's processes lived through the fit
    assert not ray.is_initialized()
    deadline = time.monotonic() + 10
    while ray_descendants() and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not ray_descendants()
