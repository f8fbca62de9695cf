"""The Runner without Ray: results, tasks, curriculum errors, reconfigure, checkpoints."""

import json
import math

import jax
import numpy as np
import pytest

from ajax_tune.build import build_loop
from ajax_tune.checkpoint import METADATA_FILE
from ajax_tune.config import Config
from ajax_tune.curriculum import Callback, ThresholdCurriculum
from ajax_tune.curriculum.task_control import TaskControl
from ajax_tune.envs import TaskError
from ajax_tune.errors import ConfigError
from ajax_tune.runner import Runner
from tests.support.helpers import assert_trees_equal, corridor_config


@pytest.fixture(scope="module")
def runner():
    return Runner(corridor_config(), trial_id="t0")


def test_results_have_stable_plain_keys(runner):
    first, second = runner.train(), runner.train()
    assert set(first) == set(second)
    for result in (first, second):
        for key, value in result.items():
            assert isinstance(value, (int, float, bool)), (key, type(value))
    for key in (
        "timesteps_this_iter",
        "eval/return_mean",
        "eval/return_std",
        "eval/length_mean",
        "eval/success_rate_mean",
        "curriculum/task/length",
        "lr",
        "perf/env_steps_per_s",
        "perf/compilations",
        "env_steps",
    ):
        assert key in first
    assert second["env_steps"] == first["env_steps"] + first["timesteps_this_iter"] == 2 * 512
    # each seed's own return, whose mean the headline is
    assert np.mean([first["eval/return_seed0"], first["eval/return_seed1"]]) == pytest.approx(first["eval/return_mean"])
    assert "eval/return_seed2" not in first


def test_bad_task_from_env_task_fn_leaves_the_state_alone(runner):
    before = jax.tree.map(np.asarray, jax.device_get(runner.state))
    runner.curriculum.env_task_fn = lambda result, env, ctx: {"length": 1000}
    try:
        with pytest.raises(TaskError, match=r"corridor: task field 'length' expected integer scalar in \[1, 32\]"):
            runner.train()
    finally:
        runner.curriculum.env_task_fn = None
    with pytest.raises(TaskError, match="unknown task field"):
        runner.set_task({"width": 3})
    # the failed call trained (its state is kept), but the task is unchanged
    assert runner.get_task()["length"] == 4
    assert int(np.asarray(runner.state.iteration)[0]) == int(before.iteration[0]) + 4


@pytest.mark.heavy
def test_eval_at_start_reports_the_untrained_policy_in_the_first_result_only():
    """Where the option is off the keys are there and NaN; where on, the first result holds the
    untrained policy's evaluation, and the same one program trains exactly as without it (its
    key is folded out of the stream, not drawn from it)."""
    starts = (
        "eval/start/return_mean",
        "eval/start/return_std",
        "eval/start/return_min",
        "eval/start/return_max",
        "eval/start/success_rate_mean",
    )
    on, off = (Runner(corridor_config(length=16, train={"eval_at_start": flag})) for flag in (True, False))
    untrained = on.evaluate(episodes=4)  # the corridor and the deterministic policy draw nothing
    first, second = on.train(), on.train()
    assert first["eval/start/return_mean"] == pytest.approx(untrained["return"].mean())
    assert first["eval/start/success_rate_mean"] == pytest.approx(untrained["success"].mean())
    assert first["eval/start/return_min"] <= first["eval/start/return_mean"] <= first["eval/start/return_max"]
    assert all(math.isfinite(first[k]) for k in starts) and all(math.isnan(second[k]) for k in starts)
    assert first["perf/compilations"] == second["perf/compilations"] == 1
    for result in (off.train(), off.train()):
        assert all(math.isnan(result[k]) for k in starts) and set(result) == set(first)
    assert_trees_equal(on.state, off.state)


def test_a_diverged_first_call_keeps_its_start_evaluation():
    """Divergence makes the call's scores the worst there is; the start evaluation scored the
    untrained policy, before anything diverged, and stays as it was."""
    runner = Runner(corridor_config(lr=1e30, train={"eval_at_start": True}))
    result = runner.train()
    assert result["train/nonfinite"] == 1.0 and result["eval/return_mean"] == -math.inf
    assert math.isfinite(result["eval/start/return_mean"]) and math.isfinite(result["eval/start/success_rate_mean"])


@pytest.mark.heavy
def test_reconfigure_onto_a_new_trial_leaks_nothing():
    first = Runner(corridor_config(lr=1e-3, train={"seed": 1}), trial_id="a")
    first.set_task({"length": 9})
    first.train()
    traces = first.loop.compilations
    new_config = corridor_config(lr=5e-3, train={"seed": 7}, agent={"ent_coef": 0.05})
    rebuilt = first.reconfigure(new_config)
    assert not rebuilt and first.loop.compilations == traces
    fresh = Runner(new_config, trial_id="b")
    assert_trees_equal(first.state, fresh.state)
    assert first.iteration == 0 and first.get_task()["length"] == 4
    # and they keep agreeing once training
    a, b = first.train(), fresh.train()
    ra, rb = a["eval/return_mean"], b["eval/return_mean"]
    assert ra == rb or (math.isnan(ra) and math.isnan(rb))
    assert_trees_equal(first.state.agent.params, fresh.state.agent.params)
    assert first.loop.compilations == 1


