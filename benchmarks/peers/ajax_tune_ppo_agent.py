"""ajax_tune's PPO from a throughput benchmark's settings (`ppo_throughput.work`), for the
workers that run it (project interpreter)."""

from __future__ import annotations

from ajax_tune.agents import PPO, PPOConfig
from ajax_tune.schedules import Schedule


def ppo_from(s: dict, env) -> PPO:
    return PPO(
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
