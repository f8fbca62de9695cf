"""Learning parity with JaxUED's maze_plr.py: robust PLR and ACCEL on its maze and settings, both sides.

The study: JaxUED's `examples/maze_plr.py` (commit 0f8f128, run unmodified by
`peers/jaxued_maze_plr.py`) and ajax_tune (`peers/ajax_tune_ued_maze.py`, the trial of
`configs/ued_maze_accel.yaml`) on maze_plr.py's settings: 13 x 13 mazes with 25 walls, 32 envs x
256 steps per update, its LSTM 256 network, buffer 4,000 replayed at 0.8 once half full, MaxMC,
rank temperature 0.3, staleness 0.3, duplicate check, 5 edits for ACCEL. Robust PLR and ACCEL,
`UPDATES` updates per seed (2,048,000 env steps: replay can start after update 63, when the
buffer holds 2,000 levels), 3 seeds a side, one process per seed (a single lane: lanes would
compute every branch), sides alternated, evaluated every 10 updates on both sides. Per
evaluation, four curves: training return (episodes that ended in the 10 updates), the buffer's
mean score, the mean shortest path of its solvable levels (both read from the buffer each side
saved at that evaluation), and the held-out solve rate on JaxUED's eight mazes with JaxUED's
protocol (the sampling policy, 10 attempts per maze). Also each process's wall clock (imports,
compilation, training and evaluation; the study's own saves left out) and seconds per update
once replay can start. Writes `results/ued_maze.json` (per seed per evaluation the curves,
medians and ranges, a verdict per curve, the timings) and `docs/images/ued_maze_parity.png`.

    python benchmarks/ued_maze.py --jaxued-repo DIR                  # the study, about an hour
    python benchmarks/ued_maze.py --jaxued-repo DIR --part tap       # what the return tap costs
    python benchmarks/ued_maze.py --jaxued-repo DIR --part update    # one recurrent update alone
    python benchmarks/ued_maze.py --part report                      # the plot and tables, from the JSON
    python benchmarks/ued_maze.py --jaxued-repo DIR --quick          # a smoke: 2 updates a unit
    python benchmarks/ued_maze.py --jaxued-repo DIR --set n_walls=50 --set num_train_envs=16   # other settings

`--jaxued-repo`: a clone of JaxUED at the pinned commit (`git clone
https://github.com/DramaCow/jaxued && git -C jaxued checkout 0f8f128`). `--peer-python`: the
interpreter maze_plr.py runs in (default: this one, whose environment has jaxued 0.0.1 on our
JAX; it needs distrax, wandb and orbax-checkpoint too). Both sides' versions are printed and
recorded. `--set FLAG=VALUE` changes one of maze_plr.py's flags (those with a counterpart in our
trial, `ued_maze_settings.MAPPED`, and `--lr`, `--score_function`) on both sides, checked on both
before any unit starts. Every unit (side, algorithm, seed) is a fresh process, written to the JSON as it ends;
a rerun skips the units the JSON holds (`--fresh` starts over, `--only` runs some).

A variant side changes one thing on ours to find what a difference comes from, and runs only when
`--only` names its units: `ajax_tune_terminal/<algorithm>/<seed>` ends an episode at the maze's
time limit, as maze_plr.py does, where ours truncates and bootstraps (`peers/maze_time_limit.py`).
The summary compares it with both sides.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import shlex
import shutil
import subprocess
import sys
import tempfile

import harness
import ued_maze_summary as summary
from ued_maze_measures import read_levels
from ued_maze_settings import (
    ALGORITHMS,
    CHANGED,
    DIFFERENCES,
    EVAL_EVERY,
    PEER_FLAGS,
    SEEDS,
    UPDATES,
    check_settings,
    gradient_share,
    in_place,
    peer_flags,
    replay_from,
    set_flags,
    steps_per_update,
    trial,
)

JAXUED_COMMIT = "0f8f1284677375b889e4f13a32c9617cd009f8c4"
#: Sides that change one thing on ours, to find what a difference comes from: `ajax_tune_terminal`
#: ends an episode at the maze's time limit as maze_plr.py does (ours truncates and bootstraps).
VARIANTS = {"ajax_tune_terminal": "maze_time_limit:TerminalMaze"}
ROOT = harness.HERE.parent
FIGURE = ROOT / "docs" / "images" / "ued_maze_parity.png"

# -- running units ----------------------------------------------------------------------------


def run(python: str, script: str, settings: dict, timeout: float) -> dict:
    """One worker, its stderr passed through (a unit runs for minutes), its RESULT line parsed."""
    cmd = [str(python), str(harness.PEERS_DIR / script), json.dumps(settings)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=None, text=True, env=harness.worker_env(), timeout=timeout)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"{script} failed (exit {proc.returncode}): {proc.stdout[-2000:]}")
    out = json.loads(lines[-1][len("RESULT ") :])
    out["load_average_at_end"] = harness.load_average()
    return out


def run_unit(key: str, args, updates: int, eval_every: int, tap: bool = True, levels: bool = True) -> tuple[dict, dict]:
    """One process of `side/algorithm/seed`: (its record for the JSON, its raw output)."""
    side, algorithm, seed = key.split("/")
    workdir = pathlib.Path(tempfile.mkdtemp(prefix="ued_maze_levels_"))
    try:
        settings = {"levels_dir": str(workdir)} if levels else {}
        if side == "jaxued":
            checkpoints = ["--checkpoint_save_interval", "1", "--max_number_of_checkpoints", "100000"] if levels else []
            flags = [
                *PEER_FLAGS,
                *ALGORITHMS[algorithm],
                "--seed",
                seed,
                "--num_updates",
                str(updates),
                "--eval_freq",
                str(eval_every),
            ]
            settings.update(jaxued_repo=args.jaxued_repo, args=[*flags, *checkpoints], tap=tap)
            out = run(args.peer_python, "jaxued_maze_plr.py", settings, args.timeout)
            record = summary.peer_unit(out, read_levels(workdir) if levels else None, replay_from())
        else:
            config = trial(algorithm, int(seed), updates, eval_every)
            if side in VARIANTS:
                config["env"]["name"] = VARIANTS[side]
            settings.update(config=config, calls=updates // eval_every)
            out = run(sys.executable, "ajax_tune_ued_maze.py", settings, args.timeout)
            record = summary.ours_unit(out, read_levels(workdir) if levels else None, replay_from())
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    record["load_average_at_end"] = out["load_average_at_end"]
    return record, out


def unit_order(seeds: int, algorithms) -> list[str]:
    """Every unit, the sides alternated from one pair to the next (A B, B A, ...); then the
    variants' units, which run only when `--only` names them."""
    keys = []
    for seed in range(seeds):
        for j, algorithm in enumerate(algorithms):
            sides = ("jaxued", "ajax_tune") if (seed + j) % 2 == 0 else ("ajax_tune", "jaxued")
            keys += [f"{side}/{algorithm}/{seed}" for side in sides]
    return keys + [f"{v}/{a}/{seed}" for v in VARIANTS for a in algorithms for seed in range(seeds)]


