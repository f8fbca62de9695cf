"""Offline training: the dataset format and its refusals, the offline loop's program (one copy of
the dataset whatever the lanes, no recompilation for a new dataset of the same shape, exact
split runs), checkpoints that record the dataset's hash, and the CLI's collect."""

import dataclasses
import json

import jax
import numpy as np
import pytest

from ajax_tune import datasets
from ajax_tune.errors import CheckpointError, ConfigError
from ajax_tune.runner import Runner
from tests.support.helpers import assert_refused_before_compiling, assert_trees_equal

ROWS = 256


def pendulum_rows(rows=ROWS, seed=0) -> datasets.Dataset:
    """Rows of pendulum's shapes and ranges (not its dynamics: the program, not learning, is tested)."""
    rng = np.random.default_rng(seed)
    theta, speed = rng.uniform(-np.pi, np.pi, rows), rng.uniform(-8, 8, rows)
    obs = np.stack([np.cos(theta), np.sin(theta), speed], axis=1).astype(np.float32)
    ends = np.arange(rows) % 200 == 199
    return datasets.Dataset(
        observations=obs,
        actions=rng.uniform(-2, 2, (rows, 1)).astype(np.float32),
        rewards=-rng.uniform(0, 16, rows).astype(np.float32),
        terminations=np.zeros(rows, bool),
        truncations=ends,
        next_observations=np.roll(obs, -1, axis=0),
        env={"name": "pendulum", "kwargs": {}, "task": {}, "id": "pendulum"},
    )


def offline_config(path, name="td3bc", **train):
    return {
        "env": {"name": "pendulum"},
        "agent": {"name": name, "hidden_sizes": [16, 16], "batch_size": 32},
        "train": {
            "dataset": str(path),
            "total_timesteps": 64,
            "timesteps_per_iteration": 16,
            "eval_episodes": 1,
            "num_seeds": 2,
            **train,
        },
    }


@pytest.fixture
def dataset_dir(tmp_path):
    return pendulum_rows().save(tmp_path / "pendulum")


# -- the format ------------------------------------------------------------------------------------


def test_a_dataset_reads_back_as_written_and_its_hash_follows_its_rows(tmp_path):
    data = pendulum_rows()
    data.save(tmp_path / "a")
    back = datasets.read(tmp_path / "a")
    for name in datasets.FIELDS:
        np.testing.assert_array_equal(getattr(back, name), getattr(data, name))
    assert back.env == data.env and back.content_hash() == data.content_hash()
    meta = json.loads((tmp_path / "a" / datasets.META_FILE).read_text())
    assert meta["format"] == datasets.FORMAT and meta["size"] == ROWS
    changed = dataclasses.replace(data, rewards=data.rewards.copy())
    changed.rewards[7] += 1.0
    assert changed.content_hash() != data.content_hash()


def _broken(tmp_path, **fields):
    return dataclasses.replace(pendulum_rows(), **fields).save(tmp_path / "broken")


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda d: d / "nowhere", r"no dataset at .*nowhere \(no such directory\)"),
        (
            lambda d: _broken(d, observations=np.zeros((ROWS, 4), np.float32), next_observations=np.zeros((ROWS, 4), np.float32)),
            r"observations are float32\[4\] per row; the env's observations are float32\[3\]",
        ),
        (
            lambda d: _broken(d, observations=np.zeros((ROWS, 3)), next_observations=np.zeros((ROWS, 3))),
            r"observations are float64\[3\] per row",
        ),
        (lambda d: _broken(d, actions=np.full((ROWS, 1), 3.0, np.float32)), r"256 action\(s\) outside the action space"),
        (lambda d: _broken(d, actions=np.zeros(ROWS, np.int32)), r"has discrete actions \(int32\); this agent learns continuous"),
        (
            lambda d: _broken(d, rewards=np.where(np.arange(ROWS) == 5, np.nan, -1.0).astype(np.float32)),
            r"1 row\(s\) with NaN or infinite rewards, the first is row 5",
        ),
        (
            lambda d: _broken(
                d,
                **{
                    n: getattr(pendulum_rows(), n)[:0]
                    for n in ("observations", "actions", "rewards", "terminations", "truncations", "next_observations")
                },
            ),
            r"is empty: it holds no transitions",
        ),
        (lambda d: _broken(d, env={"name": "cartpole", "id": "cartpole"}), r"was collected in env 'cartpole'"),
        # the arrays fit pendulum; only the config's name for the env says otherwise
        (lambda d: _broken(d, env={"name": "point_reach", "id": ""}), r"collected in env 'point_reach' \(its env.name\)"),
    ],
    ids=[
        "missing",
        "obs-shape",
        "obs-dtype",
        "actions-outside",
        "discrete-actions",
        "nan-row",
        "empty",
        "other-env",
        "other-name",
    ],
)
def test_a_dataset_that_does_not_fit_is_refused_in_one_line_before_compiling(tmp_path, make, message):
    assert_refused_before_compiling(offline_config(make(tmp_path)), message)


