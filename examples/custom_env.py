"""A user-defined env with its own task, trained under Tune by import path, no registration.

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

Naming the env. Tune trials build their env in Ray worker processes, which do not run this
script; the config names the env by import path, `"custom_env:TargetTracking"` (any callable
returning an `Env`, with `env.kwargs` as its arguments), and each worker imports it by itself.
The workers only need to find the module: here `ray.init(runtime_env=...)` puts this directory
on their PYTHONPATH (an installed package needs nothing). Everything that runs the experiment
sits under `if __name__ == "__main__"`, since the workers import this file as a module.

In one process (a notebook, or this script after Tune), a short name works too:
`register("target_tracking", TargetTracking)` makes `{"env": {"name": "target_tracking"}}` build
it. After the search, this script registers the name, rebuilds the trial with a `Runner` and
restores the trial's checkpoint into it (the env is the same, whatever it is called), evaluates
the policy on faster targets and trains on the fastest for a while: the task is data.

Run:
    python examples/custom_env.py            # about a minute on 2 CPUs
    python examples/custom_env.py --smoke    # seconds
"""

import argparse
import json
import os
import pathlib

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune.envs import Env, EnvState, TaskField

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
            "target_speed": TaskField(default=0.02, low=0.0, high=0.2, dtype=np.float32, doc="how far the target moves per step"),
            "tolerance": TaskField(
                default=0.1, low=0.01, high=1.0, dtype=np.float32, doc="how close counts as on target (for success)"
            ),
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


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="a tiny run that finishes in seconds")
    parser.add_argument("--storage-path", default="./results")
    parser.add_argument("--address", help="join a running Ray cluster (e.g. 'auto') instead of starting one")
    args = parser.parse_args()

    from ajax_tune import configure_jax

    configure_jax(cpus=2)  # before this process starts JAX: CPU platform, shared compilation cache

    import ray
    from ray import tune

    from ajax_tune import AjaxTrainable, Runner, trial_names
    from ajax_tune.envs import register

    # The workers import "custom_env" from this directory.
    here = pathlib.Path(__file__).resolve().parent
    local_ray = {} if args.address else {"num_cpus": 2, "include_dashboard": False}  # a Ray of our own
    pythonpath = os.pathsep.join(p for p in (str(here), os.environ.get("PYTHONPATH", "")) if p)
    ray.init(address=args.address, runtime_env={"env_vars": {"PYTHONPATH": pythonpath}}, **local_ray)

    iterations = 4 if args.smoke else 12
    config = {
        "env": {"name": "custom_env:TargetTracking", "kwargs": {"max_episode_steps": 50}, "task": {"target_speed": 0.02}},
        "agent": {
            "num_envs": 16,
            "unroll_length": 32,
            "num_minibatches": 4,
            "update_epochs": 4,
            "hidden_sizes": [32, 32],
            "lr": 3e-3,
        },
        "train": {"total_timesteps": 1_000_000, "timesteps_per_iteration": 16 * 32 * 4, "num_seeds": 2, "eval_episodes": 16},
    }
    storage = pathlib.Path(os.path.abspath(args.storage_path))
    results = tune.Tuner(
        AjaxTrainable,
        param_space=config,
        tune_config=tune.TuneConfig(**trial_names()),
        run_config=tune.RunConfig(
            name="custom_env",
            storage_path=str(storage),
            stop={"training_iteration": iterations},
            verbose=0 if args.smoke else 1,
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=0, checkpoint_at_end=True),
        ),
    ).fit()
    assert results.num_errors == 0, [r.error for r in results if r.error]
    trial = results[0]
    history = trial.metrics_dataframe.sort_values("training_iteration").to_dict("records")
    print(" iter  env_steps  target_speed  eval return  eval success")
    for row in history:
        print(
            f" {row['training_iteration']:4d}  {row['env_steps']:9d}  {row['curriculum/task/target_speed']:12.3f}  "
            f"{row['eval/return_mean']:11.2f}  {row['eval/success_rate_mean']:12.2f}"
        )

    # In this process, like in a notebook: a registered short name, and the trial's checkpoint.
    register("target_tracking", TargetTracking)
    runner = Runner({**config, "env": {**config["env"], "name": "target_tracking"}})
    runner.restore(trial.checkpoint.path)

    # The task is data: evaluate the same policy on a faster target, then train on it for a while.
    speeds = [0.02, 0.05] if args.smoke else [0.02, 0.05, 0.1]
    before = {s: float(runner.evaluate(episodes=16, task={"target_speed": s})["return"].mean()) for s in speeds}
    runner.set_task({"target_speed": speeds[-1]})
    for _ in range(2 if args.smoke else 8):
        result = runner.train()
        print(
            f" {runner.iteration:4d}  {result['env_steps']:9d}  {result['curriculum/task/target_speed']:12.3f}  "
            f"{result['eval/return_mean']:11.2f}  {result['eval/success_rate_mean']:12.2f}"
        )
    after = {s: float(runner.evaluate(episodes=16, task={"target_speed": s})["return"].mean()) for s in speeds}
    print("\nmean evaluation return by target speed (before -> after training on the fastest):")
    for s in speeds:
        print(f"  {s:.2f}: {before[s]:7.2f} -> {after[s]:7.2f}")

    checkpoint = runner.save(storage / "custom_env" / "checkpoint")
    print(f"checkpoint: {checkpoint}")
    summary = {
        "first_return": history[0]["eval/return_mean"],
        "trained_return": history[-1]["eval/return_mean"],
        "trial_env": trial.config["env"]["name"],
        "trial_compilations": int(max(row["perf/compilations"] for row in history)),
        "resumed_at": int(history[-1]["env_steps"]),
        "final_env_steps": result["env_steps"],
        "final_task": runner.get_task(),
        "return_by_speed_before": before,
        "return_by_speed_after": after,
        "compilations": runner.loop.compilations,
    }
    print("RESULT " + json.dumps(summary))


if __name__ == "__main__":
    main()
