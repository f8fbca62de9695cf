"""Minari datasets: one written by Minari's own collector on gymnasium's Pendulum-v1 trains the
built-in `pendulum` (its twin) offline as `train.dataset: minari:<id>`, from local files only;
what does not fit is refused in one line."""

import re

import gymnasium as gym
import numpy as np
import pytest

from ajax_tune import datasets
from ajax_tune.runner import Runner
from tests.support.helpers import assert_refused_before_compiling, import_extra

minari = import_extra("minari", extra="minari")

EPISODE = 128  # two episodes: 256 rows, the shape of tests/test_offline.py's dataset (one program for both)


def write_minari(dataset_id: str, env_id: str, seed: int = 0, episodes: int = 2):
    env = minari.DataCollector(gym.make(env_id, max_episode_steps=EPISODE), data_format="arrow")
    env.action_space.seed(seed)
    for episode in range(episodes):
        env.reset(seed=seed + episode)
        while True:
            _, _, terminated, truncated, _ = env.step(env.action_space.sample())
            if terminated or truncated:
                break
    return env.create_dataset(
        dataset_id=dataset_id, algorithm_name="random", description="uniform random actions", eval_env=env_id
    )


@pytest.fixture
def local_minari(tmp_path, monkeypatch):
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    write_minari("pendulum/random-v0", "Pendulum-v1")
    return "minari:pendulum/random-v0"


def test_a_minari_dataset_reads_as_transitions_of_its_episodes(local_minari):
    rows = datasets.read(local_minari)
    episodes = list(minari.load_dataset("pendulum/random-v0").iterate_episodes())
    assert rows.size == 2 * EPISODE and rows.env["id"] == "pendulum"  # gymnasium's Pendulum-v1 is the built-in's twin
    first = episodes[0]
    np.testing.assert_array_equal(rows.observations[:EPISODE], first.observations[:-1])
    np.testing.assert_array_equal(rows.next_observations[:EPISODE], first.observations[1:])
    np.testing.assert_array_equal(rows.actions[EPISODE:], episodes[1].actions)
    np.testing.assert_array_equal(rows.rewards, np.concatenate([e.rewards for e in episodes]).astype(np.float32))
    assert rows.truncations.tolist() == ([False] * (EPISODE - 1) + [True]) * 2 and not rows.terminations.any()
    assert rows.observations.dtype == rows.actions.dtype == rows.rewards.dtype == np.float32
    assert rows.source == {"minari": "pendulum/random-v0", "episodes": 2, "algorithm": "random"}


@pytest.mark.heavy
def test_a_minari_dataset_trains_offline_and_its_checkpoint_names_it(local_minari, tmp_path):
    config = {
        "env": {"name": "pendulum"},
        "agent": {"name": "td3bc", "hidden_sizes": [16, 16], "batch_size": 32},
        "train": {
            "dataset": local_minari,
            "total_timesteps": 64,
            "timesteps_per_iteration": 16,
            "eval_episodes": 1,
            "num_seeds": 2,
        },
    }
    runner = Runner(config)
    result = runner.train()
    assert result["gradient_steps"] == 16 and result["env_steps"] == 0 and result["perf/compilations"] == 1
    assert np.isfinite(result["loss/critic"]) and result["train/nonfinite"] == 0.0
    path = runner.save(tmp_path / "ckpt")
    again = Runner.from_checkpoint(path)
    assert again.train()["gradient_steps"] == 32  # the checkpoint found the same rows by name and hash


def test_minari_datasets_that_do_not_fit_are_refused_in_one_line(local_minari, tmp_path):
    write_minari("cartpole/random-v0", "CartPole-v1")
    offline = {"env": {"name": "pendulum"}, "agent": {"name": "td3bc"}}
    cases = [
        ("minari:cartpole/random-v0", "was collected in env 'cartpole' (its env.id); this trial's env is 'pendulum'"),
        ("minari:pendulum/expert-v0", "no local Minari dataset 'pendulum/expert-v0' (nothing is downloaded); local: "),
    ]
    for dataset, message in cases:
        assert_refused_before_compiling({**offline, "train": {"dataset": dataset}}, re.escape(message))
