"""Every shipped config validates, and runs end to end through the CLI in a reduced size."""

import os
import pathlib
import tempfile

import pandas as pd
import pytest

from ajax_tune.cli import main
from ajax_tune.runner import Runner
from ajax_tune.tune.experiment import Experiment
from tests.support.helpers import import_extra

CONFIGS = pathlib.Path(__file__).resolve().parent.parent / "configs"
# The offline config reads a dataset that `ajax-tune collect` writes first (relative to where the
# run starts); its tests give it one of random pendulum rows, there and at an absolute path for Tune.
OFFLINE = "offline_td3bc_pendulum.yaml"
OFFLINE_DATASET = pathlib.Path(tempfile.gettempdir()) / f"ajax_tune_configs_{os.getpid()}" / "pendulum"

# Small budgets and few iterations; shapes stay as shipped unless a config is costly to compile.
# A config of several trials reuses actors (a later trial continues in an earlier one's process,
# with its compiled program, through reset_config), and the three PPO cartpole configs share one
# program (4096 env steps per call, 8 evaluation episodes), which the cache then compiles once.
REUSE = "tune.reuse_actors=true"
REDUCED = {
    "quickstart.yaml": ["trial.train.timesteps_per_iteration=4096", "stop.training_iteration=2", REUSE],
    "search_cartpole_asha.yaml": [
        "trial.train.timesteps_per_iteration=4096",
        "trial.train.eval_episodes=8",
        REUSE,
        "tune.num_samples=2",
        "tune.scheduler.max_t=2",
        "tune.scheduler.grace_period=1",
        "stop.training_iteration=2",
    ],
    "curriculum_corridor.yaml": ["stop.training_iteration=3"],
    "curriculum_point_reach.yaml": ["trial.train.timesteps_per_iteration=2048", "stop.training_iteration=2"],
    "pbt_lr_schedule.yaml": [
        "trial.train.timesteps_per_iteration=4096",
        "trial.train.eval_episodes=8",
        "tune.num_samples=2",
        "tune.scheduler.perturbation_interval=1",
        "stop.training_iteration=2",
    ],
    "dqn_cartpole.yaml": ["trial.train.timesteps_per_iteration=2048", "trial.train.eval_episodes=2", "stop.training_iteration=2"],
    "sac_pendulum.yaml": ["trial.train.timesteps_per_iteration=512", "trial.train.eval_episodes=2", "stop.training_iteration=2"],
    "brax_inverted_pendulum.yaml": [
        "trial.agent.num_envs=4",
        "trial.agent.unroll_length=16",
        "trial.agent.num_minibatches=2",
        "trial.agent.update_epochs=1",
        "trial.train.timesteps_per_iteration=64",
        "trial.train.eval_episodes=2",
        "trial.env.kwargs.max_episode_steps=32",
        "stop.training_iteration=1",
    ],
    "task_samplers_corridor.yaml": ["trial.train.num_seeds=2", "stop.training_iteration=2"],
    "population_pbt_cartpole.yaml": ["trial.train.timesteps_per_iteration=2048", "stop.training_iteration=2"],
    "population_halving_cartpole.yaml": ["trial.train.timesteps_per_iteration=2048", "stop.training_iteration=2"],
    "autocurricula_point_reach.yaml": [
        "trial.train.seed=0",
        "trial.train.timesteps_per_iteration=2048",
        "stop.training_iteration=2",
    ],
    "ued_maze_dr.yaml": [
        "trial.agent.num_envs=4",
        "trial.agent.unroll_length=16",
        "trial.agent.recurrent={cell: lstm, size: 16}",
        "trial.train.timesteps_per_iteration=64",
        "trial.env.kwargs.max_episode_steps=16",
        "stop.training_iteration=2",
    ],
    "ued_maze_accel.yaml": [
        "trial.agent.num_envs=4",
        "trial.agent.unroll_length=16",
        "trial.agent.recurrent={cell: lstm, size: 16}",
        "trial.train.timesteps_per_iteration=64",
        "trial.env.kwargs.max_episode_steps=16",
        "trial.ued.buffer_size=8",
        "trial.ued.minimum_fill=0.25",
        "stop.training_iteration=2",
    ],
    OFFLINE: [
        f"trial.train.dataset={OFFLINE_DATASET}",
        "trial.train.timesteps_per_iteration=200",
        "trial.train.eval_episodes=2",
        "tune.num_samples=2",
        "stop.training_iteration=2",
        REUSE,
    ],
    # the env suites: the smallest shapes, one short call
    **{
        name: [
            "trial.agent.num_envs=4",
            "trial.agent.unroll_length=8",
            "trial.agent.num_minibatches=2",
            "trial.agent.update_epochs=1",
            "trial.train.timesteps_per_iteration=64",
            "trial.train.eval_episodes=1",
            "stop.training_iteration=1",
        ]
        for name in (
            "xminigrid_room.yaml",
            "craftax_classic.yaml",
            "navix_empty.yaml",
            "jumanji_snake.yaml",
            "kinetix_handmade.yaml",
            "playground_cartpole.yaml",
        )
    },
}
#: configs of suites dev cannot hold (docs/testing.md): checked where their extra is installed
NOT_IN_DEV = {"kinetix_handmade.yaml": ("kinetix", "kinetix"), "playground_cartpole.yaml": ("mujoco_playground", "playground")}
GRID_SIZES = {"quickstart.yaml": 2, "task_samplers_corridor.yaml": 3, "autocurricula_point_reach.yaml": 4}  # trials per sample


