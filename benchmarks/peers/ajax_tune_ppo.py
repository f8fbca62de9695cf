"""ajax_tune's PPO on its CartPole, timed like the peers (runs in the project's interpreter).

One call of the whole budget with one evaluation at its end, from a fresh state each run; the
first call compiles. Useful steps are the loop's count of unmasked env steps.
"""

from __future__ import annotations

import protocol

s = protocol.settings()

import jax  # noqa: E402
import numpy as np  # noqa: E402
from ajax_tune_ppo_agent import ppo_from  # noqa: E402

from ajax_tune.envs import make_env  # noqa: E402
from ajax_tune.loop import LoopConfig, TrainLoop  # noqa: E402

env = make_env(s.get("env", "cartpole"), **s.get("env_kwargs", {}))
batch = s["num_envs"] * s["unroll_length"]
total = s["total_steps"] // batch * batch
agent = ppo_from(s, env)
loop = TrainLoop(
    env,
    agent,
    LoopConfig(
        total_timesteps=total,
        timesteps_per_iteration=total,
        eval_every=0,
        eval_episodes=s.get("eval_episodes", 128),
        num_seeds=s["num_seeds"],
        reset_mode=s.get("reset_mode", LoopConfig.reset_mode),
    ),
)


def run(seed):
    state, rows = loop.train(loop.init(seed=seed))
    rows = jax.device_get(rows).rows
    return float(np.sum(rows["train/useful_steps"])), float(np.nanmean(rows["eval/return"][:, -1]))


(useful, eval_return), first, times = protocol.timed_runs(run, s.get("runs", 2))
assert loop.compilations == 1, loop.compilations
protocol.emit(
    {
        "side": "ajax_tune",
        **protocol.throughput(first, times, float(total * s["num_seeds"]), useful),
        "eval_return": eval_return,
        "device": str(jax.devices()[0]),
        "reset_mode": loop.config.reset_mode,
        "versions": protocol.versions("ajax-tune", "jax", "jaxlib", "flax", "optax"),
    }
)
