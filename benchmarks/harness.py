"""What every benchmark shares: peer environments, the worker protocol, alternation, results.

Each measured run is a fresh process (a *worker*, one script in `benchmarks/peers/`), so every
side pays its own imports and compilation and no side inherits another's warm caches. Our
workers run in the project's interpreter; a peer's run in a virtual environment of its own,
which this module creates on first use outside the repository (by default under
`~/.cache/ajax_tune_bench/<peer>`, or under `$AJAX_TUNE_BENCH_PEERS`, or `--peer-root`), with
pinned versions, so a peer's older JAX never meets ours.

A worker reads one JSON object of settings from its first argument and prints one line
`RESULT {...}` with what it measured. The harness alternates the sides (A B B A A B ...) so
that drift in the machine's load falls on both, and reports medians.
"""

from __future__ import annotations

import datetime
import hashlib
import json
import os
import pathlib
import platform
import shlex
import statistics
import subprocess
import sys
import time
import venv
from collections.abc import Callable

HERE = pathlib.Path(__file__).resolve().parent
PEERS_DIR = HERE / "peers"
RESULTS_DIR = HERE / "results"
ROOT_ENV = "AJAX_TUNE_BENCH_PEERS"

# Pinned so that a peer's numbers can be reproduced: each list installs into its own venv.
PEERS: dict[str, list[str]] = {
    # Rejax 0.1.3 with gymnax before 1.0 (the CartPole-v1 port whose dynamics ours matches).
    "rejax": [
        "rejax==0.1.3", "gymnax==0.0.9", "jax==0.4.38", "jaxlib==0.4.38", "flax==0.10.2",
        "optax==0.2.4", "distrax==0.1.5", "chex==0.1.88", "tensorflow-probability==0.25.0",
        "numpy<2.2",
    ],
    # RLlib's PPO on gymnasium's CartPole-v1, with a CPU build of torch.
    "rllib": ["ray[rllib]==2.60.0", "torch==2.13.0"],
}


def peer_root(override: str | None = None) -> pathlib.Path:
    root = override or os.environ.get(ROOT_ENV) or pathlib.Path.home() / ".cache" / "ajax_tune_bench"
    return pathlib.Path(root).expanduser()


def peer_python(name: str, root: str | None = None) -> pathlib.Path:
    """The interpreter of peer `name`'s venv, created (and its pins installed) when missing or
    when the pins changed."""
    pins = PEERS[name]
    where = peer_root(root) / name
    python = where / "bin" / "python"
    stamp = where / "pins.sha1"
    digest = hashlib.sha1("\n".join(pins).encode()).hexdigest()
    if python.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return python
    print(f"[harness] creating the {name} environment in {where} (once)", file=sys.stderr, flush=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(where)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *pins], check=True)
    stamp.write_text(digest + "\n")
    return python


def worker_env() -> dict[str, str]:
    """The environment every worker gets: the same for all sides. JAX picks its device unless
    the caller set JAX_PLATFORMS."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def run_worker(python: str | os.PathLike, script: str, settings: dict, timeout: float = 3600,
               extra_env: dict | None = None) -> dict:
    """Run one worker process and return the JSON it printed (with its wall time)."""
    cmd = [str(python), str(PEERS_DIR / script), json.dumps(settings)]
    start = time.perf_counter()
    env = {**worker_env(), **(extra_env or {})}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    wall = time.perf_counter() - start
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    if proc.returncode != 0 or not lines:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-25:])
        raise RuntimeError(f"worker {script} failed (exit {proc.returncode}):\n{tail}")
    out = json.loads(lines[-1][len("RESULT "):])
    out["process_wall_s"] = round(wall, 3)
    return out


def alternate(sides: dict[str, tuple], repeats: int, log=print, extra_env: dict | None = None) -> dict[str, list[dict]]:
    """Run every side `repeats` times, alternating the order each round (A B, B A, A B, ...).

    `sides` maps a label to `(python, script, settings)`; `extra_env` goes to every side alike
    (XLA_FLAGS, for instance)."""
    names = list(sides)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for r in range(repeats):
        for name in (names if r % 2 == 0 else names[::-1]):
            python, script, settings = sides[name]
            out = run_worker(python, script, settings, extra_env=extra_env)
            runs[name].append(out)
            log(f"[{name} {r + 1}/{repeats}] " + brief(out))
    return runs


def brief(out: dict) -> str:
    keys = ("env_steps_per_s", "useful_env_steps_per_s", "compile_s", "run_s", "eval_return")
    return ", ".join(f"{k}={out[k]:.4g}" for k in keys if isinstance(out.get(k), (int, float)))


def medians(runs: list[dict], keys: tuple[str, ...]) -> dict:
    """Median, min and max of each key over runs (keys absent from a run are skipped)."""
    out = {}
    for key in keys:
        values = [r[key] for r in runs if isinstance(r.get(key), (int, float))]
        if values:
            out[key] = {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}
    return out


def load_average() -> list[float] | None:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except OSError:
        return None


def machine() -> dict:
    return {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpu_count": os.cpu_count(),
        "load_average_1_5_15": load_average(),
        "jax_platforms": os.environ.get("JAX_PLATFORMS", ""),
        "xla_flags": os.environ.get("XLA_FLAGS", ""),
    }


def write_results(name: str, payload: dict, out: str | os.PathLike | None = None) -> pathlib.Path:
    """Write `payload` with the command, date and machine to `benchmarks/results/<name>.json`
    (or `out`)."""
    path = pathlib.Path(out) if out else RESULTS_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "benchmark": name,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python " + " ".join(shlex.quote(a) for a in [_relative(sys.argv[0]), *sys.argv[1:]]),
        "machine": machine(),
        **payload,
    }
    record["machine"]["load_average_at_end"] = load_average()
    path.write_text(json.dumps(record, indent=2) + "\n")
    print(f"[harness] wrote {path}", file=sys.stderr)
    return path


def _relative(path: str) -> str:
    try:
        return str(pathlib.Path(path).resolve().relative_to(HERE.parent))
    except ValueError:
        return path


def side_table(results: list[dict], columns: list[tuple[str, Callable[[dict, str, dict], str]]]) -> str:
    """A markdown table with a row per side of every result: `columns` are (header, cell) pairs,
    where `cell(result, side, medians)` formats one cell."""
    lines = ["| " + " | ".join(h for h, _ in columns) + " |", "|" + "---|" * len(columns)]
    for res in results:
        for side, med in res["summary"].items():
            if isinstance(med, dict) and "env_steps_per_s" in med:
                lines.append("| " + " | ".join(cell(res, side, med) for _, cell in columns) + " |")
    return "\n".join(lines)


def ratio_cell(res: dict, side: str, ours: str = "ajax_tune") -> str:
    """The median useful-throughput ratio, on our side's row only."""
    ratio = res["summary"].get("useful_ratio")
    return f"{ratio['median']:.2f}x" if side == ours and ratio else ""