# -- parts ------------------------------------------------------------------------------------


def study_size(args) -> tuple[int, int, int]:
    """Updates per seed, seeds a side, updates between evaluations."""
    return (2, 1, 1) if args.quick else (args.updates, args.seeds, EVAL_EVERY)


def run_study(args, path: pathlib.Path, record: dict, raw: dict) -> None:
    updates, seeds, eval_every = study_size(args)
    algorithms = list(ALGORITHMS)
    record["settings"] = {
        "updates": updates,
        "env_steps_per_seed": updates * steps_per_update(),
        "eval_every_updates": eval_every,
        "seeds": seeds,
        "replay_from_update": replay_from(),
        "gradient_share_once_replay_starts": {a: round(gradient_share(a), 4) for a in algorithms},
        "peer_flags": PEER_FLAGS,
        "changed_by_set": dict(CHANGED),
        "ours": "configs/ued_maze_accel.yaml's trial, with these in place of its own",
        "ours_in_place": in_place(algorithms, updates, eval_every),
        "mismatches_found_by_check": {a: check_settings(trial(a, 0, updates, eval_every), a, updates) for a in algorithms},
        "differences": DIFFERENCES,
        "verdict_rule": summary.__doc__.split("The verdict rule: ", 1)[1].strip(),
    }
    units = record.setdefault("per_seed", {})
    for key in unit_order(seeds, algorithms):
        if key in units or (args.only is not None and key not in args.only):
            continue
        if args.only is None and key.split("/")[0] in VARIANTS:
            continue
        print(f"[ued_maze] {key}", flush=True)
        units[key], raw.setdefault("per_seed", {})[key] = run_unit(key, args, updates, eval_every)
        record["summary"] = summary.summarise(units, algorithms, replay_from())
        save(path, record, raw)
    record["summary"] = summary.summarise(units, algorithms, replay_from())
    save(path, record, raw)
    report(record, args.figure or (path.with_suffix(".png") if args.quick or args.out or CHANGED else FIGURE))