class Recorder(Callback):
    """Which hooks ran, in order, and what each was handed."""

    def __init__(self):
        self.seen = []

    def on_setup(self, control):
        self.seen.append(("setup", control))

    def on_train_result(self, control, result):
        self.seen.append(("train", control))

    def on_task_change(self, control, old_task, new_task):
        self.seen.append((f"task {old_task['length']}->{new_task['length']}", control))

    def on_checkpoint_save(self, control, checkpoint_dir):
        self.seen.append(("save", control))

    def on_checkpoint_load(self, control, checkpoint_dir):
        self.seen.append(("load", control))


def test_callbacks_see_the_task_control_not_the_runner(tmp_path):
    recorder = Recorder()
    r = Runner(corridor_config(callbacks=[recorder]), trial_id="c")
    r.set_task({"length": 6})
    r.train()
    r.save(tmp_path / "ck")
    r.restore(tmp_path / "ck")
    assert [hook for hook, _ in recorder.seen] == ["setup", "task 4->6", "train", "save", "load"]
    assert all(control is r.curriculum.control and isinstance(control, TaskControl) for _, control in recorder.seen)
    assert (r.curriculum.control.num_envs, r.curriculum.control.iteration, r.curriculum.control.trial_id) == (8, 1, "c")
    assert r.curriculum.control.state is r.state and r.curriculum.control.task_spec is r.env.task_spec


DEFAULT_ENVS = {"ppo": "cartpole", "dqn": "cartpole", "sac": "pendulum", "td3": "pendulum"}


def test_every_built_in_agents_defaults_with_only_the_env_named_are_a_valid_config():
    """(Offline agents need a dataset besides: tests/test_offline.py.)"""
    from ajax_tune.agents import AGENTS

    assert set(DEFAULT_ENVS) == {name for name, (cls, _) in AGENTS.items() if not getattr(cls, "offline", False)}
    for agent, env in DEFAULT_ENVS.items():
        config = Runner.check({"env": {"name": env}, "agent": {"name": agent}})
        assert config.train.timesteps_per_iteration == 49_152
    assert Runner.check({"env": {"name": "cartpole"}}).agent_name == "ppo"


def test_reconfigure_rebuilds_only_for_static_changes():
    r = Runner(corridor_config())
    assert r.reconfigure(corridor_config(agent={"hidden_sizes": [16]})) is True
    loop = r.loop
    assert r.reconfigure(corridor_config(agent={"hidden_sizes": [16], "gamma": 0.9})) is False
    # the same program, told of the new sections through its own API
    assert r.loop is loop and loop.agent.config.gamma == 0.9 and loop.config is r.config.train


def test_a_refused_reconfigure_leaves_the_run_as_it_was():
    """Refused for memory (a new program) or for its task (the same program), before anything is
    replaced: the runner trains on, on its program, config and state, without compiling again."""
    from ajax_tune.errors import TaskError

    r = Runner(corridor_config())
    r.train()
    loop, config, state, agent_config = r.loop, r.config, r.state, r.loop.agent.config
    huge = corridor_config(train={**corridor_config()["train"], "eval_episodes": 10**12})
    with pytest.raises(ConfigError, match=r"GiB of it for an evaluation's 1,000,000,000,000 episodes"):
        r.reconfigure(huge)
    with pytest.raises(TaskError, match="task field 'length' expected integer scalar in"):
        r.reconfigure(corridor_config(lr=1e-3, env={"task": {"length": 99}}))
    assert r.loop is loop and r.config is config and r.state is state and loop.agent.config is agent_config
    assert r.train()["perf/compilations"] == 1


def test_the_loop_takes_a_new_runs_sections_and_refuses_a_static_change():
    """`TrainLoop.reconfigure` is how a runner keeps its program: what a run reads changes,
    a setting the program closed over is refused in one line and changes nothing."""
    _, loop = build_loop(Config.from_dict(corridor_config()))
    other = Config.from_dict(corridor_config(lr=1e-3, train={"seed": 3, "total_timesteps": 20_000}))
    loop.reconfigure(other.train, other.agent)
    assert loop.config is other.train and loop.agent.config is other.agent
    for change, named in (
        ({"agent": {"num_envs": 4}}, "agent.num_envs"),
        ({"train": {"eval_episodes": 2}}, "train.eval_episodes"),
    ):
        static = Config.from_dict(corridor_config(**change))
        with pytest.raises(ConfigError, match=rf"^reconfigure changes {named}, static in this program: build a new loop"):
            loop.reconfigure(static.train, static.agent)
        assert loop.config is other.train and loop.agent.config is other.agent