def test_an_online_agent_with_a_dataset_and_an_offline_one_without_are_refused(dataset_dir):
    config = offline_config(dataset_dir, total_timesteps=10_000)
    config["agent"] = {"name": "sac"}
    assert_refused_before_compiling(config, r"train\.dataset trains offline, but agent\.name 'sac' learns online; .*td3bc")
    config = offline_config("")
    assert_refused_before_compiling(config, r"agent\.name 'td3bc' learns offline: it needs train\.dataset")


def test_behaviour_cloning_takes_discrete_datasets_and_refuses_continuous_ones_for_cartpole(tmp_path):
    rng = np.random.default_rng(0)
    obs = rng.normal(size=(64, 4)).astype(np.float32)
    data = datasets.Dataset(
        observations=obs,
        actions=rng.integers(0, 2, 64).astype(np.int32),
        rewards=np.ones(64, np.float32),
        terminations=np.zeros(64, bool),
        truncations=np.zeros(64, bool),
        next_observations=obs,
        env={"name": "cartpole", "id": "cartpole"},
    )
    config = offline_config(data.save(tmp_path / "discrete"), name="bc")
    config["env"] = {"name": "cartpole"}
    result = Runner(config).train()
    assert result["gradient_steps"] == 16 and np.isfinite(result["loss/actor"])
    continuous = dataclasses.replace(data, actions=np.zeros((64, 1), np.float32)).save(tmp_path / "continuous")
    config["train"]["dataset"] = str(continuous)
    assert_refused_before_compiling(config, r"has continuous actions \(float32\); this agent learns discrete actions")


# -- the program -----------------------------------------------------------------------------------


@pytest.mark.heavy
def test_the_dataset_is_one_argument_shared_by_every_lane(dataset_dir):
    """The compiled program's arguments: the state (per lane) and the dataset once, whatever the
    number of seeds. Measured: with 1 and 4 seeds, argument bytes minus state bytes equal the
    dataset's bytes (256 rows: 8,448 bytes for the five arrays the agents read). With 10,000 rows,
    measured the same way: 330,000 bytes of dataset beside a state of 17,668 bytes (1 seed) or
    141,344 (8 seeds)."""
    extra = {}
    for seeds in (1, 4):
        runner = Runner(offline_config(dataset_dir, num_seeds=seeds))
        loop = runner.loop
        data = loop.dataset.data()
        lowered = loop.compiled.call.lower(runner.state, data)
        leaves = jax.tree.leaves(lowered.args_info)
        data_leaves = jax.tree.leaves(lowered.args_info[0][1])
        assert [leaf.shape[0] for leaf in data_leaves] == [ROWS] * 5  # no lane axis on the dataset
        state_bytes = sum(x.nbytes for x in jax.tree.leaves(runner.state))
        data_bytes = sum(x.nbytes for x in jax.tree.leaves(data))
        assert sum(np.prod(x.shape) * x.dtype.itemsize for x in (leaf for leaf in leaves)) == state_bytes + data_bytes
        memory = lowered.compile().memory_analysis()
        if memory is not None:  # backends that report it: the arguments the executable takes
            extra[seeds] = memory.argument_size_in_bytes - state_bytes
    for seeds, bytes_beyond_state in extra.items():
        assert bytes_beyond_state == data_bytes, (seeds, bytes_beyond_state, data_bytes)


@pytest.mark.heavy
def test_a_second_dataset_of_the_same_shape_trains_without_recompiling(tmp_path):
    """A config naming another dataset of the same shape (as a reused Tune actor's reset_config
    gives it) keeps the program and trains on the new rows: the observation statistics the
    agent keeps are the new dataset's. Another shape builds a new program; a dataset that does
    not fit is refused with the runner left as it was."""
    first, second = pendulum_rows(seed=0), pendulum_rows(seed=1)
    runner = Runner(offline_config(first.save(tmp_path / "first")))
    before = runner.train()
    np.testing.assert_allclose(runner.state.agent.obs_norm.mean[0], first.observations.mean(0), rtol=1e-5)
    assert runner.reconfigure(offline_config(second.save(tmp_path / "second"))) is False
    after = runner.train()
    assert before["perf/compilations"] == after["perf/compilations"] == 1
    assert after["gradient_steps"] == 16 and after["env_steps"] == 0  # a new run, on the new rows
    np.testing.assert_allclose(runner.state.agent.obs_norm.mean[0], second.observations.mean(0), rtol=1e-5)
    assert runner.loop.dataset.info["hash"] == second.content_hash()
    runner.loop.dataset.set_dataset(first, tmp_path / "first")  # the same, set on the loop directly
    assert runner.train()["perf/compilations"] == 1
    np.testing.assert_allclose(runner.state.agent.obs_norm.mean[0], first.observations.mean(0), rtol=1e-5)
    with pytest.raises(ConfigError, match="a new dataset must have the shape of the loop's"):
        runner.loop.dataset.set_dataset(pendulum_rows(rows=128))
    with pytest.raises(ConfigError, match=r"no dataset at .*nowhere"):
        runner.reconfigure(offline_config(tmp_path / "nowhere"))
    assert runner.config.train.dataset == str(tmp_path / "second") and runner.train()["perf/compilations"] == 1
    assert runner.reconfigure(offline_config(pendulum_rows(rows=128).save(tmp_path / "short"))) is True
    assert runner.loop.dataset.info["rows"] == 128


