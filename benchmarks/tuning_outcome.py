"""Tuning that pays: the test return each tuner's incumbent reaches, against wall clock, at the same
budget on three tasks harder than cartpole.

The tasks (`benchmarks/configs/outcome_<task>.yaml`, each the plain random search; the tuners'
experiments are derived from it):

- `acrobot`: PPO on `gymnax/Acrobot-v1`;
- `breakout`: PPO on `gymnax/Breakout-MinAtar`;
- `pendulum`: SAC on `pendulum`.

Each searches the usual traced settings: the learning rate's peak and schedule, the entropy bonus
(PPO) or the temperature's target (SAC), gamma, and GAE's lambda (PPO) or tau (SAC).

The tuners, each run as a user runs it (`ajax-tune run` on an experiment YAML, written beside the
run and kept in the JSON), on one local Ray of `--num-cpus` CPUs, stopped by the experiment's
wall-clock budget (`tune.time_budget_s`):

- `random`: Tune's random search over separate trials of one CPU each;
- `asha`: the same, with ASHA stopping the worse trials early;
- `pbt`: Tune's population-based training over 2 x CPUs separate trials (time-shared), mutating
  the searched settings every 2 calls, each trial's horizon stretched to the budget;
- `population_tpe`: `tune.population: 8` with Optuna's TPE: trials of one CPU, each holding 8 of
  the searcher's suggestions as members;
- `population_pbt`: one population trial of 16 members drawn from the same space, on all the
  CPUs, with PBT inside the trial (`population.pbt`, every 2 calls), its horizon stretched to the
  budget;
- `population_pbt_cover`: the same, its 16 members drawn stratified over the space
  (`population.draw: stratified`, a Latin hypercube) instead of independently;
- `population_halving`: one population trial of 16 members drawn from the same space, on all
  the CPUs, with successive halving inside the trial (`population.prune`: after 1 call the best
  quarter goes on, after 4 more the best one, alone, to a separate trial's horizon), so the
  survivors train at the rate the stopped members gave up;
- `population_halving_long`: the same, the survivor's horizon stretched to the budget as the PBT
  tuners' are (one lane per CPU at the task's rough rate), so that a bracket that ends early does
  not leave the budget unused.

Tuning and test seeds are kept apart (Eimer et al., 2023): trials train and evaluate with
`train.seed` 0 (every config of every tuner: common random numbers), and the tuners see only those
evaluations (`eval/return_mean`). Every trial checkpoints after every call. After a run, its
*incumbent* at time t is the checkpoint with the best tuning metric among those written by t (a
population trial's is its best member's), from each checkpoint's own record of its result (when
Tune received it, the metric, the best member). Each incumbent is evaluated on test seeds that no
training or tuning evaluation used (`Runner.from_checkpoint(...).evaluate(episodes, seed=...,
member=...)`, seeds 1,000,003 and up, in a fresh process after the run), which gives the anytime
curve: the incumbent's test return against seconds since `ajax-tune run` started. The summary
gives, per task and tuner, the median and range over repeats of that curve and of its final
value, and the time each tuner needs to reach the best separate-trial tuner's (random, ASHA,
Tune's PBT) median final test return.

Every (task, tuner, repeat) cell is a fresh `ajax-tune run` with an empty compilation cache of
its own (each tuner starts cold, as on a first run). Repeats alternate the tuners' order; the load
average is recorded at the start and end of every run; the JSON (the summary, kept in git) and its
raw record (every cell's incumbents, `results/raw/`, outside git) are written after every cell, and
a run with the same `--out` skips the cells the raw record holds (resumable). The table, the curves
and the PNG come from the JSON alone (`--plot-only` redraws them).

    python benchmarks/tuning_outcome.py                          # 3 tasks x 7 tuners x 3 repeats, 600 s each
    python benchmarks/tuning_outcome.py --tasks acrobot --tuners random population_pbt --budget-s 300
    python benchmarks/tuning_outcome.py --quick                  # acrobot, tiny trials, 60 s each, once
    python benchmarks/tuning_outcome.py --plot-only              # the table and PNG from the JSON

How many configs a population holds against the fixed cost of a trial (64 and 256 configs as
population members against one process running them one after another) is
`benchmarks/population_scale.py --task TASK --members 1 64 256 --sequential 64 256 --calls 1`, on
the same tasks and search spaces, which also gives one trial's env steps/s against its members
(`--scale` here runs it for each of `--tasks`; `--quick` with it: K = 1 4 16, 16 one by one).
"""

from __future__ import annotations

