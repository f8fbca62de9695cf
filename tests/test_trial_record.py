"""A trial's own record of its results (ajax_tune/results/record.py): every iteration exactly once,
in order, through a real kill of the trial's process and the restore that follows."""

import pandas as pd
import pytest
from ray import tune

from ajax_tune import AjaxTrainable
from ajax_tune.results import record as trial_record
from ajax_tune.tune.output import trial_dirname
from tests.support.helpers import corridor_config

BUDGET = 8 * 16 * 4  # env steps per seed per train() in corridor_config


def test_rewind_keeps_the_rows_up_to_the_restored_iteration(tmp_path):
    for i in (1, 2, 3):
        trial_record.append(tmp_path, i, {"env_steps": i * 10, "eval/return_mean": float("nan")})
    with (tmp_path / trial_record.FILE_NAME).open("a") as f:
        f.write('{"iteration": 4, "env_st')  # a kill mid-write
    trial_record.rewind(tmp_path, 2)
    trial_record.append(tmp_path, 3, {"env_steps": 30})
    rows = trial_record.read(tmp_path)
    assert [(r["iteration"], r["env_steps"]) for r in rows] == [(1, 10), (2, 20), (3, 30)]
    assert pd.isna(rows[0]["eval/return_mean"])
    assert trial_record.read(tmp_path / "none") == []


@pytest.mark.usefixtures("ray_session")
def test_every_iteration_once_in_order_through_a_killed_trial(tmp_path, monkeypatch):
    """A checkpoint after every call; Tune's experiment sync forced after every second one (by
    num_to_keep=2) and otherwise held off (as a slow sync is): the trial is killed during its
    4th call and Tune restarts it from the checkpoint after call 3. Tune copies its logs back
    from storage, as synced after call 2, so its row of call 3 is gone; the record has every
    call once, in order."""
    monkeypatch.setenv("TUNE_GLOBAL_CHECKPOINT_S", "3600")
    marker = tmp_path / "killed"
    kill = {"class": "tests.support.fault_callbacks:KillOnce", "kwargs": {"marker": str(marker), "at_iteration": 4}}
    tuner = tune.Tuner(
        AjaxTrainable,
        param_space=corridor_config(callbacks=[kill]),
        tune_config=tune.TuneConfig(trial_dirname_creator=trial_dirname),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path),
            name="record",
            stop={"training_iteration": 5},
            verbose=0,
            failure_config=tune.FailureConfig(max_failures=1),
            checkpoint_config=tune.CheckpointConfig(checkpoint_frequency=1, num_to_keep=2),
        ),
    )
    results = tuner.fit()
    assert results.num_errors == 0 and marker.exists()  # it was killed, and recovered
    rows = trial_record.read(results[0].path)
    assert [r["iteration"] for r in rows] == [r["training_iteration"] for r in rows] == [1, 2, 3, 4, 5]
    assert [r["env_steps"] for r in rows] == [BUDGET * i for i in range(1, 6)]
    # what Tune kept of what the trial reported agrees with the record
    reported = results[0].metrics_dataframe.drop_duplicates("training_iteration", keep="last").set_index("training_iteration")
    for row in rows:
        if row["training_iteration"] in reported.index:
            assert reported.loc[row["training_iteration"], "env_steps"] == row["env_steps"]
            assert reported.loc[row["training_iteration"], "eval/return_mean"] == row["eval/return_mean"]
    # it went back to the checkpoint after call 3 and ran calls 4 and 5 from there
    assert results[0].metrics["training_iteration"] == 5 and results[0].metrics["iterations_since_restore"] == 2


@pytest.mark.heavy
def test_tunes_counters_follow_the_state_loaded(tmp_path):
    """Tune restores its counters from the metrics it kept beside a checkpoint. When those are of
    an earlier call than the checkpoint's state (synchronous PBT can hand an exploiting trial a
    donor checkpoint that the donor's next save overwrote), the trial continues from the state's
    own call, so that training_iteration and env_steps keep telling the same story."""
    from ray.train._internal.session import _TrainingResult

    config = corridor_config()
    donor = AjaxTrainable(config=config)
    for _ in range(4):
        donor.train()
    checkpoint = donor.save(str(tmp_path / "after_4"))
    donor.stop()

    exploiter = AjaxTrainable(config=config)
    exploiter.restore(_TrainingResult(checkpoint=checkpoint.checkpoint, metrics={"training_iteration": 2}))
    assert exploiter.iteration == 4
    result = exploiter.train()
    assert result["training_iteration"] == 5 and result["env_steps"] == 5 * BUDGET
    exploiter.stop()
