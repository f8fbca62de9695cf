"""ajax_tune's off-policy loop from an off-policy benchmark's settings (`offpolicy_throughput.py`:
the agent's own config keys, one call of the whole budget, one evaluation at its end), for the
workers that build it (project interpreter)."""

from __future__ import annotations

from ajax_tune.agents import make_agent
from ajax_tune.config import Config
from ajax_tune.envs import make_env
from ajax_tune.loop import TrainLoop


def offpolicy_loop(s: dict) -> tuple[TrainLoop, int]:
    """The loop as `build_loop` builds it, and its budget per seed (whole unrolls)."""
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
    return TrainLoop(env, agent, config.train, learning_signal=config.learning_signal), total
