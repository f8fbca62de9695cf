"""`ajax-tune`: run, resume, plot and evaluate experiments, and collect datasets.

Bad input (a config that does not validate, a missing file, a checkpoint that does not fit, a
storage path that cannot hold results, a cluster that cannot be reached) is one line on stderr
and exit status 2, found before Ray or JAX start wherever it can be.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import dataclasses
import gc
import json
import math
import os
import pathlib
import sys
import threading
import time
from collections.abc import Sequence

from ajax_tune import __version__, compat
from ajax_tune.errors import CheckpointError, ConfigError, TaskError
from ajax_tune.launch import LaunchError
from ajax_tune.twins import GYMNASIUM_TWINS

SUMMARY_KEYS = (
    "eval/return_mean",
    "eval/return_std",
    "eval/success_rate_mean",
    "eval/length_mean",
    "env_steps",
    "training_iteration",
    "lr",
    "curriculum/level",
)


class UsageError(Exception):
    """Bad input found by the CLI itself."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 0
    try:
        return args.handler(args)
    except (ConfigError, TaskError, CheckpointError, UsageError, LaunchError) as exc:
        message = " ".join(str(exc).split())  # one line, whatever a library put in the message
        print(f"ajax-tune {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ajax-tune {args.command}: interrupted; continue with `ajax-tune resume DIR`", file=sys.stderr)
        return 130


def entry() -> None:
    """The `ajax-tune` console script: `main`, then an exit that skips the interpreter's teardown.

    Once a command has returned, its results are written and its Ray is stopped; what is left
    is Python freeing every module (JAX's, Ray's, Tune's, pandas'), about 0.9 s here, in every
    command. The exit does what a normal one must (it waits for non-daemon threads, runs the
    `atexit` hooks, flushes the standard streams) and then leaves without the teardown.
    """
    code = main()
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):  # a closed or broken pipe has nothing left to flush
            stream.flush()
    os._exit(code or 0)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ajax-tune",
        description="Tune fully jitted JAX reinforcement learning with Ray Tune: searches, curricula, PBT.",
    )
    parser.add_argument("--version", action="version", version=f"ajax-tune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser(
        "run",
        help="run an experiment from a YAML config",
        description="Build a Tuner from CONFIG and run it on a local Ray instance, or on a running cluster with --address.",
    )
    run.add_argument("config", help="experiment YAML (see configs/)")
    run.add_argument(
        "--set",
        dest="overrides",
        action="append",
        default=[],
        metavar="KEY.PATH=VALUE",
        help="override a config value (YAML syntax), e.g. --set trial.agent.ent_coef=0.0; repeatable",
    )
    run.add_argument("--name", help="experiment name (default: the config's name or file name)")
    run.add_argument("--storage-path", help="where results go (default: ./results)")
    run.add_argument(
        "--address", help="join a running Ray cluster (e.g. 'auto' or HOST:PORT; default: $RAY_ADDRESS) instead of starting one"
    )
    run.add_argument("--num-cpus", type=int, help="CPUs of the local Ray instance (default: all)")
    run.add_argument("--wandb", action="store_true", help="log every trial to Weights & Biases (offline without an API key)")
    run.add_argument("--no-plots", action="store_true", help="skip writing PNG plots at the end")
    run.add_argument(
        "--verbose",
        action="store_true",
        help="show every metric when a trial ends (default: the ones a person reads; all are in the files)",
    )
    run.set_defaults(handler=cmd_run)

    resume = sub.add_parser(
        "resume", help="continue an interrupted experiment", description="Continue an experiment directory with Tuner.restore."
    )
    resume.add_argument("directory", help="the experiment directory (STORAGE_PATH/NAME)")
    resume.add_argument("--resume-errored", action="store_true", help="resume errored trials from their last checkpoint")
    resume.add_argument("--restart-errored", action="store_true", help="restart errored trials from scratch")
    resume.add_argument("--address", help="join a running Ray cluster instead of starting one")
    resume.add_argument("--num-cpus", type=int)
    resume.add_argument("--no-plots", action="store_true")
    resume.add_argument("--verbose", action="store_true", help="show every metric when a trial ends")
    resume.set_defaults(handler=cmd_resume)

    plot = sub.add_parser(
        "plot",
        help="write PNG plots of an experiment",
        description="Learning curves, curriculum tasks and learning rates of every trial.",
    )
    plot.add_argument("directory", help="the experiment directory")
    plot.add_argument("--out", help="output folder (default: DIRECTORY/plots)")
    plot.add_argument("--metric", help="the result key to plot (default: the experiment's metric, else eval/return_mean)")
    plot.set_defaults(handler=cmd_plot)

    evaluate = sub.add_parser(
        "evaluate",
        help="run a trained policy and print return statistics",
        description="Deterministic-policy episodes from a checkpoint, in the JAX env or, "
        "with --gymnasium, in the real gymnasium env.",
    )
    evaluate.add_argument("checkpoint", help="a checkpoint directory (contains ajax_tune.json)")
    evaluate.add_argument("--episodes", type=int, default=10)
    evaluate.add_argument(
        "--task",
        action="append",
        default=[],
        metavar="FIELD=VALUE",
        help="evaluate on this task field value (default: the checkpoint's task); repeatable",
    )
    evaluate.add_argument("--gymnasium", metavar="ENV_ID", help="run in gymnasium.make(ENV_ID) (CartPole-v1, Pendulum-v1)")
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.add_argument(
        "--member", type=int, help="the member of a population to run (default: the best one the checkpoint recorded)"
    )
    evaluate.add_argument("--json", action="store_true", help="print the statistics as JSON")
    evaluate.add_argument(
        "--video",
        metavar="OUT.mp4",
        help="also record episodes of the policy: in the env's gymnasium twin (.mp4 or .gif; the `video` extra), "
        "or for a brax env as brax's HTML viewer (.html)",
    )
    evaluate.add_argument("--video-episodes", type=int, default=1, help="episodes in the video (default 1)")
    evaluate.set_defaults(handler=cmd_evaluate)

    collect = sub.add_parser(
        "collect",
        help="write a dataset of transitions from a trained policy (or a random one)",
        description="Run a checkpoint's deterministic policy (or, with --random, uniform actions) in its env and write "
        "the transitions as a dataset for train.dataset (docs/offline.md).",
    )
    collect.add_argument("checkpoint", help="a checkpoint directory: its policy, env and task")
    collect.add_argument("--steps", type=int, required=True, help="transitions to write")
    collect.add_argument("--epsilon", type=float, default=0.0, help="probability of a uniform random action at each step")
    collect.add_argument("--random", action="store_true", help="uniform random actions only (the checkpoint gives the env)")
    collect.add_argument(
        "--task", action="append", default=[], metavar="FIELD=VALUE", help="collect on this task field value; repeatable"
    )
    collect.add_argument("--num-envs", type=int, default=8, help="envs stepped in lock-step")
    collect.add_argument("--seed", type=int, default=0)
    collect.add_argument("--member", type=int, help="the member of a population whose policy acts (default: the best)")
    collect.add_argument("--out", required=True, help="the dataset directory to write (must not hold a dataset yet)")
    collect.set_defaults(handler=cmd_collect)
    return parser


