"""`ajax-tune`: run, resume, plot and evaluate experiments.

Bad input (a config that does not validate, a missing file, a checkpoint that does not fit) is
one line on stderr and exit status 2, found before Ray or JAX start.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import pathlib
import sys
from typing import Sequence

import yaml

from ajax_tune import __version__
from ajax_tune.errors import CheckpointError, ConfigError, TaskError

GYMNASIUM_TWINS = {"cartpole": "CartPole-v1", "pendulum": "Pendulum-v1"}
SUMMARY_KEYS = ("eval/return_mean", "eval/return_std", "eval/success_rate_mean", "eval/length_mean",
                "env_steps", "training_iteration", "lr", "curriculum/level")


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
    except (ConfigError, TaskError, CheckpointError, UsageError) as exc:
        print(f"ajax-tune {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ajax-tune {args.command}: interrupted; continue with `ajax-tune resume DIR`", file=sys.stderr)
        return 130


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="ajax-tune",
        description="Tune fully jitted JAX reinforcement learning with Ray Tune: searches, curricula, PBT.",
    )
    parser.add_argument("--version", action="version", version=f"ajax-tune {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    run = sub.add_parser("run", help="run an experiment from a YAML config",
                         description="Build a Tuner from CONFIG and run it on a local Ray instance, or on a "
                                     "running cluster with --address.")
    run.add_argument("config", help="experiment YAML (see configs/)")
    run.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY.PATH=VALUE",
                     help="override a config value (YAML syntax), e.g. --set trial.agent.ent_coef=0.0; repeatable")
    run.add_argument("--name", help="experiment name (default: the config's name or file name)")
    run.add_argument("--storage-path", help="where results go (default: ./results)")
    run.add_argument("--address", help="join a running Ray cluster (e.g. 'auto' or HOST:PORT) instead of starting one")
    run.add_argument("--num-cpus", type=int, help="CPUs of the local Ray instance (default: all)")
    run.add_argument("--wandb", action="store_true", help="log every trial to Weights & Biases (offline without an API key)")
    run.add_argument("--no-plots", action="store_true", help="skip writing PNG plots at the end")
    run.set_defaults(handler=cmd_run)

    resume = sub.add_parser("resume", help="continue an interrupted experiment",
                            description="Continue an experiment directory with Tuner.restore.")
    resume.add_argument("directory", help="the experiment directory (STORAGE_PATH/NAME)")
    resume.add_argument("--resume-errored", action="store_true", help="resume errored trials from their last checkpoint")
    resume.add_argument("--restart-errored", action="store_true", help="restart errored trials from scratch")
    resume.add_argument("--address", help="join a running Ray cluster instead of starting one")
    resume.add_argument("--num-cpus", type=int)
    resume.add_argument("--no-plots", action="store_true")
    resume.set_defaults(handler=cmd_resume)

    plot = sub.add_parser("plot", help="write PNG plots of an experiment",
                          description="Learning curves, curriculum tasks and learning rates of every trial.")
    plot.add_argument("directory", help="the experiment directory")
    plot.add_argument("--out", help="output folder (default: DIRECTORY/plots)")
    plot.set_defaults(handler=cmd_plot)

    evaluate = sub.add_parser("evaluate", help="run a trained policy and print return statistics",
                              description="Deterministic-policy episodes from a checkpoint, in the JAX env or, "
                                          "with --gymnasium, in the real gymnasium env.")
    evaluate.add_argument("checkpoint", help="a checkpoint directory (contains ajax_tune.json)")
    evaluate.add_argument("--episodes", type=int, default=10)
    evaluate.add_argument("--task", action="append", default=[], metavar="FIELD=VALUE",
                          help="evaluate on this task field value (default: the checkpoint's task); repeatable")
    evaluate.add_argument("--gymnasium", metavar="ENV_ID", help="run in gymnasium.make(ENV_ID) (CartPole-v1, Pendulum-v1)")
    evaluate.add_argument("--seed", type=int, default=0)
    evaluate.add_argument("--json", action="store_true", help="print the statistics as JSON")
    evaluate.set_defaults(handler=cmd_evaluate)
    return parser


# -- run / resume --------------------------------------------------------------------------------


def cmd_run(args) -> int:
    from ajax_tune.experiment import Experiment

    experiment = Experiment.load(args.config, args.overrides)  # validated before Ray starts
    if args.name:
        experiment = dataclasses.replace(experiment, name=args.name)
    wandb_settings = experiment.wandb if experiment.wandb is not None else ({} if args.wandb else None)
    _start_ray(args.address, args.num_cpus)
    callbacks = []
    if wandb_settings is not None:
        from ajax_tune.wandb_logging import wandb_callback

        callbacks.append(wandb_callback(**wandb_settings))
    tuner = experiment.tuner(storage_path=args.storage_path, callbacks=callbacks)
    results = tuner.fit()
    return _report(results, experiment.tune.metric, experiment.tune.mode, plots=not args.no_plots)


def cmd_resume(args) -> int:
    from ray import tune

    from ajax_tune.trainable import AjaxTrainable

    directory = pathlib.Path(args.directory).absolute()
    if not (directory / "tuner.pkl").exists():
        raise UsageError(f"{directory} is not a Tune experiment directory (no tuner.pkl)")
    _start_ray(args.address, args.num_cpus)
    tuner = tune.Tuner.restore(str(directory), trainable=AjaxTrainable,
                               resume_errored=args.resume_errored, restart_errored=args.restart_errored)
    results = tuner.fit()
    return _report(results, None, None, plots=not args.no_plots)


def _start_ray(address: str | None, num_cpus: int | None) -> None:
    import ray

    if ray.is_initialized():
        return
    if address:
        ray.init(address=address)
    else:
        ray.init(num_cpus=num_cpus, include_dashboard=False)


def _report(results, metric, mode, plots: bool) -> int:
    print()
    errors = [r for r in results if r.error]
    best = None
    try:
        best = results.get_best_result(metric=metric, mode=mode, scope="last", filter_nan_and_inf=True)
    except (RuntimeError, ValueError) as exc:
        print(f"No best trial: {exc}")
    if best is not None:
        print(f"Best trial: {pathlib.Path(best.path).name}")
        for key in SUMMARY_KEYS:
            if key in best.metrics and not _isnan(best.metrics[key]):
                print(f"  {key:24s} {_fmt(best.metrics[key])}")
        print(f"  checkpoint               {best.checkpoint.path if best.checkpoint else '(none)'}")
    if plots:
        from ajax_tune.plotting import plot_experiment

        try:
            paths = plot_experiment(results.experiment_path)
            if paths:
                print(f"Plots: {pathlib.Path(paths[0]).parent}")
        except ValueError as exc:
            print(f"No plots: {exc}")
    print(f"Results: {results.experiment_path}")
    if errors:
        print(f"{len(errors)} trial(s) errored; continue them with "
              f"`ajax-tune resume {results.experiment_path} --resume-errored`", file=sys.stderr)
        return 1
    return 0


# -- plot ----------------------------------------------------------------------------------------


def cmd_plot(args) -> int:
    from ajax_tune.plotting import plot_experiment

    directory = pathlib.Path(args.directory)
    if not directory.is_dir():
        raise UsageError(f"no experiment directory at {directory}")
    try:
        paths = plot_experiment(directory, args.out)
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
    from ajax_tune.checkpoint import read_metadata

    config = read_metadata(args.checkpoint).get("extra", {}).get("config")
    if config is None:
        raise CheckpointError(f"{args.checkpoint} does not record its config; it was not written by ajax_tune's Runner")
    env_name = config["env"]["name"]
    if args.gymnasium:
        twin = GYMNASIUM_TWINS.get(env_name)
        if twin is None:
            raise UsageError(f"--gymnasium runs policies of {sorted(GYMNASIUM_TWINS)}; this checkpoint is {env_name!r}")
        if task:
            raise UsageError("--gymnasium runs the reference env as it is: it takes no --task")

    from ajax_tune.runner import Runner

    runner = Runner.from_checkpoint(args.checkpoint)
    if args.gymnasium:
        from ajax_tune.envs.gymnasium_adapter import run_in_gymnasium

        if runner.get_task() != {k: v.item() for k, v in runner.env.validate_task({}).items()}:
            print(f"note: the policy was trained on task {runner.get_task()}; {args.gymnasium} is the default task")
        out = run_in_gymnasium(runner.evaluate_policy(), args.gymnasium, episodes=args.episodes, seed=args.seed)
        stats = {"env": args.gymnasium, "episodes": args.episodes, "return_mean": out["mean_return"],
                 "return_std": out["std_return"], "return_min": min(out["returns"]), "return_max": max(out["returns"]),
                 "length_mean": out["mean_length"]}
    else:
        out = runner.evaluate(args.episodes, task=task or None, seed=args.seed)
        returns = out["return"]  # [seeds, episodes]
        stats = {"env": env_name, "task": out["task"], "episodes": args.episodes, "seeds": int(returns.shape[0]),
                 "return_mean": float(returns.mean()), "return_std": float(returns.std()),
                 "return_min": float(returns.min()), "return_max": float(returns.max()),
                 "return_mean_per_seed": [float(x) for x in returns.mean(axis=1)],
                 "length_mean": float(out["length"].mean())}
        if runner.env.has_success:
            stats["success_rate"] = float(out["success"].mean())
    if args.json:
        print(json.dumps(stats))
    else:
        for key, value in stats.items():
            print(f"{key:22s} {_fmt(value)}")
    return 0


def _parse_assignments(items: Sequence[str], flag: str) -> dict:
    out = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise UsageError(f"{flag} expects FIELD=VALUE, got {item!r}")
        out[key] = yaml.safe_load(text)
    return out


def _isnan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
