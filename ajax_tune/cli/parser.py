"""`ajax-tune`: the parser, the dispatch to each command, and one-line errors.

Bad input (a config that does not validate, a missing file, a checkpoint that does not fit, a
storage path that cannot hold results, a cluster that cannot be reached) is one line on stderr
and exit status 2, found before Ray or JAX start wherever it can be. Each command lives in a
module of its own and is imported only when it runs.
"""

from __future__ import annotations

import argparse
import importlib
import math
import sys
from collections.abc import Sequence

from ajax_tune import __version__
from ajax_tune.errors import CheckpointError, ConfigError, LaunchError, TaskError


class UsageError(Exception):
    """Bad input found by the CLI itself."""


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "command", None):
        parser.print_help()
        return 0
    module, name = args.handler.split(":")
    try:
        return getattr(importlib.import_module(f"ajax_tune.cli.{module}"), name)(args)
    except (ConfigError, TaskError, CheckpointError, UsageError, LaunchError) as exc:
        message = " ".join(str(exc).split())  # one line, whatever a library put in the message
        print(f"ajax-tune {args.command}: error: {message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"ajax-tune {args.command}: interrupted; continue with `ajax-tune resume DIR`", file=sys.stderr)
        return 130


def entry() -> None:
    """The `ajax-tune` console script."""
    sys.exit(main())


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
    run.set_defaults(handler="run:cmd_run")

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
    resume.set_defaults(handler="run:cmd_resume")

    plot = sub.add_parser(
        "plot",
        help="write PNG plots of an experiment",
        description="Learning curves, curriculum tasks and learning rates of every trial.",
    )
    plot.add_argument("directory", help="the experiment directory")
    plot.add_argument("--out", help="output folder (default: DIRECTORY/plots)")
    plot.add_argument("--metric", help="the result key to plot (default: the experiment's metric, else eval/return_mean)")
    plot.set_defaults(handler="plot:cmd_plot")

    evaluate = sub.add_parser(
        "evaluate",
        help="run a trained policy and print return statistics",
        description="Deterministic-policy episodes from a checkpoint, in the JAX env or, "
        "with --gymnasium, in the real gymnasium env.",
    )
    evaluate.add_argument("checkpoint", help="a checkpoint directory (contains ajax_tune.json)")
    evaluate.add_argument("--episodes", type=int, default=10)
    _task_option(evaluate, "evaluate on this task field value (default: the checkpoint's task); repeatable")
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
    evaluate.set_defaults(handler="evaluate:cmd_evaluate")

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
    _task_option(collect, "collect on this task field value; repeatable")
    collect.add_argument("--num-envs", type=int, default=8, help="envs stepped in lock-step")
    collect.add_argument("--seed", type=int, default=0)
    collect.add_argument("--member", type=int, help="the member of a population whose policy acts (default: the best)")
    collect.add_argument("--out", required=True, help="the dataset directory to write (must not hold a dataset yet)")
    collect.set_defaults(handler="collect:cmd_collect")
    return parser


def _task_option(command: argparse.ArgumentParser, help: str) -> None:
    command.add_argument("--task", action="append", default=[], metavar="FIELD=VALUE", help=help)


def parse_assignments(items: Sequence[str], flag: str) -> dict:
    from ajax_tune.tune.sections import parse_assignment  # the one reading of KEY=VALUE, as --set's

    return dict(parse_assignment(item, flag, "FIELD=VALUE") for item in items)


def isnan(value) -> bool:
    return isinstance(value, float) and math.isnan(value)


def fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
