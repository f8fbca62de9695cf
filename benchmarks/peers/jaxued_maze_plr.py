"""JaxUED's `examples/maze_plr.py`, run unmodified, timed, with what it learned recorded.

Settings (one JSON object in argv[1]): `jaxued_repo` (a clone at the pinned commit), `args`
(maze_plr.py's own command line), `tap` (default true: record the training return) and
`levels_dir` (optional: where to save each evaluation's level buffer; needs
`--checkpoint_save_interval 1` in `args`, the script's own checkpoints being where it is read).

What it changes around the script, none of it in JaxUED's files:

- `jax.tree_map` is aliased to `jax.tree_util.tree_map`: the PyPI wheel jaxued 0.0.1 still
  calls it and jax 0.6+ has none.
- W&B runs disabled (`WANDB_MODE=disabled`, no network); `wandb.Video` and `wandb.Image` are
  stubs, so the host encodes no GIF or PNG (the script's compiled program, its in-program
  rendering included, is unchanged).
- `wandb.log` is wrapped: per evaluation it records the update, env steps, the chunk's wall, CPU
  and compile seconds, the held-out solve rates (`solve_rate/<maze>`: 10 attempts of the
  sampling policy per maze) and the sampler's logged figures.
- The tap: the script imports `jaxued.utils.compute_max_returns` and calls it on every branch of
  every update with the rollout's `(dones, rewards)`, `[T, N]`. It is replaced, before the
  script runs, by a function that returns the original's result and hands both arrays to the
  host (`jax.debug.callback`); after the run they give each evaluation's mean return over the
  episodes that ended in its updates (time-limit ends included, as ajax_tune's
  `train/episode_return_mean` counts them). The callbacks' own host seconds are reported.
- The script's checkpoint saves (orbax, when `--checkpoint_save_interval` is on) are timed, so
  that the run's wall clock can be given without them; after the run every checkpoint's sampler
  is saved as an npz (`ued_maze_measures.save_levels`), outside the timed part.
- JAX's compile events (tracing, lowering, XLA compilation) are summed. The script's own `sps`
  field is not a throughput (it divides by a dispatch time) and is not used.

Prints one `RESULT {...}` line (protocol.py).
"""

from __future__ import annotations

import os
import pathlib
import runpy
import shutil
import sys
import tempfile
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import protocol  # noqa: E402

T0 = time.perf_counter()
CPU0 = time.process_time()
settings = protocol.settings()
script = pathlib.Path(settings["jaxued_repo"]).resolve() / "examples" / "maze_plr.py"
if not script.exists():
    sys.exit(f"no examples/maze_plr.py in {settings['jaxued_repo']} (a clone of DramaCow/jaxued at 0f8f128)")

os.environ["WANDB_MODE"] = "disabled"
os.environ["WANDB_SILENT"] = "true"
workdir = tempfile.mkdtemp(prefix="jaxued_maze_plr_")  # the script's checkpoints
os.environ.setdefault("WANDB_DIR", workdir)

import jax  # noqa: E402
import jax.monitoring  # noqa: E402

if not hasattr(jax, "tree_map"):
    jax.tree_map = jax.tree_util.tree_map

import jaxued.utils  # noqa: E402
import numpy as np  # noqa: E402
import orbax.checkpoint as ocp  # noqa: E402
import wandb  # noqa: E402
from ued_maze_measures import ended_returns, save_levels  # noqa: E402

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

# -- the tap: each update's (dones, rewards), kept for after the run --------------------------

rollouts: list[tuple[np.ndarray, np.ndarray]] = []
tap_s = {"host": 0.0}
compute_max_returns = jaxued.utils.compute_max_returns


def keep_rollout(dones, rewards) -> None:
    start = time.perf_counter()
    rollouts.append((np.array(dones, bool), np.array(rewards, np.float32)))
    tap_s["host"] += time.perf_counter() - start


def tapped_max_returns(dones, rewards):
    jax.debug.callback(keep_rollout, dones, rewards)
    return compute_max_returns(dones, rewards)


if settings.get("tap", True):
    jaxued.utils.compute_max_returns = tapped_max_returns


# -- the script's checkpoint saves, timed ----------------------------------------------------

saving = {"s": 0.0}
_save, _wait = ocp.CheckpointManager.save, ocp.CheckpointManager.wait_until_finished


def timed(method):
    def wrapper(*args, **kwargs):
        start = time.perf_counter()
        try:
            return method(*args, **kwargs)
        finally:
            saving["s"] += time.perf_counter() - start

    return wrapper


