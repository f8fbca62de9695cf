"""ajax_tune's PPO on its CartPole, timed like the peers (runs in the project's interpreter).

One call of the whole budget with one evaluation at its end, from a fresh state each run; the
first call compiles. Useful steps are the loop's count of unmasked env steps.
"""

from __future__ import annotations

import protocol

s = protocol.settings()

import jax  # noqa: E402
import numpy as np  # noqa: E402

from ajax_tune.agents import PPO, PPOConfig  # noqa: E402
from ajax_tune.envs import make_env  # noqa: E402
from ajax_tune.loop import LoopConfig, TrainLoop  # noqa: E402
from ajax_tune.schedules import Schedule  # noqa: E402

env = make_env(s.get("env", "cartpole"), **s.get("env_kwargs", {}))
batch = s["num_envs"] * s["unroll_length"]
total = s["total_steps"] // batch * batch
agent = PPO(
    PPOConfig(
        num_envs=s["num_envs"],
        unroll_length=s["unroll_length"],
        update_epochs=s["epochs"],
        num_minibatches=s["minibatches"],
        hidden_sizes=tuple(s["hidden_sizes"]),
        activation=s["activation"],
        normalize_observations=s.get("normalize_observations", False),
        lr=Schedule(kind=s.get("lr_schedule", "linear"), peak=s["lr"]),
        max_grad_norm=s.get("max_grad_norm", 0.5),
    ),
    env.observation_space,
    env.action_space,
)
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
protocol.maybe_profile(s, run, 99)
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
