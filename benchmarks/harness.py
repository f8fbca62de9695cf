"""What every benchmark shares: peer environments, the worker protocol, alternation, results.

Each measured run is a fresh process (a *worker*, one script in `benchmarks/peers/`), so every
side pays its own imports and compilation and no side inherits another's warm caches. Our
workers run in the project's interpreter; a peer's run in a virtual environment of its own,
which this module creates on first use outside the repository (by default under
`~/.cache/ajax_tune_bench/<peer>-jax<version>`, or under `$AJAX_TUNE_BENCH_PEERS`, or
`--peer-root`), with pinned versions. A peer that runs on JAX runs on the project's own JAX
stack (jax, jaxlib, flax, optax, chex at the versions this interpreter has, read at run time),
so that a comparison compares the tools and not JAX versions; `--peer-jax VERSION` (or
`$AJAX_TUNE_BENCH_PEER_JAX`) pins another JAX for the peer instead. Every JSON and table the
harness writes records both sides' versions, as installed (`python benchmarks/harness.py
--dry-run` prints the pins and our versions without installing anything).

A worker reads one JSON object of settings from its first argument and prints one line
`RESULT {...}` with what it measured. The harness alternates the sides (A B B A A B ...) so
that drift in the machine's load falls on both, and reports medians.
"""

from __future__ import annotations

import argparse
import datetime
import functools
import hashlib
import importlib.metadata
import json
import math
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

# What each peer installs, pinned so that its numbers can be reproduced (each into its own venv).
# `shared`: the packages it has in common with us, installed at our versions (see shared_pins).
PEERS: dict[str, dict] = {
    # Rejax 0.1.3 with gymnax before 1.0 (the CartPole-v1 port whose dynamics ours matches), and
    # distrax 0.1.9 on a tfp-nightly build: tensorflow-probability 0.25 (what distrax 0.1.5 takes)
    # does not import on jax 0.10.
    "rejax": {
        "pins": ["rejax==0.1.3", "gymnax==0.0.9", "distrax==0.1.9", "tfp-nightly==0.26.0.dev20261027"],
        "shared": ("jax", "jaxlib", "flax", "optax", "chex", "numpy"),
        "packages": ("rejax", "gymnax"),
    },
    # RLlib's PPO on gymnasium's CartPole-v1, with a CPU build of torch (no JAX).
    "rllib": {"pins": ["ray[rllib]==2.60.0", "torch==2.13.0"], "shared": (), "packages": ("ray", "torch")},
}
PEER_JAX_ENV = "AJAX_TUNE_BENCH_PEER_JAX"
# The versions recorded for every side: the JAX stack, and the side's own packages.
STACK = ("jax", "jaxlib", "flax", "optax")


def ours(package: str) -> str:
    return importlib.metadata.version(package)


def shared_pins(name: str, jax_version: str | None = None) -> list[str]:
    """Pins of the packages peer `name` shares with us: our versions, read from this interpreter;
    with `jax_version` (or $AJAX_TUNE_BENCH_PEER_JAX), that JAX instead, and pip's choice of the
    libraries built on it."""
    shared = PEERS[name]["shared"]
    if not shared:
        return []
    jax_version = jax_version or os.environ.get(PEER_JAX_ENV)
    if jax_version and jax_version != ours("jax"):
        return [f"jax=={jax_version}", f"jaxlib=={jax_version}"]
    return [f"{package}=={ours(package)}" for package in shared]


def peer_pins(name: str, jax_version: str | None = None) -> list[str]:
    return [*PEERS[name]["pins"], *shared_pins(name, jax_version)]


def peer_root(override: str | None = None) -> pathlib.Path:
    root = override or os.environ.get(ROOT_ENV) or pathlib.Path.home() / ".cache" / "ajax_tune_bench"
    return pathlib.Path(root).expanduser()


