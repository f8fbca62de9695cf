"""Bad input that used to escape as a traceback, a hang or a silent acceptance: each is one line
on stderr and exit status 2, found before Ray starts wherever it can be."""

import json
import os
import pathlib
import pickle
import shutil
import subprocess
import sys

import pytest

from ajax_tune.cli import main
from ajax_tune.errors import ConfigError
from ajax_tune.runner import Runner
from ajax_tune.tune.experiment import Experiment
from ajax_tune.yaml_loader import load

EXPERIMENT = """
name: small
trial:
  env: {name: corridor, kwargs: {max_length: 32, max_episode_steps: 40}, task: {length: 4}}
  agent: {num_envs: 8, unroll_length: 16, num_minibatches: 2, update_epochs: 2, hidden_sizes: [32, 32], lr: 3e-3}
  train: {total_timesteps: 5e4, timesteps_per_iteration: 512, num_seeds: 2, eval_episodes: 4}
stop: {training_iteration: 3}
"""
TINY = {
    "agent": {"num_envs": 4, "unroll_length": 8, "hidden_sizes": [8]},
    "train": {"timesteps_per_iteration": 32, "eval_episodes": 1},
}


def one_line_error(capsys, code, *fragments):
    err = capsys.readouterr().err.strip()
    assert code == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    for fragment in fragments:
        assert fragment in err, err
    return err


@pytest.fixture
def experiment(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(EXPERIMENT)
    return str(path)


@pytest.fixture(scope="module")
def checkpoints(tmp_path_factory):
    """An untrained cartpole and pendulum checkpoint (nothing compiles but the init)."""
    root = tmp_path_factory.mktemp("checkpoints")
    for env in ("cartpole", "pendulum"):
        Runner({"env": {"name": env}, **TINY}).save(root / env)
    return root


# -- 9. numbers as people write them -------------------------------------------------------------


@pytest.mark.parametrize(
    "text, value",
    [
        ("3e-4", 3e-4),
        ("1e6", 1e6),
        ("1.0e6", 1e6),
        ("-2E3", -2000.0),
        (".5e1", 5.0),
        ("1.0e+6", 1e6),
        ("12", 12),
        ("0x1f", 31),
        ("1e", "1e"),
        ("e5", "e5"),
        ("1.2.3", "1.2.3"),
        (".inf", float("inf")),
    ],
)
def test_yaml_reads_numbers_as_written(text, value):
    assert load(text) == value and type(load(text)) is type(value)


def test_scientific_numbers_in_files_and_overrides(experiment, tmp_path):
    loaded = Experiment.load(experiment)
    assert loaded.trial["agent"]["lr"] == 3e-3
    assert Runner.check(loaded.trial).train.total_timesteps == 50_000  # `5e4` for an integer field
    loaded = Experiment.load(
        experiment, ["trial.agent.lr=3e-4", "trial.agent.ent_coef=1e-3", "trial.agent.lr={kind: linear, peak: 1e-3}"]
    )
    assert Runner.check(loaded.trial).agent.lr.peak == 1e-3 and loaded.trial["agent"]["ent_coef"] == 1e-3


# -- 8. storage path ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "where, message",
    [
        ("afile", "is a file, not a directory"),
        ("afile/sub/dir", "lies under"),
        ("/proc/ajax_tune_results", "is not writable"),
    ],
)
def test_unusable_storage_path(experiment, tmp_path, capsys, where, message):
    import ray

    (tmp_path / "afile").write_text("")
    path = where if where.startswith("/") else str(tmp_path / where)
    one_line_error(capsys, main(["run", experiment, "--storage-path", path]), message)
    assert not ray.is_initialized()


# -- 7. resources ------------------------------------------------------------------------------


@pytest.mark.parametrize("resources", ["{cpu: 64}", "{cpu: {grid: [1, 64]}}"])
def test_local_run_refuses_more_cpus_than_the_machine_has(experiment, tmp_path, capsys, resources):
    import ray

    code = main(["run", experiment, "--storage-path", str(tmp_path / "r"), "--set", f"trial.resources={resources}"])
    one_line_error(capsys, code, "trial.resources: a trial asks for cpu 64", "--num-cpus")
    assert not ray.is_initialized()


