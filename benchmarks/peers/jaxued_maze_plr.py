"""JaxUED's `examples/maze_plr.py`, run unmodified, timed and its evaluations recorded.

Settings (one JSON object in argv[1]): `jaxued_repo` (a clone at the pinned commit), `args`
(maze_plr.py's own command line, e.g. `["--seed", "0", "--num_updates", "40", ...]`).

What it changes around the script, none of it in JaxUED's files:

- `jax.tree_map` is aliased to `jax.tree_util.tree_map`: the PyPI wheel jaxued 0.0.1 still
  calls it and jax 0.6+ has none.
- W&B runs disabled (`WANDB_MODE=disabled`, no network); `wandb.Video` and `wandb.Image` are
  stubs, so the host encodes no GIF or PNG (the script's compiled program, its in-program
  rendering included, is unchanged).
- `wandb.log` is wrapped: per evaluation it records the update, env steps, wall clock since the
  script started, the chunk's wall and CPU seconds, the load average and the held-out solve
  rates (`solve_rate/<maze>`, JaxUED's: 10 attempts of the sampling policy per maze).
- JAX's compile events (tracing, lowering, XLA compilation) are summed, so that throughput can
  be given without them. The script's own `sps` field is not a throughput (it divides by a
  dispatch time) and is not used.

Prints one `RESULT {...}` line (protocol.py).
"""

from __future__ import annotations

import os
import pathlib
import runpy
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import protocol  # noqa: E402

T0 = time.perf_counter()
CPU0 = time.process_time()
settings = protocol.settings()
script = pathlib.Path(settings["jaxued_repo"]).resolve() / "examples" / "maze_plr.py"
if not script.exists():
    sys.exit(f"no examples/maze_plr.py in {settings['jaxued_repo']} (a clone of DramaCow/jaxued at 0f8f128)")

os.environ["WANDB_MODE"] = "disabled"
os.environ["WANDB_SILENT"] = "true"
workdir = tempfile.mkdtemp(prefix="jaxued_maze_plr_")  # checkpoints, if a caller enables them
os.environ.setdefault("WANDB_DIR", workdir)

import jax  # noqa: E402
import jax.monitoring  # noqa: E402

if not hasattr(jax, "tree_map"):
    jax.tree_map = jax.tree_util.tree_map

import numpy as np  # noqa: E402
import wandb  # noqa: E402

COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)
compile_s = {"total": 0.0, "backend": 0.0, "count": 0}


def on_duration(event: str, duration: float, **kwargs) -> None:
    if event in COMPILE_EVENTS:
        compile_s["total"] += duration
        if event == COMPILE_EVENTS[-1]:
            compile_s["backend"] += duration
            compile_s["count"] += 1


jax.monitoring.register_event_duration_secs_listener(on_duration)


class _Stub:
    def __init__(self, *args, **kwargs):
        pass


wandb.Video = _Stub
wandb.Image = _Stub

evals: list[dict] = []
prev = {"t": None, "cpu": None, "steps": 0, "compile": 0.0}


def _scalar(v):
    try:
        return float(np.asarray(v))
    except (TypeError, ValueError):
        return None


def log(d, *args, **kwargs):
    now, cpu = time.perf_counter(), time.process_time()
    steps = int(_scalar(d.get("num_env_steps", 0)) or 0)
    t_prev = prev["t"] if prev["t"] is not None else LOOP_START["t"]
    cpu_prev = prev["cpu"] if prev["cpu"] is not None else LOOP_START["cpu"]
    rec = {
        "num_updates": int(_scalar(d.get("num_updates", 0)) or 0),
        "env_steps": steps,
        "wall_s": round(now - T0, 3),
        "chunk_s": round(now - t_prev, 3),
        "chunk_cpu_s": round(cpu - cpu_prev, 3),
        "chunk_compile_s": round(compile_s["total"] - prev["compile"], 3),
        "chunk_env_steps": steps - prev["steps"],
        "load1": round(os.getloadavg()[0], 2),
        "solve_rate": {k.split("/", 1)[1]: _scalar(v) for k, v in d.items() if k.startswith("solve_rate/")},
        "level_sampler": {k.split("/", 1)[1]: _scalar(v) for k, v in d.items() if k.startswith("level_sampler/")},
    }
    prev.update(t=now, cpu=cpu, steps=steps, compile=compile_s["total"])
    evals.append(rec)
    print(
        f"[jaxued] upd {rec['num_updates']} steps {steps} chunk {rec['chunk_s']:.1f}s "
        f"(compile {rec['chunk_compile_s']:.1f}s) solve_rate/mean {rec['solve_rate'].get('mean')}",
        file=sys.stderr,
        flush=True,
    )
    return _log(d, *args, **kwargs)


_log = wandb.log
_init = wandb.init
LOOP_START = {"t": None, "cpu": None}


def init(*args, **kwargs):
    # wandb.init rebinds the module-level wandb.log to the run's; wrap it after.
    global _log
    run = _init(*args, **kwargs)
    _log = run.log
    wandb.log = log
    return run


wandb.init = init
wandb.log = log

# The script's training loop starts after its setup; the first chunk is timed from the start of
# the process's work on JAX (import excluded) so that it holds all of the first compilation.
LOOP_START.update(t=time.perf_counter(), cpu=time.process_time())
os.chdir(workdir)
sys.argv = [str(script), *settings["args"]]
runpy.run_path(str(script), run_name="__main__")
end = time.perf_counter()

protocol_out = {
    "side": "jaxued",
    "args": settings["args"],
    "device": str(jax.devices()[0].platform),
    "process_to_end_s": round(end - T0, 3),
    "run_s": round(end - LOOP_START["t"], 3),
    "cpu_s": round(time.process_time() - CPU0, 3),
    "compile_s": round(compile_s["total"], 3),
    "backend_compile_s": round(compile_s["backend"], 3),
    "compilations": compile_s["count"],
    "evals": evals,
    "versions": protocol.versions("jax", "jaxlib", "flax", "optax", "jaxued", "wandb", "distrax"),
}
print("RESULT " + __import__("json").dumps(protocol_out), flush=True)
