"""Where the test suite's time goes: a pytest run (the plain run by default, as CI makes it, with an
empty compilation cache) with every process's JAX compile events recorded, summarised by process
kind (the pytest workers, Ray's trial workers, other subprocesses) and by program: the training
program (`_counted_call`), `init`, and the rest; for each, the programs XLA compiled (a persistent
cache miss: no process had compiled the program before, or it compiled too quickly to be cached)
apart from those loaded from the cache (a hit), each with the tracing and lowering that came before
it. Then the tests that compile the most and the files that take the most time.

    python benchmarks/suite_time.py                     # the plain run, cold, as CI runs it
    python benchmarks/suite_time.py --warm -- -m "not slow" tests/test_loop.py

Every process the run starts gets `benchmarks/suite_time_hook/` first on its PYTHONPATH: its
`sitecustomize` listens to `jax.monitoring` once JAX is imported (so JAX starts with its process's
own settings), and its pytest plugin records when each test starts. Writes
`results/suite_time.json` (a summary) and the events to `results/raw/suite_time/` (ignored by git).
The environment passes through: for CI's plain run, install as `tests/run` does and set
`AJAX_TUNE_TESTS_REQUIRE=kinetix,playground`.
"""

from __future__ import annotations

import argparse
import bisect
import collections
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from harness import RESULTS_DIR, write_results  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent
HOOK = pathlib.Path(__file__).resolve().parent / "suite_time_hook"
TRACE, LOWER, COMPILE, HIT = (
    "jaxpr_trace_duration",
    "jaxpr_to_mlir_module_duration",
    "backend_compile_duration",
    "compile_time_saved_sec",
)
PROGRAMS = {"_counted_call": "training", "init": "init"}
DURATION = re.compile(r"^\s*([\d.]+)s (call|setup|teardown)\s+(\S+)")
COUNTS = re.compile(r"(\d+) (passed|failed|skipped|errors?|deselected)")


