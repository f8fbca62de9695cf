"""Offline from the command line: collect a dataset from a checkpoint, run an offline experiment
on it through Tune, evaluate the result and record a video of it; and collect's one-line refusals."""

import json
import pathlib

import pytest
import yaml

from ajax_tune import datasets
from ajax_tune.cli import main
from ajax_tune.runner import Runner
from tests.support.helpers import import_extra

SAC_PENDULUM = {
    "env": {"name": "pendulum"},
    "agent": {
        "name": "sac",
        "num_envs": 2,
        "unroll_length": 8,
        "batch_size": 16,
        "capacity": 256,
        "learning_starts": 16,
        "hidden_sizes": [16],
    },
    "train": {"total_timesteps": 10_000, "timesteps_per_iteration": 32, "eval_episodes": 1},
}


@pytest.fixture(scope="module")
def sac_checkpoint(tmp_path_factory):
    """One SAC checkpoint that both tests collect from (collecting only reads it)."""
    runner = Runner(SAC_PENDULUM)
    runner.train()
    return runner.save(tmp_path_factory.mktemp("sac") / "sac")


@pytest.mark.heavy
def test_collect_writes_a_dataset_and_refuses_bad_input_in_one_line(sac_checkpoint, tmp_path, capsys):
    out = tmp_path / "data"
    assert main(["collect", sac_checkpoint, "--steps", "1600", "--epsilon", "0.5", "--num-envs", "4", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "rows                   1600" in printed and "content_hash" in printed
    data = datasets.read(out)
    assert data.size == 1600 and data.env["name"] == "pendulum" and data.source["epsilon"] == 0.5
    assert data.actions.shape == (1600, 1) and abs(data.actions).max() <= 2.0
    assert data.truncations.sum() == data.source["episodes"] == 8  # 4 envs x 400 steps: two 200-step episodes each
    assert not data.terminations.any()
    for argv, message in (
        (["--steps", "10", "--out", str(out)], "already holds a dataset"),
        (["--steps", "0", "--out", str(tmp_path / "x")], "--steps must be >= 1"),
        (["--steps", "10", "--epsilon", "2", "--out", str(tmp_path / "x")], "--epsilon must be in [0, 1]"),
        (["--steps", "10", "--task", "max_torque=-1", "--out", str(tmp_path / "x")], "max_torque"),
    ):
        assert main(["collect", sac_checkpoint, *argv]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and message in err, err
    assert main(["collect", str(tmp_path / "nothing"), "--steps", "10", "--out", str(tmp_path / "x")]) == 2
    assert "no checkpoint at" in capsys.readouterr().err


def test_collect_then_run_then_evaluate(ray_session, sac_checkpoint, tmp_path, capsys):
    data = tmp_path / "data"
    assert main(["collect", sac_checkpoint, "--steps", "400", "--random", "--out", str(data)]) == 0
    capsys.readouterr()
    experiment = {
        "name": "offline",
        "trial": {
            "env": {"name": "pendulum"},
            "agent": {"name": "td3bc", "hidden_sizes": [16], "batch_size": 32},
            "train": {
                "dataset": str(data),
                "total_timesteps": 64,
                "timesteps_per_iteration": 32,
                "num_seeds": 2,
                "eval_episodes": 1,
            },
        },
        # the checkpoint at the end (after two calls) is the one evaluate reads
        "stop": {"training_iteration": 2},
        "checkpoint": {"at_end": True},
    }
    path = tmp_path / "offline.yaml"
    path.write_text(yaml.safe_dump(experiment))
    assert main(["run", str(path), "--storage-path", str(tmp_path / "results"), "--no-plots"]) == 0
    out = capsys.readouterr().out
    checkpoint = next(line.split()[-1] for line in out.splitlines() if line.strip().startswith("checkpoint"))
    metadata = json.loads((pathlib.Path(checkpoint) / "ajax_tune.json").read_text())
    assert metadata["extra"]["dataset"]["hash"] == datasets.read(data).content_hash()
    assert metadata["extra"]["result"]["gradient_steps"] == 64 and metadata["extra"]["result"]["env_steps"] == 0

    video = tmp_path / "policy.mp4"
    assert main(["evaluate", checkpoint, "--episodes", "2", "--json", "--video", str(video)]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["env"] == "pendulum" and stats["seeds"] == 2 and stats["episodes"] == 2 and stats["length_mean"] == 200
    # One episode of Pendulum-v1: the frame after the reset and one after each of its 200 steps.
    imageio = import_extra("imageio.v2", "video")
    with imageio.get_reader(video) as reader:
        assert stats["video_frames"] == 201 and reader.count_frames() == 201
        assert reader.get_data(0).shape == (500, 500, 3)

    assert main(["evaluate", checkpoint, "--video", str(tmp_path / "policy.avi")]) == 2
    assert "must end in one of ['.mp4', '.gif']" in capsys.readouterr().err


def test_a_stateful_policy_starts_every_recorded_episode_afresh(tmp_path):
    """A recurrent agent's policy (an object with `reset()`) is reset before each episode of a
    video, as `evaluate --gymnasium` does, so an episode never starts from the last one's memory."""
    import numpy as np

    from ajax_tune.video import record

    import_extra("imageio.v2", "video")

    class Counting:
        def __init__(self):
            self.resets, self.steps_since_reset = 0, []

        def reset(self):
            self.resets += 1
            self.steps_since_reset.append(0)

        def __call__(self, obs):
            self.steps_since_reset[-1] += 1
            return np.int32(int(obs[2] > 0))  # push towards the pole's lean

    policy = Counting()
    out = record(policy, "CartPole-v1", tmp_path / "two.gif", episodes=2)
    assert policy.resets == 2 and policy.steps_since_reset == out["lengths"]
    assert out["frames"] == sum(out["lengths"]) + 2
