"""Env steps/s of our training loop on each env suite, against the suite's own random-policy rate.

Per suite, in one fresh process (a worker: this script with `--worker SUITE`), three things are
timed on the same env with 64 envs, alternated (A B A B ...), medians over `--repeats`:

- *suite*: the suite's own vectorised env as its users step it (its own auto-reset or reset
  wrapper), uniformly random actions, 64 envs x 256 steps in one jitted `lax.scan`, every
  observation summed into the carry so that XLA cannot drop it;
- *adapter*: the same random rollout through our adapter and wrappers (`VecEnv` of
  `EpisodeWrapper`, finished envs reset on the next step, as training steps them);
- *ours*: one `Runner.train()` call of PPO (64 envs, unrolls of 64, 2 epochs of 4 minibatches,
  a 64x64 MLP, 4 updates a call), env steps/s as the result reports them (`perf/env_steps_per_s`:
  stepping, learning and the call's evaluation together).

Compilation is left out of both (each side runs once before it is timed). Ours learns as it
steps, so it is slower than a random policy by what PPO's updates cost; the comparison says
what the adapter and the loop cost beyond the suite's own stepping. Craftax's own auto-reset
makes a world every step (docs/envs.md), so its row also times its step without resets.

    python benchmarks/suites.py                 # every suite installed; ~15 min on 2 idle cores
    python benchmarks/suites.py --quick         # one repeat, short runs
    python benchmarks/suites.py --suites xminigrid navix

Writes `results/suites.json` (`results/suites_quick.json` with --quick): per suite both rates,
the ratio, compile times, the versions of jax and of the suite, and the machine's load average
before and after (the figures are only comparable on a quiet machine).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent
NUM_ENVS = 64
STEPS = 256

# per suite: our env name and kwargs, and the pip distribution whose version is recorded
SUITES = {
    "xminigrid": ("xminigrid/XLand-MiniGrid-R1-9x9", {}, "xminigrid"),
    "craftax": ("craftax/Craftax-Classic-Symbolic-v1", {}, "craftax"),
    "navix": ("navix/Navix-DoorKey-8x8-v0", {}, "navix"),
    "kinetix": ("kinetix/s", {}, "kinetix-env"),
    "playground": ("playground/CartpoleBalance", {}, "playground"),
    "jumanji": ("jumanji/Snake-v1", {}, "jumanji"),
}


# -- the suites' own random-policy rollouts: (reset(keys) -> carry, step(carry, key) -> (carry, obs)) --


def own_xminigrid():
    import jax
    import xminigrid
    from xminigrid.wrappers import GymAutoResetWrapper

    from ajax_tune.envs import make_env

    env, _ = xminigrid.make("XLand-MiniGrid-R1-9x9")
    ours = make_env("xminigrid/XLand-MiniGrid-R1-9x9")
    params = ours.params_for(ours.default_task())  # the same ruleset ours trains on (a ball to stand next to)
    env = GymAutoResetWrapper(env)

    def reset(keys):
        return jax.vmap(env.reset, in_axes=(None, 0))(params, keys)

    def step(ts, key):
        actions = jax.random.randint(key, (NUM_ENVS,), 0, 6)
        ts = jax.vmap(env.step, in_axes=(None, 0, 0))(params, ts, actions)
        return ts, ts.observation

    return reset, step


def own_craftax(auto_reset=True):
    import jax
    from craftax.craftax_env import make_craftax_env_from_name

    env = make_craftax_env_from_name("Craftax-Classic-Symbolic-v1", auto_reset=auto_reset)
    params = env.default_params

    def reset(keys):
        return jax.vmap(lambda k: env.reset(k, params)[1])(keys)

    def step(state, key):
        k_act, k_step = jax.random.split(key)
        actions = jax.random.randint(k_act, (NUM_ENVS,), 0, 17)
        obs, state, _, _, _ = jax.vmap(lambda k, s, a: env.step(k, s, a, params))(
            jax.random.split(k_step, NUM_ENVS), state, actions
        )
        return state, obs

    return reset, step


def own_navix():
    import jax
    import navix

    env = navix.make("Navix-DoorKey-8x8-v0", observation_fn=navix.observations.symbolic)

    def reset(keys):
        return jax.vmap(env.reset)(keys)

    def step(ts, key):
        ts = jax.vmap(env.step)(ts, jax.random.randint(key, (NUM_ENVS,), 0, 7))
        return ts, ts.observation

    return reset, step


def own_kinetix():
    import jax
    from kinetix.environment import ActionType, EnvParams, ObservationType, make_kinetix_env, static_env_params_from_size
    from kinetix.environment.ued.ued import make_reset_fn_list_of_levels

    from ajax_tune.envs.kinetix_adapter import shipped_levels

    static, params = static_env_params_from_size("s"), EnvParams()
    levels = shipped_levels("s")
    env = make_kinetix_env(
        ActionType.CONTINUOUS, ObservationType.SYMBOLIC_FLAT, make_reset_fn_list_of_levels(levels, static), params, static
    )

    def reset(keys):
        return jax.vmap(lambda k: env.reset(k, params)[1])(keys)

    def step(state, key):
        k_act, k_step = jax.random.split(key)
        actions = jax.random.uniform(k_act, (NUM_ENVS, 6), minval=-1.0, maxval=1.0)
        obs, state, _, _, _ = jax.vmap(lambda k, s, a: env.step(k, s, a, params))(
            jax.random.split(k_step, NUM_ENVS), state, actions
        )
        return state, obs

    return reset, step


def own_playground():
    import jax
    from mujoco_playground import registry, wrapper

    env = registry.load("CartpoleBalance", config_overrides={"impl": "jax"})
    env = wrapper.wrap_for_brax_training(env, episode_length=1000, action_repeat=1)

    def reset(keys):
        return env.reset(keys)

    def step(state, key):
        state = env.step(state, jax.random.uniform(key, (NUM_ENVS, 1), minval=-1.0, maxval=1.0))
        return state, state.obs

    return reset, step


def own_jumanji():
    import jax
    import jumanji
    from jumanji.wrappers import VmapAutoResetWrapper

    env = VmapAutoResetWrapper(jumanji.make("Snake-v1"))

    def reset(keys):
        return env.reset(keys)

    def step(carry, key):
        state, _ = carry
        state, timestep = env.step(state, jax.random.randint(key, (NUM_ENVS,), 0, 4))
        return (state, timestep), timestep.observation.grid

    return reset, step


def ours_random(suite: str):
    """The same random rollout through our adapter and wrappers (`VecEnv` of `EpisodeWrapper`,
    finished envs reset on the next step as training does): what the adapter costs."""

    def make():
        import gymnasium
        import jax

        from ajax_tune.envs import EpisodeWrapper, VecEnv, make_env
        from ajax_tune.envs.base import task_to_jax

        name, kwargs, _ = SUITES[suite]
        env = make_env(name, **kwargs)
        venv = VecEnv(EpisodeWrapper(env), NUM_ENVS)
        task = task_to_jax(env.default_task())
        space = env.action_space

        def reset(keys):
            return venv.reset(keys[0], task)

        def step(state, key):
            k_reset, k_act, k_step = jax.random.split(key, 3)
            state = venv.reset_done(state, k_reset)
            if isinstance(space, gymnasium.spaces.Discrete):
                actions = jax.random.randint(k_act, (NUM_ENVS,), 0, space.n)
            else:
                actions = jax.random.uniform(k_act, (NUM_ENVS, *space.shape), minval=-1.0, maxval=1.0)
            state = venv.step(state, actions, k_step)
            return state, state.obs

        return reset, step

    return make


OWN = {
    "xminigrid": own_xminigrid,
    "craftax": own_craftax,
    "navix": own_navix,
    "kinetix": own_kinetix,
    "playground": own_playground,
    "jumanji": own_jumanji,
}


def random_rollout(make, steps: int):
    """A compiled rollout of the suite's own env and the seconds it took to compile."""
    import jax
    import jax.numpy as jnp

    reset, step = make()

    def run(key):
        carry = reset(jax.random.split(key, NUM_ENVS))

        def body(c, k):
            carry, total = c
            carry, obs = step(carry, k)
            return (carry, total + sum(jnp.sum(x.astype(jnp.float32)) for x in jax.tree.leaves(obs))), None

        (_, total), _ = jax.lax.scan(body, (carry, jnp.float32(0)), jax.random.split(key, steps))
        return total

    start = time.perf_counter()
    compiled = jax.jit(run).lower(jax.random.PRNGKey(0)).compile()
    return compiled, time.perf_counter() - start