def cpu_ticks() -> tuple[int, int] | None:
    """(busy, total) jiffies of every core since boot, where /proc/stat exists."""
    try:
        fields = [int(x) for x in pathlib.Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + fields[4]
    return sum(fields) - idle, sum(fields)


def program_of(fun_name: str | None) -> str:
    name = (fun_name or "").removeprefix("jit(").removesuffix(")")
    return PROGRAMS.get(name, "other")


def read_events(directory: pathlib.Path) -> tuple[dict[int, list[dict]], dict[int, list[dict]]]:
    """Each process's compile events, and each pytest worker's test starts, by pid."""
    events, tests = {}, {}
    for path in directory.glob("*.jsonl"):
        rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        if path.name.startswith("tests-"):
            tests[int(path.stem.removeprefix("tests-"))] = rows
        else:
            events[int(path.stem)] = rows
    return events, tests


def kind_of(pid: int, first: dict, tests: dict) -> str:
    if pid in tests:
        return "pytest_worker"
    return "trial_worker" if "default_worker" in first.get("argv", "") else "other_process"


def builds(rows: list[dict]) -> list[dict]:
    """One row per XLA compile request: its program, whether the persistent cache held it, and the
    seconds of XLA (or of loading) with the tracing and lowering that led to it."""
    out, hit = [], False
    traced: dict[str, float] = {}
    lowered: dict[str, float] = {}
    for row in rows:
        event, name = row.get("e"), (row.get("f") or "").removeprefix("jit(").removesuffix(")")
        if event == HIT:
            hit = True
        elif event == TRACE:
            traced[name] = row["d"]
        elif event == LOWER:
            lowered[name] = row["d"]
        elif event == COMPILE:
            out.append(
                {
                    "program": program_of(name),
                    "hit": hit,
                    "xla_s": row["d"],
                    "trace_s": traced.pop(name, 0.0),
                    "lower_s": lowered.pop(name, 0.0),
                    "t": row["t"],
                }
            )
            hit = False
    return out


def summarise(events: dict[int, list[dict]], tests: dict[int, list[dict]], top: int = 15) -> dict:
    """The compile time of a run, by process kind and program, programs compiled apart from those
    loaded from the persistent cache, and the tests (in pytest's own workers) that compiled most."""
    processes = collections.Counter()
    table: dict = collections.defaultdict(lambda: collections.defaultdict(collections.Counter))
    jax_s: dict = collections.defaultdict(collections.Counter)
    by_test: dict = collections.defaultdict(collections.Counter)
    for pid, rows in events.items():
        kind = kind_of(pid, rows[0], tests)
        processes[kind] += 1
        for row in rows[1:]:
            if row.get("e") in (TRACE, LOWER, COMPILE):
                jax_s[kind][row["e"]] += row["d"]
        starts = tests.get(pid, [])
        times = [s["t"] for s in starts]
        for build in builds(rows[1:]):
            cell = table[kind][build["program"]]
            which = "loaded" if build["hit"] else "compiled"
            seconds = build["xla_s"] + build["trace_s"] + build["lower_s"]
            cell[f"{which}_n"] += 1
            cell[f"{which}_s"] += seconds
            cell[f"{which}_xla_s"] += build["xla_s"]
            at = bisect.bisect_right(times, build["t"]) - 1
            if at >= 0:
                test = by_test[starts[at]["test"]]
                test["compile_s"] += seconds
                test["training_programs_compiled"] += build["program"] == "training" and not build["hit"]
    per_kind = {
        kind: {
            "xla_s": round(jax_s[kind][COMPILE], 1),
            "trace_s": round(jax_s[kind][TRACE], 1),
            "lower_s": round(jax_s[kind][LOWER], 1),
            "programs": {program: {k: round(v, 1) for k, v in sorted(cell.items())} for program, cell in table[kind].items()},
        }
        for kind in sorted(processes)
    }
    ranked = sorted(by_test.items(), key=lambda item: -item[1]["compile_s"])[:top]
    return {
        "processes": dict(sorted(processes.items())),
        "jax_s": round(sum(sum(c.values()) for c in jax_s.values()), 1),
        "by_process_kind": per_kind,
        "tests_that_compile_most": [
            {"test": test, "compile_s": round(c["compile_s"], 1), "training_programs_compiled": c["training_programs_compiled"]}
            for test, c in ranked
        ],
    }


def pytest_outcome(output: str, top: int = 15) -> dict:
    """The counts pytest's last line gives and the test time per file from `--durations=0`."""
    per_file = collections.Counter()
    for line in output.splitlines():
        match = DURATION.match(line)
        if match:
            per_file[match.group(3).split("::")[0]] += float(match.group(1))
    last = [line for line in output.splitlines() if " in " in line and ("passed" in line or "failed" in line)]
    counts = {word: int(n) for n, word in COUNTS.findall(last[-1])} if last else {}
    return {
        "counts": counts,
        "test_time_s": round(sum(per_file.values()), 1),
        "slowest_files_s": {name: round(s, 1) for name, s in per_file.most_common(top)},
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warm", action="store_true", help="use the suite's own compilation cache instead of an empty one")
    parser.add_argument("--out", help="write the summary here instead of results/suite_time.json")
    parser.add_argument("pytest_args", nargs="*", help="after --: pytest's arguments (default: the plain run)")
    args = parser.parse_args(argv)
    events_dir = RESULTS_DIR / "raw" / "suite_time"
    shutil.rmtree(events_dir, ignore_errors=True)
    events_dir.mkdir(parents=True)
    env = dict(os.environ, SUITE_TIME_DIR=str(events_dir), JAX_PLATFORMS="cpu")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(HOOK), env.get("PYTHONPATH", "")) if p)
    cache = None
    if not args.warm:
        cache = tempfile.mkdtemp(prefix="suite_time_cache_")
        env["AJAX_TUNE_COMPILATION_CACHE"] = cache
    command = [sys.executable, "-m", "pytest", "-p", "suite_time_tests", "--durations=0", "-q", *args.pytest_args]
    ticks, start = cpu_ticks(), time.perf_counter()
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True)
    wall, after = time.perf_counter() - start, cpu_ticks()
    if cache:
        shutil.rmtree(cache, ignore_errors=True)
    print(done.stdout[-3000:], done.stderr[-2000:], sep="\n")
    busy = None if ticks is None or after is None else round((after[0] - ticks[0]) / max(1, after[1] - ticks[1]), 3)
    events, tests = read_events(events_dir)
    summary = {
        "pytest_args": args.pytest_args,
        "compilation_cache": "warm (the suite's own)" if args.warm else "empty at the start",
        "exit_status": done.returncode,
        "wall_s": round(wall, 1),
        "cpu_busy_share": busy,
        **pytest_outcome(done.stdout),
        **summarise(events, tests),
    }
    write_results("suite_time", summary, out=args.out)
    for kind, cell in summary["by_process_kind"].items():
        print(f"{kind}: XLA {cell['xla_s']} s, tracing {cell['trace_s']} s, lowering {cell['lower_s']} s; {cell['programs']}")
    return done.returncode


if __name__ == "__main__":
    sys.exit(main())
