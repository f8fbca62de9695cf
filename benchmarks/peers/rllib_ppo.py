"""RLlib's PPO on gymnasium's CartPole-v1 until its evaluation return reaches a threshold
(runs in the rllib peer venv, torch on the CPU).

Wall time counts from the start of this process, so Ray's start-up and RLlib's set-up are in
it, as they are in a user's first result. RLlib's own PPO defaults otherwise, as a new user
gets them.
"""

from __future__ import annotations

import time

START = time.perf_counter()

import protocol  # noqa: E402

s = protocol.settings()

import ray  # noqa: E402
from ray.rllib.algorithms.ppo import PPOConfig  # noqa: E402


def find(result: dict, *paths):
    """The first of several nested keys present in an RLlib result (its layout moves between
    releases)."""
    for path in paths:
        node = result
        for key in path:
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None:
            return node
    return None


ray.init(num_cpus=s.get("num_cpus"), include_dashboard=False, log_to_driver=False)
config = (
    PPOConfig()
    .environment("CartPole-v1")
    .env_runners(num_env_runners=s.get("num_env_runners", 1))
    .evaluation(evaluation_interval=1, evaluation_duration=s.get("eval_episodes", 10), evaluation_duration_unit="episodes")
)
algo = config.build_algo()
threshold, budget_s = s.get("threshold", 475.0), s.get("max_seconds", 900)
history, solved = [], None
while time.perf_counter() - START < budget_s:
    result = algo.train()
    ret = find(result, ("evaluation", "env_runners", "episode_return_mean"), ("evaluation", "episode_reward_mean"))
    steps = find(
        result, ("env_runners", "num_env_steps_sampled_lifetime"), ("num_env_steps_sampled_lifetime",), ("num_env_steps_sampled",)
    )
    history.append({"wall_s": round(time.perf_counter() - START, 2), "env_steps": steps, "eval_return": ret})
    if ret is not None and ret >= threshold:
        solved = history[-1]
        break
algo.stop()
ray.shutdown()
protocol.emit(
    {
        "side": "rllib",
        "threshold": threshold,
        "solved": solved,
        "history": history,
        "versions": protocol.versions("ray", "torch", "gymnasium"),
    }
)
