"""Trial names and directories a person can read: no mappings spelled out, the varied values kept."""

import re

import pytest
from ray import tune
from ray.tune.experiment import Trial

from ajax_tune import AjaxTrainable, trial_names
from ajax_tune.tune.output import describe_values
from tests.support.helpers import corridor_config

UNREADABLE = re.compile(r"[{}'\",:\s]")  # braces, quotes, commas, colons, spaces


def stub_trial(evaluated_params, **naming):
    config = corridor_config()
    return Trial("AjaxTrainable", config=config, evaluated_params=evaluated_params, stub=True, **naming)


def test_tunes_default_name_spells_out_the_env_mapping_and_ours_does_not():
    params = {"env/task/length": 8, "agent/lr/peak": 0.0031234, "agent/ent_coef": 0.0139}
    default = stub_trial(params)
    assert "{'name': 'corridor'" in str(default)  # the cause: Tune appends config["env"] to the name
    ours = stub_trial(params, **trial_names())
    assert str(ours) == f"AjaxTrainable_{ours.trial_id}"
    dirname = ours.custom_dirname
    assert dirname == f"AjaxTrainable_{ours.trial_id}_ent_coef=0.0139_length=8_peak=0.003123"
    assert not UNREADABLE.search(str(ours)) and not UNREADABLE.search(dirname)


def test_values_are_labelled_by_the_shortest_unique_key():
    assert describe_values({"agent/lr/peak": 1e-3, "other/lr/peak": 2e-3}) == "agent.lr.peak=0.001_other.lr.peak=0.002"
    # a grid over a whole mapping names its leaves; lists, callables and odd strings stay path-safe
    assert describe_values({"env": {"name": "point reach", "kwargs": {"radius": 0.25}}}) == "name=point_reach_radius=0.25"
    assert describe_values({"agent/hidden_sizes": [64, 64], "env_task_fn": len}) == "env_task_fn=len_hidden_sizes=64-64"
    assert describe_values({}) == ""


def test_long_directory_names_are_cut():
    params = {f"agent/key_{i}": 0.123456 for i in range(30)}
    dirname = stub_trial(params, **trial_names()).custom_dirname
    assert len(dirname) <= 120 and "/" not in dirname and not dirname.endswith("_")


class Names(tune.Callback):
    def __init__(self):
        self.seen = {}

    def on_trial_start(self, iteration, trials, trial, **info):
        self.seen[trial.trial_id] = (str(trial), trial.storage.trial_dir_name)


@pytest.mark.usefixtures("ray_session")
def test_tuner_fit_with_a_nested_config_names_trials_readably(tmp_path):
    names = Names()
    space = corridor_config(
        env={
            "name": "corridor",
            "kwargs": {"max_length": 32, "max_episode_steps": 40},
            "task": {"length": tune.grid_search([4, 8]), "exit_reward": 0.2},
        }
    )
    results = tune.Tuner(
        AjaxTrainable,
        param_space=space,
        tune_config=tune.TuneConfig(reuse_actors=True, **trial_names()),  # the second trial in the first's actor
        run_config=tune.RunConfig(
            storage_path=str(tmp_path), name="names", stop={"training_iteration": 1}, verbose=0, callbacks=[names]
        ),
    ).fit()
    assert results.num_errors == 0
    assert len(names.seen) == 2
    for trial_id, (name, dirname) in names.seen.items():
        assert name == f"AjaxTrainable_{trial_id}"
        assert not UNREADABLE.search(name) and not UNREADABLE.search(dirname), (name, dirname)
    by_length = {r.config["env"]["task"]["length"]: r.path.rsplit("/", 1)[-1] for r in results}
    assert set(by_length) == {4, 8}
    assert by_length[4].endswith("_length=4") and by_length[8].endswith("_length=8")  # says what differs
