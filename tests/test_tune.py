"""The three workflows through real `tune.Tuner(...).fit()` on a local 2-CPU Ray."""

import collections
import json
import math
import pathlib
import tempfile

import jax.numpy as jnp
import numpy as np
import pytest
from ray import tune
from ray.tune.schedulers import ASHAScheduler, PopulationBasedTraining

from ajax_tune import AjaxTrainable, Runner
from ajax_tune.schedules import Schedule, learning_rate
from ajax_tune.tune.output import trial_dirname
from tests.support.helpers import assert_trees_equal, corridor_config

pytestmark = pytest.mark.usefixtures("ray_session")

UNROLL = 8 * 16
BUDGET = 4 * UNROLL  # env steps per seed per train() in corridor_config


def fit(trainable, space, tmp_path, name, *, stop=None, checkpoint_every=0, tune_config=None, **run):
    tuner = tune.Tuner(
        trainable,
        param_space=space,
        tune_config=tune_config or tune.TuneConfig(trial_dirname_creator=trial_dirname),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path),
            name=name,
            stop=stop,
            verbose=0,
            checkpoint_config=tune.CheckpointConfig(
                checkpoint_frequency=checkpoint_every, checkpoint_at_end=bool(checkpoint_every)
            ),
            **run,
        ),
    )
    results = tuner.fit()
    assert results.num_errors == 0, [r.error for r in results if r.error]
    return results


def rows(result):
    return result.metrics_dataframe.sort_values("training_iteration").reset_index(drop=True)


def test_search_grid_and_random_with_asha(tmp_path):
    space = corridor_config(length=8, lr=tune.grid_search([1e-4, 3e-3]), agent={"ent_coef": tune.uniform(0.0, 0.02)})
    asha = ASHAScheduler(time_attr="training_iteration", max_t=6, grace_period=2, reduction_factor=2)
    results = fit(
        AjaxTrainable,
        space,
        tmp_path,
        "search",
        checkpoint_every=2,
        tune_config=tune.TuneConfig(
            metric="eval/return_mean",
            mode="max",
            num_samples=2,
            scheduler=asha,
            # a trial ASHA stops hands its actor (and compiled program) to the next one
            reuse_actors=True,
            trial_dirname_creator=trial_dirname,
        ),
    )
    assert len(results) == 4
    assert sorted(r.config["agent"]["lr"] for r in results) == [1e-4, 1e-4, 3e-3, 3e-3]
    assert len({r.config["agent"]["ent_coef"] for r in results}) == 4  # sampled per trial
    assert all(2 <= r.metrics["training_iteration"] <= 6 for r in results)  # ASHA's rungs and max_t

    best = results.get_best_result()
    assert best.metrics["eval/return_mean"] == max(r.metrics["eval/return_mean"] for r in results)
    # the best trial found the goal at least once: a check that trials trained and reported, not a
    # learning claim (the trials ran in Ray workers, in the suite's cheap build; no doc quotes it)
    assert best.metrics["eval/return_mean"] > 0
    assert best.metrics["timesteps_total"] == best.metrics["env_steps"] == best.metrics["training_iteration"] * BUDGET

    # checkpoints exist and restore: into the core object, and into the trainable
    checkpoint = best.checkpoint
    assert (pathlib.Path(checkpoint.path) / "ajax_tune.json").exists()
    saved_iteration = json.loads((pathlib.Path(checkpoint.path) / "ajax_tune.json").read_text())["extra"]["iteration"]
    runner = Runner(best.config)
    runner.restore(checkpoint.path)
    assert runner.loop.timestep(runner.state) == saved_iteration * BUDGET
    assert runner.train()["env_steps"] == (saved_iteration + 1) * BUDGET
    trainable = AjaxTrainable(config=best.config)
    trainable.restore(checkpoint)
    assert trainable.train()["env_steps"] == (saved_iteration + 1) * BUDGET  # the run continues
    trainable.stop()


