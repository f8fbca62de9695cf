"""ajax_tune's level algorithms on JaxUED's maze: one Runner, its calls timed, its results kept.

Settings (one JSON object in argv[1]): `config` (a trial config), `calls` (train() calls), and
optionally `levels_dir`: after every call the level buffer's filled slots are saved there as an
npz (`ued_maze_measures.save_levels`), outside the timed calls, and the seconds it took reported.

Per call it records the wall and CPU seconds, the seconds JAX spent compiling (tracing,
lowering, XLA) and the results the study reads. Prints one `RESULT {...}` line (protocol.py).
"""

from __future__ import annotations

import pathlib
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
import protocol  # noqa: E402

T0 = time.perf_counter()

import jax  # noqa: E402
import jax.monitoring  # noqa: E402
import numpy as np  # noqa: E402

from ajax_tune import Runner  # noqa: E402

COMPILE_EVENTS = (
    "/jax/core/compile/jaxpr_trace_duration",
    "/jax/core/compile/jaxpr_to_mlir_module_duration",
    "/jax/core/compile/backend_compile_duration",
)
compiling = {"s": 0.0}


def on_duration(event: str, duration: float, **kwargs) -> None:
    if event in COMPILE_EVENTS:
        compiling["s"] += duration


jax.monitoring.register_event_duration_secs_listener(on_duration)

KEEP_PREFIXES = ("eval/heldout/", "ued/")
KEEP = ("env_steps", "train/episode_return_mean", "train/episodes", "perf/compilations")


def kept(result: dict) -> dict:
    out = {}
    for k, v in result.items():
        if (k in KEEP or k.startswith(KEEP_PREFIXES)) and isinstance(v, (int, float, np.floating, np.integer)):
            out[k] = float(v)
    return out


def save_buffer(runner: Runner, path: pathlib.Path, update: int, gradient_updates: float) -> None:
    """The first lane's level buffer (a process runs one seed) as `ued_maze_measures` reads it."""
    from ued_maze_measures import save_levels

    buffer = jax.device_get(runner.state.ued.own.buffer)
    levels = buffer.levels
    save_levels(
        path,
        levels["wall_map"][0],
        levels["agent_pos"][0],
        levels["goal_pos"][0],
        buffer.scores[0],
        size=int(np.asarray(buffer.size)[0]),
        update=update,
        gradient_updates=gradient_updates,
    )


def main() -> None:
    settings = protocol.settings()
    runner = Runner(settings["config"])
    setup_s = time.perf_counter() - T0
    levels_dir = pathlib.Path(settings["levels_dir"]) if settings.get("levels_dir") else None
    if levels_dir:
        levels_dir.mkdir(parents=True, exist_ok=True)
    calls, saving_s, gradient_updates = [], 0.0, 0.0
    per_call = runner.loop.updates_per_call
    for i in range(int(settings["calls"])):
        compile_before, cpu = compiling["s"], time.process_time()
        start = time.perf_counter()
        result = runner.train()  # returns once the call's outputs are on the host
        wall = time.perf_counter() - start
        rec = {
            "call": i + 1,
            "wall_s": round(wall, 3),
            "cpu_s": round(time.process_time() - cpu, 3),
            "compile_s": round(compiling["s"] - compile_before, 3),
            **kept(result),
        }
        calls.append(rec)
        gradient_updates += rec.get("ued/agent_updates", 0.0)
        if levels_dir:
            start = time.perf_counter()
            save_buffer(runner, levels_dir / f"eval_{i:03d}.npz", (i + 1) * per_call, gradient_updates)
            saving_s += time.perf_counter() - start
        print(
            f"[ajax_tune] call {i + 1} steps {rec.get('env_steps')} {wall:.1f}s (compile {rec['compile_s']:.1f}s) "
            f"heldout {rec.get('eval/heldout/success_rate_mean')} replay {rec.get('ued/replay')} "
            f"return {rec.get('train/episode_return_mean')}",
            file=sys.stderr,
            flush=True,
        )
    end = time.perf_counter()
    protocol.emit(
        {
            "side": "ajax_tune",
            "device": str(jax.devices()[0].platform),
            "setup_s": round(setup_s, 3),
            "num_seeds": runner.config.train.num_seeds,
            "updates_per_call": per_call,
            "steps_per_update": runner.loop.steps_per_update,
            "process_s": round(end - T0, 3),
            "run_s": round(sum(c["wall_s"] for c in calls), 3),
            "compile_s": round(compiling["s"], 3),
            "saving_s": round(saving_s, 3),
            "calls": calls,
            "versions": protocol.versions("jax", "jaxlib", "flax", "optax", "ajax-tune", "jaxued"),
        }
    )


if __name__ == "__main__":
    main()