@pytest.fixture(autouse=True)
def _offline_dataset(request, tmp_path, monkeypatch):
    if OFFLINE not in request.node.name:
        return
    from ajax_tune import datasets
    from ajax_tune.envs import EpisodeWrapper, make_env

    rows = datasets.collect(EpisodeWrapper(make_env("pendulum")), 400, env_config={"name": "pendulum", "kwargs": {}})
    rows.save(OFFLINE_DATASET)
    monkeypatch.chdir(tmp_path)
    rows.save(tmp_path / "results" / "datasets" / "pendulum_sac")  # where the shipped config reads it


def test_every_config_is_covered():
    assert sorted(p.name for p in CONFIGS.glob("*.yaml")) == sorted(REDUCED)


# the suites dev cannot hold take seconds to import: their configs are checked in the slow tier
@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.heavy) if n in NOT_IN_DEV else n for n in sorted(REDUCED)])
def test_config_validates_as_shipped(name):
    if name in NOT_IN_DEV:
        import_extra(*NOT_IN_DEV[name], in_dev=False)
    experiment = Experiment.load(CONFIGS / name)
    assert experiment.name == name.removesuffix(".yaml")
    assert experiment.stop


# brax compiles for long on a CPU: its config is validated above, and brax runs through Tune in
# tests/test_sac.py (a task change between two iterations) and through the loop in test_envs_brax.
# Of the env suites' configs, XLand-MiniGrid's runs here (through Tune, as a user's would): each
# suite trains, saves and restores through the Runner in its own tests (tests/test_suite_*.py),
# and the others compile for a minute or more on a CPU.
SUITES_NOT_RUN = {"craftax_classic.yaml", "navix_empty.yaml", "jumanji_snake.yaml", *NOT_IN_DEV}
# A config of one trial and no search trains here in this process, its Tuner built as the CLI
# builds it but not fitted: a trial's process and Tune's loop cost more than its training, and
# they are the same for every config. Configs that search, schedule or hold populations run
# through the CLI and Tune.
IN_PROCESS = sorted(
    {"curriculum_corridor.yaml", "curriculum_point_reach.yaml", "dqn_cartpole.yaml", "sac_pendulum.yaml"}
    | {"ued_maze_dr.yaml", "ued_maze_accel.yaml", "xminigrid_room.yaml"}
)
RUN_REDUCED = sorted(set(REDUCED) - {"brax_inverted_pendulum.yaml"} - SUITES_NOT_RUN - set(IN_PROCESS))


@pytest.mark.heavy
@pytest.mark.parametrize("name", IN_PROCESS)
def test_config_trains_reduced_in_process(name, tmp_path):
    experiment = Experiment.load(CONFIGS / name, REDUCED[name])
    assert experiment.num_configs() == 1 and not experiment.tune.population
    assert experiment.param_space() == experiment.trial  # nothing for Tune to draw
    experiment.tuner(storage_path=str(tmp_path))  # Tune's side builds, as `ajax-tune run` builds it
    runner = Runner(experiment.trial, trial_id="t")
    calls = experiment.stop["training_iteration"]
    results = [runner.train() for _ in range(calls)]
    per_call = results[0]["timesteps_this_iter"]
    assert per_call > 0 and results[-1]["env_steps"] == calls * per_call
    assert [r["perf/compilations"] for r in results] == [1] * calls
    assert all(r["train/nonfinite"] == 0 for r in results)


@pytest.mark.parametrize("name", RUN_REDUCED)
def test_config_runs_reduced(name, ray_session, tmp_path, capsys):
    overrides = [arg for item in REDUCED[name] for arg in ("--set", item)]
    code = main(["run", str(CONFIGS / name), *overrides, "--storage-path", str(tmp_path), "--no-plots"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "Best trial:" in out
    experiment = Experiment.load(CONFIGS / name, REDUCED[name])
    trials = [p for p in (tmp_path / experiment.name).iterdir() if (p / "progress.csv").exists()]
    samples = experiment.tune.num_samples * GRID_SIZES.get(name, 1)
    assert len(trials) == samples
    for trial in trials:
        df = pd.read_csv(trial / "progress.csv")
        assert len(df) >= 1
        progress = df["gradient_steps"] if "gradient_steps" in df else df["env_steps"]  # an offline trial's are updates
        assert progress.iloc[-1] == len(df) * df["timesteps_this_iter"].iloc[0]
        # one program, or with population.prune one per size the population has trained at
        sizes = list(df["population/size"]) if "population/size" in df else [1] * len(df)
        assert list(df["perf/compilations"]) == [len(set(sizes[: i + 1])) for i in range(len(df))]