# -- run / resume --------------------------------------------------------------------------------


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
    was on; once, however often it is called."""
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
    from ajax_tune import launch

    if not (args.address or os.environ.get("RAY_ADDRESS")):
        launch.name_local_auth_mode()  # before anything imports Ray
    from ajax_tune.experiment import Experiment

    experiment = Experiment.load(args.config, args.overrides)  # validated before Ray starts
    if args.name:
        experiment = dataclasses.replace(experiment, name=args.name)
    storage = launch.storage_directory(args.storage_path or experiment.storage_path or "results")
    wanted = launch.trial_resources(experiment.trial)
    if not (args.address or os.environ.get("RAY_ADDRESS")):
        launch.check_resources(wanted, [{"CPU": launch.local_cpus(args.num_cpus), "GPU": math.inf}], local=True)
    directory, note = launch.run_directory(storage, experiment.name)
    if note:
        print(note, file=sys.stderr)
        experiment = dataclasses.replace(experiment, name=directory.name)
    release = launch.lock_experiment(directory)
    ray_up = None  # waits for a local Ray starting in the background, ours to stop at the end
    try:
        wandb_settings = experiment.wandb if experiment.wandb is not None else ({} if args.wandb else None)
        ray_up = _start_ray_in_background(args.address, args.num_cpus)
        if ray_up is None:
            _start_ray(args.address, args.num_cpus, wanted)
        callbacks = []
        if wandb_settings is not None:
            from ajax_tune.wandb_logging import wandb_callback

            callbacks.append(wandb_callback(**wandb_settings))
        tuner = experiment.tuner(storage_path=str(storage), callbacks=callbacks)
        if ray_up is not None:
            _wait_for_ray(ray_up, wanted)
        settle()
        with result_box(experiment.tune.metric, args.verbose):
            results = tuner.fit()
        code = _report(results, experiment.tune.metric, experiment.tune.mode, plots=not args.no_plots)
        if wandb_settings is not None:
            _best_trial_video(results, experiment.tune.metric, experiment.tune.mode, callbacks[0])
        return code
    finally:
        if ray_up is not None:
            with contextlib.suppress(BaseException):  # a start that failed has nothing more to say here
                ray_up()
            launch.stop_local_ray()
        release()


def cmd_resume(args) -> int:
    from ajax_tune import launch, recovery

    if not (args.address or os.environ.get("RAY_ADDRESS")):
        launch.name_local_auth_mode()  # before anything imports Ray
    directory = pathlib.Path(args.directory).absolute()
    recovery.check_experiment(directory)  # before Ray starts
    release = launch.lock_experiment(directory)
    try:
        for note in recovery.point_trials_at_newest(directory):
            print(note, file=sys.stderr)
        _start_ray(args.address, args.num_cpus, None)

        from ray import tune

        from ajax_tune.trainable import AjaxTrainable

        tuner = tune.Tuner.restore(
            str(directory), trainable=AjaxTrainable, resume_errored=args.resume_errored, restart_errored=args.restart_errored
        )
        with result_box(_saved_metric(directory), args.verbose):
            results = tuner.fit()
        return _report(results, None, None, plots=not args.no_plots)
    finally:
        release()


def _start_ray(address: str | None, num_cpus: int | None, wanted: dict | None) -> None:
    import ray

    from ajax_tune import launch

    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS")  # Ray's own way to name a cluster
    if address:
        launch.join_ray(address)
    else:
        launch.start_local_ray(num_cpus)
    if wanted:  # GPUs are known once Ray has looked; on a cluster, only a warning
        warning = launch.check_resources(wanted, launch.cluster_nodes(), local=not address)
        if warning:
            print(warning, file=sys.stderr)


def _start_ray_in_background(address: str | None, num_cpus: int | None):
    """For a local run whose experiment has passed every check: a Ray of our own starting while
    the driver builds the Tuner. Returns the function that waits for it, or None (a cluster to
    join, or a Ray this process already runs: `_start_ray` handles those)."""
    import ray

    from ajax_tune import launch

    if address or os.environ.get("RAY_ADDRESS") or ray.is_initialized():
        return None
    return launch.start_local_ray_in_background(num_cpus)


def _wait_for_ray(ray_up, wanted: dict | None) -> None:
    from ajax_tune import launch

    ray_up()
    if wanted:  # GPUs are known once Ray has looked
        warning = launch.check_resources(wanted, launch.cluster_nodes(), local=True)
        if warning:
            print(warning, file=sys.stderr)


@contextlib.contextmanager
def result_box(metric: str | None, verbose: bool):
    """What Tune prints when a trial ends: the keys a person reads, `metric` among them, or
    (verbose) every key. Tune reads them from the trainable class when `fit` starts."""
    from ajax_tune import compat
    from ajax_tune.trainable import AjaxTrainable
    from ajax_tune.tune_output import ResultBox

    before = getattr(AjaxTrainable, compat.TUNE_RESULT_KEYS_ATTR)
    setattr(AjaxTrainable, compat.TUNE_RESULT_KEYS_ATTR, None if verbose else ResultBox(metric))
    try:
        yield
    finally:
        setattr(AjaxTrainable, compat.TUNE_RESULT_KEYS_ATTR, before)


def _saved_metric(directory: pathlib.Path) -> str | None:
    """The metric an experiment was run with, from the plot settings `run` saved (if any)."""
    from ajax_tune.plotting import experiment_metric

    return experiment_metric(directory)


def _best_result(results, metric, mode):
    """(the best trial by `metric` at any iteration, the metric, the mode, why there is none): the
    experiment's metric and mode, else those the ResultGrid was given; the trial is None, with
    Tune's reason, when no trial reported the metric as a finite number."""
    default_metric, default_mode = compat.result_grid_defaults(results)
    metric, mode = metric or default_metric, mode or default_mode
    try:
        return results.get_best_result(metric=metric, mode=mode, scope="all", filter_nan_and_inf=True), metric, mode, None
    except (RuntimeError, ValueError) as exc:
        return None, metric, mode, exc


