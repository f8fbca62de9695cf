"""Rejax's PPO on gymnax's CartPole-v1, timed like ours (runs in the rejax peer venv).

Same work as `ajax_tune_ppo.py`: the settings name the envs, unroll, epochs, minibatches,
network, learning rate and budget; seeds are vmapped over the whole training run, as Rejax's
README does it. Rejax decays a schedule per optimiser step, so a linear decay over the run's
optimiser steps is the same curve as ours over env steps. One evaluation, at the end.
"""

from __future__ import annotations

import protocol

s = protocol.settings()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402
import rejax  # noqa: E402

total = s["total_steps"]
batch = s["num_envs"] * s["unroll_length"]
optimiser_steps = total // batch * s["epochs"] * s["minibatches"]
lr = optax.linear_schedule(s["lr"], 0.0, optimiser_steps) if s.get("lr_schedule", "linear") == "linear" else s["lr"]
algo = rejax.PPO.create(
    env="CartPole-v1",
    num_envs=s["num_envs"],
    num_steps=s["unroll_length"],
    num_epochs=s["epochs"],
    num_minibatches=s["minibatches"],
    learning_rate=lr,
    max_grad_norm=s.get("max_grad_norm", 0.5),
    total_timesteps=total,
    eval_freq=total,
    skip_initial_evaluation=True,
    gamma=0.99,
    gae_lambda=0.95,
    clip_eps=0.2,
    ent_coef=0.01,
    vf_coef=0.5,
    normalize_observations=False,
    agent_kwargs={"activation": s["activation"], "hidden_layer_sizes": list(s["hidden_sizes"])},
)
train = jax.jit(jax.vmap(algo.train))


def run(seed):
    ts, (lengths, returns) = train(jax.random.split(jax.random.PRNGKey(seed), s["num_seeds"]))
    jax.block_until_ready((ts, returns))
    return float(jnp.mean(returns))


eval_return, first, times = protocol.timed_runs(run, s.get("runs", 2))
steps = float(total // batch * batch * s["num_seeds"])
protocol.emit(
    {
        "side": "rejax",
        **protocol.throughput(first, times, steps, steps),
        "eval_return": eval_return,
        "device": str(jax.devices()[0]),
        "versions": protocol.versions("rejax", "gymnax", "jax", "jaxlib", "flax", "optax", "distrax"),
    }
)
