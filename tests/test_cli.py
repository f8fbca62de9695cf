"""The ajax-tune command line: run, evaluate, plot, resume, and one-line errors for bad input."""

import contextlib
import gc
import io
import json
import math
import os
import pathlib
import re
import subprocess
import sys

import pytest
import yaml

from ajax_tune.cli import main
from ajax_tune.results.series import learning_curve, load_trials

CONFIGS = pathlib.Path(__file__).resolve().parent.parent / "configs"
TESTS = pathlib.Path(__file__).resolve().parent


def write(tmp_path, text, name="exp.yaml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


SMALL_CORRIDOR = """
name: small
trial:
  env: {name: corridor, kwargs: {max_length: 32, max_episode_steps: 40}, task: {length: 4}}
  agent: {num_envs: 8, unroll_length: 16, num_minibatches: 2, update_epochs: 2, hidden_sizes: [32, 32], lr: 3.0e-3}
  train: {total_timesteps: 50000, timesteps_per_iteration: 512, num_seeds: 2, eval_episodes: 4}
stop: {training_iteration: 3}
checkpoint: {frequency: 1, at_end: true}
"""


@pytest.mark.parametrize(
    "argv, message",
    [
        (["run", "no/such.yaml"], "no config file at no/such.yaml"),
        (
            ["run", "{dir}/exp.yaml", "--set", "trial.agent.ent_coeff=0.1"],
            "unknown key agent.'ent_coeff'; did you mean agent.'ent_coef'",
        ),
        (["run", "{dir}/exp.yaml", "--set", "trial.agent.gamma=2"], "agent.gamma must be <= 1.0"),
        (["run", "{dir}/exp.yaml", "--set", "trial.agent.lr={loguniform: [0.1]}"], "{loguniform: ...} takes 2 numbers"),
        (["run", "{dir}/exp.yaml", "--set", "tune.scheduler.name=hyperband"], "tune.scheduler.name must be one of"),
        (["run", "{dir}/exp.yaml", "--set", "tune.metrc=x"], "did you mean tune.'metric'"),
        (["run", "{dir}/exp.yaml", "--set", "stopp"], "--set expects key.path=value"),
        (["run", "{dir}/exp.yaml", "--set", "trial.env.task.length=99"], "expected integer scalar in [1, 32]"),
        (["run", "{dir}/exp.yaml", "--set", "trial.train.timesteps_per_iteration=500"], "whole number of unrolls"),
        (["evaluate", "{dir}/nothing"], "no checkpoint at"),
        (["evaluate", "{dir}", "--episodes", "0"], "--episodes must be >= 1"),
        (["plot", "{dir}/nothing"], "no experiment directory"),
        (["resume", "{dir}"], "is not a Tune experiment directory"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, argv, message):
    write(tmp_path, SMALL_CORRIDOR)
    code = main([a.replace("{dir}", str(tmp_path)) for a in argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and gc.isenabled()  # a refused run turns the collector back on as well
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert message in err


@pytest.mark.slow  # spawns the console script six times
def test_a_rerun_gets_its_own_directory_unless_the_first_is_alive(tmp_path):
    from ajax_tune.cli import launch

    assert launch.run_directory(tmp_path, "exp") == (tmp_path / "exp", None)  # nothing there yet
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp" / launch.LOCK_FILE).write_text("{}")
    assert launch.run_directory(tmp_path, "exp") == (tmp_path / "exp", None)  # only a (stale) lock
    (tmp_path / "exp" / "tuner.pkl").write_bytes(b"")
    (tmp_path / "exp-2").mkdir()
    (tmp_path / "exp-2" / "AjaxTrainable_0").mkdir()
    directory, note = launch.run_directory(tmp_path, "exp")
    assert directory == tmp_path / "exp-3" and f"ajax-tune resume {tmp_path / 'exp'}" in note
    release = launch.lock_experiment(tmp_path / "exp")  # a live run: the lock refuses a second one
    try:
        assert launch.run_directory(tmp_path, "exp") == (tmp_path / "exp", None)
    finally:
        release()


@pytest.mark.slow  # a fresh Python process
def test_console_script_help_and_bad_config_without_traceback(tmp_path):
    exe = pathlib.Path(sys.executable).parent / "ajax-tune"
    out = subprocess.run([exe, "--help"], capture_output=True, text=True)
    assert out.returncode == 0 and "run" in out.stdout and "evaluate" in out.stdout
    for command in ("run", "resume", "plot", "evaluate"):
        sub = subprocess.run([exe, command, "--help"], capture_output=True, text=True)
        assert sub.returncode == 0 and f"ajax-tune {command}" in sub.stdout
    bad = subprocess.run([exe, "run", write(tmp_path, "trial: {env: {name: cartpol}}")], capture_output=True, text=True)
    assert bad.returncode == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ajax-tune run: error: env.name: unknown env 'cartpol'")
    assert "did you mean 'cartpole'?" in lines[0]


EXIT_PROBE = """
import os, sys, threading, time, atexit
from ajax_tune import cli
class Teardown:  # freed, and so heard from, only if the interpreter tears its modules down
    def __del__(self):
        sys.stderr.write("torn down\\n")

kept = Teardown()
out = sys.argv[1]
atexit.register(lambda: open(out + ".atexit", "w").write("ran"))
threading.Thread(target=lambda: (time.sleep(0.3), open(out + ".thread", "w").write("done"))).start()
for i in range(20000):
    print(i)  # more than a pipe's buffer: all of it must arrive
sys.argv = ["ajax-tune", "plot", out + ".missing"]
cli.entry() if os.environ["EXIT"] == "entry" else sys.exit(cli.main())
"""


@pytest.mark.slow  # a fresh Python process
@pytest.mark.parametrize("how", ["entry", "main"])
def test_console_script_exit_keeps_what_an_exit_must(tmp_path, how):
    """`entry` (the console script) exits with the command's status after its non-daemon threads,
    its atexit hooks and all its piped output: it is `sys.exit(main())`, Python's own exit."""
    probe = tmp_path / "probe"
    done = subprocess.run(
        [sys.executable, "-c", EXIT_PROBE, str(probe)], capture_output=True, text=True, env={**os.environ, "EXIT": how}
    )
    assert done.returncode == 2 and "ajax-tune plot: error: no experiment directory" in done.stderr
    assert done.stdout.split() == [str(i) for i in range(20000)]
    assert (tmp_path / "probe.atexit").read_text() == "ran" and (tmp_path / "probe.thread").read_text() == "done"
    assert "torn down" in done.stderr


@pytest.fixture(scope="module")
def errored_resumed_and_rerun(ray_session, tmp_path_factory):
    """SMALL_CORRIDOR's trial killed once at iteration 2 (`run` exits 1), resumed to its end, then
    the same config run again into the same storage (as a new run, in its own directory, with its
    plots): the outputs of each command, for the tests below. One experiment directory serves the
    resume, the rerun's note and the run, evaluate and plot commands (each run is a Tune trial
    process or more)."""
    tmp_path = tmp_path_factory.mktemp("cli_runs")
    marker = tmp_path / "failed"
    config = yaml.safe_load(SMALL_CORRIDOR)
    config["trial"]["callbacks"] = [
        {"class": "tests.support.curricula:FailOnce", "kwargs": {"marker": str(marker), "at_iteration": 2}}
    ]
    path = write(tmp_path, yaml.safe_dump(config))
    experiment = tmp_path / "r" / "small"
    runs = {"tmp_path": tmp_path, "marker": marker, "experiment": experiment}

    def command(name, argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
        runs[name] = (code, out.getvalue(), err.getvalue())

    command("errored", ["run", path, "--storage-path", str(tmp_path / "r"), "--no-plots"])
    command("resumed", ["resume", str(experiment), "--resume-errored", "--no-plots"])
    runs["before_rerun"] = sorted(p.name for p in experiment.iterdir())
    # the rerun keeps a checkpoint at its end only: nothing below reads the ones in between
    rerun = ["--set", "stop.training_iteration=2", "--set", "checkpoint.frequency=0"]
    command("rerun", ["run", path, "--storage-path", str(tmp_path / "r"), *rerun])
    return runs


def test_run_evaluate_plot(errored_resumed_and_rerun, tmp_path, capsys):
    results = errored_resumed_and_rerun["tmp_path"] / "r" / "small-2"
    code, out, _ = errored_resumed_and_rerun["rerun"]
    assert code == 0
    assert "Best trial:" in out and "eval/return_mean" in out and "Plots:" in out
    checkpoint = next(line.split()[-1] for line in out.splitlines() if line.strip().startswith("checkpoint"))
    assert (pathlib.Path(checkpoint) / "ajax_tune.json").exists()
    assert sorted(p.name for p in (results / "plots").glob("*.png"))

    assert main(["evaluate", checkpoint, "--episodes", "3", "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["seeds"] == 2 and stats["episodes"] == 3 and stats["task"]["length"] == 4
    # arriving is the corridor's only reward (its door closed): an episode returns 1 exactly when it succeeds
    assert stats["success_rate"] == stats["return_mean"] and {stats["return_min"], stats["return_max"]} <= {0.0, 1.0}

    assert main(["evaluate", checkpoint, "--episodes", "2", "--task", "length=1", "--json"]) == 0
    one_step = json.loads(capsys.readouterr().out)
    # one cell: a seed's deterministic policy steps right at once (1 step, a success) or into the wall until
    # the time limit (40 steps), every episode alike; on the trained length 4 a success takes 4 steps or more
    rate = one_step["success_rate"]
    assert one_step["task"]["length"] == 1 and one_step["return_mean"] == rate
    assert one_step["length_mean"] == pytest.approx(rate * 1 + (1 - rate) * 40)

    assert main(["evaluate", checkpoint, "--task", "length=99"]) == 2
    assert "expected integer scalar in [1, 32]" in capsys.readouterr().err
    assert main(["evaluate", checkpoint, "--gymnasium", "CartPole-v1"]) == 2
    assert "--gymnasium runs policies of ['cartpole', 'pendulum']" in capsys.readouterr().err

    assert main(["plot", str(results), "--out", str(tmp_path / "figs")]) == 0
    printed = capsys.readouterr().out.split()
    assert printed and all(pathlib.Path(p).exists() and p.endswith(".png") for p in printed)


def test_evaluate_in_real_gymnasium(ray_session, tmp_path, capsys, monkeypatch):
    config = yaml.safe_load((CONFIGS / "quickstart.yaml").read_text())
    config["trial"]["agent"]["lr"] = {"kind": "linear", "peak": 2.5e-3}
    config["stop"] = {"training_iteration": 2}  # untrained below trained needs two calls, not more
    path = write(tmp_path, yaml.safe_dump(config))
    # the driver's cyclic collector is off while it sets up (validation) and on again for the fit
    from ray import tune

    from ajax_tune.cli import launch

    collector = {}
    check_resources, fit = launch.check_resources, tune.Tuner.fit
    monkeypatch.setattr(
        launch, "check_resources", lambda *a, **k: (collector.setdefault("set_up", gc.isenabled()), check_resources(*a, **k))[1]
    )
    monkeypatch.setattr(tune.Tuner, "fit", lambda self: (collector.setdefault("fit", gc.isenabled()), fit(self))[1])
    assert gc.isenabled()
    assert main(["run", path, "--storage-path", str(tmp_path / "r"), "--no-plots"]) == 0
    assert collector == {"set_up": False, "fit": True} and gc.isenabled()
    out = capsys.readouterr().out
    # the shipped config evaluates the untrained policy: each trial's curve starts at env step 0
    trials = load_trials(tmp_path / "r" / config["name"])
    assert len(trials) == 1
    for trial in trials:
        starts = trial.frame["eval/start/return_mean"]
        assert math.isfinite(starts.iloc[0]) and starts.iloc[1:].isna().all()
        x, mean, lo, hi = learning_curve(trial.segments[0])
        assert x[0] == 0 and x[1:].tolist() == trial.frame["env_steps"].tolist()
        start = [trial.frame[f"eval/start/return_{end}"].iloc[0] for end in ("mean", "min", "max")]
        assert [mean[0], lo[0], hi[0]] == start  # the curve starts at the start evaluation, with its seed spread
        assert mean[0] < mean[-1]  # the untrained policy scores below the trained
    checkpoint = next(line.split()[-1] for line in out.splitlines() if line.strip().startswith("checkpoint"))
    assert main(["evaluate", checkpoint, "--episodes", "2", "--gymnasium", "CartPole-v1", "--json"]) == 0
    gym_stats = json.loads(capsys.readouterr().out)
    assert gym_stats["env"] == "CartPole-v1" and gym_stats["episodes"] == 2
    # what the policy scores there is asserted in the build users run by the next test (this
    # trial ran in a Ray worker, which compiles the suite's cheap build)


@pytest.mark.learning
def test_a_policy_at_500_on_the_jax_twin_scores_500_in_gymnasiums_cartpole(tmp_path, capsys):
    """docs/learning.md's transfer claim, in the build users run: the quick start's trial settings
    with a linear rate from 2.5e-3 (train seed 0), trained until seed 0's policy, the one
    `evaluate --gymnasium` runs, evaluates at 500 (at most the quick start's 8 calls), then scores
    the maximum, 500, in every one of 5 episodes of gymnasium's CartPole-v1, as it does on the JAX
    twin. Measured after 3 calls for train seeds 0, 1 and 2: seed 0's policy scored 500, 150 and
    500 in JAX and 500, 139 and 500 (every episode within 127-154 for the second) in gymnasium;
    train seed 0 is at 500 after 3 calls (73,728 env steps per seed). Cost, cold cache, 2 quiet
    cores: 12 s."""
    from ajax_tune.runner import Runner

    config = yaml.safe_load((CONFIGS / "quickstart.yaml").read_text())["trial"]
    config["agent"]["lr"] = {"kind": "linear", "peak": 2.5e-3}
    runner, curve = Runner(config), []
    while len(curve) < 8 and (not curve or curve[-1] < 500.0):
        curve.append(runner.train()["eval/return_seed0"])
    checkpoint = str(runner.save(tmp_path / "ckpt"))
    assert main(["evaluate", checkpoint, "--episodes", "5", "--json"]) == 0
    jax_stats = json.loads(capsys.readouterr().out)
    assert main(["evaluate", checkpoint, "--episodes", "5", "--gymnasium", "CartPole-v1", "--json"]) == 0
    gym_stats = json.loads(capsys.readouterr().out)
    with capsys.disabled():
        print(
            f"\nquick start's settings: seed 0's eval return per call {curve}; evaluate, 5 episodes: JAX per seed",
            jax_stats["return_mean_per_seed"],
            "gymnasium",
            gym_stats["return_mean"],
            "min",
            gym_stats["return_min"],
        )
    assert curve[-1] == 500.0, curve
    assert gym_stats["env"] == "CartPole-v1" and gym_stats["episodes"] == 5
    assert jax_stats["return_mean_per_seed"][0] == 500.0
    assert gym_stats["return_min"] == 500.0  # every gymnasium episode at the maximum


def test_errored_trial_resumes(errored_resumed_and_rerun):
    runs = errored_resumed_and_rerun
    code, _, err = runs["errored"]
    assert code == 1
    assert runs["marker"].exists() and "1 trial(s) errored" in err and "ajax-tune resume" in err
    experiment = runs["experiment"]
    code, out, _ = runs["resumed"]
    assert code == 0
    assert "training_iteration       3" in out

    # Running the same experiment again gives the new run its own directory: the first one's
    # trials, tuner.pkl and plots stay as they were, and the note says where each run is.
    code, _, err = runs["rerun"]
    assert code == 0
    assert f"{experiment} holds an earlier run" in err and f"this run writes to {experiment}-2" in err
    assert sorted(p.name for p in experiment.iterdir()) == runs["before_rerun"]
    assert len(load_trials(experiment.parent / "small-2")) == 1 and (experiment.parent / "small-2" / "tuner.pkl").exists()


@pytest.mark.parametrize(
    "tune_section",
    [
        # a trial after another continues in its actor (reset_config), not in a new process
        {"search": "optuna", "scheduler": {"name": "asha", "max_t": 3, "grace_period": 1}, "reuse_actors": True},
        {"scheduler": {"name": "pb2", "perturbation_interval": 1, "hyperparam_bounds": {"agent": {"ent_coef": [0.0, 0.02]}}}},
    ],
    ids=["optuna_asha", "pb2"],
)
def test_optuna_and_pb2(ray_session, tmp_path, capsys, tune_section):
    config = yaml.safe_load(SMALL_CORRIDOR)
    config["trial"]["agent"]["ent_coef"] = {"uniform": [0.0, 0.02]}
    if tune_section["scheduler"]["name"] == "pb2":
        # Half a CPU each, so both trials run at once in a test worker's one-CPU Ray: one at a time,
        # PB2 pauses a trial at every result to let the other run, and each resume is a new process
        # (47 s in all, against 26 s side by side, on a busy 2-core machine). With reuse_actors
        # that ping-pong ran for over 500 s, so it stays off here.
        config["trial"]["resources"] = {"cpu": 0.5}
        # Two calls: PB2 perturbs after the first; every later perturbation restarts a trial's
        # process again, and the bounds asserted below need no more of them.
        config["stop"] = {"training_iteration": 2}
    config["tune"] = {"metric": "eval/return_mean", "mode": "max", "num_samples": 2, **tune_section}
    path = write(tmp_path, yaml.safe_dump(config))
    assert main(["run", path, "--storage-path", str(tmp_path / "r"), "--no-plots"]) == 0
    assert "Best trial:" in capsys.readouterr().out
    trials = [p for p in (tmp_path / "r" / "small").iterdir() if (p / "progress.csv").exists()]
    assert len(trials) == 2
    for trial in trials:
        params = json.loads((trial / "params.json").read_text())
        assert 0.0 <= params["agent"]["ent_coef"] <= 0.02  # sampled by Optuna or PB2 within bounds


def test_pbt_refuses_a_search_algorithm(tmp_path, capsys):
    config = yaml.safe_load(SMALL_CORRIDOR)
    mutations = {"agent": {"ent_coef": [0.0, 0.01]}}
    config["tune"] = {"search": "optuna", "scheduler": {"name": "pbt", "hyperparam_mutations": mutations}}
    assert main(["run", write(tmp_path, yaml.safe_dump(config))]) == 2
    assert "works with search: random only" in capsys.readouterr().err


TINY_ASHA = """
name: tiny_asha
trial:
  env: {name: cartpole}
  agent: {num_envs: 4, unroll_length: 16, num_minibatches: 1, update_epochs: 1, hidden_sizes: [16],
          lr: {grid: [1.0e-4, 1.0e-3, 3.0e-3, 1.0e-2]}}
  train: {total_timesteps: 20000, timesteps_per_iteration: 256, num_seeds: 1, eval_episodes: 2}
tune:
  metric: eval/return_mean
  mode: max
  scheduler: {name: asha, max_t: 4, grace_period: 1, reduction_factor: 2}
stop: {training_iteration: 4}
"""


def result_boxes(out: str) -> list[list[str]]:
    """The metric lines of each box Tune printed for a finished trial."""
    boxes, box = [], None
    for line in out.splitlines():
        if line.startswith("│ Trial ") and line.rstrip("│ ").endswith("result"):
            box = []
        elif box is not None and line.startswith("╰"):
            boxes.append(box)
            box = None
        elif box is not None and line.startswith("│"):
            box.append(line.strip("│ "))
    return boxes


def without_ray_teardown_race(out: str) -> str:
    """`out` less any worker's "Exception ignored in ..." block that ends in Ray's own SIGTERM
    handler. Ray stops a worker with SIGTERM; its handler raises SystemExit, and when the signal
    lands while the exiting worker runs a weakref callback, Python prints that block instead of
    exiting quietly. Seen in 2 of 3 whole-suite runs on 2026-12-06, never with this test alone:
    a race in Ray's teardown under load, not an error of a trial. Every other traceback stays."""
    kept, block, pid = [], [], None
    for line in out.splitlines():
        worker = re.search(r"\(\w+ pid=(\d+)\)", line)
        if worker and "Exception ignored in" in line:
            kept.extend(block)
            block, pid = [line], worker.group(1)
        elif pid is not None and worker and worker.group(1) == pid:
            block.append(line)
            if "SystemExit" in line:
                if not any("sigterm_handler" in b for b in block):
                    kept.extend(block)
                block, pid = [], None
        else:
            kept.append(line)
    return "\n".join(kept + block)


def test_only_rays_teardown_race_is_taken_out_of_a_runs_output():
    race = [
        "(AjaxTrainable pid=7) Exception ignored in: <function WeakSet.__init__.<locals>._remove at 0x1>",
        "(AjaxTrainable pid=7) Traceback (most recent call last):",
        '(AjaxTrainable pid=7)   File "ray/_private/worker.py", line 1063, in sigterm_handler',
        "(AjaxTrainable pid=7) SystemExit: 1",
    ]
    ours = [
        "(AjaxTrainable pid=8) Exception ignored in: <function f at 0x2>",
        "(AjaxTrainable pid=8) Traceback (most recent call last):",
        '(AjaxTrainable pid=8)   File "ajax_tune/runner.py", line 1, in f',
        "(AjaxTrainable pid=8) SystemExit: 1",
    ]
    assert without_ray_teardown_race("\n".join(["a", *race, "b"])) == "a\nb"
    assert without_ray_teardown_race("\n".join(["a", *ours, "b"])) == "\n".join(["a", *ours, "b"])
    assert "Traceback" in without_ray_teardown_race("Traceback (most recent call last):\nValueError: x")


@pytest.mark.slow  # a Ray of its own, as a user's terminal sees it (worker output reaches the driver)
def test_asha_run_is_quiet_and_its_boxes_are_short(tmp_path):
    env = {**os.environ, "RAY_AIR_NEW_OUTPUT": "1", "PYTHONPATH": str(TESTS.parent)}
    run = subprocess.run(
        [
            sys.executable,
            "-m",
            "ajax_tune.cli",
            "run",
            write(tmp_path, TINY_ASHA),
            "--num-cpus",
            "2",
            "--storage-path",
            str(tmp_path / "r"),
            "--no-plots",
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=540,  # below pytest's 600 s, so a hang fails here with its output
    )
    out = run.stdout + run.stderr
    assert run.returncode == 0, out[-3000:]
    quiet = without_ray_teardown_race(out)
    assert "Traceback" not in quiet and "SystemExit" not in quiet, quiet[-3000:]  # ASHA's stopped trials end quietly
    trials = [p.name for p in (tmp_path / "r" / "tiny_asha").iterdir() if p.is_dir()]
    assert len(trials) == 4 and not any(c in name for name in trials for c in "{}'\",")
    assert sorted(name.rsplit("_", 1)[-1] for name in trials) == ["lr=0.0001", "lr=0.001", "lr=0.003", "lr=0.01"]
    boxes = result_boxes(run.stdout)
    assert len(boxes) == 4  # one per finished trial
    for box in boxes:
        keys = [line.split()[0] for line in box]
        assert len(keys) <= 12, box
        assert {"eval/return_mean", "eval/return_std", "env_steps", "lr", "curriculum/task/gravity"} <= set(keys)
        assert not any(k.startswith(("health/", "loss/", "eval/return_seed")) for k in keys)
    assert "AjaxTrainable_{" not in out


def test_progress_shows_only_on_work_that_takes_a_while():
    import io
    import re
    import time

    from ajax_tune.cli.progress import Progress

    quick = io.StringIO()
    with Progress("episodes", total=3, delay=5.0, stream=quick) as progress:
        progress.update(3)
    assert quick.getvalue() == ""  # done before the delay: nothing to see

    slow = io.StringIO()
    with Progress("CartPole-v1: episodes", total=4, delay=0.05, every=0.05, stream=slow) as progress:
        for done in range(1, 5):
            time.sleep(0.12)
            progress.update(done)
    lines = slow.getvalue().splitlines()
    assert len(lines) >= 3 and all(line.startswith("ajax-tune evaluate: CartPole-v1: episodes ") for line in lines)
    counts = [int(re.search(r" (\d+)/4 \(", line).group(1)) for line in lines]
    assert counts == sorted(counts) and counts[0] < 4  # it counted up while the work ran
    assert lines[-1].endswith(", done") and " 4/4 (" in lines[-1]


def box_keys(result: dict) -> list[str]:
    """The keys Tune's end-of-trial box shows for `result` with AjaxTrainable's settings."""
    from ray.tune.experimental.output import AUTO_RESULT_KEYS, BLACKLISTED_KEYS, _get_dict_as_table_data

    from ajax_tune import compat
    from ajax_tune.tune.trainable import AjaxTrainable

    include = compat.tune_result_keys(AjaxTrainable)
    table = _get_dict_as_table_data(result, include=include, exclude=BLACKLISTED_KEYS, upper_keys=AUTO_RESULT_KEYS)
    return [row[0] for row in table]


@pytest.mark.heavy
def test_result_box_keeps_what_a_person_reads_and_verbose_keeps_all():
    from ajax_tune import Runner
    from ajax_tune.cli.run import result_box
    from tests.support.helpers import corridor_config

    result = Runner(corridor_config(task_sampler=None)).train()
    result.update({"training_iteration": 1, "time_total_s": 1.0, "timesteps_total": result["env_steps"]})
    result.update({"curriculum/task/x": 1.0, "curriculum/task/y": 2.0, "curriculum/task/z": 3.0})
    with result_box("eval/success_rate_mean", verbose=True):
        assert len(box_keys(result)) == len(result) - 1  # all but Tune's own bookkeeping (timesteps_total)
    with result_box("eval/success_rate_mean", verbose=False):
        for _ in range(2):  # every trial's box is the same
            shown = box_keys(result)
            assert len(shown) <= 12
            assert {
                "eval/return_mean",
                "eval/return_std",
                "env_steps",
                "lr",
                "eval/success_rate_mean",
                "curriculum/task/length",
                "training_iteration",
            } <= set(shown)
            assert "curriculum/task/length" in shown and "curriculum/task/z" not in shown  # the first four task fields
            assert not any(k.startswith(("health/", "loss/", "perf/")) for k in shown)
    assert "eval/success_rate_mean" not in box_keys(result)  # the default box, back after the run
    assert len(box_keys(result)) <= 12
