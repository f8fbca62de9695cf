"""`ajax-tune run` and `resume`: an experiment checked, a Ray started (or joined), Tune's fit, a report.

Everything that can be refused is refused before Ray starts: the experiment file and every
section of it, the storage path, the experiment lock, the resources a trial asks for against the
local machine. A local Ray is started with `ray.init` after those checks and stopped with
`ray.shutdown` once the results are reported; a reaper process clears what Ray leaves behind if
this driver is killed (`reaper.py`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import math
import os
import pathlib
import sys


def cmd_run(args) -> int:
    settle = pause_gc()
    try:
        return _run(args, settle)
    finally:
        settle()


def pause_gc():
    """Python's cyclic collector off for the driver's set-up (imports of JAX, Flax, Ray and Ray
    Tune, validation, the Tuner: some 300,000 objects that live as long as the process, walked
    at every full collection to free nothing). Returns `settle`: it freezes what is alive then
    (`gc.freeze`, so the fit's collections never walk it) and turns the collector back on if it
    was on; once, however often it is called. This is the command's own process."""
    was_enabled = gc.isenabled()
    gc.disable()
    done = False

    def settle() -> None:
        nonlocal done
        if not done:
            done = True
            gc.freeze()
            if was_enabled:
                gc.enable()

    return settle


def _run(args, settle) -> int:
    from ajax_tune.cli import launch
    from ajax_tune.cli.report import report
    from ajax_tune.tune.experiment import Experiment

    local = not (args.address or os.environ.get("RAY_ADDRESS"))
    if local:
        launch.name_local_auth_mode()  # before anything imports Ray
    experiment = Experiment.load(args.config, args.overrides)  # validated before Ray starts
    if args.name:
        experiment = dataclasses.replace(experiment, name=args.name)
    storage = launch.storage_directory(args.storage_path or experiment.storage_path or "results")
    wanted = launch.trial_resources(experiment.trial)
    if local:
        launch.check_resources(wanted, [{"CPU": launch.local_cpus(args.num_cpus), "GPU": math.inf}], local=True)
    directory, note = launch.run_directory(storage, experiment.name)
    if note:
        print(note, file=sys.stderr)
        experiment = dataclasses.replace(experiment, name=directory.name)
    release = launch.lock_experiment(directory)
    ours = False
    try:
        ours = start_ray(args.address, args.num_cpus, wanted)
        wandb_settings = experiment.wandb if experiment.wandb is not None else ({} if args.wandb else None)
        callbacks = []
        if wandb_settings is not None:
            from ajax_tune.tune.wandb_logging import wandb_callback

            callbacks.append(wandb_callback(**wandb_settings))
        tuner = experiment.tuner(storage_path=str(storage), callbacks=callbacks)
        settle()
        with result_box(experiment.tune.metric, args.verbose):
            results = tuner.fit()
        code = report(results, experiment.tune.metric, experiment.tune.mode, plots=not args.no_plots)
        if wandb_settings is not None:
            from ajax_tune.cli.report import best_trial_video

            best_trial_video(results, experiment.tune.metric, experiment.tune.mode, callbacks[0])
        return code
    finally:
        if ours:
            launch.stop_local_ray()
        release()


def cmd_resume(args) -> int:
    from ajax_tune.cli import launch
    from ajax_tune.cli.report import report
    from ajax_tune.tune import recovery

    if not (args.address or os.environ.get("RAY_ADDRESS")):
        launch.name_local_auth_mode()  # before anything imports Ray
    directory = pathlib.Path(args.directory).absolute()
    recovery.check_experiment(directory)  # before Ray starts
    release = launch.lock_experiment(directory)
    ours = False
    try:
        for note in recovery.point_trials_at_newest(directory):
            print(note, file=sys.stderr)
        ours = start_ray(args.address, args.num_cpus, None)

        from ray import tune

        from ajax_tune.tune.trainable import AjaxTrainable

        tuner = tune.Tuner.restore(
            str(directory), trainable=AjaxTrainable, resume_errored=args.resume_errored, restart_errored=args.restart_errored
        )
        with result_box(_saved_metric(directory), args.verbose):
            results = tuner.fit()
        return report(results, None, None, plots=not args.no_plots)
    finally:
        if ours:
            launch.stop_local_ray()
        release()


def start_ray(address: str | None, num_cpus: int | None, wanted: dict | None) -> bool:
    """Join the cluster at `address` (or `$RAY_ADDRESS`, Ray's own way to name one), use the Ray
    this process already runs, or start a local one. Returns whether the Ray is ours to stop."""
    import ray

    from ajax_tune.cli import launch

    if ray.is_initialized():
        return False
    address = address or os.environ.get("RAY_ADDRESS")
    if address:
        launch.join_ray(address)
    else:
        launch.start_local_ray(num_cpus)
    if wanted:  # GPUs are known once Ray has looked; on a cluster, only a warning
        warning = launch.check_resources(wanted, launch.cluster_nodes(), local=not address)
        if warning:
            print(warning, file=sys.stderr)
    return not address


@contextlib.contextmanager
def result_box(metric: str | None, verbose: bool):
    """What Tune prints when a trial ends: the keys a person reads, `metric` among them, or
    (verbose) every key. Tune reads them from the trainable class when `fit` starts."""
    from ajax_tune import compat
    from ajax_tune.tune.output import ResultBox
    from ajax_tune.tune.trainable import AjaxTrainable

    before = compat.tune_result_keys(AjaxTrainable)
    compat.set_tune_result_keys(AjaxTrainable, None if verbose else ResultBox(metric))
    try:
        yield
    finally:
        compat.set_tune_result_keys(AjaxTrainable, before)


def _saved_metric(directory: pathlib.Path) -> str | None:
    """The metric an experiment was run with, from the plot settings `run` saved (if any)."""
    from ajax_tune.results.series import experiment_metric

    return experiment_metric(directory)
