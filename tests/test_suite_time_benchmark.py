"""benchmarks/suite_time.py's own logic: its hook records the compile events of a process it is
given to, and its summary tells compiled programs from those loaded from the cache, by process
kind and program, and puts them to the test that was running."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys

import pytest

BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def suite_time():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import suite_time

        yield suite_time
    finally:
        sys.path.remove(str(BENCHMARKS))


def event(e, d, f, t):
    return {"e": e, "d": d, "f": f, "t": t}


def test_builds_tell_compiled_from_loaded_and_carry_their_tracing(suite_time):
    rows = [
        event("jaxpr_trace_duration", 0.5, "_counted_call", 1.0),
        event("jaxpr_to_mlir_module_duration", 0.25, "jit(_counted_call)", 1.1),
        event("backend_compile_duration", 2.0, "jit(_counted_call)", 1.2),
        event("jaxpr_trace_duration", 0.125, "init", 2.0),
        event("jaxpr_to_mlir_module_duration", 0.0625, "jit(init)", 2.1),
        event("compile_time_saved_sec", 0.4, None, 2.2),
        event("backend_compile_duration", 0.03, "jit(init)", 2.2),
        event("backend_compile_duration", 0.01, "jit(add)", 2.3),
    ]
    builds = suite_time.builds(rows)
    assert [(b["program"], b["hit"]) for b in builds] == [("training", False), ("init", True), ("other", False)]
    assert (builds[0]["trace_s"], builds[0]["lower_s"], builds[0]["xla_s"]) == (0.5, 0.25, 2.0)
    assert (builds[1]["trace_s"], builds[1]["lower_s"]) == (0.125, 0.0625)
    assert builds[2]["trace_s"] == 0.0  # no tracing of its own was seen: none is lent from another program


def test_the_summary_groups_by_process_kind_and_puts_compiles_to_their_test(suite_time):
    worker = [
        {"argv": "-c", "t": 0.0},
        event("jaxpr_trace_duration", 1.0, "_counted_call", 10.5),
        event("backend_compile_duration", 3.0, "jit(_counted_call)", 10.6),
        event("jaxpr_trace_duration", 1.0, "_counted_call", 20.5),
        event("compile_time_saved_sec", 2.5, None, 20.6),
        event("backend_compile_duration", 0.5, "jit(_counted_call)", 20.6),
    ]
    trial = [{"argv": "ray/_private/workers/default_worker.py --node-ip-address=x", "t": 0.0}]
    trial.append(event("backend_compile_duration", 4.0, "jit(_counted_call)", 15.0))
    tests = {7: [{"test": "tests/a.py::one", "t": 10.0}, {"test": "tests/a.py::two", "t": 20.0}]}
    summary = suite_time.summarise({7: worker, 8: trial}, tests)
    assert summary["processes"] == {"pytest_worker": 1, "trial_worker": 1}
    training = summary["by_process_kind"]["pytest_worker"]["programs"]["training"]
    assert training["compiled_n"] == 1 and training["compiled_s"] == 4.0
    assert training["loaded_n"] == 1 and training["loaded_s"] == 1.5
    assert summary["by_process_kind"]["trial_worker"]["programs"]["training"]["compiled_n"] == 1
    assert summary["jax_s"] == 9.5
    first, second = summary["tests_that_compile_most"]
    assert first == {"test": "tests/a.py::one", "compile_s": 4.0, "training_programs_compiled": 1}
    assert second == {"test": "tests/a.py::two", "compile_s": 1.5, "training_programs_compiled": 0}


def test_pytest_outcome_reads_the_counts_and_the_time_per_file(suite_time):
    output = "\n".join(
        [
            "3.50s call     tests/test_a.py::test_one",
            "0.50s setup    tests/test_a.py::test_one",
            "1.50s call     tests/test_b.py::test_two[x]",
            "=== 2 passed, 1 skipped, 3 warnings in 5.31s ===",
        ]
    )
    outcome = suite_time.pytest_outcome(output)
    assert outcome["counts"] == {"passed": 2, "skipped": 1}
    assert outcome["test_time_s"] == 5.5
    assert outcome["slowest_files_s"] == {"tests/test_a.py": 4.0, "tests/test_b.py": 1.5}


@pytest.mark.slow  # a fresh process
def test_the_hook_records_a_process_compiles_without_importing_jax_first(tmp_path):
    """The hook, first on a fresh process's PYTHONPATH, writes that process's compile events, and
    JAX reads its settings from the environment as it would without the hook (the suite's
    conftest sets them before JAX starts)."""
    script = "import jax; print(jax.config.read('jax_disable_most_optimizations')); jax.jit(lambda x: x * 2)(1.0)"
    env = dict(os.environ, SUITE_TIME_DIR=str(tmp_path), JAX_PLATFORMS="cpu", JAX_DISABLE_MOST_OPTIMIZATIONS="1")
    env["PYTHONPATH"] = str(BENCHMARKS / "suite_time_hook")
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "True"
    (log,) = tmp_path.glob("*.jsonl")
    lines = log.read_text().splitlines()
    assert '"argv"' in lines[0]
    assert any('"backend_compile_duration"' in line and "<lambda>" in line for line in lines[1:])
