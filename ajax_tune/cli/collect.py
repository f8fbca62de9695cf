"""`ajax-tune collect`: a dataset of transitions from a checkpoint's policy (or a random one)."""

from __future__ import annotations

import pathlib

from ajax_tune.cli.evaluate import recorded_checkpoint
from ajax_tune.cli.parser import UsageError, fmt, parse_assignments
from ajax_tune.cli.progress import Progress


def cmd_collect(args) -> int:
    if args.steps < 1:
        raise UsageError(f"--steps must be >= 1, got {args.steps}")
    if not 0.0 <= args.epsilon <= 1.0:
        raise UsageError(f"--epsilon must be in [0, 1], got {args.epsilon}")
    if args.num_envs < 1:
        raise UsageError(f"--num-envs must be >= 1, got {args.num_envs}")
    from ajax_tune import datasets

    out = pathlib.Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {out} is a file; name a directory for the dataset")
    if (out / datasets.META_FILE).exists() or (out / datasets.DATA_FILE).exists():
        raise UsageError(f"--out {out} already holds a dataset; choose another directory")
    task = parse_assignments(args.task, "--task")
    checkpoint, config = recorded_checkpoint(args.checkpoint, args.member)

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
        print(f"{key:22s} {fmt(value)}")
    return 0
