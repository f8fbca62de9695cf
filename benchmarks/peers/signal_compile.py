"""SAC's training program traced, lowered and compiled in a fresh process (project interpreter),
with the learning signal PLR reads (`SAC._td_error`: the fresh unroll's TD errors, one more actor
and two more critic passes per update) or without it (as a run whose sampler does not read it,
or that has none, builds it). The settings are `offpolicy_throughput.py`'s SAC with one seed."""

from __future__ import annotations

import resource
import time

import protocol

s = protocol.settings()

import jax  # noqa: E402

from ajax_tune.agents import make_agent  # noqa: E402
from ajax_tune.config import Config  # noqa: E402
from ajax_tune.envs import make_env  # noqa: E402
from ajax_tune.loop import TrainLoop  # noqa: E402

total = s["total_steps"]
config = Config.from_dict(
    {
        "env": {"name": "pendulum"},
        "agent": {"name": "sac", **s["agent_config"]},
        "train": {"total_timesteps": total, "timesteps_per_iteration": total, "eval_every": 0, "eval_episodes": 128},
    }
)
env = make_env("pendulum")
agent = make_agent("sac", config.agent, env.observation_space, env.action_space)
loop = TrainLoop(env, agent, config.train, learning_signal=s["side"] == "with_signal")
state = jax.device_put(jax.block_until_ready(loop.init(seed=0)), loop.device)


def cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


t0 = time.perf_counter()
lowered = loop._train.lower(state)
t1, c1 = time.perf_counter(), cpu()
compiled = lowered.compile()
t2, c2 = time.perf_counter(), cpu()
hlo = compiled.as_text()
protocol.emit(
    {
        "side": s["side"],
        "lower_s": round(t1 - t0, 4),
        "compile_s": round(t2 - t1, 4),
        "compile_cpu_s": round(c2 - c1, 4),
        **{k: v for k, v in protocol.program_counts(hlo).items() if k != "while_loops"},
        "versions": protocol.versions("jax", "jaxlib"),
    }
)