def check_before_running(record: dict, algorithms, updates: int, eval_every: int) -> None:
    """Before any unit starts: our trials match maze_plr.py's flags and pass ajax_tune's config
    check (a setting out of range is refused here, not inside a worker), and the JSON's units, if
    any, ran on these flags (a rerun adds to them)."""
    from ajax_tune import Runner
    from ajax_tune.errors import ConfigError

    for algorithm in algorithms:
        config = trial(algorithm, 0, updates, eval_every)
        mismatches = check_settings(config, algorithm, updates)
        if mismatches:
            sys.exit(f"[ued_maze] our {algorithm} trial does not match maze_plr.py's flags: {'; '.join(mismatches)}")
        try:
            Runner.check(config)
        except ConfigError as e:
            sys.exit(f"[ued_maze] our {algorithm} trial on these flags is refused: {e}")
    before = record.get("settings", {}).get("peer_flags")
    if record.get("per_seed") and before not in (None, PEER_FLAGS):
        there, here = peer_flags(before), peer_flags()
        differ = ", ".join(
            f"{f} {there.get(f)} there, {here.get(f)} here"
            for f in sorted(there.keys() | here.keys())
            if there.get(f) != here.get(f)
        )
        sys.exit(
            f"[ued_maze] the JSON holds units run on other flags ({differ}): "
            "pass --fresh to start over, or --out for another file"
        )


def run_tap(args, path: pathlib.Path, record: dict, raw: dict) -> None:
    """maze_plr.py with and without the return tap, same seed, alternated; no checkpoints."""
    updates = 20 if args.quick else args.tap_updates
    timings = {"tap": [], "no_tap": []}
    for r in range(args.tap_rounds):
        for tap in (True, False) if r % 2 == 0 else (False, True):
            print(f"[ued_maze] tap={tap} round {r + 1}", flush=True)
            unit, out = run_unit("jaxued/robust_plr/0", args, updates, EVAL_EVERY, tap=tap, levels=False)
            timings["tap" if tap else "no_tap"].append(unit["timing"])
            raw.setdefault("tap", []).append(out)
    keys = ("process_s", "compile_s", "s_per_update_before_replay", "cpu_s_per_update_before_replay")
    per_process = {side: {k: [t[k] for t in ts] for k in keys} for side, ts in timings.items()}
    over = {side: {k: summary.spread(v) for k, v in ts.items()} for side, ts in per_process.items()}
    record["tap"] = {
        "updates": updates,
        "rounds": args.tap_rounds,
        "per_process": per_process,
        "over_processes": over,
        "cost_per_update": {
            k: round(over["tap"][k]["median"] / over["no_tap"][k]["median"] - 1, 4) for k in keys[2:] if over["no_tap"][k]
        },
    }
    save(path, record, raw)
    print(json.dumps(record["tap"], indent=1))