@pytest.mark.optimised
@pytest.mark.parametrize("name", ["td3bc", "iql", "bc"])
def test_split_runs_with_a_save_and_restore_are_bit_identical(dataset_dir, tmp_path, name):
    """One call of 32 updates against two of 16 with a save and a restore into a new runner (the
    same evaluation cadence, so the same blocks of updates; the draws would match anyway), in the
    fully optimised build users run: XLA may order a sum differently in the two programs of a
    cheaper build (IQL's did, by one float32 ulp, without the CPU fusion emitters)."""
    whole = Runner(offline_config(dataset_dir, name, timesteps_per_iteration=32, eval_every=16))
    whole.train()
    first = Runner(offline_config(dataset_dir, name, eval_every=16))
    first.train()
    first.save(tmp_path / "ckpt")
    second = Runner(offline_config(dataset_dir, name, eval_every=16))
    second.restore(tmp_path / "ckpt")
    result = second.train()
    assert_trees_equal(second.state, whole.state)
    assert result["gradient_steps"] == 32 and result["perf/compilations"] == 1
    saved = json.loads((tmp_path / "ckpt" / "ajax_tune.json").read_text())["extra"]["dataset"]
    assert saved["hash"] == datasets.read(dataset_dir).content_hash() and saved["path"] == str(dataset_dir)


@pytest.mark.heavy
def test_a_dataset_changed_since_the_checkpoint_is_refused_on_restore(dataset_dir, tmp_path):
    runner = Runner(offline_config(dataset_dir))
    runner.train()
    runner.save(tmp_path / "ckpt")
    changed = datasets.read(dataset_dir)
    changed.rewards[0] -= 1.0
    changed.save(dataset_dir)
    with pytest.raises(CheckpointError, match=r"learned from dataset .* it changed since the checkpoint was written") as info:
        Runner(offline_config(dataset_dir)).restore(tmp_path / "ckpt")
    assert "\n" not in str(info.value)


@pytest.mark.heavy
def test_traced_settings_change_without_recompiling(dataset_dir):
    runner = Runner(offline_config(dataset_dir, "iql"))
    runner.train()
    config = offline_config(dataset_dir, "iql")
    config["agent"].update(expectile=0.9, temperature=10.0)
    assert runner.reconfigure(config) is False
    runner.train()
    assert float(runner.state.agent.hp.expectile[0]) == pytest.approx(0.9)
    assert runner.loop.compilations == 1
    runner = Runner(offline_config(dataset_dir, "td3bc"))
    runner.train()
    config = offline_config(dataset_dir, "td3bc")
    config["agent"]["alpha"] = 10.0
    assert runner.reconfigure(config) is False
    assert runner.train()["perf/compilations"] == 1


# -- through Tune --------------------------------------------------------------------------------


def test_tunes_pbt_over_iql_settings_continues_offline_trials_without_recompiling(ray_session, dataset_dir, tmp_path):
    """PBT over IQL's learning rate, expectile and temperature (all traced) on a dataset every trial
    shares: exploits happen, the explored settings reach the trials, gradient steps advance by one
    call's budget through restores, and no trial compiles more than once."""
    from ray import tune

    from tests.test_tune import fit_synch_pbt

    space = offline_config(dataset_dir, name="iql", total_timesteps=96)
    space["agent"] = {**space["agent"], "lr": tune.choice([1e-4, 3e-3]), "expectile": 0.7, "temperature": 3.0}
    space["train"]["seed"] = tune.grid_search([0, 1])
    mutations = {"agent": {"lr": tune.loguniform(1e-4, 3e-3), "expectile": [0.6, 0.8, 0.9], "temperature": [1.0, 10.0]}}
    _, per_trial, exploits = fit_synch_pbt(space, tmp_path, "iql_pbt", mutations, metric="eval/return_mean")
    assert exploits, "PBT never exploited"
    assert len(per_trial) == 2
    for trial_rows in per_trial.values():
        assert all(r["perf/compilations"] == 1 and r["env_steps"] == 0 for r in trial_rows)
        assert {r["gradient_steps"] for r in trial_rows} <= {16, 32}  # a restore continues a donor's updates
        assert all(r["timesteps_this_iter"] == 16 for r in trial_rows)
    configs = [r["config"]["agent"] for rows in per_trial.values() for r in rows]
    assert any(c["expectile"] != 0.7 or c["temperature"] != 3.0 for c in configs)  # PBT explored the traced settings
