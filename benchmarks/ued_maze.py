"""Level algorithms on JaxUED's maze: side by side with JaxUED's maze_plr.py, then ranked.

Part 1, the same work on both sides: JaxUED's `examples/maze_plr.py` (commit 0f8f128, run
unmodified by `peers/jaxued_maze_plr.py`) with its own settings (13 x 13, 25 walls, 32 envs x 256
steps, LSTM 256, buffer 4,000, replay 0.8 once half full, MaxMC, rank T 0.3, staleness 0.3,
robust PLR; and `--use_accel`), against ajax_tune's `robust_plr` and `accel` with the same
settings (configs/ued_maze_accel.yaml's trial), for 40 updates (327,680 env steps) per seed,
evaluated every 10 updates; one process per peer seed, our seeds as lanes of one process.
Reports env steps/s with and without the compiling chunks, wall clock, compile time, and the
held-out solve rate on JaxUED's eight mazes at each evaluation (both ~0 at this budget: the
buffer never reaches its fill of 2,000 levels, so robust PLR and ACCEL never take a gradient
step; that is why part 2 exists).

Part 2, a budget where held-out success moves (ajax_tune only): 7 x 7 mazes with 12 walls, a
feed-forward conv policy, 524,288 env steps per seed, 4 seeds as lanes, DR, PLR, robust PLR,
ACCEL and SFL, ranked by held-out success on eight hand-made solvable 7 x 7 mazes (medians and
ranges over seeds), with a robustness figure (mean success over the worst 10% of 100 levels from
the generator, fixed seed), and the measurements behind the ranking: gradient updates per
algorithm (and the ranking at equal updates), how hard generated levels are, and greedy against
sampling-policy evaluation.

Part `update`, where the recurrent update's time goes against maze_plr.py's: one PPO update of
each side alone (its own network, optimiser and update function, `[256, 32]` random maze
observations), at 1 and 5 epochs of one minibatch, each a fresh process, sides alternated, 3
rounds; the two epoch counts split an update into a fixed part and a part per epoch; and each
side's forward pass over the unroll. Written to `results/ued_maze_update.json`.

    python benchmarks/ued_maze.py --jaxued-repo PATH --peer-python PATH   # both parts, ~30 min
    python benchmarks/ued_maze.py --part update --jaxued-repo PATH --peer-python PATH   # ~3 min
    python benchmarks/ued_maze.py --part 2                                # part 2 only
    python benchmarks/ued_maze.py --quick --jaxued-repo PATH --peer-python PATH

`--jaxued-repo`: a clone of JaxUED at the pinned commit (`git clone
https://github.com/DramaCow/jaxued && git -C jaxued checkout 0f8f128`). `--peer-python`: a
Python whose environment has `pip install jaxued==0.0.1 distrax wandb` on our JAX (jax, jaxlib,
flax, optax at this interpreter's versions). Every unit of work (side, algorithm, seed) is a
fresh process and is written to the JSON as it ends; a rerun skips the units the JSON holds
(`--fresh` starts over), so a long run may be split.
"""

from __future__ import annotations

import argparse
import copy
import json
import pathlib
import shlex
import statistics
import subprocess
import sys

import harness
import yaml

JAXUED_COMMIT = "0f8f1284677375b889e4f13a32c9617cd009f8c4"
ROOT = harness.HERE.parent

# -- part 1: the same work as maze_plr.py -------------------------------------------------

P1_UPDATES, P1_EVAL_EVERY, P1_SEEDS = 40, 10, 3
P1_STEPS_PER_UPDATE = 32 * 256
P1_ALGORITHMS = {"robust_plr": [], "accel": ["--use_accel"]}

# maze_plr.py's flags, all given (their defaults at 0f8f128), so a change of default shows here
PEER_FLAGS = [
    "--num_train_envs", "32", "--num_steps", "256", "--num_minibatches", "1", "--epoch_ppo", "5",
    "--lr", "1e-4", "--max_grad_norm", "0.5", "--gamma", "0.995", "--gae_lambda", "0.98",
    "--clip_eps", "0.2", "--entropy_coeff", "1e-3", "--critic_coeff", "0.5",
    "--score_function", "MaxMC", "--no-exploratory_grad_updates", "--level_buffer_capacity", "4000",
    "--replay_prob", "0.8", "--staleness_coeff", "0.3", "--temperature", "0.3",
    "--minimum_fill_ratio", "0.5", "--prioritization", "rank", "--buffer_duplicate_check",
    "--num_edits", "5", "--agent_view_size", "5", "--n_walls", "25",
    "--eval_num_attempts", "10", "--checkpoint_save_interval", "0",
]  # fmt: skip