def run_update_part(args, path: pathlib.Path, record: dict) -> None:
    config = trial("robust_plr", 0, UPDATES)
    sides = {}
    for epochs in summary.UPDATE_EPOCHS:
        sides[f"ajax_tune/{epochs}"] = (
            sys.executable,
            "ajax_tune_recurrent_update.py",
            {"agent": config["agent"], "epochs": epochs, "runs": 5},
        )
        sides[f"jaxued/{epochs}"] = (
            args.peer_python,
            "jaxued_recurrent_update.py",
            {"jaxued_repo": args.jaxued_repo, "epochs": epochs, "runs": 5},
        )
    runs = harness.alternate(sides, 3, log=lambda line: print(f"[ued_maze] update: {line}", flush=True))
    record["update"] = {"summary": summary.update_summary(runs), "agent": config["agent"]}
    save(path, record, {**harness.read_raw(path), "update_runs": runs})
    print(json.dumps(record["update"]["summary"], indent=1))


def report(record: dict, figure: pathlib.Path) -> None:
    """The figure, and the docs' tables printed as markdown."""
    from ued_maze_plot import draw

    settings, results = record["settings"], record.get("summary", {})
    if not results:
        return
    caption = (
        f"{settings['updates']} updates ({settings['env_steps_per_seed']:,} env steps) per seed; "
        f"median and range over seeds; replay can start after update {settings['replay_from_update']} (dotted)"
    )
    per_update = settings["env_steps_per_seed"] // settings["updates"]
    print(f"[ued_maze] wrote {draw(results, figure, per_update, settings['replay_from_update'], caption)}")
    print("\n| algorithm | curve | ajax_tune at end | JaxUED at end | ranges overlap | verdict |\n|---|---|---|---|---|---|")
    ran = {algorithm: row for algorithm, row in results.items() if any(row["seeds"].values())}
    for algorithm, row in ran.items():
        for metric, v in row["verdicts"].items():
            ends = [(summary.side_curve(row, metric, side) or [None])[-1] for side in ("ajax_tune", "jaxued")]
            cells = [f"{e['median']:.3g} ({e['min']:.3g}-{e['max']:.3g})" if e else "-" for e in ends]
            print(f"| {algorithm} | {metric} | {cells[0]} | {cells[1]} | {v.get('ranges_overlap', '-')} | {v['verdict']} |")
    for algorithm, row in ran.items():
        for variant, v in row.get("variants", {}).items():
            head = "| curve | at end | against JaxUED | against ajax_tune |\n|---|---|---|---|"
            print(f"\n{variant}, {algorithm}, {v['seeds']} seeds\n{head}")
            for metric in v["against_jaxued"]:
                e = v["at_end"][metric]
                cells = [
                    f"{w['verdict']} ({w.get('ranges_overlap', '-')})"
                    for w in (v["against_jaxued"][metric], v["against_ajax_tune"][metric])
                ]
                end = f"{e['median']:.3g} ({e['min']:.3g}-{e['max']:.3g})" if e else "-"
                print(f"| {metric} | {end} | " + " | ".join(cells) + " |")
    print(
        "\n| algorithm | side | process s | compile s | s/update before replay | s/update replaying |\n|---|---|---|---|---|---|"
    )
    for algorithm, row in ran.items():
        for side in ("jaxued", "ajax_tune"):
            t = row["timing"][side]
            cells = [f"{t[k]['median']:.3g} ({t[k]['min']:.3g}-{t[k]['max']:.3g})" if t[k] else "-" for k in list(t)[:4]]
            print(f"| {algorithm} | {side} | " + " | ".join(cells) + " |")


def load(path: pathlib.Path, fresh: bool) -> dict:
    return {} if fresh or not path.exists() else json.loads(path.read_text())