def _report(results, metric, mode, plots: bool) -> int:
    print()
    errors = [r for r in results if r.error]
    best, metric, mode, why_none = _best_result(results, metric, mode)
    if why_none is not None:
        print(f"No best trial: {why_none}")
    if best is not None:
        print(f"Best trial: {pathlib.Path(best.path).name} (the best {metric} of any trial at any iteration)")
        peak = _best_row(best.metrics_dataframe, metric, mode)
        if peak is not None:
            print(f"  best {metric:19s} {_fmt(peak[metric])} at training_iteration {int(peak['training_iteration'])}")
        print("  at its last iteration:")
        for key in SUMMARY_KEYS:
            if key in best.metrics and not _isnan(best.metrics[key]):
                print(f"  {key:24s} {_fmt(best.metrics[key])}")
        for line in best_member_lines(best.config, peak.to_dict() if peak is not None else best.metrics):
            print(line)
        kept = _best_checkpoint(best, metric, mode)
        print(f"  checkpoint               {kept[0].path if kept else '(none)'}")
        if kept:
            score = kept[1].get(metric)
            print(
                f"  (the best kept by {metric}: {_fmt(score)} at training_iteration "
                f"{kept[1].get('training_iteration')}; evaluate it with `ajax-tune evaluate`)"
            )
            if peak is not None and score != peak[metric]:
                print("  (the best result was not checkpointed; checkpoint.frequency: 1 keeps a checkpoint of every iteration)")
        if best.checkpoint is not None and (not kept or best.checkpoint.path != kept[0].path):
            print(f"  latest checkpoint        {best.checkpoint.path}")
    if plots:
        from ajax_tune.plotting import plot_experiment

        try:
            paths = plot_experiment(results.experiment_path, metric=metric)
            if paths:
                print(f"Plots: {pathlib.Path(paths[0]).parent}")
        except ValueError as exc:
            print(f"No plots: {exc}")
    print(f"Results: {results.experiment_path}")
    if errors:
        print(
            f"{len(errors)} trial(s) errored; continue them with `ajax-tune resume {results.experiment_path} --resume-errored`",
            file=sys.stderr,
        )
        return 1
    return 0


