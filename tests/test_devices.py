"""A trial's lanes split over several devices (`train.devices`, `loop/compiled.py`): one program,
one compilation, each device holding its own share of the lanes (not a copy of all of them), the
same results as on one device; and a `train.devices` that cannot be honoured refused in one line
before anything compiles (before Ray starts, for an experiment). The split runs on the CPU with
XLA's forced host device count, in a fresh process (the count is fixed when JAX starts)."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import jax
import pytest

from ajax_tune.errors import ConfigError
from ajax_tune.loop.compiled import trial_devices
from ajax_tune.runner import Runner
from ajax_tune.tune.experiment import Experiment
from tests.support.helpers import assert_refused_before_compiling, corridor_config, programs_built

ROOT = pathlib.Path(__file__).resolve().parent.parent

#: How far a split run's state may be from the one-device run's: float32 rounding where XLA orders
#: a reduction differently in the partitioned program. docs/scaling.md quotes it.
TOLERANCE = 1e-6

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

    def shares(leaf):
        # each addressable shard: its device, its lanes (first, count), whether it spans the leaf's
        # other axes, and whether it holds the leaf's values of those lanes
        rows = []
        for shard in leaf.addressable_shards:
            first = shard.index[0].start or 0
            rows.append({"device": shard.device.id, "first": first, "lanes": shard.data.shape[0],
                         "rest": list(shard.data.shape[1:]) == list(leaf.shape[1:]),
                         "data": np.array_equal(np.asarray(shard.data), np.asarray(leaf)[first:first + shard.data.shape[0]])})
        return sorted(rows, key=lambda row: row["first"])

    out = {"devices": len(jax.devices())}
    states = {}
    for name, devices in (("split", 0), ("one", 1)):
        config = {**base, "train": {**base["train"], "devices": devices}}
        runner = Runner(config)
        results = [runner.train() for _ in range(2)]
        leaves = jax.tree.leaves(runner.state)
        layouts = [shares(leaf) for leaf in leaves]
        params = jax.tree.leaves(runner.state.agent.params)[0]
        held = [np.asarray(shard.data) for shard in params.addressable_shards]
        out[name] = {"compilations": [r["perf/compilations"] for r in results],
                     "lanes": runner.loop.num_lanes,
                     "leaves": len(leaves),
                     "layouts": sorted({json.dumps(layout) for layout in layouts}),
                     "params_shards_differ": all(not np.array_equal(a, b) for i, a in enumerate(held) for b in held[:i])}
        states[name] = [np.asarray(x, dtype=np.float64) for x in jax.tree.leaves(jax.device_get(runner.state))]
    out["max_state_difference"] = max(float(np.max(np.abs(a - b), initial=0.0)) for a, b in zip(states["split"], states["one"]))
    print(json.dumps(out))
""")


@pytest.mark.slow  # a fresh process with its own device count
@pytest.mark.parametrize("count", [2, 4])
def test_a_population_split_over_devices_holds_a_share_on_each_and_trains_as_on_one(count):
    flags = f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={count}".strip()
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": flags, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=500, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["devices"] == count
    split, one = seen["split"], seen["one"]
    assert split["compilations"] == [1, 1] and one["compilations"] == [1, 1]
    lanes = split["lanes"]
    assert lanes == 16 and split["leaves"] == one["leaves"] > 10
    # every leaf of the state (parameters, optimiser, envs, curriculum...) is laid out alike: on
    # each of the `count` devices, its own lanes/count lanes, in order; a replicated state would
    # show one shard of all 16 lanes per device
    (layout,) = [json.loads(layout) for layout in split["layouts"]]
    share = lanes // count
    assert [(row["first"], row["lanes"], row["rest"], row["data"]) for row in layout] == [
        (k * share, share, True, True) for k in range(count)
    ]
    assert sorted(row["device"] for row in layout) == list(range(count))
    assert split["params_shards_differ"]  # the shares are different lanes, not copies
    (alone,) = one["layouts"]
    assert [(row["first"], row["lanes"]) for row in json.loads(alone)] == [(0, lanes)]
    # each lane runs the same arithmetic either way, to float32 rounding where the partitioned
    # program orders a reduction differently
    assert seen["max_state_difference"] <= TOLERANCE, seen


# -- refusals ------------------------------------------------------------------------------------


