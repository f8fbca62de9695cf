"""Real faults: a killed driver (resume, leftover processes, a second run on the same
experiment), a killed trial, a partial checkpoint, a failing curriculum."""

import json
import logging
import math
import os
import pathlib
import re
import signal
import subprocess
import sys
import time

import pandas as pd
import psutil
import pytest
import yaml

from ajax_tune import checkpoint
from ajax_tune.cli import main
from ajax_tune.errors import CheckpointError, TaskError
from ajax_tune.runner import CurriculumError, Runner
from tests.support.helpers import corridor_config

TESTS = pathlib.Path(__file__).resolve().parent
BUDGET = 512  # env steps per seed per train() of corridor_config


def experiment_yaml(tmp_path, name, **sections):
    trial = corridor_config()
    trial.update(sections.pop("trial", {}))
    raw = {
        "name": name,
        "trial": trial,
        "stop": {"training_iteration": 4},
        "checkpoint": {"frequency": 1, "at_end": True},
        **sections,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw))
    return str(path)


def rows(trial_dir):
    return pd.read_csv(trial_dir / "progress.csv").sort_values(["training_iteration", "iterations_since_restore"])


def saved_iteration(path):
    return checkpoint.read_metadata(path)["extra"]["result"]["training_iteration"]


def wait_for(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.25)


# -- a partial checkpoint --------------------------------------------------------------------------


