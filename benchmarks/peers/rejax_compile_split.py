"""Rejax's SAC, TD3 or DQN, its one program (initialisation and training, vmapped over seeds)
lowered and compiled, each timed apart (rejax venv). The settings are `offpolicy_throughput.py`'s."""

from __future__ import annotations

import time

import protocol

s = protocol.settings()

import jax  # noqa: E402
import rejax  # noqa: E402

total = s["total_steps"]
algo_cls = {"sac": rejax.SAC, "td3": rejax.TD3, "dqn": rejax.DQN}[s["algo"]]
algo = algo_cls.create(**s["rejax_config"], total_timesteps=total, eval_freq=total, skip_initial_evaluation=True)
train = jax.jit(jax.vmap(algo.train))
keys = jax.random.split(jax.random.PRNGKey(0), s["num_seeds"])

t = time.perf_counter()
lowered = train.lower(keys)
lower_s = time.perf_counter() - t
t = time.perf_counter()
compiled = lowered.compile()
compile_s = time.perf_counter() - t
protocol.emit(
    {
        "side": "rejax",
        "train_lower_s": round(lower_s, 4),
        "train_compile_s": round(compile_s, 4),
        "train_program_s": round(lower_s + compile_s, 4),
        "total_s": round(lower_s + compile_s, 4),
        **protocol.program_counts(compiled.as_text()),
        "versions": protocol.versions("rejax", "gymnax", "jax", "jaxlib", "flax", "optax", "distrax"),
    }
)
