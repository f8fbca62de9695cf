"""benchmarks/tuning_outcome.py without running a tuner: every tuner's experiment on every task is
one `ajax-tune run` accepts (quick and full), trials train on tuning seeds below the test seeds,
and the summary's incumbents, curves and time to target come out as the docs define them."""

import importlib.util
import pathlib
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))  # its siblings (harness, time_to_solve) import as top-level modules
    try:
        spec = importlib.util.spec_from_file_location("tuning_outcome", BENCHMARKS / "tuning_outcome.py")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.mark.parametrize("quick", [True, False])
@pytest.mark.heavy
def test_every_tuners_experiment_on_every_task_is_accepted_and_trains_on_a_tuning_seed(bench, quick):
    from ajax_tune.tune.experiment import Experiment

    settings = {**(bench.QUICK if quick else bench.DEFAULTS), "quick": quick, "cpus": 2, "test_seeds": 3}
    for task in bench.TASKS:
        for tuner in bench.TUNERS:
            raw = bench.experiment_for(task, tuner, settings)
            Experiment.from_dict(raw)  # refuses what `ajax-tune run` would
            assert raw["tune"]["time_budget_s"] == settings["budget_s"]
            assert 0 <= raw["trial"]["train"].get("seed", 0) < bench.TRAIN_SEED_LIMIT <= min(bench.TEST_SEEDS)
            if tuner.startswith("population_pbt"):
                assert raw["trial"]["population"]["size"] == settings["pbt_members"]
                assert raw["trial"]["population"]["draw"] == ("stratified" if tuner.endswith("cover") else "random")
                assert raw["trial"]["resources"]["cpu"] == 2
            if tuner.startswith("population_halving"):  # to a separate trial's horizon, or one stretched to the budget
                assert raw["trial"]["population"]["prune"] == settings["halving"]
                separate = bench.experiment_for(task, "random", settings)["stop"]["training_iteration"]
                calls = raw["stop"]["training_iteration"]
                assert calls == separate if tuner == "population_halving" else calls >= separate
                assert calls * raw["trial"]["train"]["timesteps_per_iteration"] == raw["trial"]["train"]["total_timesteps"]


def test_each_repeat_seeds_the_tuners_draws_and_keeps_the_tuning_seed(bench):
    settings = {**bench.DEFAULTS, "quick": False, "cpus": 2, "test_seeds": 3}
    for repeat in (0, 2):
        for tuner in bench.TUNERS:
            raw = bench.experiment_for("acrobot", tuner, settings, repeat)
            assert raw["tune"]["seed"] == repeat
            assert raw["trial"]["train"].get("seed", 0) == 0  # every config trains and is judged on the tuning seed
            if tuner.startswith("population_pbt"):
                assert raw["trial"]["population"]["seed"] == raw["trial"]["population"]["pbt"]["seed"] == repeat


def test_incumbents_thinning_and_time_to_the_best_separate_tuners_median_final(bench):
    checkpoints = [{"t": t, "metric": m} for t, m in [(1, -400), (2, -450), (3, -300), (4, float("nan")), (5, -100)]]
    assert [c["t"] for c in bench.incumbent_changes(checkpoints)] == [1, 3, 5]
    assert bench.thin(10, 4) == [0, 3, 6, 9] and bench.thin(3, 4) == [0, 1, 2]

    def cell(tuner, repeat, steps):
        incumbents = [{"t": t, "metric": v, "test_return": v} for t, v in steps]
        return {"task": "acrobot", "tuner": tuner, "repeat": repeat, "wall_s": 100.0, "configs": 1, "trials_started": 1,
                "env_steps_all_trials": 1, "incumbents": incumbents}  # fmt: skip

    cells = [
        cell("random", 0, [(10, -300), (80, -120)]),
        cell("random", 1, [(20, -200), (90, -100)]),  # median final -110: the target
        cell("asha", 0, [(30, -150)]),
        cell("asha", 1, [(30, -160)]),
        cell("population_pbt", 0, [(5, -250), (25, -90)]),
        cell("population_pbt", 1, [(15, -105)]),
    ]
    s = bench.summarize(cells)["acrobot"]
    assert s["target_test_return"] == -110
    tuners = s["tuners"]
    assert tuners["random"]["final_test_return"]["median"] == -110
    # the target is a median of finals: one random run ends below it, and a half that never reaches has no median
    assert tuners["random"]["time_to_target_s"] == {"median": None, "reached": 1, "of": 2, "per_repeat": [None, 90]}
    assert tuners["asha"]["time_to_target_s"]["median"] is None and tuners["asha"]["time_to_target_s"]["reached"] == 0
    assert tuners["population_pbt"]["time_to_target_s"]["median"] == 20.0
    assert tuners["population_pbt"]["curve"]["median"][0] is None  # no incumbent at t = 0
    assert "| acrobot | population_pbt |" in bench.table(bench.summarize(cells))