import argparse
import copy
import importlib.metadata
import json
import math
import os
import pathlib
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import harness
import yaml
from time_to_solve import ajax_tune_command, alarms

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
CONFIGS = HERE / "configs"
IMAGE = ROOT / "docs" / "images" / "tuning_outcome.png"

#: Per task: its experiment, and a rough rate of one lane on one CPU core (env steps/s) from which
#: the PBT tuners' horizons are stretched to the budget (their schedules span it).
TASKS = {
    "acrobot": {"config": "outcome_acrobot.yaml", "lane_steps_per_s": 80_000},
    "breakout": {"config": "outcome_breakout.yaml", "lane_steps_per_s": 25_000},
    "pendulum": {"config": "outcome_pendulum.yaml", "lane_steps_per_s": 1_200},
}
TUNERS = (
    "random",
    "asha",
    "pbt",
    "population_tpe",
    "population_pbt",
    "population_pbt_cover",
    "population_halving",
    "population_halving_long",
)
SEPARATE = ("random", "asha", "pbt")  # separate-trial tuners: the best of them sets the target
TEST_SEEDS = (1_000_003, 1_000_033, 1_000_037)  # never a train.seed (those stay below 1000)
TRAIN_SEED_LIMIT = 1000
DEFAULTS = {
    "budget_s": 600.0,
    "repeats": 3,
    "population_size": 8,  # tune.population with TPE: configs per trial
    "pbt_members": 16,  # population.pbt: members of the one trial
    "pbt_interval": 2,  # calls between exploits, for both PBTs
    "halving": {"grace_period": 1, "reduction_factor": 4},  # population.prune: 16 -> 4 -> 1 members
    "test_episodes": 16,  # per test seed
    "max_evals": 12,  # incumbents evaluated per run (thinned evenly past that, the last always)
}
QUICK = {
    "budget_s": 60.0,
    "repeats": 1,
    "population_size": 4,
    "pbt_members": 4,
    "pbt_interval": 1,
    "halving": {"grace_period": 1, "reduction_factor": 2},  # 4 -> 2 -> 1 members
    "test_episodes": 4,
    "max_evals": 4,
}
#: --quick: trials small enough to run several calls in a short budget, per agent (PPO's keys
#: are refused by SAC's config, so pendulum has its own).
QUICK_TRIAL = {
    "ppo": {
        "agent": {"num_envs": 8, "unroll_length": 32, "num_minibatches": 2, "update_epochs": 2, "hidden_sizes": [32, 32]},
        "train": {"total_timesteps": 8192, "timesteps_per_iteration": 2048, "eval_episodes": 2},
    },
    "sac": {
        "agent": {"num_envs": 2, "batch_size": 64, "capacity": 4096, "learning_starts": 256, "hidden_sizes": [32, 32]},
        "train": {"total_timesteps": 2048, "timesteps_per_iteration": 512, "eval_episodes": 2},
    },
}
GRID_POINTS = 60  # the anytime curves' common time grid, per task


# -- the tuners' experiments ---------------------------------------------------------------------------


def is_domain(node) -> bool:
    from ajax_tune.spaces import DOMAINS

    return isinstance(node, dict) and len(node) == 1 and next(iter(node)) in DOMAINS


def split_space(node):
    """(the config with each search space replaced by its representative value, the space alone)."""
    from ajax_tune.spaces import parse_spaces

    if is_domain(node):
        return parse_spaces(node).sample(), copy.deepcopy(node)
    if isinstance(node, dict):
        fixed, space = {}, {}
        for key, value in node.items():
            fixed[key], sub = split_space(value)
            if sub is not None:
                space[key] = sub
        return fixed, space or None
    return copy.deepcopy(node), None