def tiny(devices: int, num_seeds: int) -> dict:
    return corridor_config(
        agent={"num_envs": 4, "unroll_length": 8, "hidden_sizes": [8], "num_minibatches": 1, "update_epochs": 1},
        train={"timesteps_per_iteration": 32, "num_seeds": num_seeds, "eval_episodes": 1, "devices": devices},
    )


def test_devices_that_do_not_divide_the_lanes_are_refused_before_compiling():
    assert_refused_before_compiling(
        tiny(devices=3, num_seeds=4),
        r"^train.devices \(3\) must divide the trial's lanes \(members x seeds = 4\): one of \[1, 2, 4\]",
    )


def test_more_devices_than_jax_sees_are_refused_before_compiling():
    """`Runner.check` cannot know (asking JAX starts its backends, which a driver that only
    validates must not); the runner asks when it makes its first state, before any program."""
    have = len(jax.devices())
    config = tiny(devices=have + 1, num_seeds=have + 1)
    Runner.check(config)
    message = rf"^train.devices: {have + 1} asked, but JAX sees {have} cpu device\(s\) in this process; lower train.devices"
    with programs_built() as built, pytest.raises(ConfigError, match=message) as info:
        Runner(config)
    assert built == [] and "\n" not in str(info.value)


EXPERIMENT = """
trial:
  env: {name: corridor, kwargs: {max_length: 32, max_episode_steps: 40}, task: {length: 4}}
  agent: {num_envs: 4, unroll_length: 8, hidden_sizes: [8], num_minibatches: 1, update_epochs: 1}
  train: {total_timesteps: 1024, timesteps_per_iteration: 32, num_seeds: 4, eval_episodes: 1, devices: 2}
stop: {training_iteration: 1}
"""


@pytest.mark.parametrize(
    "gpu, flags, message",
    [
        (0, "", r"a trial with resources.gpu 0 runs JAX on 1 CPU device\(s\) \(XLA_FLAGS=.*\); .* or ask for resources.gpu$"),
        (0, "--xla_force_host_platform_device_count=2", None),
        (0.5, "--xla_force_host_platform_device_count=4", r"a trial with resources.gpu 0.5 shares one GPU; .* or ask for whole"),
        (1, "", r"a trial with resources.gpu 1 sees 1 GPU\(s\); .* or raise resources.gpu$"),
        (2, "", None),
    ],
)
def test_an_experiment_asking_more_devices_than_its_trials_get_is_refused_before_ray_starts(
    tmp_path, monkeypatch, gpu, flags, message
):
    """`ajax-tune run` checks experiments before Ray starts (tests/test_layers.py: without
    importing it): a trial's devices are known there from its resources, and from XLA_FLAGS
    (which a local Ray's workers inherit) for a trial on the CPU."""
    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENT)
    monkeypatch.setenv("XLA_FLAGS", flags)
    overrides = [f"trial.resources={{cpu: 1, gpu: {gpu}}}"]
    if message is None:
        Experiment.load(str(path), overrides)
        return
    with pytest.raises(ConfigError, match=r"^train.devices: 2 asked, but " + message) as info:
        Experiment.load(str(path), overrides)
    assert "\n" not in str(info.value)


def test_a_trials_devices_are_read_from_its_resources():
    assert trial_devices(0, "")[0] == 1
    assert trial_devices(0, "--xla_cpu_use_fusion_emitters=false --xla_force_host_platform_device_count=8")[0] == 8
    assert trial_devices(0, "--xla_force_host_platform_device_count=2 --xla_force_host_platform_device_count=3")[0] == 3
    assert trial_devices(0.25, "--xla_force_host_platform_device_count=8")[0] == 1  # a GPU trial's CPU devices do not count
    assert trial_devices(4, "")[0] == 4


def test_ajax_tune_run_refuses_them_in_one_line(tmp_path, monkeypatch, capsys):
    """The command line's path: exit status 2 and one line naming the setting, where a trial
    would otherwise start Ray and fail inside it."""
    from ajax_tune.cli import main

    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENT)
    monkeypatch.setenv("XLA_FLAGS", "")
    code = main(["run", str(path), "--storage-path", str(tmp_path / "results")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "train.devices: 2 asked, but a trial with resources.gpu 0 runs JAX on 1 CPU device(s)" in err
