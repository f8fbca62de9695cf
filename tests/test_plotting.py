"""Plots of an experiment: the figures of a real Tune run, and the series behind them."""

import json
import math
import pathlib

import numpy as np
import pandas as pd
import pytest
import yaml
from matplotlib.image import imread
from ray import tune

from ajax_tune import AjaxTrainable
from ajax_tune.plotting import learning_curves_figure, metric_curve, plot_experiment
from ajax_tune.results.series import (
    experiment_metric,
    learning_curve,
    lineage_segments,
    load_trials,
    seed_band,
    task_distribution,
)
from ajax_tune.tune.output import trial_dirname
from tests.support.helpers import corridor_config

BUDGET = 4 * 8 * 16  # env steps per seed per train() in corridor_config
ITERATIONS = 3  # the corridor grows after every perfect evaluation: from the second call here
PNG = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def experiment(ray_session, tmp_path_factory) -> pathlib.Path:
    space = corridor_config(length=4, lr=tune.grid_search([1e-3, 3e-3]), env_task_fn="tests.support.curricula:grow_corridor")
    results = tune.Tuner(
        AjaxTrainable,
        param_space=space,
        tune_config=tune.TuneConfig(trial_dirname_creator=trial_dirname),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path_factory.mktemp("plots")), name="grid", stop={"training_iteration": ITERATIONS}, verbose=0
        ),
    ).fit()
    assert results.num_errors == 0, [r.error for r in results if r.error]
    return pathlib.Path(results.experiment_path)


def check_png(path: pathlib.Path) -> None:
    assert path.read_bytes()[:8] == PNG, path
    assert path.stat().st_size > 10_000, path  # axes, curves and a legend, not an empty canvas
    height, width, _ = imread(path).shape
    assert width >= 600 and height >= 250, path


def test_plots_of_a_tune_run(experiment, tmp_path):
    written = plot_experiment(experiment)
    assert [p.name for p in written] == ["learning_curves.png", "curriculum.png", "learning_rates.png"]
    assert all(p.parent == experiment / "plots" for p in written)
    for path in written:
        check_png(path)
    assert [p.name for p in plot_experiment(experiment, out_dir=tmp_path / "elsewhere")] == [p.name for p in written]

    trials = load_trials(experiment)
    assert sorted(t.label for t in trials) == ["lr=0.001", "lr=0.003"]  # only what differs
    grew = False
    for trial in trials:
        (segment,) = trial.segments  # no PBT: one lineage
        assert segment["env_steps"].tolist() == [BUDGET * i for i in range(1, ITERATIONS + 1)]
        x, mean, lo, hi = learning_curve(segment)
        assert len(x) == ITERATIONS  # every call evaluated in this config
        np.testing.assert_array_equal(lo, segment["eval/return_min"])  # Runner's own min over seeds
        assert np.all(lo <= mean) and np.all(mean <= hi)
        grew |= segment["curriculum/task/length"].nunique() > 1
    assert grew, "no curriculum moved: curriculum.png would not be drawn"


def write_trial(root: pathlib.Path, name: str, rows: dict, params: dict | None) -> None:
    directory = root / name
    directory.mkdir(parents=True)
    pd.DataFrame({"trial_id": name, **rows}).to_csv(directory / "progress.csv", index=False)
    if params is not None:
        (directory / "params.json").write_text(json.dumps(params))


NAN = math.nan