def check_curriculum_rows(df, promoted):
    """Every row reports the task it trained on, and the next call trains on the task it chose."""
    trained, chosen = df["curriculum/task/length"].tolist(), df["curriculum/next_task/length"].tolist()
    assert trained[1:] == chosen[:-1]
    assert trained[0] == 4 and max(trained) >= 12  # it grew
    for t, c, result in zip(trained, chosen, df.to_dict("records")):
        assert c == (promoted(t) if result["eval/success_rate_mean"] >= 1.0 else t)
    assert df["perf/compilations"].max() == 1


@pytest.mark.parametrize("style", ["env_task_fn", "callback"])
def test_curriculum_on_corridor_grows_and_survives_restore(tmp_path, style):
    if style == "env_task_fn":
        space = corridor_config(length=4, env_task_fn="tests.support.curricula:grow_corridor")
    else:
        space = corridor_config(
            length=4,
            callbacks=[
                {
                    "class": "ajax_tune.curriculum:ThresholdCurriculum",
                    "kwargs": {"levels": {"length": list(range(4, 33, 4))}, "threshold": 1.0},
                }
            ],
        )
    promoted = lambda t: min(t + 4, 32)  # both grow by 4 cells up to 32
    # the checkpoint the restore below starts from (after iteration 4), and the one at the end
    results = fit(AjaxTrainable, space, tmp_path, style, stop={"training_iteration": 8}, checkpoint_every=4)
    result = results[0]
    df = rows(result)
    check_curriculum_rows(df, promoted)
    if style == "callback":
        assert (df["curriculum/next_task/length"] == 4 * (df["curriculum/level"] + 1)).all()

    # restore from the checkpoint after iteration 4: the curriculum continues from there
    by_iteration = {m["training_iteration"]: c for c, m in result.best_checkpoints}
    trainable = AjaxTrainable(config=result.config)
    trainable.restore(by_iteration[4])
    after = trainable.train()
    assert after["curriculum/task/length"] == df.loc[3, "curriculum/next_task/length"]
    assert after["eval/return_mean"] == df.loc[4, "eval/return_mean"]  # bit-exact continuation
    assert after["curriculum/next_task/length"] == df.loc[4, "curriculum/next_task/length"]
    trainable.stop()


def train_with_runner(config):
    """A function trainable that owns the core object, as RLlib users own an Algorithm."""
    runner = Runner(config["ajax"], trial_id=tune.get_context().get_trial_id())
    checkpoint = tune.get_checkpoint()
    if checkpoint:
        with checkpoint.as_directory() as directory:
            runner.restore(directory)
    while runner.iteration < config["iterations"]:
        result = runner.train()
        if result["eval/success_rate_mean"] >= 1.0:
            runner.set_task({"length": min(2 * runner.get_task()["length"], 32)})
        with tempfile.TemporaryDirectory() as directory:
            runner.save(directory)
            tune.report(
                {**result, "task_after": runner.get_task()["length"]}, checkpoint=tune.Checkpoint.from_directory(directory)
            )


def test_function_trainable_with_the_core_object(tmp_path):
    results = fit(
        train_with_runner, {"ajax": corridor_config(length=4, train={"num_seeds": 4}), "iterations": 6}, tmp_path, "function"
    )
    df = rows(results[0])
    assert len(df) == 6
    assert df["curriculum/task/length"].tolist()[1:] == df["task_after"].tolist()[:-1]
    # it doubled at least twice: all 4 seeds reached the end of 4 cells, then of 8
    assert df["task_after"].max() >= 16
    assert df["env_steps"].tolist() == [BUDGET * i for i in range(1, 7)]
    assert results[0].checkpoint is not None