def test_a_trial_that_asks_for_no_resources_is_one_line_before_ray_starts(experiment, tmp_path, capsys):
    """cpu 0 beside no GPU: Ray would refuse the trial's placement with a traceback; a GPU trial
    may ask for no CPU (its config passes the check, and is refused only for the GPU it lacks here)."""
    import ray

    from ajax_tune.config import Config

    code = main(["run", experiment, "--storage-path", str(tmp_path / "r"), "--set", "trial.resources={cpu: 0}"])
    one_line_error(capsys, code, "resources asks for nothing (cpu 0, gpu 0): a trial needs part of a CPU or a GPU")
    assert not ray.is_initialized()
    assert Config.from_dict({"resources": {"cpu": 0, "gpu": 0.5}}).resources.gpu == 0.5


# -- 10. the sections outside `trial`, and the metrics they name -------------------------------


@pytest.mark.parametrize(
    "override, message",
    [
        ("stop=[12]", "stop must be a mapping of result key to the value that ends a trial"),
        ("stop.training_iteration=ten", "stop.training_iteration must be a number"),
        ("stop.training_iteration=0", "stop.training_iteration must be > 0, got 0"),
        ("stop.training_iteration=.nan", "stop.training_iteration must be a finite number, got nan: a NaN never ends a trial"),
        ("stop.eval/return_mean=.inf", "stop.eval/return_mean must be a finite number, got inf"),
        ("stop={env_steps: -1}", "stop.env_steps must be > 0, got -1"),
        (
            "stop={training_iteraton: 3}",
            "stop.training_iteraton: metric 'training_iteraton' is not in any result; did you mean 'training_iteration'?",
        ),
        (
            "stop.eval/return_seed7=100",
            "stop.eval/return_seed7: metric 'eval/return_seed7' is not in any result; did you mean 'eval/return_seed1'?",
        ),
        (
            "tune.metric=eval/return_maen",
            "tune.metric: metric 'eval/return_maen' is not in any result; did you mean 'eval/return_mean'?",
        ),
        ("tune.metric=3", "tune.metric must be a string, got 3"),
        ("tune.mode=maximum", "tune.mode must be one of ['min', 'max'], got 'maximum'"),
        ("tune.num_samples=0", "tune.num_samples must be >= 1, got 0"),
        ("tune.reuse_actors=maybe", "tune.reuse_actors must be true or false, got 'maybe'"),
        ("tune.time_budget_s=-60", "tune.time_budget_s must be > 0.0, got -60.0"),
        ("tune.time_budget_s=0", "tune.time_budget_s must be > 0.0, got 0.0"),  # no budget is no key, not 0
        ("tune.time_budget_s=.nan", "tune.time_budget_s must be > 0.0, got nan"),
        (
            "tune.population=4",
            "tune.population packs 4 configs per trial, but the search draws 1 in all (tune.num_samples 1): "
            "raise tune.num_samples to 4 or lower tune.population to 1",
        ),
        ("tune.time_budget_s=soon", "tune.time_budget_s must be a number, got 'soon'"),
        (
            "tune.scheduler={name: asha, time_attr: env_step}",
            "tune.scheduler (asha).time_attr: metric 'env_step' is not in any result; did you mean 'env_steps'?",
        ),
        (
            "tune.scheduler={name: pbt, hyperparam_mutations: {agent: {ent_coeff: [0.0, 0.01]}}}",
            "tune.scheduler (pbt).hyperparam_mutations: agent.ent_coeff is not a key of the trial config "
            "(agent has no 'ent_coeff'; did you mean 'ent_coef'?)",
        ),
        (
            "tune.scheduler={name: pb2, hyperparam_bounds: {agnet: {ent_coef: [0.0, 0.01]}}}",
            "tune.scheduler (pb2).hyperparam_bounds: agnet.ent_coef is not a key of the trial config "
            "(the trial config has no 'agnet'; did you mean 'agent'?)",
        ),
        ("checkpoint=5", "checkpoint must be a mapping, got 5"),
        ("checkpoint.frequency=often", "checkpoint.frequency must be an integer, got 'often'"),
        ("checkpoint.num_to_keep=0", "checkpoint.num_to_keep must be >= 1, got 0"),  # keep all: leave it out
        ("checkpoint.at_end=sometimes", "checkpoint.at_end must be true or false"),
        ("checkpoint.frequncy=2", "unknown key checkpoint.'frequncy'; did you mean checkpoint.'frequency'?"),
        ("failure.max_failures=some", "failure.max_failures must be an integer, got 'some'"),
        ("failure.max_failures=-2", "failure.max_failures must be >= -1, got -2"),
        ("failure.max_failure=2", "unknown key failure.'max_failure'; did you mean failure.'max_failures'?"),
        ("wandb=ajax", "wandb must be a mapping"),
        ("wandb.projetc=ajax", "wandb: unknown option 'projetc'; did you mean 'project'?"),
        ("wandb.project=3", "wandb.project must be a string, got 3"),
        ("wandb.mode=offine", "wandb.mode must be one of ['online', 'offline', 'disabled'], got 'offine'"),
        ("storage_path=[results]", "storage_path must be a directory or a URI (a string), got ['results']"),
        ("name=runs/small", "name must be a directory name (a string without '/'), got 'runs/small'"),
        ("trial=[1]", "trial must be a mapping"),
        ("trial.agent={name: sac, capacity: 1e9}", "needs about"),
    ],
)
def test_every_section_is_checked_before_ray_starts(experiment, capsys, override, message):
    import ray

    if override.startswith("trial.agent"):  # SAC on a continuous env, with a buffer of 1e9 transitions per seed
        override = (
            "trial={env: {name: pendulum}, agent: {name: sac, capacity: 1.0e9}, "
            "train: {num_seeds: 4, timesteps_per_iteration: 4096, total_timesteps: 40960}}"
        )
    err = one_line_error(capsys, main(["run", experiment, "--set", override]), message)
    if "needs about" in message:
        assert "GiB of state (agent.capacity 1,000,000,000 transitions x 4 seeds" in err and "this machine has" in err
    assert not ray.is_initialized()