def best_member_lines(config: dict | None, row: dict) -> list[str]:
    """For a population trial, its best member at `row` (a result) and that member's config: the
    traced settings the row gives it (after exploits of PBT inside the trial, the explored ones,
    not the override it started from). Shown: the settings its override names and those in
    which the members differ."""
    from ajax_tune import keys as K

    size, best = row.get(K.POPULATION_KEYS[0]), row.get(K.POPULATION_KEYS[1])
    if size is None or best is None or _isnan(size) or _isnan(best):
        return []
    k = int(best)
    prefix = K.member_key(k, "")
    # settings are the member's keys with no headline (its metrics are the trial's keys too)
    traced = [
        key[len(prefix) :]
        for key in row
        if key.startswith(prefix) and key[len(prefix) :].startswith(("agent/", "train/")) and key[len(prefix) :] not in row
    ]
    members = ((config or {}).get("population") or {}).get("members")
    given = _flat(members[k], sep="/") if isinstance(members, list) and k < len(members) else {}
    differ = [name for name in traced if len({row.get(K.member_key(j, name)) for j in range(int(size))}) > 1]
    # an override's key the row reports as it is, or not at all; a schedule given as a number
    # (`lr: 1e-3`) is reported by its parameters, shown where the members differ in them
    own = [g for g in given if g in traced or not any(name.startswith(g + "/") for name in traced)]
    settings = {}
    for name in [*own, *(name for name in differ if name not in own)]:
        value = row.get(K.member_key(k, name), given.get(name))
        settings[name.replace("/", ".")] = _setting_value(name, value)
    shown = " ".join(f"{key}={_fmt(value)}" for key, value in settings.items()) or "(the trial's config)"
    return [
        f"  best member              {k} of {int(size)} (population/best_member; `ajax-tune evaluate CKPT --member {k}`)",
        f"  its config               {shown}",
    ]


def _setting_value(name: str, value):
    """A traced setting as a config writes it: a schedule's kind is reported as its index."""
    from ajax_tune.schedules import KINDS

    if name.endswith("/kind") and isinstance(value, (int, float)) and not _isnan(value) and 0 <= int(value) < len(KINDS):
        return KINDS[int(value)]
    return value