def test_a_grid_over_callbacks_trains_each_arm_afresh_in_a_reused_actor(tmp_path):
    """The deceptive corridor's two arms (no curriculum, a ThresholdCurriculum from 4 cells) as a
    Tune grid over `callbacks` with reused actors: each trial trains its own arm from the start.
    What the arms learn is asserted in the build users run, at the Runner, by
    `tests/test_learning.py::test_a_curriculum_pays_off_on_the_deceptive_corridor`: this test's
    trials run in Ray workers, which compile the suite's cheap build."""
    ladder = {
        "class": "ajax_tune.curriculum:ThresholdCurriculum",
        "kwargs": {"levels": {"length": list(range(4, 33, 4))}, "threshold": 1.0},
    }
    space = corridor_config(
        env={"task": {"length": 32, "exit_reward": 0.2}},
        callbacks=tune.grid_search([[], [ladder]]),
    )  # the suite's small program (as the other tests here): the arms' learning is not asserted here
    # the second trial may continue in the first one's actor: reset_config starts it afresh
    # (test_trainable_reset_config_leaks_nothing), so the two runs stay independent
    tune_config = tune.TuneConfig(reuse_actors=True, trial_dirname_creator=trial_dirname)
    results = fit(AjaxTrainable, space, tmp_path, "payoff", stop={"training_iteration": 2}, tune_config=tune_config)
    curriculum, direct = sorted((rows(r) for r in results), key=lambda df: "curriculum/level" not in df)
    assert "curriculum/level" not in direct
    assert curriculum["curriculum/task/length"].iloc[0] == 4  # the ladder starts short
    assert (direct["curriculum/task/length"] == 32).all()
    assert curriculum["env_steps"].tolist() == direct["env_steps"].tolist() == [BUDGET * i for i in (1, 2)]
    assert curriculum["perf/compilations"].max() == direct["perf/compilations"].max() == 1


LEVELS = list(range(4, 33, 4))


class CollectResults(tune.Callback):
    """Every result as the driver saw it, config included (Tune's stored result files can lose
    rows around PBT's pauses and restores)."""

    def __init__(self):
        self.rows = collections.defaultdict(list)

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.rows[trial.trial_id].append(result)


def fit_synch_pbt(space, tmp_path, name, mutations, *, metric, interval=1, resample_probability=0.25, num_samples=1):
    """Synchronous PBT with reused actors (every round exploits: the lower half of the trials takes
    the checkpoints of the upper half), stopped after one exploit round and the interval after it.
    One round, because once the searcher has made every trial Tune empties its actor cache, so each
    later round costs every trial a new actor (about 8 s on 2 cores). Returns the results, every
    result of each trial as the driver saw it, and PBT's exploits (pbt_global.txt, parsed)."""
    scheduler = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=interval,
        quantile_fraction=0.5,
        synch=True,
        resample_probability=resample_probability,
        hyperparam_mutations=mutations,
    )
    collect = CollectResults()
    results = fit(
        AjaxTrainable,
        space,
        tmp_path,
        name,
        stop={"training_iteration": 2 * interval},
        callbacks=[collect],
        tune_config=tune.TuneConfig(
            metric=metric,
            mode="max",
            num_samples=num_samples,
            scheduler=scheduler,
            reuse_actors=True,
            trial_dirname_creator=trial_dirname,
        ),
    )
    lines = (pathlib.Path(results.experiment_path) / "pbt_global.txt").read_text().splitlines()
    return results, collect.rows, [json.loads(line) for line in lines]


