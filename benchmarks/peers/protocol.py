"""The worker side of the benchmark protocol; imports nothing but the standard library, so it
runs in every side's interpreter (ours and each peer's venv).

A worker gets its settings as one JSON object in `sys.argv[1]` and prints one line
`RESULT {...}`. Timing is by wall clock around calls that block until the device is done.
"""

from __future__ import annotations

import importlib.metadata
import json
import platform
import statistics
import sys
import time


def settings() -> dict:
    return json.loads(sys.argv[1]) if len(sys.argv) > 1 else {}


def versions(*packages: str) -> dict:
    out = {"python": platform.python_version()}
    for name in packages:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def time_call(fn, *args):
    """(result, wall seconds, CPU seconds of this process) of `fn(*args)`; `fn` must block
    until its work is done. CPU time (all threads) is the steadier figure on a busy machine."""
    start, cpu = time.perf_counter(), time.process_time()
    out = fn(*args)
    return out, time.perf_counter() - start, time.process_time() - cpu


def timed_runs(fn, runs: int):
    """Call `fn(0)` (the call that compiles), then `fn(1)` ... `fn(runs)`, each timed as by
    `time_call`. Returns the last call's result, the first call's `(wall, cpu)` and the later
    calls' list of them, as `throughput` takes them."""
    if runs < 1:
        raise ValueError(f"runs must be at least 1 (timed calls after the compiling one), got {runs}")
    _, *first = time_call(fn, 0)
    times = []
    for i in range(runs):
        out, *t = time_call(fn, i + 1)
        times.append(t)
    return out, first, times


def median_seconds(fn, runs: int) -> tuple[float, float]:
    """`timed_runs` of a call that takes no argument: the median and fastest wall seconds of the
    calls after the compiling one."""
    _, _, times = timed_runs(lambda _: fn(), runs)
    walls = [wall for wall, _ in times]
    return statistics.median(walls), min(walls)


def throughput(first: tuple, runs: list[tuple], env_steps: float, useful_steps: float) -> dict:
    """The figures every throughput worker reports, from `(wall, cpu)` seconds of the first call
    and of later runs: `env_steps` and `useful_steps` are per run, summed over seeds; compile
    time is the first call less a typical later one."""
    run = statistics.median(t[0] for t in runs)
    run_cpu = statistics.median(t[1] for t in runs)
    return {
        "first_call_s": round(first[0], 4),
        "run_s": round(run, 4),
        "run_s_all": [round(t[0], 4) for t in runs],
        "run_cpu_s": round(run_cpu, 4),
        "compile_s": round(max(first[0] - run, 0.0), 4),
        "compile_cpu_s": round(max(first[1] - run_cpu, 0.0), 4),
        "env_steps": env_steps,
        "useful_steps": useful_steps,
        "env_steps_per_s": env_steps / run,
        "useful_env_steps_per_s": useful_steps / run,
        "useful_env_steps_per_cpu_s": useful_steps / run_cpu,
    }


def emit(result: dict) -> None:
    print("RESULT " + json.dumps(result), flush=True)