def base_experiment(task: str, quick: bool) -> dict:
    raw = yaml.safe_load((CONFIGS / TASKS[task]["config"]).read_text())
    if quick:
        from ajax_tune.population.spec import merge

        raw["trial"] = merge(raw["trial"], QUICK_TRIAL[raw["trial"]["agent"].get("name", "ppo")])
        t = raw["trial"]["train"]
        raw["stop"] = {"training_iteration": t["total_timesteps"] // t["timesteps_per_iteration"]}
    seed = raw["trial"]["train"].get("seed", 0)
    if not (isinstance(seed, int) and 0 <= seed < TRAIN_SEED_LIMIT):
        raise SystemExit(f"{task}: train.seed must be a fixed integer below {TRAIN_SEED_LIMIT} (test seeds are above)")
    return raw


def stretched_horizon(raw: dict, budget_s: float, cpus: int, lanes: int, task: str, vmap_gain: float = 1.0) -> int:
    """A PBT tuner's per-lane horizon (env steps): what `lanes` lanes sharing `cpus` CPUs train in
    the budget at the task's rough lane rate (x `vmap_gain` for lanes of one program), with 50%
    to spare, in whole calls, and never below a separate trial's."""
    train = raw["trial"]["train"]
    per_call = train["timesteps_per_iteration"]
    steps = TASKS[task]["lane_steps_per_s"] * budget_s * cpus / lanes * vmap_gain * 1.5
    return max(train["total_timesteps"], int(math.ceil(steps / per_call)) * per_call)


def experiment_for(task: str, tuner: str, s: dict, repeat: int = 0) -> dict:
    """The experiment `tuner` runs on `task` (`s`: the run's settings). Repeat `repeat` seeds the
    tuner's own draws with `repeat` (`tune.seed`, a population's and its PBT's seed), so repeats
    are independent draws of the tuner; the trials' `train.seed` stays the task's tuning seed."""
    raw = base_experiment(task, s["quick"])
    cpus, budget = s["cpus"], s["budget_s"]
    tune = raw.setdefault("tune", {})
    tune["seed"] = repeat
    tune["time_budget_s"] = budget
    iterations = raw["stop"]["training_iteration"]
    train = raw["trial"]["train"]
    fixed, space = split_space(raw["trial"])
    if tuner == "random":
        tune["max_concurrent_trials"] = cpus
    elif tuner == "asha":
        tune["max_concurrent_trials"] = cpus
        tune["scheduler"] = {"name": "asha", "max_t": iterations, "grace_period": max(1, iterations // 8), "reduction_factor": 3}
    elif tuner == "pbt":
        trials = 2 * cpus
        train["total_timesteps"] = stretched_horizon(raw, budget, cpus, trials, task)
        raw["stop"] = {"training_iteration": train["total_timesteps"] // train["timesteps_per_iteration"]}
        tune.update(num_samples=trials, reuse_actors=True)
        tune["scheduler"] = {
            "name": "pbt",
            "perturbation_interval": s["pbt_interval"],
            "quantile_fraction": 0.25,
            "resample_probability": 0.25,
            "hyperparam_mutations": space,
        }
    elif tuner == "population_tpe":
        k = s["population_size"]
        tune.update(search={"name": "optuna"}, population=k, num_samples=k * 1000, max_concurrent_trials=cpus)
    elif tuner in ("population_pbt", "population_pbt_cover"):
        k = s["pbt_members"]
        trial = fixed
        trial["resources"] = {"cpu": cpus}
        trial["population"] = {
            "size": k,
            "seed": repeat,
            "draw": "stratified" if tuner == "population_pbt_cover" else "random",
            "space": space,
            "pbt": {
                "interval": s["pbt_interval"],
                "quantile": 0.25,
                "resample_probability": 0.25,
                "perturbation_factors": [0.8, 1.2],
                "seed": repeat,
                "mutations": space,
            },
        }
        # lanes of one program gain nothing in total on this CPU: population_scale.json (2026-12-04,
        # cartpole, 2 CPUs) has 257k env steps/s for 2 lanes and 269k for 32, so a gain of 2 would
        # leave the linear and cosine schedules about a third of the way through their span at the end
        horizon = stretched_horizon(raw, budget, cpus, k * train.get("num_seeds", 1), task, vmap_gain=1.0)
        trial["train"]["total_timesteps"] = horizon
        raw["trial"] = trial
        raw["stop"] = {"training_iteration": horizon // train["timesteps_per_iteration"]}
        tune.update(num_samples=1)
    elif tuner in ("population_halving", "population_halving_long"):
        trial = fixed
        trial["resources"] = {"cpu": cpus}
        trial["population"] = {"size": s["pbt_members"], "seed": repeat, "space": space, "prune": dict(s["halving"])}
        if tuner.endswith("long"):  # the survivor's schedule spans the budget
            horizon = stretched_horizon(raw, budget, cpus, cpus, task)
            trial["train"]["total_timesteps"] = horizon
            raw["stop"] = {"training_iteration": horizon // train["timesteps_per_iteration"]}
        raw["trial"] = trial  # else the survivor trains to a separate trial's horizon, on the same schedule
        tune.update(num_samples=1)
    else:
        raise ValueError(tuner)
    raw["name"] = f"{task}_{tuner}"
    return raw


# -- one cell: a tuner's run, its incumbents, their test returns ---------------------------------------


def cell_env(work: pathlib.Path, cache: pathlib.Path | None = None) -> dict:
    env = harness.worker_env()
    env["AJAX_TUNE_COMPILATION_CACHE"] = str(cache or work / "cache")  # cold, of its own, unless shared
    env.setdefault("JAX_PLATFORMS", "cpu")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH", "")) if p)  # this tree's ajax_tune
    return env


def run_cell(task: str, tuner: str, repeat: int, s: dict, work: pathlib.Path, log, cache: pathlib.Path | None = None) -> dict:
    if work.exists():
        shutil.rmtree(work)
    work.mkdir(parents=True)
    experiment = experiment_for(task, tuner, s, repeat)
    config = work / "experiment.yaml"
    config.write_text(yaml.safe_dump(experiment, sort_keys=False))
    cmd = [*ajax_tune_command(), "run", str(config), "--storage-path", str(work / "results"), "--name", tuner]
    cmd += ["--no-plots", "--num-cpus", str(s["cpus"])]
    shown = " ".join(shlex.quote(a.replace(str(work), "WORK")) for a in ["ajax-tune", *cmd[1:]])
    env = cell_env(work, cache)
    load_start = harness.load_average()
    t0 = time.time()
    with (work / "run.log").open("w") as out:
        proc = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, timeout=s["budget_s"] * 3 + 900)
    wall = time.time() - t0
    load_end = harness.load_average()
    output = (work / "run.log").read_text()
    record = {
        "task": task,
        "tuner": tuner,
        "repeat": repeat,
        "command": shown,
        "experiment": experiment,
        "exit_code": proc.returncode,
        "wall_s": round(wall, 2),
        "load_average_at_start": load_start,
        "load_average_at_end": load_end,
        "alarms": alarms(output)[:20],
    }
    seeds = experiment["trial"]["train"].get("num_seeds", 1)
    trials, checkpoints = scan(work / "results" / tuner, t0, experiment["tune"]["metric"], seeds)
    record.update(trials)
    if proc.returncode != 0:
        record["error"] = f"ajax-tune run exited with {proc.returncode}:\n" + "\n".join(output.splitlines()[-30:])
        return record
    if not checkpoints:  # a run whose tuner had no agent by the budget's end: an outcome, not a failure
        record["incumbents"] = []
        log(f"[{task} {tuner} {repeat + 1}] {wall:.0f} s, {record['trials_started']} trial(s): no checkpoint by the budget's end")
        return record
    incumbents = incumbent_changes(checkpoints)
    chosen = thin(len(incumbents), s["max_evals"])
    t_eval = time.time()
    settings = {
        "checkpoints": [{"path": incumbents[i]["path"], "member": incumbents[i]["member"]} for i in chosen],
        "episodes": s["test_episodes"],
        "seeds": list(TEST_SEEDS[: s["test_seeds"]]),
        "cpus": s["cpus"],
    }
    evaluated = evaluate_in_a_process(settings, env)
    for i, result in zip(chosen, evaluated["checkpoints"]):
        incumbents[i].update(result)
    for inc in incumbents:
        inc.pop("path")
    record.update(
        incumbents=incumbents,
        test_seeds=settings["seeds"],
        test_episodes_per_seed=s["test_episodes"],
        evaluation_s=round(time.time() - t_eval, 2),
        load_average_after_evaluation=harness.load_average(),
    )
    final = [inc for inc in incumbents if "test_return" in inc][-1]
    log(
        f"[{task} {tuner} {repeat + 1}] {wall:.0f} s, {record['trials_started']} trial(s), {record['configs']} config(s), "
        f"{len(checkpoints)} checkpoints, {len(incumbents)} incumbents ({len(chosen)} tested); final incumbent: "
        f"tuning {final['metric']:.1f}, test {final['test_return']:.1f} (load {load_start} -> {load_end})"
    )
    return record


def scan(directory: pathlib.Path, t0: float, metric: str, seeds: int) -> tuple[dict, list[dict]]:
    """Each trial's record and checkpoints: what the tuner ran (its env steps: the calls its
    record holds, all lanes together), and every checkpoint with when Tune received its result
    (seconds since the command started), its metric and best member."""
    from ajax_tune.checkpoint import read_metadata
    from ajax_tune.errors import CheckpointError
    from ajax_tune.results import record

    checkpoints, started, configs, env_steps, last_t = [], 0, 0, 0, 0.0
    horizon_reached = []
    for trial in sorted(directory.glob("AjaxTrainable_*")):
        rows = record.read(trial)
        if not rows:
            continue
        started += 1
        configs += int(rows[0].get("population/size", 1))
        # every member of a call trained its steps (a pruned population's size falls between calls)
        env_steps += sum(int(r.get("timesteps_this_iter", 0)) * int(r.get("population/size", 1)) for r in rows) * seeds
        horizon_reached.append(bool(rows[-1].get("done", False)))
        for path in sorted(trial.glob("checkpoint_*")):
            try:
                extra = read_metadata(path).get("extra", {})
            except CheckpointError:
                continue  # cut short by the budget's end
            result = extra.get("result", {})
            value = result.get(metric)
            if not isinstance(value, (int, float)) or "timestamp" not in result:
                continue
            t = result["timestamp"] - t0
            last_t = max(last_t, t)
            checkpoints.append(
                {
                    "t": round(t, 1),
                    "metric": float(value),
                    "trial": "_".join(trial.name.split("_")[1:3]),
                    "iteration": int(extra.get("iteration", 0)),
                    "env_steps": int(result.get("env_steps", 0)),
                    "member": int(extra.get("best_member", 0)),
                    "path": str(path),
                }
            )
    checkpoints.sort(key=lambda c: (c["t"], c["path"]))
    trials = {
        "trials_started": started,
        "configs": configs,
        "env_steps_all_trials": env_steps,
        "trials_at_horizon": sum(horizon_reached),
        "checkpoints": len(checkpoints),
        "last_checkpoint_t": round(last_t, 1),
    }
    return trials, checkpoints


def incumbent_changes(checkpoints: list[dict]) -> list[dict]:
    """The checkpoints that became the incumbent: each with a better tuning metric than every
    checkpoint before it (NaN never is)."""
    out, best = [], -math.inf
    for c in checkpoints:
        if c["metric"] == c["metric"] and c["metric"] > best:
            best = c["metric"]
            out.append(dict(c))
    return out


def thin(n: int, most: int) -> list[int]:
    """At most `most` of n indices, evenly spread, the last always among them."""
    if n <= most:
        return list(range(n))
    return sorted({round(i * (n - 1) / (most - 1)) for i in range(most)})


def warm_cache(task: str, s: dict, cache: pathlib.Path, log) -> None:
    """--quick only: compile the quick trials' programs (one lane, on one CPU; a population of
    `tune.population`'s size on one CPU; the PBT population on all of them: XLA's threads are part
    of a program's cache key) into the cache its runs share, so that their short budgets train
    instead of compiling."""
    from ajax_tune.spaces import sample
    from ajax_tune.tune.experiment import Experiment

    single = sample(Experiment.from_dict(experiment_for(task, "random", s)).trial)
    packed = {**single, "population": {"members": [{}] * s["population_size"]}}
    population = experiment_for(task, "population_pbt", s)["trial"]
    start = time.time()
    worker({"warm": [single, packed], "cpus": 1}, cell_env(cache, cache))
    worker({"warm": [population], "cpus": s["cpus"]}, cell_env(cache, cache))
    log(f"[quick] compiled the trials' programs into the shared cache in {time.time() - start:.0f} s")


def warm(settings: dict) -> dict:
    """The worker: build each config's runner and train it twice (compiling every program)."""
    from ajax_tune.jax_setup import configure_jax

    configure_jax(settings["cpus"])
    from ajax_tune.runner import Runner

    for config in settings["warm"]:
        runner = Runner(config)
        runner.train()
        runner.train()
    return {}


def evaluate_in_a_process(settings: dict, env: dict) -> dict:
    """`evaluate` in a fresh process (this script's worker mode), on the run's compilation cache."""
    return worker(settings, env)


def worker(settings: dict, env: dict) -> dict:
    """This script in worker mode (`evaluate`, or `warm` where settings hold it), in a fresh process."""
    cmd = [sys.executable, str(pathlib.Path(__file__).resolve()), "--worker", json.dumps(settings)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=3600)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
        raise RuntimeError(f"the worker failed (exit {proc.returncode}):\n{tail}")
    return json.loads(lines[-1][len("RESULT ") :])


def evaluate(settings: dict) -> dict:
    """The worker: each checkpoint's member on every test seed (deterministic policy)."""
    import numpy as np

    from ajax_tune.jax_setup import configure_jax

    configure_jax(settings["cpus"])
    from ajax_tune.runner import Runner

    out = []
    for item in settings["checkpoints"]:
        start = time.perf_counter()
        runner = Runner.from_checkpoint(item["path"])
        per_seed = [
            float(np.mean(runner.evaluate(settings["episodes"], seed=seed, member=item["member"])["return"]))
            for seed in settings["seeds"]
        ]
        out.append(
            {
                "test_return": round(float(np.mean(per_seed)), 3),
                "test_return_per_seed": [round(v, 3) for v in per_seed],
                "evaluate_s": round(time.perf_counter() - start, 2),
            }
        )
    return {"checkpoints": out}


# -- the summary, from the JSON alone -------------------------------------------------------------------


def tested(cell: dict) -> list[tuple[float, float]]:
    """The cell's anytime curve as (time the incumbent appeared, its test return) steps; an
    incumbent left untested (thinned) keeps the last tested one's value."""
    return [(inc["t"], inc["test_return"]) for inc in cell.get("incumbents", []) if "test_return" in inc]


def value_at(steps: list[tuple[float, float]], t: float) -> float | None:
    value = None
    for at, v in steps:
        if at > t:
            break
        value = v
    return value


def summarize(cells: list[dict]) -> dict:
    done = [c for c in cells if "incumbents" in c]
    summary = {}
    for task in dict.fromkeys(c["task"] for c in done):
        mine = [c for c in done if c["task"] == task]
        end = max(c["wall_s"] for c in mine)
        grid = [round(end * i / (GRID_POINTS - 1), 1) for i in range(GRID_POINTS)]
        tuners = {}
        for tuner in dict.fromkeys(c["tuner"] for c in mine):
            runs = sorted((c for c in mine if c["tuner"] == tuner), key=lambda c: c["repeat"])
            curves = [[value_at(tested(c), t) for t in grid] for c in runs]
            finals = [tested(c)[-1][1] if tested(c) else None for c in runs]
            tuners[tuner] = {
                "repeats": len(runs),
                "final_test_return": spread(finals),
                "final_tuning_metric": spread([c["incumbents"][-1]["metric"] if c["incumbents"] else None for c in runs]),
                "configs": spread([c["configs"] for c in runs]),
                "trials": spread([c["trials_started"] for c in runs]),
                "env_steps_all_trials": spread([c["env_steps_all_trials"] for c in runs]),
                "wall_s": spread([c["wall_s"] for c in runs]),
                "curve": {
                    "median": [med([v for v in col if v is not None]) for col in zip(*curves)],
                    "min": [min((v for v in col if v is not None), default=None) for col in zip(*curves)],
                    "max": [max((v for v in col if v is not None), default=None) for col in zip(*curves)],
                    "runs_with_an_incumbent": [sum(v is not None for v in col) for col in zip(*curves)],
                },
            }
        separate = [tuners[t]["final_test_return"]["median"] for t in SEPARATE if t in tuners]
        separate = [v for v in separate if v is not None]
        target = max(separate) if separate else None
        for tuner, entry in tuners.items():
            runs = [c for c in mine if c["tuner"] == tuner]
            times = [first_time(tested(c), target) for c in runs] if target is not None else []
            reached = [t for t in times if t is not None]
            entry["time_to_target_s"] = {
                "median": med_or_none(times),
                "reached": len(reached),
                "of": len(times),
                "per_repeat": times,
            }
        summary[task] = {"time_grid_s": grid, "target_test_return": target, "tuners": tuners}
    return summary


def first_time(steps: list[tuple[float, float]], target: float) -> float | None:
    return next((t for t, v in steps if v >= target), None)


def med(values: list[float]) -> float | None:
    return round(statistics.median(values), 3) if values else None


def med_or_none(times: list[float | None]) -> float | None:
    """The median with runs that never reached counted as the slowest; None when that is one."""
    if not times:
        return None
    ordered = sorted(times, key=lambda t: math.inf if t is None else t)
    middle = ordered[(len(ordered) - 1) // 2 : len(ordered) // 2 + 1]
    if any(t is None for t in middle):
        return None
    return round(statistics.mean(middle), 1)


def spread(values: list[float | None]) -> dict:
    """Median and range of the values there are (a run without an incumbent has none)."""
    there = [v for v in values if v is not None]
    return {"median": med(there), "min": min(there, default=None), "max": max(there, default=None), "all": values}


def table(summary: dict) -> str:
    lines = [
        "| task | tuner | final test return, median (range) | tuning metric | time to target s (reached) | configs | trials |",
        "|---|---|---|---|---|---|---|",
    ]
    for task, s in summary.items():
        target = s["target_test_return"]
        for tuner, e in s["tuners"].items():
            f, tt = e["final_test_return"], e["time_to_target_s"]
            when = "never" if tt["median"] is None else f"{tt['median']:.0f}"
            lines.append(
                f"| {task} | {tuner} | {number(f['median'])} ({number(f['min'])} to {number(f['max'])}) | "
                f"{number(e['final_tuning_metric']['median'])} | {when} ({tt['reached']}/{tt['of']}) | "
                f"{e['configs']['median']:g} | {e['trials']['median']:g} |"
            )
        if target is not None:
            lines.append(f"| {task} | target: the best separate-trial tuner's median final | {target:.1f} | | | | |")
    return "\n".join(lines)


def number(value: float | None) -> str:
    return "none" if value is None else f"{value:.1f}"


def plot(summary: dict, path: pathlib.Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    tasks = list(summary)
    fig, axes = plt.subplots(1, len(tasks), figsize=(5.5 * len(tasks), 4), squeeze=False)
    for ax, task in zip(axes[0], tasks):
        s = summary[task]
        grid = s["time_grid_s"]
        for tuner, e in s["tuners"].items():
            c = e["curve"]
            xs = [t for t, m in zip(grid, c["median"]) if m is not None]
            if not xs:
                continue
            ms = [m for m in c["median"] if m is not None]
            lo = [v for v, m in zip(c["min"], c["median"]) if m is not None]
            hi = [v for v, m in zip(c["max"], c["median"]) if m is not None]
            (line,) = ax.step(xs, ms, where="post", label=f"{tuner} ({e['repeats']})")
            ax.fill_between(xs, lo, hi, step="post", alpha=0.15, color=line.get_color())
        if s["target_test_return"] is not None:
            ax.axhline(s["target_test_return"], color="grey", lw=0.8, ls="--")
        ax.set_title(task)
        ax.set_xlabel("seconds since ajax-tune run started")
        ax.set_ylabel("incumbent's test return")
        ax.legend(fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)


# -- the run ---------------------------------------------------------------------------------------------


def library_versions() -> dict:
    out = {}
    for package in ("ajax-tune", "jax", "jaxlib", "flax", "optax", "ray", "optuna", "gymnax", "numpy"):
        try:
            out[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            out[package] = None
    return out


def tree_commit() -> str:
    done = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "HEAD"], capture_output=True, text=True)
    dirty = subprocess.run(
        ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True
    )
    return (done.stdout.strip() or "unknown") + ("+changes" if dirty.stdout.strip() else "")


#: (a setting the JSON does not hold yet, as `halving` before its tuner ran, is not compared)
SETTINGS_THAT_MUST_MATCH = (
    "quick",
    "budget_s",
    "cpus",
    "population_size",
    "pbt_members",
    "pbt_interval",
    "halving",
    "test_episodes",
)


def load_previous(path: pathlib.Path, settings: dict) -> dict:
    """The summary at `path` with the cells of its raw record (`harness.raw_path`), which a rerun
    skips; a summary without its raw record (a fresh checkout) keeps its sessions and summary only."""
    if not path.exists():
        return {}
    previous = {**json.loads(path.read_text()), "cells": harness.read_raw(path).get("cells", [])}
    old = previous.get("settings", {})
    differ = [k for k in SETTINGS_THAT_MUST_MATCH if k in old and old[k] != settings[k]]
    if differ:
        raise SystemExit(
            f"{path} holds cells run with other settings ({', '.join(f'{k}: {old[k]} here {settings[k]}' for k in differ)}); "
            f"pass --out elsewhere to start afresh"
        )
    return previous


def write(path: pathlib.Path, settings: dict, cells: list[dict], sessions: list[dict]) -> dict:
    summary = summarize(cells)
    harness.write_results(
        "tuning_outcome",
        {
            "settings": settings,
            "library_versions": library_versions(),
            "tree": tree_commit(),
            "sessions": sessions,
            "summary": summary,
        },
        path,
        raw={"cells": cells},
    )
    return summary


def scale(tasks: list[str], quick: bool) -> None:
    """population_scale.py for each task: 64 and 256 configs as members against one process."""
    for task in tasks:
        members = ["1", "4", "16"] if quick else ["1", "64", "256"]
        sequential = ["16"] if quick else ["64", "256"]
        cmd = [sys.executable, str(HERE / "population_scale.py"), "--task", task, "--members", *members]
        cmd += ["--sequential", *sequential, "--calls", "1", *(["--quick"] if quick else [])]
        print("+", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", nargs="+", choices=list(TASKS), default=None)
    parser.add_argument("--tuners", nargs="+", choices=TUNERS, default=list(TUNERS))
    parser.add_argument(
        "--budget-s", type=float, default=None, help=f"wall-clock budget per run (default {DEFAULTS['budget_s']:g})"
    )
    parser.add_argument(
        "--repeats", type=int, default=None, help=f"runs per (task, tuner), alternated (default {DEFAULTS['repeats']})"
    )
    parser.add_argument("--num-cpus", type=int, default=os.cpu_count(), help="CPUs of each run's local Ray (default: all)")
    parser.add_argument("--test-seeds", type=int, default=len(TEST_SEEDS), choices=range(1, len(TEST_SEEDS) + 1))
    parser.add_argument("--quick", action="store_true", help="acrobot, tiny trials, 60 s per run, once: proves it runs")
    parser.add_argument("--out", default=None, help="result JSON (default: results/tuning_outcome.json, _quick for --quick)")
    parser.add_argument(
        "--plot", default=None, help="the PNG (default: docs/images/tuning_outcome.png; beside the JSON otherwise)"
    )
    parser.add_argument("--plot-only", action="store_true", help="the table and the PNG from the JSON; run nothing")
    parser.add_argument("--work-dir", default=None, help="where runs are made (default: a temporary directory)")
    parser.add_argument("--keep-runs", action="store_true", help="keep each run's directory (checkpoints included)")
    parser.add_argument("--scale", action="store_true", help="run population_scale.py for each task instead")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:  # evaluating incumbents, or (--quick) warming the shared cache
        job = json.loads(args.worker)
        print("RESULT " + json.dumps(warm(job) if "warm" in job else evaluate(job)), flush=True)
        return
    base = QUICK if args.quick else DEFAULTS
    tasks = args.tasks or (["acrobot"] if args.quick else list(TASKS))
    if args.scale:
        scale(tasks, args.quick)
        return
    settings = {
        **base,
        "quick": args.quick,
        "budget_s": args.budget_s or base["budget_s"],
        "repeats": args.repeats or base["repeats"],
        "cpus": args.num_cpus,
        "test_seeds": args.test_seeds,
    }
    path = (
        pathlib.Path(args.out)
        if args.out
        else harness.RESULTS_DIR / ("tuning_outcome" + ("_quick" if args.quick else "") + ".json")
    )
    image = pathlib.Path(args.plot) if args.plot else (IMAGE if not (args.quick or args.out) else path.with_suffix(".png"))
    previous = load_previous(path, settings)
    cells = [c for c in previous.get("cells", []) if "incumbents" in c]  # failed cells run again
    sessions = previous.get("sessions", [])
    title = f"tuning_outcome: incumbent's test return, median and range over repeats ({path.name})"
    if args.plot_only:
        summary = summarize(cells) if cells else previous.get("summary", {})
        print(table(summary))
        plot(summary, image, title)
        print(f"(drawn to {image})")
        return
    sessions.append(
        {
            "command": "python " + " ".join(shlex.quote(harness._relative(a)) for a in sys.argv),
            "started": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            "load_average_at_start": harness.load_average(),
            "tree": tree_commit(),
        }
    )
    have = {(c["task"], c["tuner"], c["repeat"]) for c in cells}
    todo = [
        (task, tuner, r)
        for r in range(settings["repeats"])
        for task in tasks
        for tuner in (args.tuners if r % 2 == 0 else args.tuners[::-1])  # the order alternates between repeats
        if (task, tuner, r) not in have
    ]
    print(f"{len(todo)} run(s) to make ({len(have)} already in {path}), {settings['budget_s']:g} s each", flush=True)
    work_root = pathlib.Path(args.work_dir or tempfile.mkdtemp(prefix="tuning_outcome_"))
    log = lambda line: print(line, flush=True)  # noqa: E731
    shared = work_root / "quick_cache" if args.quick else None  # --quick: one warm cache; else each run's own, cold
    if shared is not None and todo:
        for task in dict.fromkeys(t for t, _, _ in todo):
            warm_cache(task, settings, shared, log)
    failed = []
    for task, tuner, r in todo:
        work = work_root / f"{task}_{tuner}_{r}"
        try:
            cell = run_cell(task, tuner, r, settings, work, log=log, cache=shared)
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            cell = {"task": task, "tuner": tuner, "repeat": r, "error": str(exc)[-3000:]}
        cell["order"] = len(cells) + len(failed)
        if "incumbents" in cell:
            cells.append(cell)
        else:
            failed.append(cell)
            print(f"[{task} {tuner} {r + 1}] FAILED: {cell['error'].splitlines()[0] if cell['error'] else ''}", flush=True)
        sessions[-1]["load_average_at_end"] = harness.load_average()
        sessions[-1]["failed"] = failed
        write(path, settings, cells, sessions)
        if not args.keep_runs:
            shutil.rmtree(work, ignore_errors=True)
    if not args.work_dir and not args.keep_runs:
        shutil.rmtree(work_root, ignore_errors=True)
    summary = summarize(cells)
    print(table(summary))
    if cells:
        plot(summary, image, title)
        print(f"(drawn to {image})")
    print(f"(written to {path})")
    if failed:
        raise SystemExit(f"{len(failed)} run(s) failed; run the same command again to retry them")


if __name__ == "__main__":
    main()