def save(path: pathlib.Path, record: dict, raw: dict | None = None) -> None:
    payload = {k: v for k, v in record.items() if k in ("settings", "summary", "per_seed", "tap", "update", "peer", "commands")}
    harness.write_results("ued_maze", payload, path, raw=raw)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--part", choices=["study", "tap", "update", "report"], default="study")
    parser.add_argument("--jaxued-repo", default=None, help="a clone of DramaCow/jaxued at 0f8f128")
    parser.add_argument("--peer-python", default=sys.executable, help="maze_plr.py's interpreter (default: this one)")
    parser.add_argument("--updates", type=int, default=UPDATES, help=f"updates per seed, a multiple of {EVAL_EVERY}")
    parser.add_argument("--seeds", type=int, default=SEEDS, help="seeds a side")
    parser.add_argument("--only", nargs="*", default=None, help="units to run, e.g. jaxued/accel/0 ajax_tune/robust_plr/2")
    parser.add_argument("--fresh", action="store_true", help="forget the units the JSON holds")
    parser.add_argument("--quick", action="store_true", help="a smoke: 2 updates a unit, 1 seed")
    parser.add_argument("--tap-updates", type=int, default=50, help="--part tap: updates per run (before replay)")
    parser.add_argument("--tap-rounds", type=int, default=2, help="--part tap: runs with and without the tap")
    parser.add_argument("--out", default=None, help="the JSON (default results/ued_maze.json)")
    parser.add_argument("--figure", default=None, help=f"the figure (default {FIGURE.relative_to(ROOT)})")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per unit")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="FLAG=VALUE",
        help="the study: change one of maze_plr.py's flags on both sides (e.g. --set n_walls=50 --set num_train_envs=16); "
        "written to results/ued_maze_custom.json unless --out says otherwise",
    )
    args = parser.parse_args(argv)
    if args.set and args.part != "study":
        parser.error(f"--set changes the study's settings; --part {args.part} runs maze_plr.py's own")
    try:
        set_flags(args.set)
    except ValueError as e:
        parser.error(str(e))
    if args.updates % EVAL_EVERY:
        parser.error(f"--updates {args.updates}: expected a multiple of {EVAL_EVERY}")
    args.figure = pathlib.Path(args.figure) if args.figure else None

    name = {"update": "ued_maze_update.json"}.get(args.part, "ued_maze_quick.json" if args.quick else "ued_maze.json")
    name = "ued_maze_custom.json" if CHANGED and not args.quick else name
    path = pathlib.Path(args.out) if args.out else harness.RESULTS_DIR / name
    if args.part == "report":
        report(load(path, False), args.figure or FIGURE)
        return
    if not args.jaxued_repo:
        parser.error(f"--part {args.part} needs --jaxued-repo")
    record = load(path, args.fresh)
    if args.part == "study":
        updates, _, eval_every = study_size(args)
        check_before_running(record, list(ALGORITHMS), updates, eval_every)
    raw = {} if args.fresh else harness.read_raw(path)
    # a run split into several commands keeps them all (the header keeps the last)
    record.setdefault("commands", []).append("python " + " ".join(shlex.quote(harness._relative(a)) for a in sys.argv))
    commit = subprocess.run(["git", "-C", args.jaxued_repo, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    if commit != JAXUED_COMMIT:
        print(f"[ued_maze] warning: {args.jaxued_repo} is at {commit or 'no commit'}, not {JAXUED_COMMIT}", file=sys.stderr)
    peer_packages = ("jaxued", "distrax", "wandb", "orbax-checkpoint")
    harness.SIDES["jaxued"] = (args.peer_python, peer_packages)
    record["peer"] = {
        "jaxued_commit": commit,
        "jaxued": harness.installed_versions(args.peer_python, peer_packages),
        "ajax_tune": harness.installed_versions(sys.executable, ("ajax-tune", "jaxued")),
    }
    print(f"[ued_maze] versions: {json.dumps(record['peer'])}", flush=True)
    if record["peer"]["jaxued"]["jax"] != record["peer"]["ajax_tune"]["jax"]:
        print("[ued_maze] warning: the two sides run different JAX versions", file=sys.stderr)
    if args.part == "update":
        run_update_part(args, path, record)
    elif args.part == "tap":
        run_tap(args, path, record, raw)
    else:
        run_study(args, path, record, raw)


if __name__ == "__main__":
    main()