def our_runner(suite: str, quick: bool):
    from ajax_tune.runner import Runner

    name, kwargs, _ = SUITES[suite]
    config = {
        "env": {"name": name, "kwargs": kwargs},
        "agent": {"num_envs": NUM_ENVS, "unroll_length": 64, "num_minibatches": 4, "update_epochs": 2, "hidden_sizes": [64, 64]},
        "train": {
            "total_timesteps": 10**9,
            "timesteps_per_iteration": NUM_ENVS * 64 * (1 if quick else 4),
            "num_seeds": 1,
            "eval_episodes": 1,
            "eval_every": 10**9,
        },
    }
    return Runner(config)


def worker(suite: str, repeats: int, quick: bool) -> dict:
    import jax

    steps = 32 if quick else STEPS
    own, own_compile = random_rollout(OWN[suite], steps)
    extra = None
    if suite == "craftax":  # its step alone, without craftax's reset (what our pool of start worlds pays)
        extra, _ = random_rollout(lambda: own_craftax(auto_reset=False), steps)
    adapter, adapter_compile = random_rollout(ours_random(suite), steps)
    runner = our_runner(suite, quick)
    start = time.perf_counter()
    runner.train()  # compiles
    ours_compile = time.perf_counter() - start
    jax.block_until_ready(own(jax.random.PRNGKey(1)))
    jax.block_until_ready(adapter(jax.random.PRNGKey(1)))
    suite_rates, adapter_rates, our_rates, step_only = [], [], [], []
    for i in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(own(jax.random.PRNGKey(2 + i)))
        suite_rates.append(NUM_ENVS * steps / (time.perf_counter() - t))
        t = time.perf_counter()
        jax.block_until_ready(adapter(jax.random.PRNGKey(2 + i)))
        adapter_rates.append(NUM_ENVS * steps / (time.perf_counter() - t))
        our_rates.append(runner.train()["perf/env_steps_per_s"])
        if extra is not None:
            t = time.perf_counter()
            jax.block_until_ready(extra(jax.random.PRNGKey(2 + i)))
            step_only.append(NUM_ENVS * steps / (time.perf_counter() - t))
    out = {
        "env": SUITES[suite][0],
        "suite_random_steps_per_s": statistics.median(suite_rates),
        "adapter_random_steps_per_s": statistics.median(adapter_rates),
        "ours_training_steps_per_s": statistics.median(our_rates),
        "suite_runs": suite_rates,
        "adapter_runs": adapter_rates,
        "our_runs": our_rates,
        "suite_compile_s": own_compile,
        "adapter_compile_s": adapter_compile,
        "ours_first_call_s": ours_compile,
    }
    out["ours_over_suite"] = out["ours_training_steps_per_s"] / out["suite_random_steps_per_s"]
    if step_only:
        out["suite_step_without_reset_steps_per_s"] = statistics.median(step_only)
    return out


