"""benchmarks/ued_maze.py's own logic, checked without running either side: our trial still
matches the flags it gives JaxUED's maze_plr.py (its learning rate included), the shortest paths
and buffer figures it reads from both sides' saved buffers, the training return it computes for
maze_plr.py, and its summaries and verdicts on made-up units."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import re
import sys

import numpy as np
import pytest

from tests.support.helpers import import_extra

import_extra("jaxued", extra="ued")

BENCHMARKS = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, str(BENCHMARKS))
    try:
        import ued_maze
        import ued_maze_measures
        import ued_maze_settings
        import ued_maze_summary

        yield type(
            "Bench",
            (),
            {"study": ued_maze, "settings": ued_maze_settings, "measures": ued_maze_measures, "summary": ued_maze_summary},
        )
    finally:
        sys.path.remove(str(BENCHMARKS))


@pytest.mark.parametrize("algorithm", ["robust_plr", "accel"])
def test_our_trial_matches_maze_plr_flags_and_passes_the_config_check(bench, algorithm):
    from ajax_tune import Runner

    study = bench.settings
    config = study.trial(algorithm, 0, 250)
    assert study.check_settings(config, algorithm, 250) == []
    Runner.check(config)
    config["agent"]["lr"]["end_fraction"] = 0.0  # the config's own schedule: decays to 0 over env steps
    assert study.check_settings(config, algorithm, 250) == ["lr once replay starts differs"]
    config = study.trial(algorithm, 0, 250)
    config["train"]["eval_episodes"] = 1
    assert study.check_settings(config, algorithm, 250) == ["--eval_num_attempts 10 against 1"]


@pytest.mark.parametrize("algorithm, share", [("robust_plr", 0.8), ("accel", 0.8 / 1.8)])
def test_our_learning_rate_follows_maze_plr_expected_rate_wherever_the_agent_learns(bench, algorithm, share):
    """maze_plr.py decays its rate over the gradient updates it applied: none before the buffer
    is half full (2,000 levels: after update 63), then `share` of the updates."""
    study, updates = bench.settings, 250
    assert study.replay_from() == 63 and study.gradient_share(algorithm) == pytest.approx(share)
    schedule = study.lr_schedule(algorithm, updates)
    for update in range(63, updates + 1):
        peer = 1e-4 * (1 - share * (update - 63) / updates)
        assert study.lr_at(schedule, update, updates) == pytest.approx(peer, rel=1e-6)


def random_mazes(n: int, size: int, seed: int):
    rng = np.random.default_rng(seed)
    walls = rng.random((n, size, size)) < rng.uniform(0.1, 0.6, (n, 1, 1))
    start, goal = rng.integers(0, size, (n, 2)), rng.integers(0, size, (n, 2))
    goal[: n // 20] = start[: n // 20]  # some start on their goal
    for i in range(n):  # start and goal cells are free, as JaxUED places them
        walls[i, start[i, 1], start[i, 0]] = walls[i, goal[i, 1], goal[i, 0]] = False
    return walls, start, goal


def test_vectorised_shortest_paths_equal_the_maze_adapter_breadth_first_search(bench):
    from ajax_tune.envs.jaxued_adapter import shortest_path

    walls, start, goal = random_mazes(300, 13, seed=0)
    paths = bench.measures.shortest_paths(walls, start, goal)
    expected = [shortest_path({"wall_map": w, "agent_pos": s, "goal_pos": g}) for w, s, g in zip(walls, start, goal)]
    assert paths.tolist() == [-1 if e is None else e for e in expected]
    assert (paths == -1).sum() > 20 and (paths == 0).sum() >= 15 and paths.max() > 20  # every case was met


def test_buffer_figures_count_unsolvable_levels_and_unscored_slots_apart(bench, tmp_path):
    corridor = np.ones((3, 3), bool)
    corridor[0] = False  # a row of three free cells
    walled = corridor.copy()
    walled[0, 1] = True  # the middle cell blocked: the ends cannot reach each other
    levels = np.stack([corridor, corridor, walled, corridor])
    start, goal = np.array([[0, 0]] * 4), np.array([[2, 0], [1, 0], [2, 0], [0, 0]])
    scores = np.array([0.5, 0.25, 0.75, -np.inf, 9.0], np.float32)  # the last slot is past `size`
    path = tmp_path / "eval_000.npz"
    bench.measures.save_levels(path, np.concatenate([levels, levels[:1]]), start, goal, scores, size=4, update=10)
    figures = bench.measures.buffer_figures(path)
    assert figures["size"] == 4 and figures["update"] == 10
    assert figures["score_mean"] == pytest.approx(0.5) and figures["scores_not_finite"] == 1
    assert figures["shortest_path_mean"] == pytest.approx((2 + 1 + 0) / 3)
    assert figures["unsolvable_share"] == pytest.approx(0.25)


def test_maze_plr_training_return_counts_episodes_as_jaxued_does(bench, monkeypatch):
    """The return the peer's tap computes on the host equals JaxUED's own per-env episode
    statistics (`accumulate_rollout_stats`: mean return over the episodes that ended, and how
    many ended), summed over envs."""
    import jax
    from jaxued.utils import accumulate_rollout_stats

    if not hasattr(jax, "tree_map"):  # jaxued 0.0.1 calls it; jax 0.6 removed it
        monkeypatch.setattr(jax, "tree_map", jax.tree_util.tree_map, raising=False)

    rng = np.random.default_rng(1)
    dones = rng.random((64, 8)) < 0.1
    dones[:, 0] = False  # an env whose episode never ends in the rollout
    rewards = rng.random((64, 8)).astype(np.float32)
    total, count = bench.measures.ended_returns(dones, rewards)
    mean, _, episodes = (np.asarray(x, np.float64) for x in accumulate_rollout_stats(dones, rewards, time_average=False))
    assert count == int(episodes.sum()) == int(dones.sum())
    assert total == pytest.approx(float((mean * episodes).sum()), rel=1e-5)
    assert bench.measures.ended_returns(np.zeros((4, 2), bool), np.ones((4, 2))) == (0.0, 0)


def made_up_unit(summary, side: str, curve: list[float], chunks=(30.0, 1.0, 1.0, 1.0, 1.0), replay_from: int = 20):
    """A worker output of 5 evaluations every 10 updates, its curves all `curve`, its chunks of
    10 updates taking `chunks` seconds; its first chunk compiles."""
    evals = [dict(update=10 * (i + 1), value=value, chunk_s=chunk) for i, (value, chunk) in enumerate(zip(curve, chunks))]
    levels = [
        {"update": e["update"], "score_mean": e["value"], "shortest_path_mean": e["value"], "unsolvable_share": 0.0}
        for e in evals
    ]
    if side == "jaxued":
        out = {
            "process_s": 100.0,
            "saving_s": 4.0,
            "compile_s": 25.0,
            "evals": [
                {
                    "num_updates": e["update"],
                    "train_return": e["value"],
                    "solve_rate": {"mean": e["value"]},
                    "level_sampler": {"size": 32.0 * e["update"], "mean_score": e["value"] + 0.5},
                    "chunk_s": e["chunk_s"] + 1.0,
                    "chunk_cpu_s": e["chunk_s"] / 2,
                    "chunk_saving_s": 1.0,  # the previous checkpoint's save, taken out
                    "chunk_compile_s": 25.0 if e["update"] == 10 else 0.0,
                }
                for e in evals
            ],
        }
        return summary.peer_unit(out, levels, replay_from)
    out = {
        "process_s": 50.0,
        "saving_s": 1.0,
        "compile_s": 9.0,
        "updates_per_call": 10,
        "calls": [
            {
                "call": i + 1,
                "wall_s": e["chunk_s"],
                "cpu_s": e["chunk_s"] / 4,
                "compile_s": 9.0 if i == 0 else 0.0,
                "train/episode_return_mean": e["value"],
                "eval/heldout/success_rate_mean": e["value"],
                "ued/score_mean": e["value"],
            }
            for i, e in enumerate(evals)
        ],
    }
    return summary.ours_unit(out, levels, replay_from)


def test_summary_gives_each_curve_a_verdict_by_the_stated_rule(bench):
    s = bench.summary
    peer = {f"jaxued/robust_plr/{k}": made_up_unit(s, "jaxued", [k, k + 1, k + 2, k + 3, k + 4]) for k in range(3)}
    same = {f"ajax_tune/robust_plr/{k}": made_up_unit(s, "ajax_tune", [k + 0.5, k + 1.5, k + 2.5, 9, 9]) for k in range(3)}
    row = s.summarise({**peer, **same}, ["robust_plr"], replay_from=20)["robust_plr"]
    v = row["verdicts"]["train_return"]
    # compared after update 20: updates 30, 40, 50; ranges overlap at 30 only (ours 9 at 40, 50)
    assert v["evaluations"] == 3  # updates 30, 40, 50
    assert v["ranges_overlap"] == pytest.approx(1 / 3, abs=1e-3) and v["verdict"] == "differs"
    assert v["ours_median_above"] == 1.0 and v["median_gap"] == pytest.approx(4)  # gaps 0.5, 9 - 4, 9 - 5
    assert s.side_curve(row, "train_return", "jaxued")[0] == {"update": 10, "median": 1, "min": 0, "max": 2}

    close = {f"ajax_tune/robust_plr/{k}": made_up_unit(s, "ajax_tune", [k + 0.5 + i for i in range(5)]) for k in range(3)}
    row = s.summarise({**peer, **close}, ["robust_plr"], replay_from=20)["robust_plr"]
    assert all(v["verdict"] == "within seed noise" and v["ranges_overlap"] == 1.0 for v in row["verdicts"].values())

    flat = {k: made_up_unit(s, k.split("/")[0], [0.0] * 5) for k in [*peer, *close]}
    verdict = s.summarise(flat, ["robust_plr"], replay_from=20)["robust_plr"]["verdicts"]["solve_rate"]["verdict"]
    assert verdict.startswith("no signal")

    one = {k: u for k, u in {**peer, **close}.items() if k.endswith("/0")}
    verdict = s.summarise(one, ["robust_plr"], replay_from=20)["robust_plr"]["verdicts"]["train_return"]["verdict"]
    assert verdict == "one seed a side: no range to compare"


def test_summary_times_each_side_without_its_saves_and_compiling_chunks(bench):
    s = bench.summary
    units = {  # replay can start after update 25: the chunk of updates 21-30 is neither before nor after
        "jaxued/accel/0": made_up_unit(s, "jaxued", [1.0] * 5, (30.0, 2.0, 9.0, 4.0, 6.0), replay_from=25),
        "ajax_tune/accel/0": made_up_unit(s, "ajax_tune", [1.0] * 5, (30.0, 1.0, 9.0, 2.0, 3.0), replay_from=25),
    }
    row = s.summarise(units, ["accel"], replay_from=25)["accel"]
    peer, ours = row["timing"]["jaxued"], row["timing"]["ajax_tune"]
    assert peer["process_s"]["median"] == 96.0 and ours["process_s"]["median"] == 49.0
    assert peer["s_per_update_before_replay"]["median"] == pytest.approx(0.2)  # the first chunk compiles
    assert peer["s_per_update_replaying"]["median"] == pytest.approx(0.5)
    assert ours["s_per_update_replaying"]["median"] == pytest.approx(0.25)
    assert peer["cpu_s_per_update_replaying"]["median"] == pytest.approx(0.25)
    assert ours["cpu_s_per_update_before_replay"]["median"] == pytest.approx(0.025)
    assert row["timing"]["jaxued_over_ajax_tune"]["s_per_update_replaying"] == 2.0
    assert row["score_mean_logged_against_saved_max_abs_difference"] == {"jaxued": 0.5, "ajax_tune": 0.0}
    assert row["at_end"]["buffer_size"]["jaxued"] == {"median": 1600.0, "min": 1600.0, "max": 1600.0, "n": 1}


def test_units_alternate_sides_and_cover_every_seed(bench):
    order = bench.study.unit_order(3, ["robust_plr", "accel"])
    assert len(order) == len(set(order)) == 18
    assert order[:4] == ["jaxued/robust_plr/0", "ajax_tune/robust_plr/0", "ajax_tune/accel/0", "jaxued/accel/0"]
    assert {k.split("/")[0] for k in order[:12]} == {"jaxued", "ajax_tune"}  # the variants come last
    assert order[12:] == [f"ajax_tune_terminal/{a}/{seed}" for a in ("robust_plr", "accel") for seed in range(3)]


def test_a_variant_is_compared_with_both_sides_and_leaves_their_verdicts_alone(bench):
    s = bench.summary
    peer = {f"jaxued/robust_plr/{k}": made_up_unit(s, "jaxued", [k, k + 1, k + 2, k + 3, k + 4]) for k in range(3)}
    ours = {f"ajax_tune/robust_plr/{k}": made_up_unit(s, "ajax_tune", [k + 9 + i for i in range(5)]) for k in range(3)}
    variant = {
        f"ajax_tune_terminal/robust_plr/{k}": made_up_unit(s, "ajax_tune", [k + 0.5 + i for i in range(5)]) for k in range(3)
    }
    alone = s.summarise({**peer, **ours}, ["robust_plr"], replay_from=20)["robust_plr"]
    row = s.summarise({**peer, **ours, **variant}, ["robust_plr"], replay_from=20)["robust_plr"]
    assert row["verdicts"] == alone["verdicts"] and row["seeds"] == {"jaxued": 3, "ajax_tune": 3}
    v = row["variants"]["ajax_tune_terminal"]
    assert v["seeds"] == 3
    assert v["against_jaxued"]["train_return"]["verdict"] == "within seed noise"
    assert v["against_ajax_tune"]["train_return"]["verdict"] == "differs"
    assert s.side_curve(row, "train_return", "ajax_tune_terminal")[0] == {"update": 10, "median": 1.5, "min": 0.5, "max": 2.5}


def test_the_terminal_variant_ends_an_episode_at_the_time_limit_where_ours_truncates(bench):
    import jax
    import jax.numpy as jnp

    from ajax_tune.envs.registry import make_env
    from ajax_tune.envs.wrappers import EpisodeWrapper

    sys.path.insert(0, str(BENCHMARKS / "peers"))
    try:
        ends = {}
        for name in ("jaxued/maze", bench.study.VARIANTS["ajax_tune_terminal"]):
            env = EpisodeWrapper(make_env(name, height=5, width=5, n_walls=0, max_episode_steps=3))
            state = env.reset(jax.random.PRNGKey(0), {k: jnp.asarray(f.default) for k, f in env.task_spec.items()})
            for t in range(3):  # turning on the spot never reaches the goal
                state = env.step(state, jnp.asarray(0), jax.random.PRNGKey(t))
                ends.setdefault(name, []).append((bool(state.terminated), bool(state.truncated)))
    finally:
        sys.path.remove(str(BENCHMARKS / "peers"))
    assert ends["jaxued/maze"] == [(False, False), (False, False), (False, True)]
    assert ends["maze_time_limit:TerminalMaze"] == [(False, False), (False, False), (True, False)]


def test_a_checkpoint_read_as_the_wrong_evaluation_is_refused(bench):
    s = bench.summary
    out = {"process_s": 1.0, "compile_s": 0.0, "evals": [{"num_updates": 10, "solve_rate": {}, "level_sampler": {}}]}
    with pytest.raises(ValueError, match="update 20"):
        s.peer_unit(out, [{"update": 20}], 63)


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

    summary = bench.summary.update_summary({**runs("ajax_tune", 0.2, 0.3, 0.15), **runs("jaxued", 0.05, 0.25, 0.05)})
    assert summary["ajax_tune"]["per_epoch_s"] == pytest.approx(0.3) and summary["ajax_tune"]["fixed_s"] == pytest.approx(0.2)
    assert summary["jaxued"]["update_s"] == {"1": 0.3, "5": 1.3}
    ratio = summary["ratio_ajax_tune_over_jaxued"]
    assert (
        ratio["fixed_s"] == 4.0 and ratio["forward_s"] == 3.0 and ratio["per_epoch_s"] == 1.2 and ratio["update_5_epochs"] == 1.31
    )


def test_median_seconds_runs_once_to_compile_then_times_the_rest():
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


@pytest.fixture
def flags(bench):
    """The study's settings module, its flags restored after the test (`set_flags` changes them in place)."""
    study = bench.settings
    saved = list(study.PEER_FLAGS)
    yield study
    study.PEER_FLAGS[:] = saved
    study.CHANGED.clear()


