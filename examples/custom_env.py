"""A user-defined env with its own task, registered by name and trained with the `Runner`.

`TargetTracking` below: a point on a line must stay on a target that drifts at `target_speed`
and bounces off the ends; the point moves at most 0.1 per step, so the faster the target,
the harder the task. The reward is minus the distance to the target on every step, so a return
near 0 means "on target the whole episode"; an evaluation counts as a success when the point is
within `tolerance` of the target when the episode ends.

What an env needs (see ajax_tune/envs/base.py):
  - `reset(key, task)` and `step(state, action, key)`, pure JAX functions of their arguments
    (they are traced into the compiled training loop);
  - `observation_space`, `action_space`, `max_episode_steps`, `name`;
  - `task_spec`: the task's fields with default, dtype and allowed range. The task lives in the
    env state as data, so `set_task` changes values, never shapes: no recompilation.
  - `info_keys = ("success",)` if it reports a success (enables success rates).

Registration: `register("target_tracking", TargetTracking)` makes the name usable in a config,
in this process. This script trains with the `Runner` directly (no Ray needed), so registering
at the top of the script is enough. Under Tune, trials build their env in Ray worker processes,
which do not run this script: there, put the env class and the `register` call in a module the
workers import (e.g. `my_envs.py` next to the script, imported at the top of your trainable, or
registered inside a function trainable before it builds its `Runner`), or the worker answers
"unknown env 'target_tracking'".

Run:
    python examples/custom_env.py            # under a minute on 2 CPUs
    python examples/custom_env.py --smoke    # seconds
"""

import argparse
import json
import os
import pathlib

import gymnasium
import numpy as np

from ajax_tune import configure_jax

configure_jax(cpus=2)  # before anything starts JAX: CPU platform, shared compilation cache

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

from ajax_tune import Runner  # noqa: E402
from ajax_tune.envs import Env, EnvState, TaskField, register  # noqa: E402

AGENT_SPEED = 0.1  # the most the point moves in one step


class TargetTracking(Env):
    info_keys = ("success",)

    def __init__(self, max_episode_steps: int = 50):
        self.name = "target_tracking"
        self.max_episode_steps = int(max_episode_steps)
        # position, target, target - position, target direction
        self.observation_space = gymnasium.spaces.Box(-2.0, 2.0, (4,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(3)  # 0: left, 1: stay, 2: right
        self.task_spec = {
            "target_speed": TaskField(default=0.02, low=0.0, high=0.2, dtype=np.float32,
                                      doc="how far the target moves per step"),
            "tolerance": TaskField(default=0.1, low=0.01, high=1.0, dtype=np.float32,
                                   doc="how close counts as on target (for success)"),
        }

    def _obs(self, physics):
        pos, target, direction = physics
        return jnp.stack([pos, target, target - pos, direction]).astype(jnp.float32)

    def _info(self, physics, task):
        pos, target, _ = physics
        return {"success": (jnp.abs(target - pos) <= task["tolerance"]).astype(jnp.float32)}

    def reset(self, key, task) -> EnvState:
        k_pos, k_target, k_dir = jax.random.split(key, 3)
        pos = jax.random.uniform(k_pos, (), jnp.float32, -1.0, 1.0)
        target = jax.random.uniform(k_target, (), jnp.float32, -1.0, 1.0)
        direction = jnp.where(jax.random.bernoulli(k_dir), 1.0, -1.0).astype(jnp.float32)
        physics = (pos, target, direction)
        return EnvState.create(obs=self._obs(physics), task=task, physics=physics, info=self._info(physics, task))

    def step(self, state, action, key) -> EnvState:
        pos, target, direction = state.physics
        pos = jnp.clip(pos + AGENT_SPEED * (action.astype(jnp.float32) - 1.0), -1.0, 1.0)
        target = target + direction * state.task["target_speed"]
        direction = jnp.where(jnp.abs(target) > 1.0, -direction, direction)  # bounce off the ends
        target = jnp.clip(target, -1.0, 1.0)
        physics = (pos, target, direction)
        return state.replace(
            obs=self._obs(physics),
            reward=-jnp.abs(target - pos),
            terminated=jnp.zeros((), jnp.bool_),  # episodes end at the time limit
            physics=physics,
            info=self._info(physics, state.task),
        )


register("target_tracking", TargetTracking)  # now "target_tracking" works in any config here

parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
parser.add_argument("--smoke", action="store_true", help="a tiny run that finishes in seconds")
parser.add_argument("--storage-path", default="./results")
args = parser.parse_args()

iterations = 4 if args.smoke else 12
runner = Runner({
    "env": {"name": "target_tracking", "kwargs": {"max_episode_steps": 50}, "task": {"target_speed": 0.02}},
    "agent": {"num_envs": 16, "unroll_length": 32, "num_minibatches": 4, "update_epochs": 4,
              "hidden_sizes": [32, 32], "lr": 3e-3},
    "train": {"total_timesteps": 1_000_000, "timesteps_per_iteration": 16 * 32 * 4, "num_seeds": 2,
              "eval_episodes": 16},
})

print(" iter  env_steps  target_speed  eval return  eval success")
history = []
for _ in range(iterations):
    result = runner.train()
    history.append(result)
    print(f" {runner.iteration:4d}  {result['env_steps']:9d}  {result['curriculum/task/target_speed']:12.3f}  "
          f"{result['eval/return_mean']:11.2f}  {result['eval/success_rate_mean']:12.2f}")

# The task is data: evaluate the same policy on a faster target, then train on it for a while.
speeds = [0.02, 0.05] if args.smoke else [0.02, 0.05, 0.1]
before = {s: float(runner.evaluate(episodes=16, task={"target_speed": s})["return"].mean()) for s in speeds}
runner.set_task({"target_speed": speeds[-1]})
for _ in range(2 if args.smoke else 8):
    result = runner.train()
    history.append(result)
    print(f" {runner.iteration:4d}  {result['env_steps']:9d}  {result['curriculum/task/target_speed']:12.3f}  "
          f"{result['eval/return_mean']:11.2f}  {result['eval/success_rate_mean']:12.2f}")
after = {s: float(runner.evaluate(episodes=16, task={"target_speed": s})["return"].mean()) for s in speeds}
print("\nmean evaluation return by target speed (before -> after training on the fastest):")
for s in speeds:
    print(f"  {s:.2f}: {before[s]:7.2f} -> {after[s]:7.2f}")

checkpoint = runner.save(pathlib.Path(os.path.abspath(args.storage_path), "custom_env", "checkpoint"))
print(f"checkpoint: {checkpoint} (restoring it needs 'target_tracking' registered in that process too)")
summary = {
    "first_return": history[0]["eval/return_mean"],
    "trained_return": history[iterations - 1]["eval/return_mean"],
    "final_task": runner.get_task(),
    "return_by_speed_before": before,
    "return_by_speed_after": after,
    "compilations": runner.loop.compilations,
}
print("RESULT " + json.dumps(summary))
