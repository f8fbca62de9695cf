"""A trial's lanes split over several devices (`train.devices`, `loop/compiled.py`): one program,
one compilation, the same results as on one device. Run on the CPU with XLA's forced host device
count, in a fresh process (the count is fixed when JAX starts)."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent

PROBE = textwrap.dedent("""
    import json, sys
    import jax, numpy as np
    from ajax_tune import Runner
    from tests.support.helpers import corridor_config

    members = [{"agent": {"lr": lr}} for lr in np.geomspace(1e-3, 1e-2, 8).tolist()]
    agent = {"num_envs": 4, "unroll_length": 16, "hidden_sizes": [16], "num_minibatches": 2, "update_epochs": 1}
    base = corridor_config(agent=agent,
                           train={"timesteps_per_iteration": 256, "num_seeds": 2, "eval_episodes": 2},
                           population={"members": members})
    out = {"devices": len(jax.devices())}
    states = {}
    for name, devices in (("split", 0), ("one", 1)):
        config = {**base, "train": {**base["train"], "devices": devices}}
        runner = Runner(config)
        results = [runner.train() for _ in range(2)]
        leaf = jax.tree.leaves(runner.state.agent.params)[0]
        out[name] = {"compilations": [r["perf/compilations"] for r in results],
                     "leaf_devices": len(leaf.sharding.device_set),
                     "returns": [r["eval/return_mean"] for r in results]}
        states[name] = jax.tree.map(np.asarray, jax.device_get(runner.state.agent.params))
    diffs = [float(np.max(np.abs(a - b))) for a, b in zip(jax.tree.leaves(states["split"]), jax.tree.leaves(states["one"]))]
    out["max_param_difference"] = max(diffs)
    print(json.dumps(out))
""")


@pytest.mark.slow  # a fresh process with its own device count
@pytest.mark.parametrize("count", [2, 4])
def test_a_population_split_over_devices_compiles_once_and_trains_as_on_one(count):
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={count}".strip()
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": flags, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=500, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["devices"] == count
    assert seen["split"]["compilations"] == [1, 1] and seen["one"]["compilations"] == [1, 1]
    assert seen["split"]["leaf_devices"] == count and seen["one"]["leaf_devices"] == 1
    # 8 members x 2 seeds, each lane on one device either way: the same arithmetic, to float32
    # rounding where XLA orders a reduction differently in the partitioned program
    assert seen["max_param_difference"] <= 1e-5, seen
    assert seen["split"]["returns"] == pytest.approx(seen["one"]["returns"], abs=1e-4)