def test_settings_of_ones_own_change_both_sides_and_still_pass_the_check(flags):
    from ajax_tune import Runner

    changed = flags.set_flags(["n_walls=40", "--num_train_envs=16", "score_function=pvl", "lr=3e-4", "num_edits=3"])
    assert changed == {"--n_walls": "40", "--num_train_envs": "16", "--score_function": "pvl", "--lr": "3e-4", "--num_edits": "3"}
    peer = flags.peer_flags()  # what maze_plr.py is given
    assert (peer["--n_walls"], peer["--num_train_envs"], peer["--score_function"]) == ("40", "16", "pvl")
    assert flags.steps_per_update() == 16 * 256 and flags.replay_from() == 125  # half of 4,000 levels, 16 a rollout
    for algorithm in ("robust_plr", "accel"):
        config = flags.trial(algorithm, 0, 250)
        assert config["env"]["kwargs"]["n_walls"] == 40 and config["agent"]["num_envs"] == 16
        assert config["ued"]["score"] == "pvl" and config["ued"].get("edits") == (3 if algorithm == "accel" else None)
        assert config["train"]["total_timesteps"] == 250 * 16 * 256
        assert flags.lr_at(config["agent"]["lr"], 125, 250) == pytest.approx(3e-4, rel=1e-6)
        assert flags.check_settings(config, algorithm, 250) == []
        Runner.check(config)
        config["env"]["kwargs"]["n_walls"] = 25  # the check still sees a side left behind
        assert flags.check_settings(config, algorithm, 250) == ["--n_walls 40 against 25"]