def pbt_like(tmp_path: pathlib.Path, level: bool = False) -> pathlib.Path:
    """Trial a exploits a donor twice: at env step 400 one at 200 (back), at 500 one at 600 (ahead)."""
    root = tmp_path / ("level" if level else "pbt")
    steps = [100, 200, 300, 400, 300, 400, 500, 700, 800]
    a = {
        "env_steps": steps,
        "timesteps_this_iter": [100] * 9,
        "training_iteration": [s // 100 for s in steps],
        "lr": [1e-3] * 4 + [3e-3] * 3 + [1e-2] * 2,
        "eval/return_mean": [0.1, NAN, 0.3, NAN, 0.5, NAN, 0.7, 0.8, 0.9],
        "eval/return_seed0": [0.0, NAN, 0.2, NAN, 0.4, NAN, 0.6, 0.8, 1.0],
        "eval/return_seed1": [0.2, NAN, 0.4, NAN, 0.6, NAN, 0.8, 0.8, 0.8],
        "curriculum/task/length": [4] * 9,
    }
    b = {**{k: v[:3] for k, v in a.items()}, "lr": [1e-4] * 3}
    if level:
        a["curriculum/level"], b["curriculum/level"] = [0] * 9, [0, 0, 1]
    write_trial(root, "t_a", a, {"agent": {"lr": 1e-3, "num_envs": 8}, "train": {"seed": 0}})
    write_trial(root, "t_b", b, {"agent": {"lr": 1e-4, "num_envs": 8}, "train": {"lr": 5}})
    (root / "t_pending").mkdir()
    (root / "t_pending" / "progress.csv").write_text("")  # a trial that never reported
    return root


def test_lineage_segments_break_where_env_steps_do_not_continue(tmp_path):
    trials = load_trials(pbt_like(tmp_path))
    assert [t.trial_id for t in trials] == ["t_a", "t_b"]
    a, b = trials
    assert [s["env_steps"].tolist() for s in a.segments] == [[100, 200, 300, 400], [300, 400, 500], [700, 800]]
    assert [s["lr"].tolist() for s in a.segments] == [[1e-3] * 4, [3e-3] * 3, [1e-2] * 2]
    assert len(b.segments) == 1
    # keys that differ get the shortest unambiguous name; equal ones (num_envs), and keys a
    # trial does not have, are left out
    assert a.label == "agent/lr=0.001 seed=0"
    assert b.label == "agent/lr=0.0001 train/lr=5"

    frame = pd.DataFrame({"env_steps": [5, 10, 15], "timesteps_this_iter": [5, 5, 10]})
    assert [len(s) for s in lineage_segments(frame)] == [2, 1]  # 15 - 10 != 10
    assert lineage_segments(frame.iloc[:0]) == []


def test_a_trials_own_record_is_read_before_tunes_progress_csv(tmp_path):
    """Tune's progress.csv may lose the rows logged since its last sync when a trial restarts
    from a checkpoint, and keep rows a restore rewound; the trial's own record holds every
    iteration once. A trial without a record (a function trainable's) is read from progress.csv."""
    from ajax_tune.results import record

    root = tmp_path / "exp"
    lost = {"env_steps": [100, 200, 100], "timesteps_this_iter": [100] * 3, "eval/return_mean": [1.0, 2.0, 1.5]}
    write_trial(root, "t_a", lost, {"agent": {"lr": 1e-3}})
    for iteration, steps in enumerate([100, 200, 300, 400], start=1):
        row = {"env_steps": steps, "timesteps_this_iter": 100, "eval/return_mean": float(iteration), "trial_id": "a"}
        record.append(root / "t_a", iteration, row)
    record.rewind(root / "t_a", 3)  # a restore to iteration 3, which then runs on
    record.append(root / "t_a", 4, {"env_steps": 400, "timesteps_this_iter": 100, "eval/return_mean": 4.5, "trial_id": "a"})
    write_trial(
        root, "t_b", {"env_steps": [100], "timesteps_this_iter": [100], "eval/return_mean": [0.5]}, {"agent": {"lr": 3e-3}}
    )
    a, b = load_trials(root)
    assert a.trial_id == "a" and [s["env_steps"].tolist() for s in a.segments] == [[100, 200, 300, 400]]
    assert a.frame["eval/return_mean"].tolist() == [1.0, 2.0, 3.0, 4.5]
    assert b.trial_id == "t_b" and b.frame["env_steps"].tolist() == [100]


def test_learning_curve_skips_rows_without_evaluation_and_bands_the_seeds(tmp_path):
    (a, _) = load_trials(pbt_like(tmp_path))
    x, mean, lo, hi = learning_curve(a.segments[0])
    assert x.tolist() == [100, 300] and mean.tolist() == [0.1, 0.3]
    assert lo.tolist() == [0.0, 0.2] and hi.tolist() == [0.2, 0.4]
    lo, hi = seed_band(a.frame)
    seeds = a.frame[["eval/return_seed0", "eval/return_seed1"]].to_numpy()
    evaluated = ~np.isnan(seeds).all(axis=1)
    np.testing.assert_array_equal(lo[evaluated], seeds[evaluated].min(axis=1))
    np.testing.assert_array_equal(hi[evaluated], seeds[evaluated].max(axis=1))
    assert np.isnan(lo[~evaluated]).all() and np.isnan(hi[~evaluated]).all()


def test_curves_start_at_env_step_zero_where_the_first_row_has_the_start_evaluation(tmp_path):
    """Only a run's first result holds `eval/start/*` (NaN after): its point goes first, at env
    step 0, on the return and on every metric with a start counterpart; a segment that continued
    a restored checkpoint starts where it was restored."""
    root = tmp_path / "start"
    rows = {
        "env_steps": [100, 200, 100, 200],
        "timesteps_this_iter": [100] * 4,
        "eval/return_mean": [0.5, 0.7, 0.6, 0.8],
        "eval/return_seed0": [0.4, 0.6, 0.5, 0.7],
        "eval/return_seed1": [0.6, 0.8, 0.7, 0.9],
        HELDOUT: [0.2, 0.4, 0.3, 0.5],
        "eval/start/return_mean": [0.1, NAN, NAN, NAN],
        "eval/start/return_min": [0.0, NAN, NAN, NAN],
        "eval/start/return_max": [0.2, NAN, NAN, NAN],
        "eval/start/heldout/success_rate_mean": [0.05, NAN, NAN, NAN],
    }
    write_trial(root, "t_a", rows, {"agent": {"lr": 1e-3}})
    write_trial(root, "t_b", {k: v[:2] for k, v in rows.items() if not k.startswith("eval/start/")}, {"agent": {"lr": 3e-3}})
    a, b = load_trials(root)
    first, exploited = a.segments  # env steps went back: a PBT exploit at 200
    x, mean, lo, hi = learning_curve(first)
    assert x.tolist() == [0, 100, 200] and mean.tolist() == [0.1, 0.5, 0.7]
    assert lo.tolist() == [0.0, 0.4, 0.6] and hi.tolist() == [0.2, 0.6, 0.8]
    assert learning_curve(exploited)[0].tolist() == [100, 200]
    x, value, _, _ = metric_curve(first, HELDOUT)
    assert x.tolist() == [0, 100, 200] and value.tolist() == [0.05, 0.2, 0.4]
    assert learning_curve(b.segments[0])[0].tolist() == [100, 200]  # results without the start evaluation

    fig = learning_curves_figure([a, b], ["C0", "C1"], HELDOUT)
    for ax in fig.axes:  # the metric's panel and the return's
        starts = {line.get_label(): line.get_xdata()[0] for line in ax.get_lines() if line.get_label() == a.label}
        assert starts == {a.label: 0}
        assert {line.get_xdata()[0] for line in ax.get_lines()} == {0, 100}


def test_curriculum_figure_only_when_the_curriculum_moved_or_has_levels(tmp_path):
    fixed = plot_experiment(pbt_like(tmp_path))
    assert [p.name for p in fixed] == ["learning_curves.png", "learning_rates.png"]
    assert not (tmp_path / "pbt" / "plots" / "curriculum.png").exists()
    for path in fixed:
        check_png(path)
    levels = plot_experiment(pbt_like(tmp_path, level=True))
    assert [p.name for p in levels] == ["learning_curves.png", "curriculum.png", "learning_rates.png"]
    check_png(levels[1])


def test_no_results_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match=str(tmp_path)):
        plot_experiment(tmp_path)
    (tmp_path / "trial").mkdir()
    (tmp_path / "trial" / "progress.csv").write_text("")
    with pytest.raises(ValueError, match="no trial results"):
        plot_experiment(tmp_path)
    assert not (tmp_path / "plots").exists()