def peer_dir(name: str, root: str | None = None, jax_version: str | None = None) -> pathlib.Path:
    """One venv per peer and JAX version, so that switching between them reinstalls nothing."""
    jax_pin = next((p.split("==")[1] for p in shared_pins(name, jax_version) if p.startswith("jax==")), None)
    return peer_root(root) / (f"{name}-jax{jax_pin}" if jax_pin else name)


def peer_python(name: str, root: str | None = None, jax_version: str | None = None) -> pathlib.Path:
    """The interpreter of peer `name`'s venv, created (and its pins installed) when missing or
    when the pins changed."""
    pins = peer_pins(name, jax_version)
    where = peer_dir(name, root, jax_version)
    python = where / "bin" / "python"
    stamp = where / "pins.sha1"
    digest = hashlib.sha1("\n".join(pins).encode()).hexdigest()
    SIDES[name] = (str(python), PEERS[name]["packages"])
    if python.exists() and stamp.exists() and stamp.read_text().strip() == digest:
        return python
    print(f"[harness] creating the {name} environment in {where} (once): {' '.join(pins)}", file=sys.stderr, flush=True)
    venv.EnvBuilder(with_pip=True, clear=True).create(where)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", *pins], check=True)
    stamp.write_text(digest + "\n")
    return python


# The interpreters this process ran workers in: side -> (python, the side's own packages).
SIDES: dict[str, tuple[str, tuple[str, ...]]] = {}


