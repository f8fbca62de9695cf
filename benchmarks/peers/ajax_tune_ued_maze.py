"""ajax_tune's level algorithms on JaxUED's maze: one Runner, its calls timed, its results kept.

Settings (one JSON object in argv[1]): `config` (a trial config), `calls` (train() calls),
and optionally `posthoc`: `{"at": [call numbers], "tasks": {field: [levels...]}, "groups":
{name: [first, stop]}, "stochastic_episodes": N}`, a second evaluation after those calls of
every seed on each level, with the deterministic policy (one episode: the maze and the policy
are deterministic) and with the sampling policy (`N` episodes, as JaxUED evaluates).

Per call it records the wall and CPU seconds, the seconds JAX spent compiling (tracing,
lowering, XLA) and the results that matter here. Prints one `RESULT {...}` line.
"""

from __future__ import annotations

import json
import pathlib
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import protocol  # noqa: E402

T0 = time.perf_counter()

import jax  # noqa: E402
import jax.monitoring  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

from ajax_tune import Runner  # noqa: E402
from ajax_tune.loop.rollout import make_evaluate  # noqa: E402

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
KEEP = ("env_steps", "train/episode_return_mean", "perf/compilations", "eval/success_rate_mean")


def kept(result: dict) -> dict:
    out = {}
    for k, v in result.items():
        if (k in KEEP or k.startswith(KEEP_PREFIXES)) and isinstance(v, (int, float, np.floating, np.integer)):
            out[k] = float(v)
    return out


def posthoc_evaluator(runner: Runner, spec: dict):
    """evaluate(deterministic) -> success [lanes, levels, episodes] on spec's levels."""
    tasks = {k: jnp.asarray(np.asarray(v)) for k, v in spec["tasks"].items()}
    agent, env = runner.loop.agent, runner.env
    fns = {}
    for deterministic, episodes in ((True, 1), (False, int(spec.get("stochastic_episodes", 10)))):
        evaluate = make_evaluate(agent, env, episodes, per_episode=True, deterministic=deterministic)
        per_level = jax.vmap(evaluate, in_axes=(None, 0, 0))
        per_lane = jax.vmap(per_level, in_axes=(0, None, None))
        fns[deterministic] = jax.jit(per_lane)
    num_levels = len(next(iter(tasks.values())))
    keys = jax.random.split(jax.random.PRNGKey(int(spec.get("seed", 0))), num_levels)

    def run(deterministic: bool) -> np.ndarray:
        out = fns[deterministic](runner.state.agent, tasks, keys)
        return np.asarray(jax.device_get(out["eval/success"]), np.float64)

    return run


def summarise(success: np.ndarray, groups: dict) -> dict:
    """Per group of levels: per seed, the mean success and the mean over the worst 10% of levels
    (each level's success is its mean over episodes); per level, the mean over seeds."""
    per_level = np.nanmean(success, axis=-1)  # [lanes, levels]
    out = {}
    for name, (first, stop) in groups.items():
        block = per_level[:, first:stop]
        worst = max(1, int(round(0.1 * block.shape[1])))
        out[name] = {
            "mean_per_seed": np.round(block.mean(axis=1), 4).tolist(),
            "worst10_per_seed": np.round(np.sort(block, axis=1)[:, :worst].mean(axis=1), 4).tolist(),
            "per_level_mean_over_seeds": np.round(block.mean(axis=0), 3).tolist() if block.shape[1] <= 16 else None,
        }
    return out


def buffer_contents(runner: Runner) -> list[dict] | None:
    """What each lane's level buffer holds at the end: every filled slot's maze (wall rows as
    '0'/'1' strings, agent and goal positions), its score and its best return so far."""
    ued = runner.state.ued
    buffer = None if ued is None else getattr(ued.own, "buffer", None)
    if buffer is None:
        return None
    buf = jax.device_get(buffer)
    lanes = []
    for lane in range(np.asarray(buf.size).shape[0]):
        size = int(np.asarray(buf.size)[lane])
        slots = []
        for i in range(size):
            walls = np.asarray(buf.levels["wall_map"][lane, i])
            slots.append(
                {
                    "wall_rows": ["".join("1" if c else "0" for c in row) for row in walls],
                    "agent_pos": np.asarray(buf.levels["agent_pos"][lane, i]).tolist(),
                    "goal_pos": np.asarray(buf.levels["goal_pos"][lane, i]).tolist(),
                    "score": float(np.asarray(buf.scores)[lane, i]),
                    "max_return": float(np.asarray(buf.extra["max_return"])[lane, i]),
                }
            )
        lanes.append({"size": size, "slots": slots})
    return lanes


def main() -> None:
    settings = protocol.settings()
    runner = Runner(settings["config"])
    setup_s = time.perf_counter() - T0
    spec = settings.get("posthoc")
    evaluate = posthoc_evaluator(runner, spec) if spec else None
    calls, posthoc = [], []
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
        print(
            f"[ajax_tune] call {i + 1} steps {rec.get('env_steps')} {wall:.1f}s (compile {rec['compile_s']:.1f}s) "
            f"heldout {rec.get('eval/heldout/success_rate_mean')} replay {rec.get('ued/replay')}",
            file=sys.stderr,
            flush=True,
        )
        if evaluate is not None and (i + 1) in spec["at"]:
            start = time.perf_counter()
            point = {"call": i + 1, "env_steps": rec.get("env_steps")}
            for deterministic, name in ((True, "greedy"), (False, "stochastic")):
                point[name] = summarise(evaluate(deterministic), spec["groups"])
            point["s"] = round(time.perf_counter() - start, 3)
            posthoc.append(point)
            print(f"[ajax_tune] posthoc {json.dumps(point)[:300]}", file=sys.stderr, flush=True)
    out = {
        "side": "ajax_tune",
        "device": str(jax.devices()[0].platform),
        "setup_s": round(setup_s, 3),
        "num_seeds": runner.config.train.num_seeds,
        "updates_per_call": runner.loop.updates_per_call,
        "steps_per_update": runner.loop.steps_per_update,
        "run_s": round(sum(c["wall_s"] for c in calls), 3),
        "compile_s": round(sum(c["compile_s"] for c in calls), 3),
        "process_to_end_s": round(time.perf_counter() - T0, 3),
        "calls": calls,
        "posthoc": posthoc,
        "buffer": buffer_contents(runner) if settings.get("buffer") else None,
        "versions": protocol.versions("jax", "jaxlib", "flax", "optax", "ajax-tune", "jaxued"),
    }
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
