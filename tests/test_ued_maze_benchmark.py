"""benchmarks/ued_maze.py's set-up, checked without running it: our trial still matches the
flags it gives JaxUED's maze_plr.py, its held-out 7 x 7 mazes are valid and solvable, and its
part-2 configs pass the config check for every algorithm."""

from __future__ import annotations

import pathlib
import sys

import pytest

from tests.support.helpers import import_extra

import_extra("jaxued", extra="ued")

BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import ued_maze

        yield ued_maze
    finally:
        sys.path.remove(str(BENCHMARKS))


def test_part1_trial_matches_peer_flags(bench):
    assert bench.check_p1_settings(bench.p1_config("accel", 3, 40)) == []


def test_heldout_mazes_are_solvable_levels(bench):
    from ajax_tune.envs.jaxued_adapter import MazeEnv, parse_maze

    env = MazeEnv(height=7, width=7, n_walls=12, max_episode_steps=64)
    for name, text in bench.HELDOUT_7X7.items():
        level = parse_maze(text.strip("\n"))
        env.validate_task(level)
        assert bench.shortest_path(level["wall_map"], level["agent_pos"], level["goal_pos"]) is not None, name


@pytest.mark.parametrize("algorithm", ["dr", "plr", "robust_plr", "accel", "sfl"])
def test_part2_configs_check(bench, algorithm):
    from ajax_tune import Runner

    Runner.check(bench.p2_config(algorithm, 4, 16))
    if algorithm in ("plr", "robust_plr", "accel"):  # --p2-score pvl
        config = bench.p2_config(algorithm, 4, 16, score="pvl")
        assert config["ued"]["score"] == "pvl"
        Runner.check(config)


def test_buffer_facts_find_unsolvable_levels_and_their_replay_weight(bench):
    open_row, wall_row = "000", "111"
    solvable = {"wall_rows": [open_row, wall_row, wall_row], "agent_pos": [0, 0], "goal_pos": [2, 0]}
    walled_in = {"wall_rows": ["010", wall_row, wall_row], "agent_pos": [0, 0], "goal_pos": [2, 0]}
    lanes = [
        {
            "size": 3,
            "slots": [
                {**walled_in, "score": 0.9, "max_return": 0.0},
                {**solvable, "score": 0.5, "max_return": 1.0},
                {**solvable, "score": 0.1, "max_return": 1.0},
            ],
        },
        {"size": 0, "slots": []},
    ]
    facts = bench.buffer_facts(lanes, temperature=1.0)
    assert facts["size_per_seed"] == [3, 0]
    assert facts["unsolvable_share_per_seed"] == [pytest.approx(1 / 3, abs=1e-4)]
    # ranks 1, 2, 3 at T = 1 weigh 1, 1/2, 1/3: the top-scored, unsolvable level holds 6/11
    assert facts["unsolvable_share_of_rank_weight_per_seed"] == [pytest.approx(6 / 11, abs=1e-4)]
    assert facts["unsolvable_share_of_top_tenth_by_score_per_seed"] == [1.0]
    assert facts["shortest_path_solvable_mean"] == 2.0
    assert facts["score_mean_unsolvable"] == 0.9 and facts["score_mean_solvable"] == 0.3
    assert bench.buffer_facts(None) is None


def test_part1_summary_puts_a_process_per_seed_beside_the_peer(bench):
    """Made-up units of 2 updates (one per call): the peer's and our single-lane processes are
    summarised alike, and their wall-clock ratio is the peer's total over ours."""
    total = 2 * bench.P1_STEPS_PER_UPDATE
    peer = {
        "run_s": 40.0,
        "compile_s": 30.0,
        "evals": [
            {
                "chunk_s": 35.0,
                "chunk_env_steps": total // 2,
                "solve_rate": {"mean": 0.0, "a": 0.0},
                "level_sampler": {"size": 32},
            },
            {"chunk_s": 5.0, "chunk_env_steps": total // 2, "solve_rate": {"mean": 0.5, "a": 0.5}, "level_sampler": {"size": 64}},
        ],
    }
    ours = {
        "run_s": 10.0,
        "compile_s": 8.0,
        "steps_per_update": bench.P1_STEPS_PER_UPDATE,
        "updates_per_call": 1,
        "calls": [{"wall_s": 9.0, "eval/heldout/a/success_rate": 0.0}, {"wall_s": 1.0, "eval/heldout/a/success_rate": 1.0}],
    }
    units = {f"jaxued/robust_plr/{s}": peer for s in range(2)} | {f"ajax_tune/robust_plr/{s}": ours for s in range(2)}
    row = bench.p1_summary(units, updates=2, seeds=2)["robust_plr"]
    j, a = row["jaxued"], row["ajax_tune_per_process"]
    assert j["wall_s_all_seeds"] == 80.0 and a["wall_s_all_seeds"] == 20.0
    assert row["ratio_all_seeds_wall_jaxued_over_ajax_tune_per_process"] == 4.0
    assert j["env_steps_per_s_without_compile"]["median"] == total / 10.0
    assert a["env_steps_per_s_without_compile"]["median"] == total / 2.0
    assert a["env_steps_per_s_without_first_chunk"]["median"] == bench.P1_STEPS_PER_UPDATE / 1.0
    assert a["heldout_solve_rate_max_any_maze_any_eval"] == 1.0 and "ajax_tune" not in row


def test_recorded_warnings_name_no_directories():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from time_to_solve import alarms
    finally:
        sys.path.remove(str(BENCHMARKS))
    out = "ok\n/usr/lib/python3.11/subprocess.py:1883: RuntimeWarning: os.fork() was called\n"
    assert alarms(out) == ["DIR/subprocess.py:1883: RuntimeWarning: os.fork() was called"]


def test_update_summary_splits_an_update_into_its_fixed_part_and_its_epochs(bench):
    def runs(side, fixed, per_epoch, forward):
        return {f"{side}/{e}": [{"update_s": fixed + e * per_epoch, "forward_s": forward}] * 3 for e in (1, 5)}

    summary = bench.update_summary({**runs("ajax_tune", 0.2, 0.3, 0.15), **runs("jaxued", 0.05, 0.25, 0.05)})
    assert summary["ajax_tune"]["per_epoch_s"] == pytest.approx(0.3) and summary["ajax_tune"]["fixed_s"] == pytest.approx(0.2)
    assert summary["jaxued"]["update_s"] == {"1": 0.3, "5": 1.3}
    ratio = summary["ratio_ajax_tune_over_jaxued"]
    assert (
        ratio["fixed_s"] == 4.0 and ratio["forward_s"] == 3.0 and ratio["per_epoch_s"] == 1.2 and ratio["update_5_epochs"] == 1.31
    )


def test_median_seconds_runs_once_to_compile_then_times_the_rest():
    import importlib.util
    import time

    spec = importlib.util.spec_from_file_location("protocol", BENCHMARKS / "peers" / "protocol.py")
    protocol = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(protocol)
    calls = []

    def fn():
        calls.append(None)
        time.sleep(0.2 if len(calls) == 1 else 0.01)  # the first call is the slow, compiling one

    median, fastest = protocol.median_seconds(fn, 3)
    assert len(calls) == 4 and 0.01 <= fastest <= median < 0.1