def _flat(tree, prefix: str = "", sep: str = ".") -> dict:
    if not isinstance(tree, dict):
        return {prefix: tree}
    out = {}
    for key, value in tree.items():
        out.update(_flat(value, f"{prefix}{sep}{key}" if prefix else str(key), sep))
    return out


def _best_row(frame, metric, mode):
    if frame is None or metric not in frame or frame[metric].dropna().empty:
        return None
    values = frame[metric].replace([math.inf, -math.inf], math.nan).dropna()
    if values.empty:
        return None
    return frame.loc[values.idxmax() if mode == "max" else values.idxmin()]


def _best_trial_video(results, metric, mode, callback) -> None:
    """With W&B on, a short video of the best trial's best kept checkpoint, logged to W&B
    (`wandb_logging.log_best_trial_video`); a failure here is a warning, not the run's."""
    best, metric, mode, _ = _best_result(results, metric, mode)
    if best is None:
        return
    kept = _best_checkpoint(best, metric, mode)
    if not kept:
        print("W&B video: none (the best trial kept no checkpoint)")
        return
    from ajax_tune.wandb_logging import log_best_trial_video

    try:
        print(log_best_trial_video(callback, results.experiment_path, kept[0].path))
    except Exception as exc:  # the run itself finished: say what went wrong, keep its exit code
        print(f"W&B video: failed ({type(exc).__name__}: {exc})", file=sys.stderr)


def _best_checkpoint(result, metric, mode):
    """The checkpoint of `result` whose result scored best by `metric` (NaN never counts)."""
    scored = [(c, m) for c, m in (result.best_checkpoints or []) if not _isnan(m.get(metric, math.nan))]
    if not scored:
        return (result.checkpoint, result.metrics) if result.checkpoint is not None else None
    pick = max if mode == "max" else min
    return pick(scored, key=lambda item: (item[1][metric], item[1].get("training_iteration", 0)))


# -- plot ----------------------------------------------------------------------------------------


def cmd_plot(args) -> int:
    from ajax_tune.plotting import plot_experiment

    directory = pathlib.Path(args.directory)
    if not directory.is_dir():
        raise UsageError(f"no experiment directory at {directory}")
    try:
        paths = plot_experiment(directory, args.out, metric=args.metric)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for path in paths:
        print(path)
    return 0


# -- evaluate ------------------------------------------------------------------------------------