@functools.cache
def installed_versions(python: str, packages: tuple[str, ...]) -> dict[str, str | None]:
    """The versions an interpreter really has (what pip installed, not what was asked for)."""
    names = [*STACK, *packages]
    code = (
        "import importlib.metadata as m, json, sys\n"
        "def v(p):\n"
        "    try:\n        return m.version(p)\n"
        "    except m.PackageNotFoundError:\n        return None\n"
        "print(json.dumps({p: v(p) for p in sys.argv[1:]}))"
    )
    out = subprocess.run([python, "-c", code, *names], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def versions() -> dict[str, dict]:
    """Both sides' versions: ours always, and every peer this process ran."""
    sides = {"ajax_tune": (sys.executable, ("ajax-tune",)), **SIDES}
    return {
        side: installed_versions(python, package) for side, (python, package) in sides.items() if pathlib.Path(python).exists()
    }


def versions_cell(side: str) -> str:
    found = versions().get(side, {})
    return ", ".join(f"{k} {v}" for k, v in found.items() if v)


def worker_env() -> dict[str, str]:
    """The environment every worker gets: the same for all sides. JAX picks its device unless
    the caller set JAX_PLATFORMS."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    env.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    return env


def run_worker(
    python: str | os.PathLike, script: str, settings: dict, timeout: float = 3600, extra_env: dict | None = None
) -> dict:
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
    out = json.loads(lines[-1][len("RESULT ") :])
    out["process_wall_s"] = round(wall, 3)
    return out


def alternate(sides: dict[str, tuple], repeats: int, log=print, extra_env: dict | None = None) -> dict[str, list[dict]]:
    """Run every side `repeats` times, alternating the order each round (A B, B A, A B, ...).

    `sides` maps a label to `(python, script, settings)`; `extra_env` goes to every side alike
    (XLA_FLAGS, for instance)."""
    names = list(sides)
    runs: dict[str, list[dict]] = {name: [] for name in names}
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
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


def tree() -> str | None:
    """The commit the benchmarks ran from, `+changes` when the checkout had edits; None outside git."""
    git = ["git", "-C", str(HERE.parent)]
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    if head.returncode != 0:
        return None
    dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True, text=True)
    return head.stdout.strip() + ("+changes" if dirty.stdout.strip() else "")


def raw_path(path: str | os.PathLike) -> pathlib.Path:
    """Where the raw record of the summary at `path` goes: `raw/` beside it, which git ignores."""
    path = pathlib.Path(path)
    return path.parent / "raw" / path.name


def write_results(name: str, summary: dict, out: str | os.PathLike | None = None, raw: dict | None = None) -> pathlib.Path:
    """Write `summary` with the command, date, machine and both sides' versions to
    `benchmarks/results/<name>.json` (or `out`): the file the repository keeps, so it holds what a
    reader checks a figure against (medians, ranges, ratios, settings) and no per-run or per-step
    rows. `raw` (every run as measured), when given, goes to `raw_path` of it, outside git."""
    path = pathlib.Path(out) if out else RESULTS_DIR / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {
        "benchmark": name,
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python " + " ".join(shlex.quote(_relative(a)) for a in sys.argv),
        "machine": machine(),
        "versions": versions(),
        "tree": tree(),
    }
    header["machine"]["load_average_at_end"] = load_average()
    path.write_text(dumps({**header, **summary}))
    print(f"[harness] wrote {path}", file=sys.stderr)
    if raw is not None:
        raw_file = raw_path(path)
        raw_file.parent.mkdir(parents=True, exist_ok=True)
        raw_file.write_text(json.dumps({**header, **raw}) + "\n")
        print(f"[harness] wrote the raw runs to {raw_file} (ignored by git)", file=sys.stderr)
    return path


def read_raw(path: str | os.PathLike) -> dict:
    """The raw record written beside the summary at `path`, or {} where there is none (a fresh
    checkout: raw records stay on the machine that ran them)."""
    raw_file = raw_path(path)
    return json.loads(raw_file.read_text()) if raw_file.exists() else {}


def dumps(value, width: int = 100) -> str:
    """JSON a reader can scan: floats to 6 significant digits, a list of numbers or any short value
    on one line, the rest indented."""
    return _dump(_tidy(value), 0, width) + "\n"


def _tidy(value):
    if isinstance(value, float):
        return value if not math.isfinite(value) or value == 0 else float(f"{value:.6g}")
    if isinstance(value, dict):
        return {str(k): _tidy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_tidy(v) for v in value]
    return value


def _dump(value, indent: int, width: int) -> str:
    flat = json.dumps(value)
    scalars = isinstance(value, list) and all(not isinstance(v, (dict, list)) for v in value)
    if not isinstance(value, (dict, list)) or scalars or len(flat) + indent <= width:
        return flat
    pad = " " * (indent + 2)
    if isinstance(value, list):
        items = [pad + _dump(v, indent + 2, width) for v in value]
        return "[\n" + ",\n".join(items) + "\n" + " " * indent + "]"
    items = [f"{pad}{json.dumps(k)}: {_dump(v, indent + 2, width)}" for k, v in value.items()]
    return "{\n" + ",\n".join(items) + "\n" + " " * indent + "}"


def _relative(arg: str) -> str:
    """A command's argument as the record shows it: a path inside the project relative to its
    root, any other absolute path (an earlier tree's checkout, a scratch file) as DIR."""
    if not (os.path.isabs(arg) or os.path.exists(arg)):
        return arg
    try:
        return str(pathlib.Path(arg).resolve().relative_to(HERE.parent))
    except ValueError:
        return "DIR" if os.path.isabs(arg) else arg


def side_table(results: list[dict], columns: list[tuple[str, Callable[[dict, str, dict], str]]]) -> str:
    """A markdown table with a row per side of every result: `columns` are (header, cell) pairs,
    where `cell(result, side, medians)` formats one cell. The last column is the side's versions."""
    columns = [*columns, ("versions", lambda r, side, m: versions_cell(side))]
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


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description="Show what the peers' environments would install, and our versions.")
    parser.add_argument("--dry-run", action="store_true", help="print the pins and versions; install nothing")
    parser.add_argument("--peer-jax", default=None, help=f"JAX for the peers instead of ours (${PEER_JAX_ENV})")
    parser.add_argument("--peer-root", default=None)
    args = parser.parse_args(argv)
    print(
        json.dumps(
            {
                "ajax_tune": installed_versions(sys.executable, ("ajax-tune",)),
                "peers": {
                    name: {"venv": str(peer_dir(name, args.peer_root, args.peer_jax)), "pins": peer_pins(name, args.peer_jax)}
                    for name in PEERS
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
