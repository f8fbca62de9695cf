"""Train one ajax_tune trial call by call until its evaluation reaches a threshold (or the
budget ends); report when each seed and the seeds' mean first reached it, in env steps and in
wall time from the first call (compilation included), and the useful env steps per second over
the calls after the first (which compiles). At least `min_calls` calls run, so that a trial
solved early still gives a throughput.
"""

from __future__ import annotations

import time

import protocol

s = protocol.settings()

import jax  # noqa: E402
import numpy as np  # noqa: E402

from ajax_tune.agents import make_agent  # noqa: E402
from ajax_tune.config import Config  # noqa: E402
from ajax_tune.envs import make_env  # noqa: E402
from ajax_tune.envs.wrappers import EpisodeWrapper  # noqa: E402
from ajax_tune.loop import TrainLoop  # noqa: E402

config = Config.from_dict(s["config"])
env = make_env(config.env.name, **config.env.kwargs)
agent = make_agent(config.agent_name, config.agent, env.observation_space, env.action_space)
loop = TrainLoop(EpisodeWrapper(env, config.env.max_episode_steps or None), agent, config.train)
metric, threshold = s.get("metric", "eval/return"), s["threshold"]
state = loop.set_task(loop.init(), config.env.task) if config.env.task else loop.init()

start = time.perf_counter()
calls, first_call_s = [], None
mean_solved = None
seeds_solved = [None] * config.train.num_seeds
while loop.timestep(state) < config.train.total_timesteps:
    t0 = time.perf_counter()
    state, rows = loop.train(state)
    rows = jax.device_get(rows).rows
    now = time.perf_counter()
    first_call_s = first_call_s or now - t0
    per_seed = np.asarray(rows[metric])[:, -1]  # the call's last update holds its evaluation
    timestep = loop.timestep(state)
    calls.append(
        {
            "timestep": timestep,
            "wall_s": round(now - t0, 4),
            "useful_steps": float(np.sum(rows["train/useful_steps"])),
            "per_seed": [round(float(v), 4) for v in per_seed],
        }
    )
    for i, v in enumerate(per_seed):
        if seeds_solved[i] is None and v >= threshold:
            seeds_solved[i] = {"env_steps": timestep, "wall_s": round(now - start, 3)}
    if mean_solved is None and float(np.mean(per_seed)) >= threshold:
        mean_solved = {"env_steps": timestep, "wall_s": round(now - start, 3)}
    if mean_solved is not None and s.get("stop_when_solved", True) and len(calls) >= s.get("min_calls", 4):
        break

later = calls[1:] or calls
useful_per_s = sum(c["useful_steps"] for c in later) / sum(c["wall_s"] for c in later)
stepped_per_s = sum(loop.steps_per_update * loop.updates_per_call * config.train.num_seeds for _ in later) / sum(
    c["wall_s"] for c in later
)
protocol.emit(
    {
        "side": "ajax_tune",
        "reset_mode": config.train.reset_mode,
        "metric": metric,
        "threshold": threshold,
        "solved": mean_solved,
        "seeds_solved": seeds_solved,
        "first_call_s": round(first_call_s, 3),
        "useful_env_steps_per_s": useful_per_s,
        "env_steps_per_s": stepped_per_s,
        "useful_fraction": sum(c["useful_steps"] for c in calls)
        / (len(calls) * loop.steps_per_update * loop.updates_per_call * config.train.num_seeds),
        "calls": calls,
        "device": str(jax.devices()[0]),
        "versions": protocol.versions("ajax-tune", "jax", "jaxlib"),
    }
)