def cmd_evaluate(args) -> int:
    if args.episodes < 1:
        raise UsageError(f"--episodes must be >= 1, got {args.episodes}")
    task = _parse_assignments(args.task, "--task")
    checkpoint, config = _recorded_checkpoint(args.checkpoint, args.member)
    env_name = config["env"]["name"]
    if args.video:
        from ajax_tune.video import check_video_path

        brax = env_name.startswith("brax/")
        check_video_path(args.video, brax=brax)
        if env_name not in GYMNASIUM_TWINS and not brax:
            raise UsageError(
                f"--video renders policies of {sorted(GYMNASIUM_TWINS)} (their gymnasium twins) and brax envs (brax's "
                f"HTML viewer); this checkpoint is {env_name!r}"
            )
        if args.video_episodes < 1:
            raise UsageError(f"--video-episodes must be >= 1, got {args.video_episodes}")
    if args.gymnasium:
        twin = GYMNASIUM_TWINS.get(env_name)
        if twin is None:
            raise UsageError(f"--gymnasium runs policies of {sorted(GYMNASIUM_TWINS)}; this checkpoint is {env_name!r}")
        if task:
            raise UsageError("--gymnasium runs the reference env as it is: it takes no --task")
        _check_gymnasium_twin(args.gymnasium, config)

    import numpy as np

    from ajax_tune.runner import Runner

    with Progress("restoring the checkpoint"):
        runner = Runner.from_checkpoint(checkpoint)
    if args.gymnasium:
        from ajax_tune.envs.gymnasium_adapter import run_in_gymnasium

        if runner.get_task() != {k: v.item() for k, v in runner.env.validate_task({}).items()}:
            print(f"note: the policy was trained on task {runner.get_task()}; {args.gymnasium} is the default task")
        with Progress(f"{args.gymnasium}: episodes", total=args.episodes) as progress:
            out = run_in_gymnasium(
                runner.policy(args.member),
                args.gymnasium,
                episodes=args.episodes,
                seed=args.seed,
                on_episode=progress.update,
                wrap=_gymnasium_wrapper(runner.env),
            )
        stats = {
            "env": args.gymnasium,
            "episodes": args.episodes,
            "return_mean": out["mean_return"],
            "return_std": out["std_return"],
            "return_min": min(out["returns"]),
            "return_max": max(out["returns"]),
            "length_mean": out["mean_length"],
        }
    else:
        with Progress(f"{args.episodes} episodes x {runner.config.train.num_seeds} seeds, in one compiled call"):
            out = runner.evaluate(args.episodes, task=task or None, seed=args.seed, member=args.member)
        returns = out["return"]  # [seeds, episodes]
        stats = {
            "env": env_name,
            **({"member": runner.best_member if args.member is None else args.member} if len(runner.members) > 1 else {}),
            "task": out["task"],
            "episodes": args.episodes,
            "seeds": int(returns.shape[0]),
            "return_mean": float(returns.mean()),
            "return_std": float(returns.std()),
            "return_min": float(returns.min()),
            "return_max": float(returns.max()),
            "return_mean_per_seed": [float(x) for x in returns.mean(axis=1)],
            "length_mean": float(out["length"].mean()),
        }
        if runner.env.has_success:
            stats["success_rate"] = float(out["success"].mean())
    if args.video:
        from ajax_tune.video import record, record_brax

        if env_name.startswith("brax/"):
            with Progress(f"{env_name}: recording {args.video}"):
                policy, task = runner.policy(args.member), {**runner.get_task(), **task}
                video = record_brax(policy, runner.env, args.video, task=task, episodes=args.video_episodes, seed=args.seed)
        else:
            twin = GYMNASIUM_TWINS[env_name]
            with Progress(f"{twin}: recording {args.video}"):
                video = record(runner.policy(args.member), twin, args.video, episodes=args.video_episodes, seed=args.seed)
        stats.update(
            {"video": video["video"], "video_frames": video["frames"], "video_return_mean": float(np.mean(video["returns"]))}
        )
    if args.json:
        print(json.dumps(stats))
    else:
        for key, value in stats.items():
            print(f"{key:22s} {_fmt(value)}")
    return 0


# -- collect -------------------------------------------------------------------------------------


def _recorded_checkpoint(path: str, member: int | None) -> tuple[str, dict]:
    """The newest complete checkpoint at `path` (saying so when it is not `path` itself) and the
    config it records, with `--member` checked against that config's population, before anything
    is restored or compiled."""
    from ajax_tune.checkpoint import find_complete, read_metadata

    checkpoint, note = find_complete(path)
    if note:
        print(note, file=sys.stderr)
    config = read_metadata(checkpoint).get("extra", {}).get("config")
    if config is None:
        raise CheckpointError(f"{checkpoint} does not record its config; it was not written by ajax_tune's Runner")
    size = len((config.get("population") or {}).get("members") or [None])
    if member is not None and not 0 <= member < size:
        raise UsageError(f"--member must be in [0, {size - 1}] (the checkpoint's population has {size} member(s)), got {member}")
    return checkpoint, config


def cmd_collect(args) -> int:
    if args.steps < 1:
        raise UsageError(f"--steps must be >= 1, got {args.steps}")
    if not 0.0 <= args.epsilon <= 1.0:
        raise UsageError(f"--epsilon must be in [0, 1], got {args.epsilon}")
    if args.num_envs < 1:
        raise UsageError(f"--num-envs must be >= 1, got {args.num_envs}")
    from ajax_tune import datasets

    out = pathlib.Path(args.out)
    if (out / datasets.META_FILE).exists() or (out / datasets.DATA_FILE).exists():
        raise UsageError(f"--out {out} already holds a dataset; choose another directory")
    task = _parse_assignments(args.task, "--task")
    checkpoint, config = _recorded_checkpoint(args.checkpoint, args.member)

    import jax

    from ajax_tune.runner import Runner

    with Progress("restoring the checkpoint", command="collect"):
        runner = Runner.from_checkpoint(checkpoint)
    lane = runner.member_lanes(args.member).start
    task = runner.env.validate_task(task, current=runner.get_task())
    with Progress(f"{args.steps} steps", command="collect"):
        dataset = datasets.collect(
            runner.env,
            args.steps,
            agent=None if args.random else runner.loop.agent,
            agent_state=jax.tree.map(lambda x: x[lane], runner.state.agent),
            epsilon=1.0 if args.random else args.epsilon,
            task=task,
            seed=args.seed,
            num_envs=args.num_envs,
            env_config={"name": config["env"]["name"], "kwargs": config["env"].get("kwargs", {})},
            source={"checkpoint": str(pathlib.Path(checkpoint).absolute())},
        )
    dataset.save(out)
    for key, value in (
        ("dataset", str(out)),
        ("rows", dataset.size),
        ("episodes", dataset.source["episodes"]),
        ("episode_return_mean", dataset.source["return_mean"]),
        ("content_hash", dataset.content_hash()[:16]),
    ):
        print(f"{key:22s} {_fmt(value)}")
    return 0


