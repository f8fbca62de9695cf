"""benchmarks/results holds summaries: what a reader checks a quoted figure against (medians, ranges,
ratios, settings, versions, machine, date, command), never the raw per-run or per-step rows a
benchmark measured, which `harness.write_results` puts in the git-ignored `results/raw/`."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
# the keys under which the benchmarks keep their raw records: every run, cell, unit or call
RAW_KEYS = {"runs", "sequential_runs", "cells", "units", "iterations", "curves", "history", "calls", "evals"}
MOST_LINES = 900  # the largest summary today (ued_maze.json: 12 units, per evaluation, and their medians) has 660


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("harness", ROOT / "benchmarks" / "harness.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def rows(value) -> bool:
    """A list or mapping of records (dicts or lists), as raw runs are; a count or a flat curve is not."""
    items = value if isinstance(value, list) else value.values() if isinstance(value, dict) else ()
    return any(isinstance(item, (dict, list)) for item in items)


def raw_keys(value, where="") -> list[str]:
    if isinstance(value, dict):
        found = [f"{where}/{k}" for k, v in value.items() if k in RAW_KEYS and rows(v)]
        return found + [hit for k, v in value.items() for hit in raw_keys(v, f"{where}/{k}")]
    if isinstance(value, list):
        return [hit for i, v in enumerate(value) for hit in raw_keys(v, f"{where}[{i}]")]
    return []


@pytest.mark.parametrize("path", sorted(RESULTS.glob("*.json")), ids=lambda p: p.name)
def test_every_committed_result_is_a_summary_with_its_command_and_date(path):
    text = path.read_text()
    record = json.loads(text)
    assert {"benchmark", "date", "command", "versions"} <= set(record), f"{path.name} lacks its header"
    assert not raw_keys(record), f"{path.name} holds raw rows: {raw_keys(record)[:5]}"
    assert text.count("\n") <= MOST_LINES, f"{path.name} has {text.count(chr(10))} lines"


def test_write_results_keeps_the_summary_and_puts_the_runs_beside_it_outside_git(harness, tmp_path):
    runs = [{"env_steps_per_s": 1000.0 + i, "per_step": list(range(50))} for i in range(3)]
    summary = {"summary": harness.medians(runs, ("env_steps_per_s",)), "curve": [0.123456789, 1 / 3, None]}
    path = harness.write_results("probe", summary, tmp_path / "probe.json", raw={"runs": runs})

    written = json.loads(path.read_text())
    assert written["summary"]["env_steps_per_s"] == {"median": 1001.0, "min": 1000.0, "max": 1002.0, "n": 3}
    assert written["curve"] == [0.123457, 0.333333, None]  # six significant digits
    assert "runs" not in written and written["benchmark"] == "probe" and written["command"].startswith("python ")
    assert '"curve": [0.123457, 0.333333, null]' in path.read_text()  # a list of numbers reads on one line
    raw = harness.read_raw(path)
    assert harness.raw_path(path) == tmp_path / "raw" / "probe.json"
    assert raw["runs"] == runs and raw["date"] == written["date"]
    assert harness.read_raw(tmp_path / "elsewhere.json") == {}


def test_git_ignores_the_raw_records():
    probe = "benchmarks/results/raw/ppo_throughput.json"
    done = subprocess.run(["git", "-C", str(ROOT), "check-ignore", "-q", probe], capture_output=True)
    assert done.returncode == 0, f"{probe} is not ignored by .gitignore"