def test_task_distribution_figure_from_task_histograms(tmp_path):
    """A sampler's results carry tasks/<field>/bin<i> shares over [low, high]; plot draws them."""
    root = tmp_path / "sampled"
    shares = {f"tasks/length/bin{i}": [0.0] * 3 for i in range(11)}  # 11 bins: bin10 sorts after bin9
    shares.update(
        {"tasks/length/bin0": [1.0, 0.5, 0.0], "tasks/length/bin3": [0.0, 0.5, 0.25], "tasks/length/bin10": [0.0, 0.0, 0.75]}
    )
    rows = {
        "env_steps": [100, 200, 300],
        "timesteps_this_iter": [100] * 3,
        "eval/return_mean": [0.1, 0.2, 0.3],
        "tasks/length/low": [3.5] * 3,
        "tasks/length/high": [14.5] * 3,
        "tasks/length/mean": [4.0, 5.5, 12.0],
        **shares,
    }
    write_trial(root, "t_s", rows, {"task_sampler": {"name": "plr"}})
    (trial,) = load_trials(root)
    x, y, z = task_distribution(trial.segments[0], "length")
    assert x.tolist() == [0, 100, 200, 300] and y.tolist() == list(np.arange(3.5, 15.5, 1.0))
    assert z.shape == (11, 3) and z[0].tolist() == [1.0, 0.5, 0.0] and z[10].tolist() == [0.0, 0.0, 0.75]
    written = plot_experiment(root)
    assert [p.name for p in written] == ["learning_curves.png", "task_distribution.png", "learning_rates.png"]
    check_png(written[1])