def test_a_population_larger_than_the_configs_drawn_is_refused_and_one_that_fits_is_not():
    """`tune.population` against `num_samples` times the grid's points: as many configs as one
    trial holds is a full trial; one more member than the search draws would leave the trial
    short without a word. Budgets left out are None (no budget), not 0."""
    raw = load(EXPERIMENT)
    raw["trial"]["agent"]["lr"] = {"grid": [1e-3, 3e-3]}
    raw["tune"] = {"num_samples": 2, "population": 4}
    fits = Experiment.from_dict(raw)
    assert fits.num_configs() == 4 and fits.tune.time_budget_s is None and fits.checkpoint.num_to_keep is None
    raw["tune"]["population"] = 5
    with pytest.raises(ConfigError) as info:
        Experiment.from_dict(raw)
    assert str(info.value) == (
        "tune.population packs 5 configs per trial, but the search draws 4 in all (tune.num_samples 2 x 2 grid points): "
        "raise tune.num_samples to 3 or lower tune.population to 4"
    )


def test_a_yaml_key_written_twice_is_refused(tmp_path, capsys):
    """PyYAML keeps the second of two equal keys silently; here a second `mode` turned a
    maximisation into a minimisation."""
    path = tmp_path / "twice.yaml"
    path.write_text(EXPERIMENT + "tune: {metric: eval/return_mean, mode: max}\nstop: {training_iteration: 1}\n")
    one_line_error(capsys, main(["run", str(path)]), "key 'stop' is written twice (lines 7 and 9); keep one")
    path.write_text(EXPERIMENT.replace("lr: 3e-3}", "lr: 3e-3, lr: 1e-3}"))
    one_line_error(capsys, main(["run", str(path)]), "key 'lr' is written twice")


def test_collect_out_naming_a_file(checkpoints, tmp_path, capsys):
    (tmp_path / "taken").write_text("a file")
    code = main(["collect", str(checkpoints / "cartpole"), "--steps", "8", "--out", str(tmp_path / "taken")])
    one_line_error(capsys, code, f"--out {tmp_path / 'taken'} is a file; name a directory for the dataset")
    assert (tmp_path / "taken").read_text() == "a file"


def test_a_grid_over_whole_schedules_packs_into_populations_as_it_runs_without():
    """A grid of mappings (whole learning-rate schedules) with tune.population: the searcher holds
    the space, so Tune has none to merge `grid_search` back into a trial's config from. Each
    trial config it suggests is a valid config whose members follow the grid's schedules."""
    from ajax_tune.config import Config
    from ajax_tune.tune.searchers import searcher_for

    raw = load(EXPERIMENT)
    raw["trial"]["agent"]["lr"] = {"grid": [{"kind": "linear", "peak": 1e-3}, {"kind": "cosine", "peak": 3e-3}]}
    raw["tune"] = {"num_samples": 4, "population": 4}
    experiment = Experiment.from_dict(raw)
    assert experiment.num_configs() == 8
    searcher = searcher_for(experiment.tune, experiment.param_space(), experiment.num_configs())
    searcher.set_search_properties("eval/return_mean", "max", {}, num_samples=99)  # what Tune may pass: ignored
    trials = [searcher.suggest(f"t{i}") for i in range(2)]
    assert searcher.suggest("t2") == "FINISHED"
    for trial in trials:
        assert "grid_search" not in json.dumps(trial)
        config = Config.from_dict(trial)
        assert [(m.agent.lr.kind, m.agent.lr.peak) for m in config.members] == [("linear", 1e-3), ("cosine", 3e-3)] * 2