@pytest.mark.parametrize(
    "item, says",
    [
        ("topk_k=2", "expected FLAG=VALUE with FLAG one of"),  # no counterpart on our side
        ("n_walls", "expected FLAG=VALUE"),
        ("n_walls=many", "--n_walls takes an integer, not 'many'"),
        ("score_function=maxmc", "takes one of ['MaxMC', 'pvl']"),
    ],
)
def test_a_flag_without_a_counterpart_or_of_the_wrong_type_is_refused_by_name(flags, item, says):
    before = list(flags.PEER_FLAGS)
    with pytest.raises(ValueError, match=re.escape(says)):
        flags.set_flags([item])
    assert before == flags.PEER_FLAGS and not flags.CHANGED


def test_the_study_refuses_settings_ajax_tune_refuses_and_a_json_of_other_settings_before_any_unit(
    bench, flags, tmp_path, capsys
):
    out = tmp_path / "study.json"
    with pytest.raises(SystemExit, match="n_walls"):  # more walls than a 13 x 13 maze has cells
        bench.study.main(["--set", "n_walls=500", "--jaxued-repo", str(tmp_path), "--out", str(out)])
    flags.PEER_FLAGS[flags.PEER_FLAGS.index("--n_walls") + 1] = "25"
    flags.CHANGED.clear()
    out.write_text(json.dumps({"settings": {"peer_flags": flags.PEER_FLAGS}, "per_seed": {"jaxued/accel/0": {}}}))
    with pytest.raises(SystemExit, match=r"other flags \(--n_walls 25 there, 30 here\).*--fresh"):
        bench.study.main(["--set", "n_walls=30", "--jaxued-repo", str(tmp_path), "--out", str(out)])
    with pytest.raises(SystemExit):  # --set is the study's: the update part runs maze_plr.py's own shapes
        bench.study.main(["--part", "update", "--set", "n_walls=30", "--jaxued-repo", str(tmp_path)])
    assert "--set changes the study's settings" in capsys.readouterr().err