def test_pbt_over_lr_schedules_without_recompiling(tmp_path):
    space = corridor_config(
        length=4,
        lr={"kind": "warmup_cosine", "peak": tune.choice([3e-4, 3e-3]), "warmup_fraction": 0.1, "end_fraction": 0.1},
        callbacks=[
            {"class": "ajax_tune.curriculum:ThresholdCurriculum", "kwargs": {"levels": {"length": LEVELS}, "threshold": 1.0}}
        ],
        train={"total_timesteps": 12 * BUDGET},
        # Normalised observations, as this test was built on: with PPO's raw-observation default
        # every trial climbs one level per call whatever its learning rate, the population ties at
        # every perturbation, and PBT (rightly) never exploits.
        agent={"normalize_observations": True},
        # Half a CPU each: with one CPU per test worker's Ray, two trials run side by side, so
        # asynchronous PBT has a live population to rank (one trial at a time would never exploit).
        resources={"cpu": 0.5},
    )
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=2,
        quantile_fraction=0.25,
        resample_probability=0.5,
        hyperparam_mutations={
            "agent": {
                "lr": {
                    "peak": tune.loguniform(1e-4, 1e-2),
                    "warmup_fraction": [0.0, 0.1, 0.2],
                    "end_fraction": [0.0, 0.1],
                    "kind": ["warmup_cosine", "cosine", "linear"],
                }
            }
        },
    )
    collect = CollectResults()
    results = fit(
        AjaxTrainable,
        space,
        tmp_path,
        "pbt",
        stop={"training_iteration": 10},
        callbacks=[collect],
        tune_config=tune.TuneConfig(
            metric="curriculum/level",
            mode="max",
            num_samples=4,
            scheduler=pbt,
            reuse_actors=True,
            trial_dirname_creator=trial_dirname,
        ),
    )
    experiment = pathlib.Path(results.experiment_path)
    exploits = [json.loads(line) for line in (experiment / "pbt_global.txt").read_text().splitlines()]
    assert exploits, "PBT never exploited"
    assert len(collect.rows) == 4

    mutated = 0
    for trial_rows in collect.rows.values():
        schedules = set()
        for r in trial_rows:
            assert r["perf/compilations"] == 1
            # the reported learning rate is the schedule of the config in force, at that timestep
            lr = r["config"]["agent"]["lr"]
            schedules.add(tuple(sorted(lr.items())))
            params = Schedule.parse(lr).to_params()
            expected = learning_rate(params, jnp.float32(r["env_steps"] - UNROLL), jnp.float32(12 * BUDGET))
            assert r["lr"] == pytest.approx(float(expected), rel=1e-5)
            # the curriculum level travels with the state: the task never drops (no demotion is
            # configured) and always matches the reported level
            assert r["curriculum/next_task/length"] >= r["curriculum/task/length"]
            assert r["curriculum/next_task/length"] == LEVELS[int(r["curriculum/level"])]
            # env steps follow the state's lineage, although Tune rewinds training_iteration
            assert r["env_steps"] == r["training_iteration"] * BUDGET == r["timesteps_total"]
        mutated += len(schedules) > 1
    assert mutated >= 1


def test_trial_recovers_from_a_failure_exactly(tmp_path):
    never = tmp_path / "never-fails"
    never.write_text("already failed")
    callbacks = lambda marker: [
        {"class": "tests.support.curricula:FailOnce", "kwargs": {"marker": str(marker), "at_iteration": 3}}
    ]
    space = corridor_config(length=8, callbacks=tune.grid_search([callbacks(tmp_path / "failed"), callbacks(never)]))
    results = fit(
        AjaxTrainable,
        space,
        tmp_path,
        "recovery",
        stop={"training_iteration": 5},
        checkpoint_every=1,
        failure_config=tune.FailureConfig(max_failures=1),
        # a trial may start (or restart) in an actor another one left (reset_config starts it afresh)
        tune_config=tune.TuneConfig(reuse_actors=True, trial_dirname_creator=trial_dirname),
    )
    assert (tmp_path / "failed").exists()  # the failure really happened
    failed, clean = sorted(results, key=lambda r: r.config["callbacks"][0]["kwargs"]["marker"] != str(tmp_path / "failed"))
    for key in ("eval/return_mean", "eval/return_seed0", "eval/return_seed1", "loss/value", "env_steps"):
        a, b = failed.metrics[key], clean.metrics[key]
        assert a == b or (math.isnan(a) and math.isnan(b)), key


def test_trainable_reset_config_leaks_nothing():
    first = AjaxTrainable(config=corridor_config(lr=1e-3, train={"seed": 2}))
    first.train()
    first.runner.set_task({"length": 20})
    new_config = corridor_config(lr=4e-3, train={"seed": 5})
    assert first.reset(new_config)
    fresh = AjaxTrainable(config=new_config)
    assert_trees_equal(first.runner.state, fresh.runner.state)
    a, b = first.train(), fresh.train()
    assert a["training_iteration"] == b["training_iteration"] == 1
    assert first.runner.loop.compilations == 1  # reset reused the compiled program
    np.testing.assert_array_equal(
        np.asarray(first.runner.state.agent.params["policy"]["params"]["Dense_0"]["kernel"]),
        np.asarray(fresh.runner.state.agent.params["policy"]["params"]["Dense_0"]["kernel"]),
    )
    first.stop()
    fresh.stop()
