"""Every example runs end to end with `--smoke` and prints a `RESULT {json}` line that says it
did what it shows. Each runs in its own process and joins the test session's Ray (`--address`)
rather than starting one of its own; all share the JAX compilation cache with the test session."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
TIMEOUT_S = 540  # a smoke run takes 10-30 s; this only turns a hang into a failure (before pytest's 600 s)


@pytest.fixture
def ray_address(ray_session):
    return ray_session.get_runtime_context().gcs_address


def run_example(name, tmp_path, address, *extra):
    env = dict(os.environ, JAX_PLATFORMS="cpu")  # AJAX_TUNE_COMPILATION_CACHE is inherited
    command = [sys.executable, str(EXAMPLES / name), "--smoke", "--storage-path", str(tmp_path), "--address", address, *extra]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=TIMEOUT_S)
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, f"{name} exited with {proc.returncode}:\n{output[-6000:]}"
    lines = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, f"{name} printed {len(lines)} RESULT lines:\n{output[-6000:]}"
    return json.loads(lines[0][len("RESULT ") :])


def test_tune_search(tmp_path, ray_address):
    result = run_example("tune_search.py", tmp_path, ray_address)
    assert len(result["returns"]) == 4
    assert result["best_return"] == max(result["returns"])
    assert 1e-4 <= result["best_config"]["lr"] <= 1e-2 and 0 <= result["best_config"]["ent_coef"] <= 0.02
    assert min(result["iterations"]) >= 2 and max(result["iterations"]) == 4  # ASHA's grace period and max_t
    # random CartPole play lasts ~20 steps: the trials trained. A check of the example, not a
    # learning claim (its trials ran in Ray workers, in the suite's cheap build; no doc quotes it)
    assert result["best_return"] > 50
    assert result["max_compilations"] == 1  # reuse_actors: later trials reused the compiled program


def test_curriculum_env_task_fn(tmp_path, ray_address):
    # (the function by import path, the --by-name variant, is what tests/test_tune.py uses)
    result = run_example("curriculum_env_task_fn.py", tmp_path, ray_address)
    tasks = result["curriculum"]["tasks"]
    assert tasks[0] == 4 and tasks[-1] > tasks[0]
    assert all(b - a in (0, 4) for a, b in zip(tasks, tasks[1:]))  # grown 4 cells at a time, never shrunk
    assert result["curriculum"]["compilations"] == 1  # a new task is data, not a new program


def test_curriculum_callback(tmp_path, ray_address):
    result = run_example("curriculum_callback.py", tmp_path, ray_address)
    assert result["curriculum"] == "ReachCurriculum"
    assert result["final_level"] >= 1
    assert result["final_task"]["distance"] > result["first_task"]["distance"]
    assert result["final_task"]["radius"] < result["first_task"]["radius"]


def test_function_trainable(tmp_path, ray_address):
    result = run_example("function_trainable.py", tmp_path, ray_address)
    assert result["resumed_from"] == 3  # crashed on purpose after iteration 3, restored from its checkpoint
    assert result["iterations"] == 6 and result["env_steps"] == 6 * 512  # and carried on to the end
    assert result["final_length"] > 4  # the curriculum between train() calls grew the corridor
    assert result["checkpoint"] and pathlib.Path(result["checkpoint"]).is_dir()


def test_pbt_lr_schedule(tmp_path, ray_address):
    result = run_example("pbt_lr_schedule.py", tmp_path, ray_address)
    assert len(result["trials"]) == 4
    assert result["max_compilations"] == 1
    assert result["exploits"] >= 1
    for trial in result["trials"].values():  # every row; after an exploit a trial continues its donor's run
        assert trial["env_steps"] == [1024 * i for i in trial["iterations"]]
        assert trial["iterations"][-1] == 8 or trial["return"] == 500  # the stop: 8 iterations, or solved
    assert any(trial["schedules"] > 1 for trial in result["trials"].values())  # an exploit changed a schedule


def test_custom_env(tmp_path, ray_address):
    result = run_example("custom_env.py", tmp_path, ray_address)
    assert result["trial_env"] == "custom_env:TargetTracking"  # by import path: no register call in workers
    assert result["trained_return"] > result["first_return"]
    assert result["trial_compilations"] == 1
    # the registered name rebuilt the same env: the trial's checkpoint restored and training went on
    assert result["final_env_steps"] == result["resumed_at"] + 2 * 16 * 32 * 4
    assert result["final_task"]["target_speed"] == pytest.approx(0.05)
    assert result["compilations"] == 1
    assert (tmp_path / "custom_env" / "checkpoint" / "ajax_tune.json").exists()


def test_task_samplers(tmp_path, ray_address):
    result = run_example("task_samplers.py", tmp_path, ray_address)
    samplers = result["samplers"]
    assert sorted(samplers) == ["learning_progress", "plr", "uniform"]
    for name, s in samplers.items():
        assert s["compilations"] == 1, name  # a reused actor swapped the sampler without recompiling
        assert s["draws"] == result["iterations"] + 1  # one draw before the first call, one after each
        # 2 seeds x 1 episode per held-out task: each task's rate is 0, 0.5 or 1, and their mean is the headline
        assert len(s["heldout_per_task"]) == 8 and set(s["heldout_per_task"]) <= {0.0, 0.5, 1.0}
        assert s["heldout_success"][-1] == pytest.approx(sum(s["heldout_per_task"]) / 8, abs=5e-4)  # rounded to 3 places
        assert s["histogram_total"] == pytest.approx(1.0)
        assert all(4 <= v <= 32 for v in s["trained_length_mean"])
    assert "sampler/entropy" in samplers["plr"]["sampler_metrics"]
    assert "sampler/progress_mean" in samplers["learning_progress"]["sampler_metrics"]
    assert "task_distribution.png" in result["plots"]
