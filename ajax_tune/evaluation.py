"""Evaluation inside the jitted call, and the host-side reduction of the rows it produces.

In the graph, `make_evaluate` runs `episodes` envs with the deterministic policy until all are
done (at most the time limit), on whatever task it is given. On the host, `summarize` turns the
fixed-shape rows of one call (`[num_seeds, updates]` per key) into plain floats for a result:
the latest evaluation's mean, spread and per-seed values, the agent's metrics, the task at the
end of the call, and whether anything stopped being finite.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune.envs.wrappers import EpisodeWrapper, VecEnv

EVAL_KEYS = ("eval/return", "eval/length", "eval/success")


def make_evaluate(agent, env: EpisodeWrapper, episodes: int, per_episode: bool = False):
    """Returns means over episodes, or (`per_episode`) every episode's values."""
    venv = VecEnv(env, episodes)
    reduce = (lambda x: x) if per_episode else jnp.mean

    def evaluate(agent_state, task, key) -> dict[str, jax.Array]:
        k_reset, k_run = jax.random.split(key)
        state = venv.reset(k_reset, task)

        def running(carry):
            state, t, _ = carry
            return (t < env.max_episode_steps) & ~jnp.all(state.episode.done)

        def step(carry):
            state, t, k = carry
            k, k_act, k_env = jax.random.split(k, 3)
            action, _ = agent.act(agent_state, state.obs, k_act, deterministic=True)
            return venv.step(state, action, k_env), t + 1, k

        state, _, _ = jax.lax.while_loop(running, step, (state, jnp.zeros((), jnp.int32), k_run))
        success = state.info["success"] if env.has_success else jnp.full((episodes,), jnp.nan)
        return {
            "eval/return": reduce(state.episode.ret),
            "eval/length": reduce(state.episode.step.astype(jnp.float32)),
            "eval/success": reduce(success),
        }

    return evaluate


def _nanmean(x) -> float:
    x = np.asarray(x, np.float64)
    return float(np.mean(x[~np.isnan(x)])) if np.any(~np.isnan(x)) else math.nan


LOOP_PREFIXES = ("timestep", "eval/", "task/", "train/", "health/", "per_env/")


def summarize(rows: Mapping[str, np.ndarray], latest: tuple[str, ...] = ("lr",)) -> dict[str, float]:
    """Plain floats under stable keys: the same keys every call, NaN where there is nothing.

    Evaluation values come from the call's last evaluation (mean, spread and per seed); the
    agent's metrics are averaged over the call, except those in `latest` (the value of a
    schedule), which are read after the last update.
    """
    rows = {k: np.asarray(v) for k, v in rows.items()}
    num_seeds = rows["timestep"].shape[0]
    out: dict[str, float] = {"timestep": float(rows["timestep"][0, -1])}

    evaluated = np.nonzero(rows["eval/timestep"][0] >= 0)[0]
    last = evaluated[-1] if len(evaluated) else None
    out["eval/timestep"] = float(rows["eval/timestep"][0, last]) if last is not None else -1.0
    out["eval/num_evaluations"] = float(len(evaluated))
    for key, name in (("eval/return", "return"), ("eval/length", "length"), ("eval/success", "success_rate")):
        per_seed = rows[key][:, last] if last is not None else np.full(num_seeds, np.nan)
        out[f"eval/{name}_mean"] = _nanmean(per_seed)
        if name == "return":
            out["eval/return_std"] = float(np.std(per_seed)) if last is not None else math.nan
            out["eval/return_min"] = float(np.min(per_seed)) if last is not None else math.nan
            for i, v in enumerate(per_seed):
                out[f"eval/return_seed{i}"] = float(v)
    if "eval/heldout/return" in rows:
        num_tasks = rows["eval/heldout/return"].shape[-1]
        for key, name in (("eval/heldout/return", "return"), ("eval/heldout/success", "success_rate")):
            per_task = rows[key][:, last] if last is not None else np.full((num_seeds, num_tasks), np.nan)
            out[f"eval/heldout/{name}_mean"] = _nanmean(per_task)
            for i in range(num_tasks):
                out[f"eval/heldout/{i}/{name}"] = _nanmean(per_task[:, i])

    for key, value in rows.items():
        if key.startswith("task/"):
            out[f"curriculum/{key}"] = float(value[0, -1])
        elif not key.startswith(LOOP_PREFIXES):  # the agent's own metrics
            out[key] = float(np.mean(value[:, -1])) if key in latest else _nanmean(value)

    episodes = rows["train/episodes"].astype(np.float64)
    for name in ("return", "length"):
        per_update = np.nan_to_num(rows[f"train/episode_{name}"].astype(np.float64))
        total = episodes.sum()
        out[f"train/episode_{name}_mean"] = float((per_update * episodes).sum() / total) if total else math.nan
    out["train/episodes"] = float(episodes.sum() / num_seeds)
    out["train/useful_steps"] = float(rows["train/useful_steps"].astype(np.float64).sum() / num_seeds)
    out.update(health(rows))
    return out


def health(rows: Mapping[str, np.ndarray]) -> dict[str, float]:
    """`train/nonfinite` (1.0 when any part of any seed stopped being finite during the call)
    and, per part, the first timestep where it did (`health/<part>_nonfinite_at`, -1 if never)."""
    out: dict[str, float] = {}
    timestep = np.asarray(rows["timestep"])
    for key in sorted(k for k in rows if k.startswith("health/")):
        bad = np.asarray(rows[key]) == 0
        out[f"{key}_nonfinite_at"] = float(timestep[bad].min()) if bad.any() else -1.0
    out["train/nonfinite"] = float(any(v >= 0 for v in out.values()))
    return out