def version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", nargs="*", default=list(SUITES), choices=list(SUITES))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="one repeat of short runs: a smoke of the same path")
    parser.add_argument("--out", type=pathlib.Path)
    parser.add_argument("--worker", choices=list(SUITES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    repeats = 1 if args.quick else args.repeats
    if args.worker:
        print("RESULT " + json.dumps(worker(args.worker, repeats, args.quick)), flush=True)
        return

    env = {**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu"), "PYTHONPATH": str(ROOT)}
    results = {}
    for suite in args.suites:
        if version(SUITES[suite][2]) is None:
            print(f"{suite}: not installed, skipped ({SUITES[suite][2]})")
            continue
        load_before = os.getloadavg()
        cmd = [sys.executable, __file__, "--worker", suite, "--repeats", str(repeats), *(["--quick"] if args.quick else [])]
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
        lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
        if proc.returncode or not lines:
            print(f"{suite}: failed\n{proc.stderr[-3000:]}")
            continue
        result = json.loads(lines[-1][len("RESULT ") :])
        result.update(suite_version=version(SUITES[suite][2]), load_before=load_before, load_after=os.getloadavg())
        results[suite] = result
        print(
            f"{suite:<10} {result['env']:<36} random policy: suite's own {result['suite_random_steps_per_s']:>10,.0f}"
            f", through our adapter {result['adapter_random_steps_per_s']:>10,.0f} steps/s;"
            f" our PPO training {result['ours_training_steps_per_s']:>8,.0f} steps/s (x{result['ours_over_suite']:.2f})"
            f"   [{SUITES[suite][2]} {result['suite_version']}, load {load_before[0]:.1f}]",
            flush=True,
        )
    import harness  # a sibling: this script runs from benchmarks/

    path = harness.write_results(
        "suites" + ("_quick" if args.quick else ""), {"num_envs": NUM_ENVS, "repeats": repeats, "results": results}, args.out
    )
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
