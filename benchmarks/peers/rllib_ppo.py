"""RLlib's PPO on gymnasium's CartPole-v1 until its evaluation return reaches a threshold
(runs in the rllib peer venv, torch on the CPU).

Wall time counts from the start of this process, so Ray's start-up and RLlib's set-up are in
it, as they are in a user's first result. The settings are those an RLlib user writes for
CartPole (its tuned examples' shape), not RLlib's bare defaults, which learn CartPole slowly:
one env runner with 4 envs, a train batch of 4,000 env steps, 10 epochs of minibatches of 128,
lr 3e-4 (each overridable in the settings). Both crossings are recorded: the first iteration
whose mean *training* episode return reaches the threshold, and the first whose *evaluation*
return (10 episodes after every iteration, the criterion `ajax-tune run` is held to) does.
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
    .env_runners(num_env_runners=s.get("num_env_runners", 1), num_envs_per_env_runner=s.get("num_envs_per_env_runner", 4))
    .training(
        train_batch_size_per_learner=s.get("train_batch_size", 4000),
        minibatch_size=s.get("minibatch_size", 128),
        num_epochs=s.get("num_epochs", 10),
        lr=s.get("lr", 3e-4),
    )
    .evaluation(evaluation_interval=1, evaluation_duration=s.get("eval_episodes", 10), evaluation_duration_unit="episodes")
)
algo = config.build_algo()
threshold, budget_s = s.get("threshold", 475.0), s.get("max_seconds", 900)
history, solved, solved_train = [], None, None
while time.perf_counter() - START < budget_s:
    result = algo.train()
    ret = find(result, ("evaluation", "env_runners", "episode_return_mean"), ("evaluation", "episode_reward_mean"))
    train_ret = find(result, ("env_runners", "episode_return_mean"), ("episode_reward_mean",))
    steps = find(
        result, ("env_runners", "num_env_steps_sampled_lifetime"), ("num_env_steps_sampled_lifetime",), ("num_env_steps_sampled",)
    )
    history.append(
        {"wall_s": round(time.perf_counter() - START, 2), "env_steps": steps, "eval_return": ret, "train_return": train_ret}
    )
    if solved_train is None and train_ret is not None and train_ret >= threshold:
        solved_train = history[-1]
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
        "solved_train": solved_train,
        "settings": config.to_dict() if s.get("dump_config") else None,
        "history": history,
        "versions": protocol.versions("ray", "torch", "gymnasium"),
    }
)