ocp.CheckpointManager.save = timed(_save)
ocp.CheckpointManager.wait_until_finished = timed(_wait)

# -- W&B: nothing sent, each evaluation recorded ----------------------------------------------


class _Stub:
    def __init__(self, *args, **kwargs):
        pass


wandb.Video = _Stub
wandb.Image = _Stub

evals: list[dict] = []
prev = {"t": None, "cpu": None, "steps": 0, "compile": 0.0, "saving": 0.0}
LOOP_START = {"t": None, "cpu": None}


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
        "chunk_saving_s": round(saving["s"] - prev["saving"], 3),  # the previous evaluation's checkpoint
        "chunk_env_steps": steps - prev["steps"],
        "rollouts_so_far": len(rollouts),
        "load1": round(os.getloadavg()[0], 2),
        "solve_rate": {k.split("/", 1)[1]: _scalar(v) for k, v in d.items() if k.startswith("solve_rate/")},
        "level_sampler": {k.split("/", 1)[1]: _scalar(v) for k, v in d.items() if k.startswith("level_sampler/")},
    }
    prev.update(t=now, cpu=cpu, steps=steps, compile=compile_s["total"], saving=saving["s"])
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


def init(*args, **kwargs):
    # wandb.init rebinds the module-level wandb.log to the run's; wrap it after.
    global _log
    run = _init(*args, **kwargs)
    _log = run.log
    wandb.log = log
    return run


wandb.init = init
wandb.log = log


def save_buffers(directory: pathlib.Path) -> float:
    """Every checkpoint's sampler as an npz (`eval_000.npz`, ...), with the update it was saved
    after and the gradient updates so far; returns the seconds it took."""
    start = time.perf_counter()
    models = sorted(pathlib.Path(workdir).glob("checkpoints/*/*/models"))
    if not models:
        sys.exit("no checkpoints: levels_dir needs --checkpoint_save_interval 1 in args")
    manager = ocp.CheckpointManager(models[0].resolve())
    directory.mkdir(parents=True, exist_ok=True)
    for step in manager.all_steps():
        state = manager.restore(step, args=ocp.args.StandardRestore())
        sampler, levels = state["sampler"], state["sampler"]["levels"]
        save_levels(
            directory / f"eval_{step:03d}.npz",
            levels["wall_map"],
            levels["agent_pos"],
            levels["goal_pos"],
            sampler["scores"],
            size=int(sampler["size"]),
            update=int(state["num_dr_updates"] + state["num_replay_updates"] + state["num_mutation_updates"]),
            gradient_updates=int(state["num_replay_updates"]),
        )
    manager.close()
    return time.perf_counter() - start


# The script's training loop starts after its set-up; the first chunk is timed from here so
# that it holds all of the first compilation.
LOOP_START.update(t=time.perf_counter(), cpu=time.process_time())
os.chdir(workdir)
sys.argv = [str(script), *settings["args"]]
runpy.run_path(str(script), run_name="__main__")
end = time.perf_counter()

# after the timed part: the training return per evaluation, the buffers
bounds = [0, *(e["rollouts_so_far"] for e in evals)]
for e, first, stop in zip(evals, bounds, bounds[1:]):
    ended = [ended_returns(d, r) for d, r in rollouts[first:stop]]
    total, count = sum(s for s, _ in ended), sum(n for _, n in ended)
    e["train_return"] = total / count if count else None
    e["train_episodes"] = count
levels_s = save_buffers(pathlib.Path(settings["levels_dir"])) if settings.get("levels_dir") else None
shutil.rmtree(workdir, ignore_errors=True)

protocol.emit(
    {
        "side": "jaxued",
        "args": settings["args"],
        "tap": bool(settings.get("tap", True)),
        "device": str(jax.devices()[0].platform),
        "process_s": round(end - T0, 3),
        "run_s": round(end - LOOP_START["t"], 3),
        "cpu_s": round(time.process_time() - CPU0, 3),
        "compile_s": round(compile_s["total"], 3),
        "backend_compile_s": round(compile_s["backend"], 3),
        "compilations": compile_s["count"],
        "saving_s": round(saving["s"], 3),
        "tap_host_s": round(tap_s["host"], 3),
        "tapped_rollouts": len(rollouts),
        "levels_s": None if levels_s is None else round(levels_s, 3),
        "evals": evals,
        "versions": protocol.versions("jax", "jaxlib", "flax", "optax", "jaxued", "wandb", "distrax", "orbax-checkpoint"),
    }
)
