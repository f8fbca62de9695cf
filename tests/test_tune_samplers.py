"""Task samplers and levels through real `tune.Tuner(...).fit()`: a search over a sampler's own
hyperparameter, its state through a Tune restore and a PBT exploit, and RLlib's documented
curriculum function driving a corridor's levels."""

import json
import math
import pathlib

import numpy as np
import pandas as pd
import pytest
from ray import tune
from ray.tune.schedulers import PopulationBasedTraining

from ajax_tune import AjaxTrainable, Runner
from ajax_tune.results import record as trial_record
from ajax_tune.tune.output import trial_dirname
from tests.support.helpers import corridor_config
from tests.test_tune import BUDGET, CollectResults, fit, rows

pytestmark = [pytest.mark.usefixtures("ray_session"), pytest.mark.slow]

SPACE = {"length": [4, 32]}
HELDOUT = {"space": SPACE, "num_tasks": 3, "seed": 0}


def plr_config(temperature, callbacks=()):
    sampler = {"name": "plr", "kwargs": {"space": SPACE, "buffer_size": 8, "seed": 3, "temperature": temperature}}
    return corridor_config(task_sampler=sampler, heldout=HELDOUT, callbacks=list(callbacks))


def test_search_over_plr_temperature_and_a_restore_that_continues(tmp_path):
    """Two temperatures; whichever trial reaches its second call first fails once there and Tune
    recovers it from its first checkpoint."""
    failing = {"class": "tests.support.curricula:FailOnce", "kwargs": {"marker": str(tmp_path / "failed"), "at_iteration": 2}}
    space = plr_config(tune.grid_search([0.1, 1.0]), callbacks=[failing, "tests.support.curricula:SamplerProbe"])
    results = fit(
        AjaxTrainable,
        space,
        tmp_path,
        "plr_search",
        stop={"training_iteration": 3},
        checkpoint_every=1,
        failure_config=tune.FailureConfig(max_failures=1),
        tune_config=tune.TuneConfig(
            metric="eval/heldout/success_rate_mean",
            mode="max",
            # a trial may start (or restart) in an actor the other one left: reset_config starts
            # it afresh, and the probe still sees only its own trial's checkpoint
            reuse_actors=True,
            trial_dirname_creator=trial_dirname,
        ),
    )
    assert (tmp_path / "failed").exists()  # the failure happened
    by_temperature = {r.config["task_sampler"]["kwargs"]["temperature"]: r for r in results}
    assert sorted(by_temperature) == [0.1, 1.0]
    # the trials' own records: Tune's log of a recovered trial can lose rows (see trial_record)
    frames = {t: pd.DataFrame(trial_record.read(r.path)) for t, r in by_temperature.items()}
    for df in frames.values():
        assert df["iteration"].tolist() == df["training_iteration"].tolist() == [1, 2, 3]
        assert (df["sampler/draws"] == df["training_iteration"] + 1).all()
        assert (df["perf/compilations"] == 1).all()
    # the same first call (same seeds, same first tasks), so the same buffer and scores; only the
    # temperature differs, and a higher one spreads the replay distribution
    cold, warm = (frames[t].iloc[0] for t in (0.1, 1.0))
    assert cold["sampler/score_mean"] == warm["sampler/score_mean"] and cold["tasks/length/mean"] == warm["tasks/length/mean"]
    assert warm["sampler/entropy"] > cold["sampler/entropy"]
    best = results.get_best_result()
    assert best.metrics["eval/heldout/success_rate_mean"] == max(r.metrics["eval/heldout/success_rate_mean"] for r in results)

    # Tune's restore of the failed trial: after it, the sampler held the checkpoint's state,
    # random stream included (its own trial: nothing re-keyed)
    recovered = [t for t, df in frames.items() if df["probe/sampler_matched"].notna().any()]
    assert len(recovered) == 1
    after = frames[recovered[0]].iloc[1:]
    assert (after["probe/sampler_matched"] == 1.0).all() and (after["probe/sampler_reseeded"] == 0.0).all()
    assert (after["probe/from_other_trial"] == 0.0).all()

    # and its run continues exactly: call 3 again from the checkpoint after call 2
    result = by_temperature[recovered[0]]
    checkpoint = {m["training_iteration"]: c for c, m in result.best_checkpoints}[2]
    saved = json.loads((pathlib.Path(checkpoint.path) / "ajax_tune.json").read_text())["extra"]
    runner = Runner(result.config, trial_id=saved["trial_id"])
    runner.restore(checkpoint.path)
    assert runner.curriculum.sampler.get_state() == saved["curricula"][0]["sampler"]
    again = runner.train()
    for key, value in frames[recovered[0]].iloc[2].items():
        if key.startswith(("sampler/", "tasks/", "eval/")):
            assert again[key] == value or (math.isnan(value) and math.isnan(again[key])), key


def test_pbt_exploit_continues_the_donors_sampler(tmp_path):
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=2,
        quantile_fraction=0.5,
        synch=True,  # an exploit every time
        hyperparam_mutations={"task_sampler": {"kwargs": {"temperature": tune.uniform(0.05, 1.0)}}},
    )
    collect = CollectResults()
    space = plr_config(tune.grid_search([0.1, 1.0]), callbacks=["tests.support.curricula:SamplerProbe"])
    results = fit(
        AjaxTrainable,
        space,
        tmp_path,
        "plr_pbt",
        stop={"training_iteration": 4},
        callbacks=[collect],
        tune_config=tune.TuneConfig(
            metric="eval/heldout/success_rate_mean",
            mode="max",
            scheduler=pbt,
            reuse_actors=True,
            trial_dirname_creator=trial_dirname,
        ),
    )
    exploits = (pathlib.Path(results.experiment_path) / "pbt_global.txt").read_text().splitlines()
    assert exploits, "PBT never exploited"
    exploited = 0
    for trial_rows in collect.rows.values():
        for r in trial_rows:
            assert r["perf/compilations"] == 1
            # the sampler follows the state's lineage: one draw at the start and one per call
            # of the lineage, although an exploit swapped in another trial's run
            assert r["sampler/draws"] == r["env_steps"] / BUDGET + 1
            if not math.isnan(r["probe/sampler_matched"]):  # since a checkpoint load
                assert r["probe/sampler_matched"] == 1.0  # the checkpoint's sampler state ...
                assert r["probe/sampler_reseeded"] == r["probe/from_other_trial"]  # ... with this trial's draws
                exploited += r["probe/from_other_trial"] == 1.0
    assert exploited >= 1


def test_rllib_curriculum_fn_drives_corridor_levels_through_tune(tmp_path):
    space = corridor_config(
        env={"levels": {"length": [4, 8, 12, 16]}, "level_overflow": "clamp"}, env_task_fn="tests.support.curricula:curriculum_fn"
    )
    df = rows(fit(AjaxTrainable, space, tmp_path, "rllib_fn", stop={"training_iteration": 5})[0])
    # `current_task + 1` after every call, held at the last level
    assert df["curriculum/task/length"].tolist() == [4, 8, 12, 16, 16]
    assert df["curriculum/level"].tolist() == [1, 2, 3, 3, 3]
    assert np.all(df["perf/compilations"] == 1)