def test_tunes_own_keys_and_the_trials_are_valid_metrics():
    raw = load(EXPERIMENT)
    for metric in (
        "training_iteration",
        "time_total_s",
        "timesteps_total",
        "env_steps",
        "loss/entropy",
        "eval/return_seed1",
        "curriculum/task/length",
    ):
        loaded = Experiment.from_dict({**raw, "tune": {"metric": metric}, "stop": {metric: 1e9, "time_total_s": 60}})
        assert loaded.tune.metric == metric and loaded.stop == {metric: 1e9, "time_total_s": 60}


# -- 6. a curriculum metric that no result has -------------------------------------------------


def test_threshold_curriculum_on_a_metric_never_reported(experiment, capsys):
    callback = (
        "[{class: 'ajax_tune.curriculum:ThresholdCurriculum', kwargs: {levels: {length: [4, 8]}, metric: eval/no_such_metric}}]"
    )
    code = main(["run", experiment, "--set", f"trial.callbacks={callback}"])
    one_line_error(
        capsys,
        code,
        "callbacks[0] (ThresholdCurriculum): metric 'eval/no_such_metric' is not in any result",
        "eval/success_rate_mean",
    )
    task_fn = (
        "{function: 'ajax_tune.curriculum:grow_when_solved', kwargs: {field: length, step: 4, metric: eval/sucess_rate_mean}}"
    )
    code = main(["run", experiment, "--set", f"trial.env_task_fn={task_fn}"])
    one_line_error(capsys, code, "env_task_fn ajax_tune.curriculum:grow_when_solved", "did you mean 'eval/success_rate_mean'?")


# -- 3. a damaged experiment directory ---------------------------------------------------------


