"""Seconds to trace and lower (jaxpr to StableHLO, no XLA compile) each built-in agent's `init`
and `train` programs, one agent per fresh process as in a trial (project interpreter, or an
earlier tree's `ajax_tune` through PYTHONPATH): the agent's default config with 2 seeds."""

from __future__ import annotations

import time

import protocol

s = protocol.settings()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import ajax_tune  # noqa: E402
from ajax_tune.agents import make_agent  # noqa: E402
from ajax_tune.config import Config  # noqa: E402
from ajax_tune.envs import make_env  # noqa: E402
from ajax_tune.loop import TrainLoop  # noqa: E402

ENVS = {"ppo": "cartpole", "sac": "pendulum", "dqn": "cartpole"}
out = {"side": s["side"], "tree": "before" if "before" in s and s["before"] in ajax_tune.__file__ else "this"}
agent = s["agent"]
config = Config.from_dict({"env": {"name": ENVS[agent]}, "agent": {"name": agent}, "train": {"num_seeds": 2}})
env = make_env(ENVS[agent])
loop = TrainLoop(env, make_agent(agent, config.agent, env.observation_space, env.action_space), config.train)
keys = jax.random.split(jax.random.PRNGKey(0), 2)
task = {k: jnp.asarray(v) for k, v in env.validate_task({}).items()}
t0 = time.perf_counter()
loop._init.trace(keys, task).lower()
t1 = time.perf_counter()
state = jax.eval_shape(loop._init, keys, task)  # the state's shapes, without running init
t2 = time.perf_counter()
loop._train.trace(state).lower()
t3 = time.perf_counter()
out.update(agent=agent, init_s=round(t1 - t0, 4), train_s=round(t3 - t2, 4), total_s=round((t1 - t0) + (t3 - t2), 4))
out["versions"] = protocol.versions("jax", "jaxlib")
protocol.emit(out)