# Where the two sides differ on part 1's work, as read from both sources.
P1_DIFFERENCES = [
    "evaluation: maze_plr samples its policy, 10 attempts per maze (solve rate in steps of 0.1) and renders "
    "every step of attempt 0 inside its program; ajax_tune runs the deterministic policy once per maze "
    "(train.eval_episodes 1; maze and policy are deterministic) and renders nothing",
    "learning-rate schedule: both decay linearly from 1e-4; maze_plr counts only updates that apply gradients "
    "over --num_updates, ajax_tune counts env steps over total_timesteps (the run's). At the default 40 "
    "updates no gradient step happens on either side (the buffer never reaches its minimum fill of 2,000 levels, "
    "so nothing is replayed and robust PLR only scores), so this acts only in longer runs (--p1-updates)",
    "maze_plr compiles its train-and-eval step twice (a weak-typed level width after the first call); "
    "both compilations are in its compile time",
    "maze_plr scans its 10 updates and the evaluation in one jitted call; ajax_tune's train() runs 10 updates "
    "and one evaluation per call, for all seeds as lanes of one program",
]


def p1_config(algorithm: str, seeds: int, updates: int) -> dict:
    trial = yaml.safe_load((ROOT / "configs" / "ued_maze_accel.yaml").read_text())["trial"]
    trial["ued"]["algorithm"] = algorithm
    trial["train"].update(
        total_timesteps=updates * P1_STEPS_PER_UPDATE,
        timesteps_per_iteration=P1_EVAL_EVERY * P1_STEPS_PER_UPDATE,
        eval_episodes=1,
        eval_at_start=False,
        num_seeds=seeds,
        seed=0,
    )
    return trial


def check_p1_settings(trial: dict) -> list[str]:
    """Our trial against maze_plr's flags: the mismatches (expected: none)."""
    flags: dict = {}
    i = 0
    while i < len(PEER_FLAGS):  # flags with and without a value
        if i + 1 < len(PEER_FLAGS) and not PEER_FLAGS[i + 1].startswith("--"):
            flags[PEER_FLAGS[i]] = PEER_FLAGS[i + 1]
            i += 2
        else:
            flags[PEER_FLAGS[i]] = True
            i += 1
    a, u, e = trial["agent"], trial["ued"], trial["env"]["kwargs"]
    pairs = [
        ("--num_train_envs", a["num_envs"], int),
        ("--num_steps", a["unroll_length"], int),
        ("--num_minibatches", a["num_minibatches"], int),
        ("--epoch_ppo", a["update_epochs"], int),
        ("--lr", a["lr"]["peak"], float),
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
        ("--num_edits", u["edits"], int),
        ("--agent_view_size", e["agent_view_size"], int),
        ("--n_walls", e["n_walls"], int),
    ]
    bad = [f"{flag} {flags[flag]} against {ours}" for flag, ours, cast in pairs if cast(flags[flag]) != cast(ours)]
    checks = [
        (u.get("score", "maxmc") == "maxmc", "score"),
        (a["lr"]["kind"] == "linear", "lr schedule"),
        (a["recurrent"] == {"cell": "lstm", "size": 256}, "LSTM 256"),
        (a["encoder"] == {"kind": "conv", "channels": [16], "kernel": 3, "embed_rest": 5}, "conv 16 3x3, direction in 5"),
        (a["hidden_sizes"] == [32], "heads of 32"),
        ((e["height"], e["width"], e["max_episode_steps"]) == (13, 13, 250), "13 x 13, 250 steps"),
        (u.get("duplicate_check", True) is True, "duplicate check"),
    ]
    return bad + [f"{what} differs" for ok, what in checks if not ok]


# -- part 2: small mazes, ranked -----------------------------------------------------------

P2_CALLS, P2_SEEDS, P2_POSTHOC_EVERY, P2_WALLS = 16, 4, 2, 12
P2_ALGORITHMS = ("dr", "plr", "robust_plr", "accel", "sfl")
P2_GENERATED, P2_GENERATED_SEED, P2_STOCHASTIC_EPISODES = 100, 20261205, 10

#: Eight hand-made 7 x 7 mazes, each solvable ('>' the agent facing right, 'G' the goal).
HELDOUT_7X7 = {
    "zigzag": """
>......
######.
.......
.######
.......
######.
G......""",
    "spiral": """
>......
.#####.
.#...#.
.#.#.#.
.#.#G#.
.#.###.
.......""",
    "rooms": """
>..#...
...#...
.......
####.##
...#...
...#..G
.......""",
    "comb": """
>.#.#.#
..#.#.#
..#.#.#
.......
#.#.#..
#.#.#..
#.#.#.G""",
    "pocket": """
G#.....
.#.###.
.#.#...
.#.#.##
.#.#...
...###.
>......""",
    "corridor": """
#######
#######
>.....G
#######
#######
#######
#######""",
    "snake": """
>.#....
#.#.##.
#.#.#..
#...#.#
###.#..
..#.##.
G.....#""",
    "cross": """
...#...
.>.#...
.......
##...##
.......
...#.G.
...#...""",
}