def test_resume_refuses_a_damaged_tuner_state(tmp_path, capsys):
    Experiment.from_dict(load(EXPERIMENT)).tuner(storage_path=str(tmp_path))  # writes a real tuner.pkl
    directory = tmp_path / "small"
    real = (directory / "tuner.pkl").read_bytes()
    one_line_error(capsys, main(["resume", str(directory)]), "holds no experiment state")

    (directory / "experiment_state-2000-01-01_00-00-00.json").write_text("{}")
    for content, message in (
        (b"garbage\n", "tuner.pkl cannot be read"),
        (real[: len(real) // 2], "tuner.pkl cannot be read"),
        (pickle.dumps(["another", "object"]), "holds a list, not a Tuner's state"),
        (pickle.dumps({"__trainable_name": "PPO"}), "an experiment of trainable 'PPO'"),
    ):
        (directory / "tuner.pkl").write_bytes(content)
        one_line_error(capsys, main(["resume", str(directory)]), message)


# -- 1, 2, 5. evaluate -------------------------------------------------------------------------


def test_evaluate_in_an_unknown_or_mismatched_gymnasium_env(checkpoints, capsys):
    cartpole = str(checkpoints / "cartpole")
    one_line_error(capsys, main(["evaluate", cartpole, "--gymnasium", "NoSuchEnv-v0"]), "gymnasium has no env 'NoSuchEnv-v0'")
    one_line_error(capsys, main(["evaluate", cartpole, "--gymnasium", "CartPol-v1"]), "did you mean 'CartPole-v1'?")
    one_line_error(
        capsys,
        main(["evaluate", cartpole, "--gymnasium", "Pendulum-v1"]),
        "observation space Box(3,) does not match the observation space Box(4,) of this cartpole checkpoint",
    )


def test_evaluate_a_checkpoint_whose_state_comes_from_another_env(checkpoints, tmp_path, capsys):
    mixed = tmp_path / "mixed"
    shutil.copytree(checkpoints / "cartpole", mixed)
    shutil.rmtree(mixed / "state")
    shutil.copytree(checkpoints / "pendulum" / "state", mixed / "state")
    one_line_error(capsys, main(["evaluate", str(mixed)]), "is incomplete or damaged")
    # the same without the file list older checkpoints lack: orbax's own error, as one line
    metadata = json.loads((mixed / "ajax_tune.json").read_text())
    del metadata["files"]
    (mixed / "ajax_tune.json").write_text(json.dumps(metadata))
    one_line_error(capsys, main(["evaluate", str(mixed)]), "could not be read; its files are damaged")


@pytest.mark.slow
def test_evaluate_a_checkpoint_cut_in_half_in_a_fresh_process(checkpoints, tmp_path):
    """Exit-time errors (orbax's event loop) only show in a process of its own."""
    cut = tmp_path / "cut"
    shutil.copytree(checkpoints / "cartpole", cut)
    for path in (cut / "state").rglob("*"):
        if path.is_file():
            path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    metadata = json.loads((cut / "ajax_tune.json").read_text())
    del metadata["files"]  # so that orbax itself meets the cut files
    (cut / "ajax_tune.json").write_text(json.dumps(metadata))
    exe = pathlib.Path(sys.executable).parent / "ajax-tune"
    out = subprocess.run([exe, "evaluate", str(cut)], capture_output=True, text=True, env={**os.environ, "JAX_PLATFORMS": "cpu"})
    lines = [line for line in out.stderr.splitlines() if "warp" not in line]  # brax's optional-import notice
    assert out.returncode == 2 and len(lines) == 1, out.stderr
    assert "could not be read; its files are damaged" in lines[0]


# -- joining a cluster that is not there -------------------------------------------------------


@pytest.mark.parametrize(
    "address, message",
    [
        ("127.0.0.1:1", "cannot reach a Ray cluster at 127.0.0.1:1"),
        ("headnode", "--address expects HOST:PORT of a Ray head"),
    ],
)
def test_unreachable_address(experiment, tmp_path, capsys, address, message):
    import ray

    code = main(["run", experiment, "--storage-path", str(tmp_path), "--address", address])
    one_line_error(capsys, code, message)
    assert not ray.is_initialized() and not (tmp_path / "small" / ".ajax-tune.lock").exists()


# -- 9. an env asked for more than it holds (each suite's own: tests/test_suite_*.py) ------------


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (
            {"height": 7, "width": 7, "n_walls": 48},
            r"^jaxued/maze: n_walls=48 does not fit a 7 x 7 maze: at most 47 \(its cells less one for the agent and one",
        ),
        ({"height": 7, "width": 7, "n_walls": 47}, None),  # the most it holds
        ({"max_episode_steps": 0}, "^jaxued/maze: max_episode_steps must be an integer >= 1, got 0"),
    ],
)
def test_a_maze_asked_for_more_than_it_holds_is_one_line_before_compiling(kwargs, message):
    """Walls past a maze's cells (less the agent's and the goal's), a time limit under one step:
    one ConfigError naming the maze and the setting, before any program is built."""
    from tests.support.helpers import assert_refused_before_compiling

    config = {"env": {"name": "jaxued/maze", "kwargs": kwargs}, **TINY}
    if message is None:
        Runner.check(config)
    else:
        assert_refused_before_compiling(config, message)


@pytest.mark.parametrize(
    "env, message",
    [
        (
            {"name": "jaxued/maze", "kwargs": {"n_wall": 3}},
            r"^env.kwargs: jaxued/maze takes no argument 'n_wall'; did you mean 'n_walls'\? It takes: height, width, n_walls,",
        ),
        (
            {"name": "corridor", "kwargs": {"max_lenght": 8}},
            r"^env.kwargs: corridor takes no argument 'max_lenght'; did you mean 'max_length'\? It takes: max_length, "
            r"max_episode_steps, default_length$",
        ),
        ({"name": "tmaze", "kwargs": {"colour": 1}}, r"^env.kwargs: tmaze takes no argument 'colour'\. It takes: max_length,"),
        ({"name": "corridor", "kwargs": {"max_length": "long"}}, r"^corridor: max_length must be an integer >= 1, got 'long'$"),
        ({"name": "corridor", "kwargs": {"max_episode_steps": 0}}, r"^corridor: max_episode_steps must be an integer >= 1"),
        ({"name": "tmaze", "kwargs": {"max_length": 4, "default_length": 9}}, r"^tmaze: default_length must be in \[1, 4\]"),
        ({"name": "jaxued/maze", "kwargs": {"height": True}}, r"^jaxued/maze: height must be an integer >= 2, got True$"),
    ],
)
def test_env_kwargs_that_the_env_does_not_take_or_cannot_hold_are_one_line_before_compiling(env, message):
    """A misspelt constructor argument names the nearest one and the list (any env whose constructor
    names its arguments); a count of the wrong type or below its least is one line naming the env."""
    from tests.support.helpers import assert_refused_before_compiling

    assert_refused_before_compiling({"env": env, **TINY}, message)