class Progress:
    """What a command is doing (`evaluate`; later `collect`), on stderr, once it has taken more than `delay` seconds:
    a count of done out of `total` when there is one, and the time so far. On a terminal the
    line is redrawn in place; elsewhere (a log file) a line every `every` seconds."""

    def __init__(
        self, what: str, total: int | None = None, delay: float = 3.0, every: float = 10.0, stream=None, command: str = "evaluate"
    ):
        self.what, self.total, self.delay, self.every, self.command = what, total, delay, every, command
        self.stream = stream or sys.stderr
        self.done, self.shown = 0, False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Progress:
        self.start = time.monotonic()
        self._thread.start()
        return self

    def update(self, done: int) -> None:
        self.done = done

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        if self.shown:
            self._show(final=True)

    def line(self) -> str:
        count = f" {self.done}/{self.total}" if self.total else ""
        return f"ajax-tune {self.command}: {self.what}{count} ({time.monotonic() - self.start:.0f} s)"

    def _run(self) -> None:
        tty = getattr(self.stream, "isatty", lambda: False)()
        if self._stop.wait(self.delay):
            return
        while True:
            self._show(final=False, tty=tty)
            if self._stop.wait(1.0 if tty else self.every):
                return

    def _show(self, final: bool, tty: bool | None = None) -> None:
        tty = getattr(self.stream, "isatty", lambda: False)() if tty is None else tty
        text = self.line() + (", done" if final else "")
        self.stream.write(f"\r{text}\x1b[K" + ("\n" if final else "") if tty else text + "\n")
        self.stream.flush()
        self.shown = True


def _check_gymnasium_twin(env_id: str, config: dict) -> None:
    """The gymnasium env must exist and take the policy's observations and actions."""
    import difflib

    import gymnasium

    if env_id not in gymnasium.envs.registry:
        close = difflib.get_close_matches(env_id, list(gymnasium.envs.registry), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; try {GYMNASIUM_TWINS[config['env']['name']]}"
        raise UsageError(f"--gymnasium: gymnasium has no env {env_id!r}{hint}")
    from ajax_tune.envs import make_env

    ours = make_env(config["env"]["name"], **config["env"].get("kwargs", {}))
    theirs = gymnasium.make(env_id)
    wrap = _gymnasium_wrapper(ours)
    if wrap is not None:  # observed as ours is (cartpole with hidden velocities)
        theirs = wrap(theirs)
    try:
        pairs = (
            ("observation", ours.observation_space, theirs.observation_space),
            ("action", ours.action_space, theirs.action_space),
        )
        for what, mine, other in pairs:
            same_n = getattr(mine, "n", None) == getattr(other, "n", None)
            if type(mine) is not type(other) or mine.shape != other.shape or not same_n:
                raise UsageError(
                    f"--gymnasium {env_id}: its {what} space {_space(other)} does not match the "
                    f"{what} space {_space(mine)} of this {config['env']['name']} checkpoint; "
                    f"use {GYMNASIUM_TWINS[config['env']['name']]}"
                )
    finally:
        theirs.close()


def _gymnasium_wrapper(env):
    """What an env asks of its gymnasium twin to observe as it does (None: nothing)."""
    make = getattr(env, "gymnasium_wrapper", None)
    return make() if callable(make) else None


def _space(space) -> str:
    size = f"({space.n})" if hasattr(space, "n") else str(space.shape)
    return f"{type(space).__name__}{size}"


def _parse_assignments(items: Sequence[str], flag: str) -> dict:
    from ajax_tune.experiment import parse_assignment  # the one reading of KEY=VALUE, as --set's

    return dict(parse_assignment(item, flag, "FIELD=VALUE") for item in items)


def _isnan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
