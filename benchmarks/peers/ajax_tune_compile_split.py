"""ajax_tune's off-policy agent, its first call split by program (project interpreter): the `init`
program lowered, compiled and run, then the training program lowered and compiled for the state
it returns, each timed apart (ahead-of-time `lower` and `compile`, as jit does them on a first
call). The settings are `offpolicy_throughput.py`'s."""

from __future__ import annotations

import time

import protocol

s = protocol.settings()

import jax  # noqa: E402

from ajax_tune.agents import make_agent  # noqa: E402
from ajax_tune.config import Config  # noqa: E402
from ajax_tune.envs import make_env  # noqa: E402
from ajax_tune.envs.base import task_to_jax  # noqa: E402
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
            "eval_episodes": s["eval_episodes"],
            "num_seeds": s["num_seeds"],
        },
    }
)
env = make_env(s["env"])
agent = make_agent(s["agent"], config.agent, env.observation_space, env.action_space)
loop = TrainLoop(env, agent, config.train, learning_signal=config.learning_signal)
keys = jax.random.split(jax.random.PRNGKey(0), loop.num_lanes)
task = task_to_jax(loop.env.validate_task({}))

times = {}
t = time.perf_counter()
lowered = loop._init.lower(keys, task)
times["init_lower_s"] = time.perf_counter() - t
t = time.perf_counter()
init = lowered.compile()
times["init_compile_s"] = time.perf_counter() - t
t = time.perf_counter()
state = jax.device_put(jax.block_until_ready(init(keys, task)), loop.device)
times["init_run_s"] = time.perf_counter() - t
t = time.perf_counter()
lowered = loop._train.lower(state)
times["train_lower_s"] = time.perf_counter() - t
t = time.perf_counter()
compiled = lowered.compile()
times["train_compile_s"] = time.perf_counter() - t
protocol.emit(
    {
        "side": "ajax_tune",
        **{k: round(v, 4) for k, v in times.items()},
        "train_program_s": round(times["train_lower_s"] + times["train_compile_s"], 4),
        "total_s": round(sum(times.values()), 4),
        **protocol.program_counts(compiled.as_text()),
        "versions": protocol.versions("ajax-tune", "jax", "jaxlib", "flax", "optax", "flashbax"),
    }
)
