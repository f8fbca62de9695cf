"""`ajax-tune evaluate`: a checkpoint's deterministic policy, in its JAX env (every seed in one
compiled call) or in the real gymnasium env, with statistics and optionally a video."""

from __future__ import annotations

import json
import sys

from ajax_tune.cli.parser import UsageError, fmt, parse_assignments
from ajax_tune.cli.progress import Progress
from ajax_tune.errors import CheckpointError
from ajax_tune.twins import GYMNASIUM_TWINS


def cmd_evaluate(args) -> int:
    if args.episodes < 1:
        raise UsageError(f"--episodes must be >= 1, got {args.episodes}")
    task = parse_assignments(args.task, "--task")
    checkpoint, config = recorded_checkpoint(args.checkpoint, args.member)
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
        from ajax_tune.policy import episode_statistics

        stats = {"env": args.gymnasium, **episode_statistics(out["returns"], out["lengths"])}
    else:
        with Progress(f"{args.episodes} episodes x {runner.config.train.num_seeds} seeds, in one compiled call"):
            summary = runner.evaluation_statistics(args.episodes, task=task or None, seed=args.seed, member=args.member)
        member = {"member": runner.best_member if args.member is None else args.member} if len(runner.members) > 1 else {}
        stats = {"env": env_name, **member, **summary}
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
            print(f"{key:22s} {fmt(value)}")
    return 0


def recorded_checkpoint(path: str, member: int | None) -> tuple[str, dict]:
    """The newest complete checkpoint at `path` (saying so when it is not `path` itself) and the
    config it records, with `--member` checked against that config's population, before anything
    is restored or compiled."""
    from ajax_tune.checkpoint import find_complete, read_metadata

    checkpoint, note = find_complete(path)
    if note:
        print(note, file=sys.stderr)
    extra = read_metadata(checkpoint).get("extra", {})
    config = extra.get("config")
    if config is None:
        raise CheckpointError(f"{checkpoint} does not record its config; it was not written by ajax_tune's Runner")
    survivors = (extra.get("prune") or {}).get("survivors")  # a pruned population's members, renumbered
    size = len(survivors or (config.get("population") or {}).get("members") or [None])
    if member is not None and not 0 <= member < size:
        raise UsageError(f"--member must be in [0, {size - 1}] (the checkpoint's population has {size} member(s)), got {member}")
    return checkpoint, config


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