CONFIGS = pathlib.Path(__file__).resolve().parent.parent / "configs"
HELDOUT = "eval/heldout/success_rate_mean"


def sampler_results(tmp_path: pathlib.Path) -> tuple[pathlib.Path, dict]:
    """Results shaped as configs/task_samplers_corridor.yaml leaves them: one trial per sampler
    of its grid (params.json as Tune writes it), ranked by the held-out success rate, whose
    default-task return is a flat 1.0."""
    config = yaml.safe_load((CONFIGS / "task_samplers_corridor.yaml").read_text())
    root = tmp_path / config["name"]
    success = {}
    for i, sampler in enumerate(config["trial"]["task_sampler"]["grid"]):
        trial = {**config["trial"], "task_sampler": sampler}
        success[sampler["name"]] = [0.1 * (i + 1), 0.2 * (i + 1), 0.3 * (i + 1)]
        write_trial(
            root,
            f"AjaxTrainable_s{i}",
            {
                "env_steps": [3072, 6144, 9216],
                "timesteps_this_iter": [3072] * 3,
                "eval/return_mean": [1.0] * 3,
                HELDOUT: success[sampler["name"]],
            },
            trial,
        )
    state = {"runner_data": {"_metric": config["tune"]["metric"]}, "trial_data": [], "stats": {}}
    (root / "experiment_state-2026-01-01_00-00-00.json").write_text(json.dumps(state))
    return root, success


def test_the_sampler_config_plots_its_own_metric_labelled_by_sampler(tmp_path):
    root, success = sampler_results(tmp_path)
    assert experiment_metric(root) == HELDOUT
    trials = load_trials(root)
    assert sorted(t.label for t in trials) == [
        "name=learning_progress bins=8",
        "name=plr buffer_size=16 temperature=0.1",
        "name=uniform",
    ]  # what differs, nothing else, nothing cut
    fig = learning_curves_figure(trials, [f"C{i}" for i in range(3)], experiment_metric(root))
    metric_ax, return_ax = fig.axes
    assert metric_ax.get_ylabel() == HELDOUT and return_ax.get_ylabel().startswith("eval/return_mean")
    by_label = {line.get_label(): line.get_ydata().tolist() for line in metric_ax.get_lines()}
    assert by_label == {t.label: success[t.label.split()[0].removeprefix("name=")] for t in trials}
    assert all(line.get_ydata().tolist() == [1.0] * 3 for line in return_ax.get_lines())
    assert [text.get_text() for text in fig.legends[0].get_texts()] == [t.label for t in trials]

    written = plot_experiment(root)
    check_png(written[0])
    assert written[0].name == "learning_curves.png"
    # without a saved metric, or when asked for the return, the return is drawn alone as before
    assert len(learning_curves_figure(trials, ["C0"] * 3).axes) == 1
    assert len(learning_curves_figure(trials, ["C0"] * 3, "no/such_metric").axes) == 1


def test_an_offline_trial_is_drawn_against_its_gradient_steps(tmp_path):
    """An offline trial reports `env_steps` 0 (it steps no env) and counts `gradient_steps`: its
    curve runs along those, and the axis says so; beside an online trial the axis names both."""
    root = tmp_path / "offline"
    offline_rows = {
        "env_steps": [0, 0, 0],
        "gradient_steps": [200, 400, 600],
        "timesteps_this_iter": [200] * 3,
        "eval/return_mean": [-900.0, -500.0, -300.0],
        "lr": [3e-4] * 3,
    }
    write_trial(root, "t_off", offline_rows, {"agent": {"name": "td3bc", "alpha": 2.5}})
    (trial,) = load_trials(root)
    assert trial.axis == "gradient_steps" and len(trial.segments) == 1  # gradient steps continue call to call
    assert learning_curve(trial.segments[0])[0].tolist() == [200, 400, 600]
    fig = learning_curves_figure([trial], ["C0"])
    assert fig.axes[0].get_xlabel() == "gradient_steps"
    assert fig.axes[0].get_lines()[0].get_xdata().tolist() == [200, 400, 600]

    write_trial(root, "t_on", {"env_steps": [100, 200], "timesteps_this_iter": [100] * 2, "eval/return_mean": [-1e3, -8e2]}, {})
    trials = load_trials(root)
    assert [t.axis for t in trials] == ["gradient_steps", "env_steps"]
    assert learning_curves_figure(trials, ["C0", "C1"]).axes[0].get_xlabel() == "env_steps (gradient_steps for offline trials)"
    assert {p.name for p in plot_experiment(root)} == {"learning_curves.png", "learning_rates.png"}