def p2_config(algorithm: str, seeds: int, calls: int, walls: int = P2_WALLS, score: str = "maxmc") -> dict:
    from ajax_tune.envs.jaxued_adapter import parse_maze

    heldout = [{k: v.tolist() for k, v in parse_maze(text.strip("\n")).items()} for text in HELDOUT_7X7.values()]
    per_call = 32 * 64 * 16
    return {
        "env": {"name": "jaxued/maze", "kwargs": {"height": 7, "width": 7, "n_walls": walls, "max_episode_steps": 64}},
        "agent": {
            "name": "ppo",
            "num_envs": 32,
            "unroll_length": 64,
            "hidden_sizes": [64],
            "activation": "relu",
            "num_minibatches": 4,
            "update_epochs": 4,
            "gamma": 0.99,
            "ent_coef": 0.01,
            "lr": {"kind": "constant", "peak": 5e-4},
            "encoder": {"kind": "conv", "channels": [16], "kernel": 3},
        },
        "train": {
            "total_timesteps": per_call * calls,
            "timesteps_per_iteration": per_call,
            "eval_episodes": 1,
            "num_seeds": seeds,
            "seed": 0,
        },
        "heldout": {"tasks": heldout},
        "ued": P2_UED[algorithm](score),
    }


#: Each algorithm's settings in part 2 (each takes only its own).
P2_BUFFER = {"buffer_size": 256, "replay_prob": 0.8, "minimum_fill": 0.25}
P2_UED = {
    "dr": lambda score: {"algorithm": "dr"},
    "plr": lambda score: {"algorithm": "plr", "score": score, **P2_BUFFER},
    "robust_plr": lambda score: {"algorithm": "robust_plr", "score": score, **P2_BUFFER},
    "accel": lambda score: {"algorithm": "accel", "score": score, **P2_BUFFER, "edits": 5},
    "sfl": lambda score: {"algorithm": "sfl", "candidates": 256, "keep": 64, "scoring_episodes": 4, "refresh_every": 8},
}


def shortest_path(wall_map, agent_pos, goal_pos) -> int | None:
    """Moves forward (turns aside) from the agent's cell to the goal's; None when the goal cannot
    be reached (the generator does not check)."""
    from ajax_tune.envs.jaxued_adapter import shortest_path as maze_shortest_path

    return maze_shortest_path({"wall_map": wall_map, "agent_pos": agent_pos, "goal_pos": goal_pos})


def posthoc_levels(walls: int = P2_WALLS) -> tuple[dict, dict]:
    """The eight held-out mazes then the first 100 solvable levels the generator draws (fixed
    seed), as one batch of tasks; and what the draw held (unsolvable levels, path lengths)."""
    import jax
    import numpy as np

    from ajax_tune.envs.jaxued_adapter import MazeEnv, parse_maze

    mazes = [parse_maze(text.strip("\n")) for text in HELDOUT_7X7.values()]
    env = MazeEnv(height=7, width=7, n_walls=walls, max_episode_steps=64)
    keys = jax.random.split(jax.random.PRNGKey(P2_GENERATED_SEED), 20 * P2_GENERATED)
    drawn = jax.device_get(jax.vmap(env.generate_level)(keys))
    fields = list(mazes[0])
    lengths = [shortest_path(drawn["wall_map"][i], drawn["agent_pos"][i], drawn["goal_pos"][i]) for i in range(len(keys))]
    solvable = [i for i, n in enumerate(lengths) if n is not None][:P2_GENERATED]
    considered = solvable[-1] + 1
    tasks = {k: np.concatenate([np.stack([m[k] for m in mazes]), np.asarray(drawn[k])[solvable]]).tolist() for k in fields}
    held = [shortest_path(m["wall_map"], m["agent_pos"], m["goal_pos"]) for m in mazes]
    kept = [lengths[i] for i in solvable]
    facts = {
        "generated_drawn": considered,
        "generated_unsolvable_share": round(sum(n is None for n in lengths[:considered]) / considered, 3),
        "shortest_path_heldout": dict(zip(HELDOUT_7X7, held)),
        "shortest_path_heldout_mean": round(float(np.mean(held)), 2),
        "shortest_path_generated_mean": round(float(np.mean(kept)), 2),
        "shortest_path_generated_quantiles_50_90_max": [float(np.quantile(kept, q)) for q in (0.5, 0.9, 1.0)],
        "generated_at_least_as_long_as_shortest_heldout": round(float(np.mean(np.asarray(kept) >= min(held))), 3),
    }
    return tasks, facts


