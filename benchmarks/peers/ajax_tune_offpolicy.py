"""ajax_tune's SAC, TD3 or DQN, timed like the peers (runs in the project's interpreter).

The settings carry the agent's own config keys (`agent_config`), so the worker follows the
agent's config as it is; one call of the whole budget, one evaluation at its end, from a fresh
state each run.
"""

from __future__ import annotations

import protocol

s = protocol.settings()

import jax  # noqa: E402
import numpy as np  # noqa: E402

from ajax_tune.agents import make_agent  # noqa: E402
from ajax_tune.config import Config  # noqa: E402
from ajax_tune.envs import make_env  # noqa: E402
from ajax_tune.loop import TrainLoop  # noqa: E402

agent_config = dict(s["agent_config"])
batch = agent_config["num_envs"] * agent_config["unroll_length"]
total = s["total_steps"] // batch * batch
config = Config.from_dict(
    {
        "env": {"name": s["env"]},
        "agent": {"name": s["agent"], **agent_config},
        "train": {
            "total_timesteps": total,
            "timesteps_per_iteration": total,
            "eval_every": 0,
            "eval_episodes": s.get("eval_episodes", 16),
            "num_seeds": s["num_seeds"],
        },
    }
)
env = make_env(s["env"])
agent = make_agent(s["agent"], config.agent, env.observation_space, env.action_space)
loop = TrainLoop(env, agent, config.train, learning_signal=config.learning_signal)  # as `build_loop` builds it


def run(seed):
    state, rows = loop.train(loop.init(seed=seed))
    rows = jax.device_get(rows).rows
    return state, float(np.sum(rows["train/useful_steps"])), float(np.nanmean(rows["eval/return"][:, -1]))


(state, useful, eval_return), first, times = protocol.timed_runs(run, s.get("runs", 2))
assert loop.compilations == 1, loop.compilations
protocol.maybe_profile(s, run, 99)
protocol.emit(
    {
        "side": "ajax_tune",
        **protocol.throughput(first, times, float(total * s["num_seeds"]), useful),
        "eval_return": eval_return,
        "device": str(jax.devices()[0]),
        "versions": protocol.versions("ajax-tune", "jax", "jaxlib", "flax", "optax", "flashbax"),
    }
)