def test_partial_checkpoints_are_skipped(tmp_path, capsys):
    runner = Runner(corridor_config())
    trial = tmp_path / "trial"
    for i in range(3):
        runner.save(trial / f"checkpoint_{i:06d}")
    # Tune copies checkpoint files in no fixed order: the metadata may land before a state file.
    newest = trial / "checkpoint_000002"
    victim = next(p for p in sorted((newest / "state").rglob("*")) if p.is_file())
    victim.unlink()
    with pytest.raises(CheckpointError, match=r"incomplete or damaged \(state/.* is missing\)"):
        runner.restore(newest)
    assert checkpoint.find_complete(newest)[0].name == "checkpoint_000001"
    assert checkpoint.find_complete(trial)[0].name == "checkpoint_000001"

    half = trial / "checkpoint_000001" / "state" / victim.relative_to(newest / "state")
    half.write_bytes(half.read_bytes()[: half.stat().st_size // 2])  # cut in half: also incomplete
    chosen, note = checkpoint.find_complete(newest)
    assert chosen.name == "checkpoint_000000" and "incomplete" in note

    assert main(["evaluate", str(newest), "--episodes", "1", "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["episodes"] == 1
    assert (
        out.err.strip() == f"note: checkpoint_000002 is incomplete (state/{victim.relative_to(newest / 'state')} "
        f"is missing); using checkpoint_000000, the newest complete one before it"
    )


# -- a failing curriculum -----------------------------------------------------------------------


def test_failing_curriculum_names_the_function_and_the_iteration():
    runner = Runner(corridor_config(env_task_fn="tests.support.fault_callbacks:raise_at_iteration_two"))
    runner.train()
    with pytest.raises(CurriculumError) as failure:
        runner.train()
    message = str(failure.value)
    assert (
        "env_task_fn tests.support.fault_callbacks:raise_at_iteration_two raised ValueError: curriculum failed on purpose"
    ) in message
    assert f"after iteration 2 (trained to env_steps {2 * BUDGET};" in message and "not reported" in message
    assert failure.value.result["env_steps"] == 2 * BUDGET  # the trained iteration's result, not lost
    assert runner.iteration == 2 and runner.loop.timestep(runner.state) == 2 * BUDGET

    from tests.support.curricula import bad_task_fn

    runner.curriculum.env_task_fn = bad_task_fn  # returns a corridor of 1000 cells
    with pytest.raises(
        TaskError,
        match=r"env_task_fn tests.support.curricula:bad_task_fn returned a task that does not fit "
        r"after iteration 3 .*length.*\[1, 32\]",
    ):
        runner.train()
    assert runner.get_task()["length"] == 4  # the task stays as it was

    from tests.support.fault_callbacks import RaiseOnTrainResult

    runner.curriculum.env_task_fn, runner.curriculum.callbacks = None, [RaiseOnTrainResult()]
    with pytest.raises(
        CurriculumError,
        match=r"callbacks\[0\] \(RaiseOnTrainResult\) raised RuntimeError: "
        r"callback failed on purpose after iteration 4",
    ):
        runner.train()


# -- a killed driver ----------------------------------------------------------------------------


@pytest.mark.slow
def test_killed_driver_leaves_nothing_and_resume_continues_from_the_newest_checkpoints(ray_session, tmp_path, capsys):
    hold = tmp_path / "hold"
    hold.write_text("")
    config = experiment_yaml(
        tmp_path,
        "killed",
        stop={"training_iteration": 3},  # each trial trains on after the resume: from 1 or 2 to 3
        trial={
            "agent": {**corridor_config()["agent"], "lr": {"grid": [1e-3, 3e-3]}},
            "callbacks": [{"class": "tests.support.fault_callbacks:HoldAfter", "kwargs": {"marker": str(hold), "iteration": 2}}],
            # both trials must be live at once (one is held), in a Ray of one CPU beside the session's
            "resources": {"cpu": 0.5},
        },
    )
    storage = tmp_path / "results"
    experiment = storage / "killed"
    # Tune's experiment snapshot is taken at the start and then only every hour: the driver dies
    # with the snapshot knowing no checkpoint, the case that used to restart trials from scratch.
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(TESTS.parent), os.environ.get("PYTHONPATH", "")]),
        "JAX_PLATFORMS": "cpu",
        "TUNE_GLOBAL_CHECKPOINT_S": "3600",
    }
    exe = pathlib.Path(sys.executable).parent / "ajax-tune"
    log = tmp_path / "driver.log"
    driver = subprocess.Popen(
        [exe, "run", config, "--storage-path", str(storage), "--no-plots", "--num-cpus", "1"],
        env=env,
        stdout=log.open("w"),
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    descendants = []
    try:

        def two_checkpoints_each():
            assert driver.poll() is None, log.read_text()[-3000:]
            trials = list(experiment.glob("AjaxTrainable_*"))
            return len(trials) == 2 and all(
                len(checkpoint.sorted_checkpoints(t)) == 2 and checkpoint.find_complete(t)[0].name == "checkpoint_000001"
                for t in trials
            )

        # (the whole test takes about 90 s on 2 busy cores); the rest of it (the kill, a resume of
        # 1 or 2 iterations) must fit in pytest's 600 s too
        wait_for(two_checkpoints_each, 300, "two checkpoints in each trial")

        # A second run on the same experiment while the first is live is refused, before Ray.
        assert main(["run", config, "--storage-path", str(storage), "--no-plots"]) == 2
        assert "is in use by another ajax-tune (pid" in capsys.readouterr().err

        descendants = [(p, p.create_time()) for p in psutil.Process(driver.pid).children(recursive=True)]
        assert any("DashboardAgent" in " ".join(p.cmdline()) for p, _ in descendants)  # what used to outlive it
        driver.send_signal(signal.SIGKILL)
        driver.wait()

        def all_gone():
            return not [
                p
                for p, started in descendants
                if p.is_running() and p.create_time() == started and p.status() != psutil.STATUS_ZOMBIE
            ]

        wait_for(all_gone, 30, "the killed driver's Ray processes to go")  # Ray's own agents linger for a minute
    finally:
        for process, started in descendants:  # only what this test started
            if process.is_running() and process.create_time() == started:
                process.kill()
        if driver.poll() is None:
            driver.kill()
            driver.wait()

    # Fault on fault: the newest checkpoint of one trial is a partial copy (its metadata is there).
    trials = sorted(experiment.glob("AjaxTrainable_*"))
    partial = trials[0] / "checkpoint_000001"
    next(p for p in (partial / "state").rglob("*") if p.is_file()).unlink()
    expected = {trials[0].name: 1, trials[1].name: 2}  # the iteration of each newest complete checkpoint
    hold.unlink()

    assert main(["resume", str(experiment), "--no-plots"]) == 0
    err = capsys.readouterr().err
    assert "taking over the stale lock" in err and "skipping checkpoint_000001, incomplete" in err
    assert err.count("Tune's last snapshot knew no checkpoint") == 2
    for trial in trials:
        frame = rows(trial)
        resumed = frame[frame["iterations_since_restore"] == 1].iloc[-1]
        # the first iteration after the resume continues from the newest complete checkpoint
        assert resumed["training_iteration"] == expected[trial.name] + 1
        assert resumed["env_steps"] == (expected[trial.name] + 1) * BUDGET
        assert frame["training_iteration"].max() == 3
    assert not (experiment / ".ajax-tune.lock").exists()


# -- a killed trial; the best checkpoint kept ---------------------------------------------------


@pytest.mark.slow
def test_killed_trial_finishes_exactly_and_the_best_checkpoint_survives(ray_session, tmp_path, capsys):
    marker = tmp_path / "killed"
    kill = [{"class": "tests.support.fault_callbacks:KillOnce", "kwargs": {"marker": str(marker), "at_iteration": 3}}]
    # The metric is env_steps to minimise: the best checkpoint is the first one, for certain.
    config = experiment_yaml(
        tmp_path,
        "best",
        trial={"callbacks": {"grid": [kill, []]}},
        # the clean twin may continue in a finished trial's actor (reset_config), not a new process
        tune={"metric": "env_steps", "mode": "min", "reuse_actors": True},
        failure={"max_failures": 1},
        checkpoint={"frequency": 1, "at_end": True, "num_to_keep": 1},
    )
    assert main(["run", config, "--storage-path", str(tmp_path / "results"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert marker.exists()  # the trial was killed at iteration 3, and restored

    assert f"best env_steps {' ' * 10}{BUDGET} at training_iteration 1" in out
    assert next(line.split()[-1] for line in out.splitlines() if line.strip().startswith("checkpoint")).endswith(
        "checkpoint_000000"
    )
    trials = {}
    for trial in (tmp_path / "results" / "best").glob("AjaxTrainable_*"):
        params = json.loads((trial / "params.json").read_text())
        trials["killed" if params["callbacks"] else "clean"] = trial
        kept = [p.name for p in checkpoint.sorted_checkpoints(trial)]
        assert len(kept) == 2 and kept[0] == "checkpoint_000000"  # the best, beside the latest
        assert saved_iteration(checkpoint.sorted_checkpoints(trial)[-1]) == 4

    killed, clean = rows(trials["killed"]), rows(trials["clean"])
    assert (killed["iterations_since_restore"] == 1).sum() == 2  # started, then restored
    last_killed, last_clean = killed.iloc[-1], clean.iloc[-1]
    for key in ("env_steps", "eval/return_mean", "loss/policy", "loss/value", "train/episode_return_mean"):
        assert last_killed[key] == last_clean[key], key  # bit-identical to the uninterrupted twin

    # A restore that meets a damaged checkpoint uses the newest whole one before it.
    from ajax_tune import AjaxTrainable

    config = json.loads((trials["clean"] / "params.json").read_text())
    latest = checkpoint.sorted_checkpoints(trials["clean"])[-1]
    next(p for p in (latest / "state").rglob("*") if p.is_file()).unlink()  # its metadata stays
    trainable = AjaxTrainable(config=config)
    trainable.restore(str(latest))
    assert trainable.training_iteration == 1 and trainable.runner.iteration == 1
    assert trainable.train()["env_steps"] == 2 * BUDGET
    trainable.stop()


# -- a diverged state -----------------------------------------------------------------------------


@pytest.mark.heavy
def test_a_diverged_state_is_never_saved_and_never_evaluated(tmp_path, capsys, caplog):
    from ajax_tune.config import Config

    runner = Runner(corridor_config())
    runner.train()
    good = pathlib.Path(runner.save(tmp_path / "good"))
    runner.state = runner.loop.set_hparams(runner.state, Config.from_dict(corridor_config(lr=1e30)).agent)
    with caplog.at_level(logging.WARNING, logger="ajax_tune.runner"):
        result = runner.train()  # a learning rate of 1e30: the parameters are NaN after one update
    assert result["train/nonfinite"] == 1.0 and result["done"] is True  # on_nonfinite: stop (the default)
    assert result["eval/return_mean"] == -math.inf and result["eval/success_rate_mean"] == -math.inf
    assert result["health/params_nonfinite_at"] > BUDGET
    (message,) = [r.getMessage() for r in caplog.records if "diverged" in r.getMessage()]
    assert re.search(r"in iteration 2: (loss|params) stopped being finite at env step \d+", message)
    with pytest.raises(CheckpointError, match=r"the state of iteration 2 is not finite \(.params"):
        runner.save(tmp_path / "diverged")
    assert not (tmp_path / "diverged" / "ajax_tune.json").exists()
    runner.restore(good)  # the last good checkpoint is whole, and finite
    assert runner.iteration == 1

    # A checkpoint written before this guard existed (straight through the loop) is refused.
    runner.state = runner.loop.set_hparams(runner.state, Config.from_dict(corridor_config(lr=1e30)).agent)
    runner.train()
    runner.loop.save(tmp_path / "old", runner.state, extra={"config": runner.config.to_dict(), "iteration": 2})
    code = main(["evaluate", str(tmp_path / "old")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "holds a non-finite state" in err


@pytest.mark.parametrize("policy", ["error", "continue"])
def test_divergence_policy(policy):
    from ajax_tune.config import Config
    from ajax_tune.runner import DivergedError

    runner = Runner(corridor_config(train={"on_nonfinite": policy}))
    runner.state = runner.loop.set_hparams(runner.state, Config.from_dict(corridor_config(lr=1e30)).agent)
    if policy == "error":
        with pytest.raises(DivergedError, match=r"diverged in iteration 1: (loss|params) stopped being finite"):
            runner.train()
    else:
        result = runner.train()
        assert result["done"] is False and result["eval/return_min"] == -math.inf