def buffer_facts(lanes: list[dict] | None, temperature: float = 0.3) -> dict | None:
    """What the level buffers held at the end, over every seed's buffer: how many levels, the
    share that cannot be solved, shortest paths of the rest, scores of both kinds, and the share
    of rank-prioritised replay weight ((1/rank)^(1/T), staleness left out) on unsolvable levels."""
    import numpy as np

    if not lanes:
        return None
    sizes, unsolvable, paths, scores_solvable, scores_unsolvable, weight_unsolvable, top_unsolvable = ([] for _ in range(7))
    for lane in lanes:
        slots = lane["slots"]
        sizes.append(lane["size"])
        if not slots:
            continue
        lengths = [
            shortest_path([[c == "1" for c in row] for row in s["wall_rows"]], s["agent_pos"], s["goal_pos"]) for s in slots
        ]
        bad = np.array([n is None for n in lengths])
        score = np.array([s["score"] for s in slots], np.float64)
        unsolvable.append(float(bad.mean()))
        paths += [n for n in lengths if n is not None]
        scores_solvable += score[~bad & np.isfinite(score)].tolist()
        scores_unsolvable += score[bad & np.isfinite(score)].tolist()
        order = np.argsort(-np.where(np.isfinite(score), score, -np.inf), kind="stable")
        rank = np.empty(len(score))
        rank[order] = np.arange(1, len(score) + 1)
        w = (1.0 / rank) ** (1.0 / temperature)
        weight_unsolvable.append(float(w[bad].sum() / w.sum()))
        top = order[: max(1, len(order) // 10)]
        top_unsolvable.append(float(bad[top].mean()))

    def mean(values):
        return round(float(np.mean(values)), 4) if values else None

    return {
        "size_per_seed": sizes,
        "unsolvable_share_per_seed": [round(v, 4) for v in unsolvable],
        "unsolvable_share_of_top_tenth_by_score_per_seed": [round(v, 4) for v in top_unsolvable],
        "unsolvable_share_of_rank_weight_per_seed": [round(v, 4) for v in weight_unsolvable],
        "shortest_path_solvable_mean": mean(paths),
        "shortest_path_solvable_quantiles_50_90_max": [float(np.quantile(paths, q)) for q in (0.5, 0.9, 1.0)] if paths else None,
        "score_mean_solvable": mean(scores_solvable),
        "score_mean_unsolvable": mean(scores_unsolvable),
    }


# -- running units ------------------------------------------------------------------------


def run(python: str, script: str, settings: dict, timeout: float) -> dict:
    cmd = [str(python), str(harness.PEERS_DIR / script), json.dumps(settings)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None, text=True, env=harness.worker_env(), timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{script} failed (exit {proc.returncode}): {proc.stdout[-2000:]}")
    out = json.loads(lines[-1][len("RESULT ") :])
    out["load_average_at_end"] = harness.load_average()
    return out


def jaxued_commit(repo: str) -> str | None:
    try:
        return subprocess.run(["git", "-C", repo, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


# -- summaries ----------------------------------------------------------------------------


def spread(values: list[float]) -> dict:
    values = [v for v in values if v is not None]
    if not values:
        return {}
    return {
        "median": round(statistics.median(values), 4),
        "min": round(min(values), 4),
        "max": round(max(values), 4),
        "n": len(values),
    }


def per_process(units: list[dict], total: int) -> dict:
    """What a side that runs one process per seed took, each process `total` env steps: wall
    clock and compile time per process, and env steps/s with and without compiling."""
    run = [u["run_s"] for u in units]
    return {
        "processes": len(units),
        "wall_s_per_seed": spread(run),
        "wall_s_all_seeds": round(sum(run), 2),
        "compile_s_per_seed": spread([u["compile_s"] for u in units]),
        "env_steps_per_s_with_compile_all_seeds": round(total * len(units) / sum(run), 1),
        "env_steps_per_s_without_compile": spread([total / (u["run_s"] - u["compile_s"]) for u in units]),
    }


def p1_summary(units: dict, updates: int, seeds: int = P1_SEEDS) -> dict:
    out = {}
    total = updates * P1_STEPS_PER_UPDATE
    for algorithm in P1_ALGORITHMS:
        peer = [u for k, u in units.items() if k.startswith(f"jaxued/{algorithm}/")]
        ours = units.get(f"ajax_tune/{algorithm}")
        row = {}
        if peer:
            first = [u["evals"][0] for u in peer]
            rest = [u["evals"][1:] for u in peer]
            row["jaxued"] = {
                **per_process(peer, total),
                "env_steps_per_s_without_first_chunk": spread(
                    [sum(c["chunk_env_steps"] for c in r) / sum(c["chunk_s"] for c in r) for r in rest if r]
                ),
                "first_chunk_s": spread([c["chunk_s"] for c in first]),
                "heldout_solve_rate_mean_per_eval": [
                    spread([u["evals"][i]["solve_rate"].get("mean") for u in peer]) for i in range(len(peer[0]["evals"]))
                ],
                "heldout_solve_rate_max_any_maze_any_eval": max(
                    v for u in peer for e in u["evals"] for k, v in e["solve_rate"].items() if k != "mean"
                ),
                "buffer_size_at_end": spread([u["evals"][-1]["level_sampler"].get("size") for u in peer]),
            }
        if ours:
            calls, seeds = ours["calls"], ours["num_seeds"]
            later = calls[1:]
            row["ajax_tune"] = {
                "seeds_as_lanes": seeds,
                "wall_s_all_seeds": ours["run_s"],
                "setup_s": ours["setup_s"],
                "compile_s": ours["compile_s"],
                "env_steps_per_s_with_compile_all_seeds": round(total * seeds / ours["run_s"], 1),
                "env_steps_per_s_without_first_chunk_all_seeds": round(
                    seeds
                    * sum(ours["steps_per_update"] * ours["updates_per_call"] for _ in later)
                    / sum(c["wall_s"] for c in later),
                    1,
                )
                if later
                else None,
                "env_steps_per_s_without_compile_all_seeds": round(total * seeds / (ours["run_s"] - ours["compile_s"]), 1),
                "first_chunk_s": calls[0]["wall_s"],
                "heldout_solve_rate_mean_per_eval": [c.get("eval/heldout/success_rate_mean") for c in calls],
                "heldout_solve_rate_max_any_maze_any_eval": max(
                    v for c in calls for k, v in c.items() if k.startswith("eval/heldout/") and k.endswith("/success_rate")
                ),
                "buffer_size_at_end": calls[-1].get("ued/buffer_size"),
                "replay_share_per_call": [c.get("ued/replay") for c in calls],
            }
        single = [units[k] for k in sorted(units) if k.startswith(f"ajax_tune/{algorithm}/")]
        if single:
            row["ajax_tune_per_process"] = {
                **per_process(single, total),
                "env_steps_per_s_without_first_chunk": spread(
                    [
                        u["steps_per_update"]
                        * u["updates_per_call"]
                        * (len(u["calls"]) - 1)
                        / sum(c["wall_s"] for c in u["calls"][1:])
                        for u in single
                        if len(u["calls"]) > 1
                    ]
                ),
                "first_chunk_s": spread([u["calls"][0]["wall_s"] for u in single]),
                "heldout_solve_rate_max_any_maze_any_eval": max(
                    v
                    for u in single
                    for c in u["calls"]
                    for k, v in c.items()
                    if k.startswith("eval/heldout/") and k.endswith("/success_rate")
                ),
            }
        if "jaxued" in row:
            j = row["jaxued"]
            for side in ("ajax_tune", "ajax_tune_per_process"):
                if side in row:
                    row[f"ratio_all_seeds_wall_jaxued_over_{side}"] = round(
                        j["wall_s_all_seeds"] / row[side]["wall_s_all_seeds"], 2
                    )
        out[algorithm] = row
    out["how_to_read"] = (
        "Throughput for all seeds of a side: the peer runs one process per seed (seeds one after another), "
        f"ours runs the {seeds} seeds as lanes of one process ('ajax_tune') and, as the peer does, one "
        "single-lane process per seed ('ajax_tune_per_process'). Lanes compute every branch of a per-lane "
        "decision (a vmapped cond is a select): robust PLR's scoring-only rollouts still compute the update "
        f"they discard; a single lane skips it. 'all_seeds' figures are {seeds} x {total:,} env "
        f"steps over the wall clock each side took for all {seeds}. The peer's per-seed 'without' figures are per process "
        "(one seed). 'without_first_chunk' drops the first 10 updates (the first compilation; the peer's "
        "second compilation is in its second chunk), 'without_compile' subtracts the seconds JAX reported "
        "compiling."
    )
    if updates * 32 < 2000:  # maze_plr.py's 32 levels per update against its buffer's minimum fill
        out["how_to_read"] += (
            " Held-out solve rates are ~0 on both sides, as expected: the buffer (4,000) needs 2,000 levels "
            f"before a replay, {updates} updates x 32 envs offer {updates * 32:,}, so robust PLR and ACCEL take "
            f"no gradient step in {total:,} env steps on either side."
        )
    return out


def p2_summary(units: dict) -> dict:
    import numpy as np

    ranking, details = {}, {}
    for algorithm in P2_ALGORITHMS:
        u = units.get(f"ajax_tune/{algorithm}")
        if not u:
            continue
        calls, per_call = u["calls"], u["updates_per_call"]
        learns_always = algorithm in ("dr", "plr", "sfl")
        share = [1.0 if learns_always else c.get("ued/replay", 0.0) for c in calls]
        grad_updates = np.cumsum([s * per_call for s in share]).round(1).tolist()
        final = u["posthoc"][-1]
        details[algorithm] = {
            "wall_s": u["run_s"],
            "compile_s": u["compile_s"],
            "env_steps": calls[-1].get("env_steps"),
            # SFL's scoring episodes, outside env_steps: its env interaction is the sum
            "scoring_env_steps": calls[-1].get("ued/scoring_env_steps"),
            "buffer_at_end": u.get("buffer_facts"),
            "gradient_updates_per_seed": grad_updates[-1],
            "gradient_updates_cumulative": grad_updates,
            "replay_share_per_call": [c.get("ued/replay") for c in calls],
            "train_return_per_call": [round(c.get("train/episode_return_mean", float("nan")), 3) for c in calls],
            "heldout_greedy_in_loop_per_call_mean_over_seeds": [c.get("eval/heldout/success_rate_mean") for c in calls],
            "posthoc": u["posthoc"],
        }
        ranking[algorithm] = {
            "heldout_greedy": spread(final["greedy"]["heldout"]["mean_per_seed"]),
            "heldout_sampling": spread(final["stochastic"]["heldout"]["mean_per_seed"]),
            "generated_greedy": spread(final["greedy"]["generated"]["mean_per_seed"]),
            "generated_sampling": spread(final["stochastic"]["generated"]["mean_per_seed"]),
            "generated_worst10_greedy": spread(final["greedy"]["generated"]["worst10_per_seed"]),
            "generated_worst10_sampling": spread(final["stochastic"]["generated"]["worst10_per_seed"]),
            # the last three post-hoc points averaged per seed: less noise than one point
            "heldout_sampling_last3_points": spread(
                np.mean([p["stochastic"]["heldout"]["mean_per_seed"] for p in u["posthoc"][-3:]], axis=0).tolist()
            ),
            "heldout_greedy_last3_points": spread(
                np.mean([p["greedy"]["heldout"]["mean_per_seed"] for p in u["posthoc"][-3:]], axis=0).tolist()
            ),
        }
    orders = {}
    for metric in ("heldout_greedy", "heldout_sampling", "heldout_sampling_last3_points", "generated_worst10_sampling"):
        have = [a for a in ranking if ranking[a].get(metric)]
        orders[metric] = sorted(have, key=lambda a: -ranking[a][metric]["median"])
    equal = equal_updates(details)
    return {"ranking": ranking, "order_by_median": orders, "equal_gradient_updates": equal, "per_algorithm": details}


def equal_updates(details: dict) -> dict:
    """DR's post-hoc held-out success at the point where its gradient updates are closest to each
    robust algorithm's at the end (DR learns from every rollout)."""
    dr = details.get("dr")
    if not dr:
        return {}
    out = {}
    for algorithm in ("robust_plr", "accel"):
        d = details.get(algorithm)
        if not d:
            continue
        target = d["gradient_updates_per_seed"]
        points = dr["posthoc"]
        per_call = dr["gradient_updates_cumulative"]
        best = min(points, key=lambda p: abs(per_call[p["call"] - 1] - target))
        final = d["posthoc"][-1]
        out[algorithm] = {
            "its_gradient_updates": target,
            "dr_point": {"call": best["call"], "gradient_updates": per_call[best["call"] - 1], "env_steps": best["env_steps"]},
            "dr_heldout_sampling": spread(best["stochastic"]["heldout"]["mean_per_seed"]),
            "dr_heldout_greedy": spread(best["greedy"]["heldout"]["mean_per_seed"]),
            "its_heldout_sampling": spread(final["stochastic"]["heldout"]["mean_per_seed"]),
            "its_heldout_greedy": spread(final["greedy"]["heldout"]["mean_per_seed"]),
        }
    return out


# -- main ---------------------------------------------------------------------------------


# -- part update: one recurrent update alone ------------------------------------------------------

UPDATE_EPOCHS, UPDATE_ROUNDS, UPDATE_RUNS = (1, 5), 3, 5


def update_summary(runs: dict[str, list[dict]]) -> dict:
    """Per side: the median update at each epoch count, its split into a fixed part and a part
    per epoch (from the two counts), and the forward pass; the ratios ours over the peer's."""
    low, high = UPDATE_EPOCHS
    out = {}
    for side in ("ajax_tune", "jaxued"):
        at = {e: statistics.median(r["update_s"] for r in runs[f"{side}/{e}"]) for e in UPDATE_EPOCHS}
        per_epoch = (at[high] - at[low]) / (high - low)
        forward = statistics.median(r["forward_s"] for key in runs if key.startswith(side) for r in runs[key])
        out[side] = {
            "update_s": {str(e): round(v, 4) for e, v in at.items()},
            "per_epoch_s": round(per_epoch, 4),
            "fixed_s": round(at[low] - low * per_epoch, 4),
            "forward_s": round(forward, 4),
        }
    ours, peer = out["ajax_tune"], out["jaxued"]
    out["ratio_ajax_tune_over_jaxued"] = {
        key: round(ours[key] / peer[key], 2) for key in ("per_epoch_s", "fixed_s", "forward_s") if peer[key] > 0
    } | {f"update_{high}_epochs": round(ours["update_s"][str(high)] / peer["update_s"][str(high)], 2)}
    out["how_to_read"] = (
        "Seconds per call, median of 5 timed calls per process and of the processes over rounds. "
        "fixed_s is what an update costs besides its epochs: for ajax_tune the forward pass that "
        "computes values, successor values and GAE before the epochs (maze_plr.py takes them from "
        "its rollout); forward_s is ajax_tune's value_estimates (the unroll replayed, the successor "
        "of every step, GAE) against maze_plr.py's network over the unroll."
    )
    return out


def run_update_part(args, path: pathlib.Path, record: dict) -> None:
    trial = p1_config("robust_plr", 1, P1_UPDATES)
    sides = {}
    for epochs in UPDATE_EPOCHS:
        sides[f"ajax_tune/{epochs}"] = (
            sys.executable,
            "ajax_tune_recurrent_update.py",
            {"agent": trial["agent"], "epochs": epochs, "runs": UPDATE_RUNS},
        )
        sides[f"jaxued/{epochs}"] = (
            args.peer_python,
            "jaxued_recurrent_update.py",
            {"jaxued_repo": args.jaxued_repo, "epochs": epochs, "runs": UPDATE_RUNS},
        )
    runs = harness.alternate(sides, UPDATE_ROUNDS, log=lambda line: print(f"[ued_maze] update: {line}", flush=True))
    record["update"] = {"runs": runs, "summary": update_summary(runs), "agent": trial["agent"]}
    save(path, record)
    print(json.dumps(record["update"]["summary"], indent=1))


def load(path: pathlib.Path, fresh: bool) -> dict:
    if path.exists() and not fresh:
        return json.loads(path.read_text())
    return {"part1": {"units": {}}, "part2": {"units": {}}}


def save(path: pathlib.Path, record: dict) -> None:
    payload = {k: v for k, v in record.items() if k in ("part1", "part2", "update", "peer", "loads", "commands")}
    harness.write_results("ued_maze", payload, path)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["1", "2", "all", "update"], default="all")
    parser.add_argument("--jaxued-repo", default=None, help="a clone of DramaCow/jaxued at 0f8f128 (part 1)")
    parser.add_argument("--peer-python", default=None, help="a Python with jaxued==0.0.1, distrax, wandb on our JAX")
    parser.add_argument("--only", nargs="*", default=None, help="units to run, e.g. jaxued/accel/0 ajax_tune/dr")
    parser.add_argument("--fresh", action="store_true", help="forget the units the JSON holds")
    parser.add_argument("--quick", action="store_true", help="a short smoke of both parts")
    parser.add_argument("--p1-seeds", type=int, default=None, help=f"part 1 seeds per side (default {P1_SEEDS})")
    parser.add_argument(
        "--p1-updates",
        type=int,
        default=None,
        help=f"part 1 updates per seed, a multiple of {P1_EVAL_EVERY} (default {P1_UPDATES}: no replay yet; past about "
        "70 the buffer reaches its minimum fill and replayed levels train); give --out with it",
    )
    parser.add_argument(
        "--p2-walls",
        type=int,
        default=P2_WALLS,
        help=f"part 2's walls per generated 7 x 7 maze, in training and among the generated levels scored "
        f"(default {P2_WALLS}); give --out with another",
    )
    parser.add_argument(
        "--p2-score",
        choices=["maxmc", "pvl"],
        default="maxmc",
        help="part 2's level score for PLR, robust PLR and ACCEL (default maxmc, as JaxUED's maze_plr.py); give --out with pvl",
    )
    parser.add_argument(
        "--p2-calls",
        type=int,
        default=None,
        help=f"part 2's calls of {32 * 64 * 16:,} env steps per seed (default {P2_CALLS}), a multiple of "
        f"{P2_POSTHOC_EVERY}; give --out with another",
    )
    parser.add_argument("--out", default=None)
    parser.add_argument("--timeout", type=float, default=1800)
    args = parser.parse_args(argv)

    p1_updates, p1_seeds, p2_calls, p2_seeds, p2_algorithms = P1_UPDATES, P1_SEEDS, P2_CALLS, P2_SEEDS, P2_ALGORITHMS
    if args.quick:
        p1_updates, p1_seeds, p2_calls, p2_seeds, p2_algorithms = 2, 1, 2, 2, ("dr", "accel")
    if args.p1_seeds:
        p1_seeds = args.p1_seeds
    if args.p1_updates:
        if args.p1_updates % P1_EVAL_EVERY:
            parser.error(f"--p1-updates {args.p1_updates}: expected a multiple of {P1_EVAL_EVERY}")
        p1_updates = args.p1_updates
    if args.p2_calls:
        if args.p2_calls % P2_POSTHOC_EVERY:
            parser.error(f"--p2-calls {args.p2_calls}: expected a multiple of {P2_POSTHOC_EVERY}")
        p2_calls = args.p2_calls
    path = (
        pathlib.Path(args.out)
        if args.out
        else harness.RESULTS_DIR
        / ("ued_maze_quick.json" if args.quick else "ued_maze_update.json" if args.part == "update" else "ued_maze.json")
    )
    record = load(path, args.fresh)
    record.setdefault("loads", [])
    # a run split under a shared lock is several commands: keep them all (the header keeps the last)
    record.setdefault("commands", []).append("python " + " ".join(shlex.quote(harness._relative(a)) for a in sys.argv))
    wanted = (lambda key: True) if args.only is None else (lambda key: key in args.only)

    if args.part in ("1", "all", "update"):
        if not (args.jaxued_repo and args.peer_python):
            parser.error(f"part {args.part if args.part != 'all' else 1} needs --jaxued-repo and --peer-python")
        commit = jaxued_commit(args.jaxued_repo)
        if commit != JAXUED_COMMIT:
            print(f"[ued_maze] warning: {args.jaxued_repo} is at {commit}, not {JAXUED_COMMIT}", file=sys.stderr)
        harness.SIDES["jaxued"] = (args.peer_python, ("jaxued", "distrax", "wandb"))
        record["peer"] = {
            "jaxued_commit": commit,
            "versions": harness.installed_versions(args.peer_python, ("jaxued", "distrax", "wandb")),
            "ours": harness.installed_versions(sys.executable, ("ajax-tune", "jaxued")),
        }
        print(f"[ued_maze] versions: {json.dumps(record['peer'])}", flush=True)
        if args.part == "update":
            run_update_part(args, path, record)
            return
        part = record["part1"]
        eval_every = 1 if args.quick else P1_EVAL_EVERY
        trial = p1_config("accel", p1_seeds, p1_updates)
        if args.quick:
            trial["train"]["timesteps_per_iteration"] = P1_STEPS_PER_UPDATE
        part["settings"] = {
            "updates": p1_updates,
            "env_steps_per_seed": p1_updates * P1_STEPS_PER_UPDATE,
            "eval_every_updates": eval_every,
            "seeds": p1_seeds,
            "peer_flags": PEER_FLAGS,
            "ours_trial": trial,
            "mismatches_found_by_check": check_p1_settings(trial),
            "differences": P1_DIFFERENCES,
        }
        for algorithm, extra in P1_ALGORITHMS.items():
            # the peer: one process per seed; ours: the seeds as lanes of one process, and (as
            # the peer runs) one single-lane process per seed
            units = (
                [(f"jaxued/{algorithm}/{s}", s) for s in range(p1_seeds)]
                + [(f"ajax_tune/{algorithm}", None)]
                + [(f"ajax_tune/{algorithm}/{s}", s) for s in range(p1_seeds)]
            )
            for key, seed in units:
                if key in part["units"] or not wanted(key):
                    continue
                print(f"[ued_maze] part 1: {key}", flush=True)
                if key.startswith("jaxued/"):
                    flags = [
                        *PEER_FLAGS,
                        *extra,
                        "--seed",
                        str(seed),
                        "--num_updates",
                        str(p1_updates),
                        "--eval_freq",
                        str(eval_every),
                    ]
                    out = run(
                        args.peer_python, "jaxued_maze_plr.py", {"jaxued_repo": args.jaxued_repo, "args": flags}, args.timeout
                    )
                else:
                    config = copy.deepcopy(trial)
                    config["ued"]["algorithm"] = algorithm
                    if seed is not None:
                        config["train"].update(num_seeds=1, seed=seed)
                    calls = p1_updates // eval_every
                    out = run(sys.executable, "ajax_tune_ued_maze.py", {"config": config, "calls": calls}, args.timeout)
                part["units"][key] = out
                record["loads"].append({"unit": key, "load_average_at_end": out["load_average_at_end"]})
                part["summary"] = p1_summary(part["units"], p1_updates, p1_seeds)
                save(path, record)

    if args.part in ("2", "all"):
        part = record["part2"]
        tasks, facts = posthoc_levels(args.p2_walls)
        n = len(HELDOUT_7X7)
        spec = {
            "at": list(range(P2_POSTHOC_EVERY, p2_calls + 1, P2_POSTHOC_EVERY)),
            "tasks": tasks,
            "groups": {"heldout": [0, n], "generated": [n, n + P2_GENERATED]},
            "stochastic_episodes": P2_STOCHASTIC_EPISODES,
            "seed": 1,
        }
        part["settings"] = {
            "config": p2_config("robust_plr", p2_seeds, p2_calls, args.p2_walls, args.p2_score),
            "calls": p2_calls,
            "heldout_mazes": HELDOUT_7X7,
            "generated_levels": P2_GENERATED,
            "generated_seed": P2_GENERATED_SEED,
            "levels": facts,
            "posthoc": {k: v for k, v in spec.items() if k != "tasks"},
        }
        for algorithm in p2_algorithms:
            key = f"ajax_tune/{algorithm}"
            if key in part["units"] or not wanted(key):
                continue
            print(f"[ued_maze] part 2: {key}", flush=True)
            out = run(
                sys.executable,
                "ajax_tune_ued_maze.py",
                {
                    "config": p2_config(algorithm, p2_seeds, p2_calls, args.p2_walls, args.p2_score),
                    "calls": p2_calls,
                    "posthoc": spec,
                    "buffer": True,
                },
                args.timeout,
            )
            out["buffer_facts"] = buffer_facts(out.pop("buffer", None))
            part["units"][key] = out
            record["loads"].append({"unit": key, "load_average_at_end": out["load_average_at_end"]})
            part["summary"] = p2_summary(part["units"])
            save(path, record)
    save(path, record)
    print(json.dumps({k: record[k].get("summary") for k in ("part1", "part2")}, indent=1)[:6000])


if __name__ == "__main__":
    main()