def test_threshold_curriculum_promotes_demotes_and_mixes():
    r = Runner(corridor_config(), trial_id="x")
    cb = ThresholdCurriculum(
        levels={"length": [2, 4, 8]}, metric="m", threshold=0.5, patience=2, demote_below=0.1, mix_earlier=0.5
    )
    r.curriculum.callbacks = [cb]
    cb.on_setup(r.curriculum.control)  # what a callback sees of the trial: its task control
    assert r.get_task()["length"] == 2
    for value, level in [(0.6, 0), (0.7, 1), (float("nan"), 1), (0.6, 1), (0.9, 2), (0.9, 2), (0.0, 1)]:
        cb.on_train_result(r.curriculum.control, {"m": value})
        assert cb.level == level
    per_env = r.curriculum.task_settable_env.get_tasks()["length"]
    assert r.get_task()["length"] == 4  # evaluations follow the current level
    assert (per_env == 4).sum() == 4 and set(per_env.tolist()) <= {2, 4} and per_env[0] == 4
    with pytest.raises(KeyError, match="metric 'm' is not in the result"):
        cb.on_train_result(r.curriculum.control, {"other": 1.0})


@pytest.mark.heavy
def test_save_restore_carries_curriculum_state(tmp_path):
    config = corridor_config(
        callbacks=[
            {"class": "ajax_tune.curriculum:ThresholdCurriculum", "kwargs": {"levels": {"length": [2, 6, 10]}, "threshold": 0.5}}
        ]
    )
    a = Runner(config, trial_id="same")
    a.curriculum.callbacks[0].level = 2
    a.curriculum.callbacks[0]._apply(a.curriculum.control)
    a.train()
    a.save(tmp_path / "ck")
    b = Runner(config, trial_id="same")
    assert b.curriculum.callbacks[0].level == 0
    b.restore(tmp_path / "ck")
    assert b.curriculum.callbacks[0].level == 2 and b.get_task()["length"] == 10 and b.iteration == 1
    assert_trees_equal(a.state, b.state)
    # another trial's checkpoint: same parameters, a different random stream
    c = Runner(config, trial_id="other")
    c.restore(tmp_path / "ck")
    assert_trees_equal(a.state.agent.params, c.state.agent.params)
    assert not np.array_equal(np.asarray(a.state.key), np.asarray(c.state.key))
    # a trial of one keeps its member's curriculum as a population keeps each member's
    metadata = json.loads((tmp_path / "ck" / METADATA_FILE).read_text())
    assert metadata["extra"]["curricula"] == [a.curriculum.get_state()] and "callbacks" not in metadata["extra"]
    # from_checkpoint builds and then restores the same way
    d = Runner.from_checkpoint(tmp_path / "ck", curriculum=True)
    assert d.curriculum.callbacks[0].level == 2 and d.iteration == 1 and d.trial_id == "same"
    assert_trees_equal(a.state, d.state)
    # a checkpoint written before every member's curriculum was listed kept it at the top level
    extra = metadata["extra"]
    metadata["extra"] = {**{k: v for k, v in extra.items() if k != "curricula"}, **extra["curricula"][0]}
    (tmp_path / "ck" / METADATA_FILE).write_text(json.dumps(metadata))
    e = Runner(config, trial_id="same")
    e.restore(tmp_path / "ck")
    assert e.curriculum.callbacks[0].level == 2


@pytest.mark.parametrize(
    "config, message",
    [
        ({"env": {"nme": "corridor"}}, "unknown key env.'nme'; did you mean env.'name'"),
        ({"agent": {"ent_coeff": 0.1}}, "did you mean agent.'ent_coef'"),
        ({"agent": {"gamma": 1.5}}, "agent.gamma must be <= 1.0"),
        ({"agent": {"num_envs": "8"}}, "agent.num_envs must be an integer, got '8'"),
        ({"agent": {"lr": {"kind": "exp"}}}, "kind must be one of"),
        ({"train": {"timesteps_per_iteration": 100}}, "whole number of unrolls"),
        ({"env": {"name": "corridorr"}}, "did you mean 'corridor'"),
        ({"env": {"task": {"length": 99}}}, "expected integer scalar in [1, 32]"),
        ({"env_task_fn": "nowhere:fn"}, "cannot import module 'nowhere'"),
        ({"callbacks": ["ajax_tune.curriculum:NoSuch"]}, "has no attribute 'NoSuch'"),
        ({"agnt": {}}, "did you mean 'agent'"),
    ],
)
def test_bad_configs_fail_before_compiling(config, message):
    full = corridor_config()
    for key, value in config.items():
        full[key] = {**full[key], **value} if isinstance(full.get(key), dict) else value
    with pytest.raises((ConfigError, TaskError)) as info:
        Runner(full)
    assert message in str(info.value)
