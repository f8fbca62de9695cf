"""Both sides' settings in the maze parity study (`ued_maze.py`): maze_plr.py's command line, and
our trial, `configs/ued_maze_accel.yaml`'s with what the study puts in its place, checked against
that command line so that a change on either side shows as a mismatch."""

from __future__ import annotations

import math
import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent

UPDATES, EVAL_EVERY, SEEDS = 250, 10, 3
STEPS_PER_UPDATE = 32 * 256
ALGORITHMS = {"robust_plr": [], "accel": ["--use_accel"]}

# maze_plr.py's flags, all given (their defaults at 0f8f128), so a change of default shows here
PEER_FLAGS = [
    "--num_train_envs", "32", "--num_steps", "256", "--num_minibatches", "1", "--epoch_ppo", "5",
    "--lr", "1e-4", "--max_grad_norm", "0.5", "--gamma", "0.995", "--gae_lambda", "0.98",
    "--clip_eps", "0.2", "--entropy_coeff", "1e-3", "--critic_coeff", "0.5",
    "--score_function", "MaxMC", "--no-exploratory_grad_updates", "--level_buffer_capacity", "4000",
    "--replay_prob", "0.8", "--staleness_coeff", "0.3", "--temperature", "0.3",
    "--minimum_fill_ratio", "0.5", "--prioritization", "rank", "--buffer_duplicate_check",
    "--num_edits", "5", "--agent_view_size", "5", "--n_walls", "25", "--eval_num_attempts", "10",
]  # fmt: skip


def peer_flags() -> dict:
    """PEER_FLAGS as a mapping (a flag without a value maps to True)."""
    flags, i = {}, 0
    while i < len(PEER_FLAGS):
        if i + 1 < len(PEER_FLAGS) and not PEER_FLAGS[i + 1].startswith("--"):
            flags[PEER_FLAGS[i]], i = PEER_FLAGS[i + 1], i + 2
        else:
            flags[PEER_FLAGS[i]], i = True, i + 1
    return flags


def replay_from() -> int:
    """Updates of fresh levels before the buffer reaches its minimum fill: replay can come after."""
    f = peer_flags()
    return math.ceil(float(f["--minimum_fill_ratio"]) * int(f["--level_buffer_capacity"]) / int(f["--num_train_envs"]))


def gradient_share(algorithm: str) -> float:
    """The share of updates that apply gradients once replay can start: robust PLR's replays;
    ACCEL's replays, each followed by an update on its edited levels (p / (1 + p))."""
    p = float(peer_flags()["--replay_prob"])
    return p if algorithm == "robust_plr" else p / (1 + p)


def lr_schedule(algorithm: str, updates: int) -> dict:
    """Our learning rate on the values maze_plr.py's takes. Its schedule decays over the
    gradient updates it has applied, `lr * (1 - g / num_updates)`; ours over env steps. Neither
    side applies a gradient before replay can start (update `replay_from()`), and after it the
    peer's expected g grows by `gradient_share` per update, so a linear schedule through the
    peer's expected values at `replay_from()` (its full rate) and at the end gives ours the
    same rate at every update that learns, in expectation."""
    lr, t0, rho = float(peer_flags()["--lr"]), replay_from(), gradient_share(algorithm)
    peak = lr * (1 + rho * t0 / updates)
    return {"kind": "linear", "peak": peak, "end_fraction": 1 - lr * rho / peak}


def lr_at(schedule: dict, update: int, updates: int) -> float:
    """A linear schedule's rate before update `update` + 1 of `updates`."""
    return schedule["peak"] * (1 - (1 - schedule["end_fraction"]) * update / updates)


def trial(algorithm: str, seed: int, updates: int, eval_every: int = EVAL_EVERY) -> dict:
    config = yaml.safe_load((ROOT / "configs" / "ued_maze_accel.yaml").read_text())["trial"]
    config["ued"]["algorithm"] = algorithm
    if algorithm != "accel":
        del config["ued"]["edits"]  # each algorithm takes only its own settings
    config["agent"]["lr"] = lr_schedule(algorithm, updates)
    config["train"].update(
        total_timesteps=updates * STEPS_PER_UPDATE,
        timesteps_per_iteration=eval_every * STEPS_PER_UPDATE,
        eval_episodes=int(peer_flags()["--eval_num_attempts"]),
        eval_policy="sampled",
        eval_at_start=False,
        num_seeds=1,
        seed=seed,
    )
    return config


