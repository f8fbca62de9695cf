"""Rejax's SAC, TD3 or DQN on gymnax's Pendulum-v1 / CartPole-v1, timed like ours (rejax venv).

Rejax steps its `num_envs` envs once per iteration and then takes `num_epochs` gradient steps,
so its update-to-data ratio is `num_epochs / num_envs`; the harness picks `num_epochs` to match
ours. One evaluation, at the end; seeds vmapped over the whole run.
"""

from __future__ import annotations

import protocol

s = protocol.settings()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import rejax  # noqa: E402

total = s["total_steps"]
algo_cls = {"sac": rejax.SAC, "td3": rejax.TD3, "dqn": rejax.DQN}[s["algo"]]
algo = algo_cls.create(**s["rejax_config"], total_timesteps=total, eval_freq=total, skip_initial_evaluation=True)
train = jax.jit(jax.vmap(algo.train))


def run(seed):
    ts, (lengths, returns) = train(jax.random.split(jax.random.PRNGKey(seed), s["num_seeds"]))
    jax.block_until_ready((ts, returns))
    return float(jnp.mean(returns))


eval_return, first, times = protocol.timed_runs(run, s.get("runs", 2))
steps = float(-(-total // s["rejax_config"]["num_envs"]) * s["rejax_config"]["num_envs"] * s["num_seeds"])
protocol.emit(
    {
        "side": "rejax",
        **protocol.throughput(first, times, steps, steps),
        "eval_return": eval_return,
        "device": str(jax.devices()[0]),
        "versions": protocol.versions("rejax", "gymnax", "jax", "jaxlib", "flax", "optax", "distrax"),
    }
)
