"""Both sides' settings in the maze parity study (`ued_maze.py`): maze_plr.py's command line, and
our trial, `configs/ued_maze_accel.yaml`'s with what the study puts in its place, checked against
that command line so that a change on either side shows as a mismatch."""

from __future__ import annotations

import math
import pathlib

import yaml

ROOT = pathlib.Path(__file__).resolve().parent.parent

UPDATES, EVAL_EVERY, SEEDS = 250, 10, 3
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


#: maze_plr.py's flags with a counterpart in our trial: where it sits (section, key) and its type.
#: `check_settings` compares each; `set_flags` may change any of them (and `--lr`,
#: `--score_function`) on both sides at once. The others are the study's own (seed, updates,
#: evaluation cadence) or have no counterpart in ours (top-k prioritisation, exploratory updates).
MAPPED = {
    "--num_train_envs": ("agent", "num_envs", int),
    "--num_steps": ("agent", "unroll_length", int),
    "--num_minibatches": ("agent", "num_minibatches", int),
    "--epoch_ppo": ("agent", "update_epochs", int),
    "--max_grad_norm": ("agent", "max_grad_norm", float),
    "--gamma": ("agent", "gamma", float),
    "--gae_lambda": ("agent", "gae_lambda", float),
    "--clip_eps": ("agent", "clip_eps", float),
    "--entropy_coeff": ("agent", "ent_coef", float),
    "--critic_coeff": ("agent", "vf_coef", float),
    "--level_buffer_capacity": ("ued", "buffer_size", int),
    "--replay_prob": ("ued", "replay_prob", float),
    "--staleness_coeff": ("ued", "staleness_coef", float),
    "--temperature": ("ued", "temperature", float),
    "--minimum_fill_ratio": ("ued", "minimum_fill", float),
    "--num_edits": ("ued", "edits", int),
    "--agent_view_size": ("env", "agent_view_size", int),
    "--n_walls": ("env", "n_walls", int),
    "--eval_num_attempts": ("train", "eval_episodes", int),
}
SCORES = {"MaxMC": "maxmc", "pvl": "pvl"}
#: What `set_flags` may change, with each value's type.
SETTABLE = {**{flag: cast for flag, (_, _, cast) in MAPPED.items()}, "--lr": float, "--score_function": str}
#: The flags `set_flags` has changed from maze_plr.py's defaults, with their new values.
CHANGED: dict[str, str] = {}


def set_flags(items: list[str]) -> dict[str, str]:
    """Change maze_plr.py's flags, `FLAG=VALUE` each, for both sides of the study: PEER_FLAGS
    (what maze_plr.py is given) and, through `MAPPED`, the trial `trial` builds. Refuses, naming
    it, a flag with no counterpart on our side or a value of the wrong type."""
    for item in items:
        flag, sep, value = item.partition("=")
        flag = flag if flag.startswith("--") else f"--{flag}"
        if not sep or flag not in SETTABLE:
            raise ValueError(f"--set {item!r}: expected FLAG=VALUE with FLAG one of {sorted(SETTABLE)}")
        cast = SETTABLE[flag]
        try:
            cast(value)
        except ValueError:
            kind = {int: "an integer", float: "a number"}[cast]
            raise ValueError(f"--set {item!r}: {flag} takes {kind}, not {value!r}") from None
        if flag == "--score_function" and value not in SCORES:
            raise ValueError(f"--set {item!r}: {flag} takes one of {sorted(SCORES)}")
        PEER_FLAGS[PEER_FLAGS.index(flag) + 1] = value
        CHANGED[flag] = value
    return dict(CHANGED)


def mapped(algorithm: str) -> dict:
    """MAPPED as it applies to `algorithm`: edits are ACCEL's alone."""
    return {flag: where for flag, where in MAPPED.items() if algorithm == "accel" or flag != "--num_edits"}


def sections(config: dict) -> dict:
    """A trial's sections by the names MAPPED gives them (`env`: the env's kwargs)."""
    return {**config, "env": config["env"]["kwargs"]}


def steps_per_update() -> int:
    """Env steps in one update: maze_plr.py's envs times its steps per env."""
    f = peer_flags()
    return int(f["--num_train_envs"]) * int(f["--num_steps"])


def peer_flags(given: list[str] | None = None) -> dict:
    """PEER_FLAGS (or `given`, a command line of the same kind) as a mapping (a flag without a
    value maps to True)."""
    given = PEER_FLAGS if given is None else given
    flags, i = {}, 0
    while i < len(given):
        if i + 1 < len(given) and not given[i + 1].startswith("--"):
            flags[given[i]], i = given[i + 1], i + 2
        else:
            flags[given[i]], i = True, i + 1
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
    flags, places, ours = peer_flags(), sections(config), mapped(algorithm)
    for flag in CHANGED.keys() & ours.keys():  # what --set changed, on our side too
        section, key, cast = ours[flag]
        places[section][key] = cast(flags[flag])
    if "--score_function" in CHANGED:
        config["ued"]["score"] = SCORES[flags["--score_function"]]
    config["agent"]["lr"] = lr_schedule(algorithm, updates)
    config["train"].update(
        total_timesteps=updates * steps_per_update(),
        timesteps_per_iteration=eval_every * steps_per_update(),
        eval_episodes=int(flags["--eval_num_attempts"]),
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
    places = sections(config)
    pairs = [(flag, places[section].get(key), cast) for flag, (section, key, cast) in mapped(algorithm).items()]
    bad = [f"{flag} {flags[flag]} against {ours}" for flag, ours, cast in pairs if cast(flags[flag]) != cast(ours)]
    lr, t0, rho = float(flags["--lr"]), replay_from(), gradient_share(algorithm)
    at_start, at_end = lr_at(a["lr"], t0, updates), lr_at(a["lr"], updates, updates)
    checks = [
        (u.get("score", "maxmc") == SCORES[flags["--score_function"]], "score"),
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
        (t["total_timesteps"] == updates * steps_per_update(), "budget"),
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