def in_place(algorithms, updates: int, eval_every: int) -> dict:
    """What `trial` puts in place of the config's own: the train section, and per algorithm its
    ued section and learning rate."""
    out = {"train": {**trial(algorithms[0], 0, updates, eval_every)["train"], "seed": "the unit's seed"}}
    for algorithm in algorithms:
        config = trial(algorithm, 0, updates, eval_every)
        out[algorithm] = {"ued": config["ued"], "agent.lr": config["agent"]["lr"]}
    return out


def check_settings(config: dict, algorithm: str, updates: int) -> list[str]:
    """Our trial against maze_plr.py's flags: the mismatches (expected: none)."""
    flags = peer_flags()
    a, u, e, t = config["agent"], config["ued"], config["env"]["kwargs"], config["train"]
    pairs = [
        ("--num_train_envs", a["num_envs"], int),
        ("--num_steps", a["unroll_length"], int),
        ("--num_minibatches", a["num_minibatches"], int),
        ("--epoch_ppo", a["update_epochs"], int),
        ("--max_grad_norm", a["max_grad_norm"], float),
        ("--gamma", a["gamma"], float),
        ("--gae_lambda", a["gae_lambda"], float),
        ("--clip_eps", a["clip_eps"], float),
        ("--entropy_coeff", a["ent_coef"], float),
        ("--critic_coeff", a["vf_coef"], float),
        ("--level_buffer_capacity", u["buffer_size"], int),
        ("--replay_prob", u["replay_prob"], float),
        ("--staleness_coeff", u["staleness_coef"], float),
        ("--temperature", u["temperature"], float),
        ("--minimum_fill_ratio", u["minimum_fill"], float),
        ("--agent_view_size", e["agent_view_size"], int),
        ("--n_walls", e["n_walls"], int),
        ("--eval_num_attempts", t["eval_episodes"], int),
    ]
    if algorithm == "accel":
        pairs.append(("--num_edits", u["edits"], int))
    bad = [f"{flag} {flags[flag]} against {ours}" for flag, ours, cast in pairs if cast(flags[flag]) != cast(ours)]
    lr, t0, rho = float(flags["--lr"]), replay_from(), gradient_share(algorithm)
    at_start, at_end = lr_at(a["lr"], t0, updates), lr_at(a["lr"], updates, updates)
    checks = [
        (u.get("score", "maxmc") == "maxmc" and flags["--score_function"] == "MaxMC", "score"),
        (u.get("duplicate_check", True) is True and flags.get("--buffer_duplicate_check") is True, "duplicate check"),
        (a["lr"]["kind"] == "linear", "lr schedule kind"),
        (
            math.isclose(at_start, lr, rel_tol=1e-6)
            and math.isclose(at_end, lr * (1 - rho * (updates - t0) / updates), rel_tol=1e-6),
            "lr once replay starts",
        ),
        (a["recurrent"] == {"cell": "lstm", "size": 256}, "LSTM 256"),
        (a["encoder"] == {"kind": "conv", "channels": [16], "kernel": 3, "embed_rest": 5}, "conv 16 3x3, direction in 5"),
        (a["hidden_sizes"] == [32], "heads of 32"),
        ((e["height"], e["width"], e["max_episode_steps"]) == (13, 13, 250), "13 x 13, 250 steps"),
        (t["eval_policy"] == "sampled", "sampled evaluation"),
        (t["total_timesteps"] == updates * STEPS_PER_UPDATE, "budget"),
    ]
    return bad + [f"{what} differs" for ok, what in checks if not ok]


# Where the two sides still differ, as read from both sources.
DIFFERENCES = [
    "learning rate: maze_plr.py decays over the gradient updates it applied (lr * (1 - g / num_updates)), "
    "ajax_tune over env steps; ours is set to the peer's expected rate at every update that learns (lr_schedule)",
    "evaluation: both sample the policy, 10 attempts per held-out maze; maze_plr.py also renders attempt 0 "
    "of every maze inside its program, and ajax_tune also evaluates the env's default level (an open maze, start "
    "and goal in opposite corners; 10 episodes)",
    "scoring-only rollouts (fresh levels; ACCEL's edited ones): maze_plr.py computes the PPO update and discards "
    "it, ajax_tune's single lane skips it",
    "maze_plr.py compiles its train-and-eval step twice (a weak-typed level width after the first call)",
    "time limit: maze_plr.py's done includes it (GAE stops there); ajax_tune truncates and bootstraps from V(s'), "
    "which lowers MaxMC scores (the ajax_tune_terminal side ends episodes at the limit instead)",
]
