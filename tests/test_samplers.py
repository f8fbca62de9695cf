"""Task samplers on the host: each one's arithmetic against small cases worked by hand, their
state through JSON, and their config errors. Nothing here compiles."""

import json

import numpy as np
import pytest

from ajax_tune.config import Config
from ajax_tune.envs import make_env
from ajax_tune.errors import ConfigError
from ajax_tune.heldout import HeldOut
from ajax_tune.loop import CallStats
from ajax_tune.samplers import (
    ALPGMM,
    LearningProgress,
    PrioritizedTaskReplay,
    TaskHistogram,
    TaskSpace,
    Uniform,
    gmm,
    make_sampler,
)
from ajax_tune.samplers.stats import EnvStats


@pytest.fixture(scope="module")
def corridor():
    return make_env("corridor", max_length=32)


@pytest.fixture(scope="module")
def reach():
    return make_env("point_reach")


def call_stats(task, episodes, success=None, returns=None, signal=None) -> EnvStats:
    """Per-env statistics of one call, as the loop reports them ([seeds, envs]); NaN where none."""
    episodes = np.asarray(episodes, np.float32)
    nan = np.full(episodes.shape, np.nan, np.float32)
    signal = nan if signal is None else np.asarray(signal, np.float32)
    return EnvStats.from_call(
        CallStats(
            task={k: np.broadcast_to(v, episodes.shape) for k, v in task.items()},
            episodes=episodes,
            return_sum=nan if returns is None else np.asarray(returns, np.float32),
            success_sum=nan if success is None else np.asarray(success, np.float32),
            steps=np.full(episodes.shape, 64, np.float32),
            signal_sum=np.nan_to_num(signal),
            signal_count=(~np.isnan(signal)).astype(np.float32),
        )
    )


def stats(lengths, episodes, success=None, returns=None, signal=None, exit_reward=0.0):
    """One call on the corridor (tasks are the same per seed)."""
    task = {"length": np.asarray(lengths, np.int32), "exit_reward": np.float32(exit_reward)}
    return call_stats(task, episodes, success=success, returns=returns, signal=signal)


def json_round_trip(state):
    return json.loads(json.dumps(state))


# -- the space ---------------------------------------------------------------------------------


def test_space_bins_integer_ranges_in_whole_numbers_and_rejects_tasks_outside(corridor):
    space = TaskSpace({"length": [4, 11], "exit_reward": 0.1}, bins=3).bind(corridor)
    assert space.bin_counts == [3, 1] and space.num_bins == 3
    # 4..11 is 8 values: bins {4, 5, 6}, {7, 8, 9}, {10, 11}
    tasks = {"length": np.array([4, 6, 7, 11, 12, 3, 5]), "exit_reward": np.array([0.1] * 6 + [0.2], np.float32)}
    assert space.bin_of(tasks).tolist() == [0, 0, 1, 2, -1, -1, -1]
    drawn = space.draw_in_bins(np.random.default_rng(0), np.array([2] * 200 + [0] * 200))
    assert set(drawn["length"][:200].tolist()) == {10, 11} and set(drawn["length"][200:].tolist()) == {4, 5, 6}
    assert drawn["length"].dtype == np.int32 and np.all(drawn["exit_reward"] == np.float32(0.1))
    # more bins than values: one bin per value
    assert TaskSpace({"length": [4, 6]}, bins=8).bind(corridor).num_bins == 3


def test_space_grid_over_a_float_range_and_a_value_set(reach):
    space = TaskSpace({"distance": [0.5, 2.5], "radius": {"values": [0.1, 0.3]}}, bins=4).bind(reach)
    assert space.num_bins == 8  # 4 distance bins x 2 radii
    tasks = {"distance": np.array([0.5, 1.2, 2.5, 2.6], np.float32), "radius": np.array([0.1, 0.3, 0.3, 0.1], np.float32)}
    assert space.bin_of(tasks).tolist() == [0, 3, 7, -1]
    drawn = space.draw_in_bins(np.random.default_rng(1), np.full(100, 3))
    assert np.all((drawn["distance"] >= 1.0) & (drawn["distance"] < 1.5)) and np.all(drawn["radius"] == np.float32(0.3))
    uniform = space.draw(np.random.default_rng(2), 1000)
    assert uniform["distance"].dtype == np.float32 and 0.5 <= uniform["distance"].min() < uniform["distance"].max() < 2.5
    assert set(uniform["radius"].tolist()) == {np.float32(0.1), np.float32(0.3)}


@pytest.mark.parametrize(
    "space, message",
    [
        (
            {"width": [1, 2]},
            "task_sampler.space.width: corridor has no task field 'width'; its fields are ['exit_reward', 'length']",
        ),
        ({"length": [4, 64]}, "task_sampler.space.length: [4.0, 64.0] is outside corridor's 'length', integer scalar in [1, 32]"),
        ({"length": [4.5, 8]}, "task_sampler.space.length: 'length' is an integer field, got [4.5, 8.0]"),
        ({"length": [8, 4]}, "task_sampler.space.length: a range [low, high] needs low < high, got [8, 4]"),
        ({"length": [4, 8, 16]}, "task_sampler.space.length as a list must be a range [low, high] of two numbers"),
        ({"length": {"choice": [4, 8]}}, "a mapping must be {values: [...]} (a finite set), got keys ['choice']"),
        (
            {"exit_reward": 2.0},
            "task_sampler.space.exit_reward: corridor: task field 'exit_reward' expected float scalar in [0, 1]",
        ),
        ({"length": {"values": [4, 4]}}, "task_sampler.space.length.values repeats a value"),
    ],
)
def test_bad_spaces_are_one_line_config_errors(corridor, space, message):
    with pytest.raises(ConfigError) as info:
        TaskSpace(space).bind(corridor)
    assert message in str(info.value) and "\n" not in str(info.value)


# -- Uniform -----------------------------------------------------------------------------------


def test_uniform_over_levels_and_ranges_is_seeded_and_restores_exactly(corridor):
    levels = Uniform(levels={"length": [4, 8, 16]}, seed=3).bind(corridor)
    lengths = levels.sample(3000)["length"]
    assert lengths.shape == (3000,) and lengths.dtype == np.int32
    shares = [np.mean(lengths == v) for v in (4, 8, 16)]
    assert all(abs(s - 1 / 3) < 0.03 for s in shares), shares

    a = Uniform({"length": [4, 32], "exit_reward": 0.1}, seed=7).bind(corridor)
    b = Uniform({"length": [4, 32], "exit_reward": 0.1}, seed=7).bind(corridor)
    first = a.sample(8)
    np.testing.assert_array_equal(first["length"], b.sample(8)["length"])
    assert first["length"].min() >= 4 and first["length"].max() <= 32
    state = json_round_trip(a.get_state())
    expected = a.sample(8)
    c = Uniform({"length": [4, 32], "exit_reward": 0.1}, seed=99).bind(corridor)
    c.set_state(state)
    np.testing.assert_array_equal(c.sample(8)["length"], expected["length"])
    a.update(stats([4] * 8, [[1] * 8]))  # learns nothing, accepts the statistics
    assert a.metrics() == {"sampler/draws": 2.0} and c.get_state()["draws"] == 2


def test_env_levels_are_the_default_space(corridor):
    ladder = [corridor.validate_task({"length": n}) for n in (4, 8)]
    sampler = Uniform().bind(corridor, env_levels=ladder)
    assert set(sampler.sample(50)["length"].tolist()) == {4, 8}
    with pytest.raises(ConfigError, match=r"needs a space \(\{field: \[low, high\], ...\}\) or levels, or env.levels"):
        Uniform().bind(corridor)


# -- LearningProgress --------------------------------------------------------------------------


def test_learning_progress_by_hand(corridor):
    lp = LearningProgress(levels={"length": [4, 8]}, fast=0.5, slow=0.1, uniform_share=0.2, seed=0).bind(corridor)
    np.testing.assert_allclose(lp.probabilities(), [0.5, 0.5])  # nothing seen: uniform
    # two seeds, env 0 on length 4 and env 1 on length 8
    lp.update(stats([4, 8], episodes=[[2, 1], [2, 1]], success=[[1, 0], [1, 0]]))
    # first scores set both averages: bin 0 at 2/4, bin 1 at 0/2; no progress yet
    np.testing.assert_allclose(lp.fast_avg, [0.5, 0.0])
    np.testing.assert_allclose(lp.slow_avg, [0.5, 0.0])
    np.testing.assert_allclose(lp.probabilities(), [0.5, 0.5])

    lp.update(stats([4, 8], episodes=[[2, 1], [2, 1]], success=[[2, 1], [1, 0]]))  # 3/4 and 1/2
    np.testing.assert_allclose(lp.fast_avg, [0.625, 0.25])  # 0.5 + 0.5 * 0.25, 0 + 0.5 * 0.5
    np.testing.assert_allclose(lp.slow_avg, [0.525, 0.05])  # 0.5 + 0.1 * 0.25, 0 + 0.1 * 0.5
    np.testing.assert_allclose(lp.progress(), [0.1, 0.2])
    np.testing.assert_allclose(lp.probabilities(), [0.8 * 0.1 / 0.3 + 0.1, 0.8 * 0.2 / 0.3 + 0.1])

    # bin 1 finishes no episode (its averages stay); an env outside the space (length 5) is ignored
    lp.update(stats([4, 8, 5], episodes=[[1, 0, 3]], success=[[1, 0, 3]]))
    np.testing.assert_allclose(lp.fast_avg, [0.8125, 0.25])  # 0.625 + 0.5 * 0.375
    np.testing.assert_allclose(lp.slow_avg, [0.5725, 0.05])  # 0.525 + 0.1 * 0.475
    p = lp.probabilities()
    np.testing.assert_allclose(p, [0.8 * 0.24 / 0.44 + 0.1, 0.8 * 0.2 / 0.44 + 0.1])
    metrics = lp.metrics()
    assert metrics["sampler/progress_max"] == pytest.approx(0.24) and metrics["sampler/progress_mean"] == pytest.approx(0.22)
    assert metrics["sampler/score_mean"] == pytest.approx((0.5725 + 0.05) / 2) and metrics["sampler/bins_seen"] == 1.0
    assert metrics["sampler/entropy"] == pytest.approx(-(p * np.log(p)).sum() / np.log(2))
    # sampling follows the probabilities
    assert np.mean(lp.sample(4000)["length"] == 4) == pytest.approx(p[0], abs=0.03)


def test_learning_progress_on_normalised_returns_and_range_bins(reach):
    lp = LearningProgress(
        {"distance": [0.5, 2.5], "radius": 0.2}, bins=4, metric="return", return_range=[-1.0, 3.0], fast=0.5, slow=0.25
    ).bind(reach)
    shape = (1, 2)
    call = lambda returns: call_stats(
        {"distance": np.array([[0.6, 2.4]], np.float32), "radius": np.full(shape, 0.2, np.float32)},
        episodes=[[2.0, 1.0]],
        returns=[returns],
    )
    lp.update(call([2.0, 5.0]))  # means 1.0 and 5.0: mapped to 0.5 and clipped to 1.0
    np.testing.assert_allclose(lp.fast_avg, [0.5, 0, 0, 1.0])
    lp.update(call([6.0, 5.0]))  # bin 0 mean 3.0 -> 1.0
    np.testing.assert_allclose(lp.fast_avg, [0.75, 0, 0, 1.0])
    np.testing.assert_allclose(lp.slow_avg, [0.625, 0, 0, 1.0])
    np.testing.assert_allclose(lp.probabilities(), [0.8 + 0.05, 0.05, 0.05, 0.05])
    assert lp.metrics()["sampler/bins_seen"] == 0.5


def test_learning_progress_state_continues_exactly(corridor):
    make = lambda seed: LearningProgress({"length": [4, 32]}, bins=4, seed=seed).bind(corridor)
    a = make(0)
    for i in range(3):
        lengths = a.sample(8)["length"]
        a.update(stats(lengths, episodes=[np.ones(8)], success=[(lengths < 10 + 5 * i).astype(float)]))
    b = make(5)
    b.set_state(json_round_trip(a.get_state()))
    np.testing.assert_array_equal(a.sample(8)["length"], b.sample(8)["length"])
    assert a.metrics() == b.metrics()
    with pytest.raises(ValueError, match="needs an env that reports success"):
        a.update(stats([4] * 8, episodes=[np.ones(8)]))


# -- PrioritizedTaskReplay --------------------------------------------------------------------


def test_plr_probabilities_by_hand(corridor):
    plr = PrioritizedTaskReplay(levels={"length": [4, 8, 12]}, buffer_size=3, temperature=1.0, staleness=0.25).bind(corridor)
    state = plr.get_state()
    state.update(buffer={"length": [4, 8, 12]}, scores=[0.5, 2.0, 1.0], last_drawn=[1, 5, 3], clock=5)
    plr.set_state(json_round_trip(state))
    # ranks 3, 1, 2 -> weights 1/3, 1, 1/2 (sum 11/6)
    np.testing.assert_allclose(plr.score_probabilities(), [2 / 11, 6 / 11, 3 / 11])
    # staleness 4, 0, 2
    np.testing.assert_allclose(plr.staleness_probabilities(), [2 / 3, 0, 1 / 3])
    np.testing.assert_allclose(
        plr.replay_probabilities(), 0.75 * np.array([2 / 11, 6 / 11, 3 / 11]) + 0.25 * np.array([2 / 3, 0, 1 / 3])
    )
    plr.temperature = 0.5  # weights (1/rank)^2: 1/9, 1, 1/4 (sum 49/36)
    np.testing.assert_allclose(plr.score_probabilities(), [4 / 49, 36 / 49, 9 / 49])
    assert plr.metrics()["sampler/staleness_mean"] == 2.0 and plr.metrics()["sampler/score_max"] == 2.0


def test_plr_fills_its_buffer_replays_and_replaces_the_lowest_score(corridor):
    plr = PrioritizedTaskReplay(
        levels={"length": [4, 8, 12, 16]}, buffer_size=3, temperature=1.0, staleness=0.25, replay_prob=1.0, seed=0
    ).bind(corridor)
    # call 1: an empty buffer, so both envs get new levels (distinct, none buffered yet)
    first = plr.sample(2)["length"]
    assert len(set(first.tolist())) == 2 and plr.replay_share == 0.0
    plr.update(stats(first, episodes=[[1, 1]], signal=[[0.5, 2.0]]))
    assert plr.buffer["length"].tolist() == first.tolist() and plr.scores.tolist() == [0.5, 2.0]
    # call 2: two of three slots filled, below min_fill (the whole buffer): new levels again
    second = plr.sample(2)["length"]
    assert not set(second.tolist()) & set(first.tolist())
    plr.update(stats(second, episodes=[[1, 1]], signal=[[1.0, 0.2]]))
    # the first fills the buffer; the second (0.2) is below the lowest score (0.5): left out
    assert plr.buffer["length"].tolist() == [*first.tolist(), second[0]] and plr.scores.tolist() == [0.5, 2.0, 1.0]
    assert plr.last_drawn.tolist() == [1, 1, 2] and plr.clock == 2
    # call 3: a full buffer, replay_prob 1: replayed from 0.75 * P_score + 0.25 * P_stale
    np.testing.assert_allclose(
        plr.replay_probabilities(), 0.75 * np.array([2 / 11, 6 / 11, 3 / 11]) + 0.25 * np.array([0.5, 0.5, 0.0])
    )
    third = plr.sample(2)["length"]
    assert plr.replay_share == 1.0 and set(third.tolist()) <= set(plr.buffer["length"].tolist())
    replayed = [plr.buffer["length"].tolist().index(x) for x in third]
    assert all(plr.last_drawn[s] == 3 for s in replayed)
    plr.update(stats(third, episodes=[[1, 1]], signal=[[3.0, 3.0]]))  # the latest signal is the score
    assert all(plr.scores[s] == 3.0 for s in replayed)

    # a new level joins a full buffer only by beating its lowest score, which it replaces
    small = PrioritizedTaskReplay({"length": [4, 32]}, buffer_size=1, replay_prob=0.0, seed=1).bind(corridor)
    drawn = []
    for signal in (1.0, 0.5, 2.0):
        drawn.append(int(small.sample(1)["length"][0]))
        small.update(stats(drawn[-1:], episodes=[[1]], signal=[[signal]]))
        kept = drawn[0] if signal < 2.0 else drawn[2]
        assert small.buffer["length"].tolist() == [kept] and small.scores.tolist() == [max(1.0, signal)]
    assert len(set(drawn)) == 3


def test_plr_scores_average_over_seeds_and_skip_envs_it_did_not_steer(corridor):
    plr = PrioritizedTaskReplay({"length": [4, 32]}, buffer_size=4, seed=2).bind(corridor)
    lengths = plr.sample(3)["length"]
    trained = lengths.copy()
    trained[2] = 33 - trained[2]  # another curriculum changed env 2's task
    plr.update(stats(trained, episodes=[[1, 1, 1]] * 2, signal=[[1.0, np.nan, 5.0], [3.0, 4.0, 5.0]]))
    assert plr.scores.tolist() == [2.0, 4.0]  # env 0: mean of both seeds; env 1: the seed that has one
    assert plr.buffer["length"].tolist() == lengths[:2].tolist()
    lengths = plr.sample(3)["length"]
    with pytest.raises(ValueError, match="this agent reports none"):
        plr.update(stats(lengths, episodes=[[1, 1, 1]]))


def test_plr_state_continues_exactly_and_a_reseed_keeps_the_scores(corridor):
    make = lambda: PrioritizedTaskReplay({"length": [4, 32]}, buffer_size=4, replay_prob=0.5, min_fill=2, seed=4).bind(corridor)
    a = make()
    for i in range(4):
        lengths = a.sample(4)["length"]
        a.update(stats(lengths, episodes=[np.ones(4)], signal=[lengths / 32.0 + i]))
    a.sample(4)  # the pending draw is part of the state: the checkpoint lies between sample and update
    saved = json_round_trip(a.get_state())
    b = make()
    b.set_state(saved)
    result = stats(a.pending_tasks["length"], episodes=[np.ones(4)], signal=[np.arange(4.0)])
    a.update(result)
    b.update(result)
    np.testing.assert_array_equal(a.sample(4)["length"], b.sample(4)["length"])
    assert a.get_state() == b.get_state()
    c = make()
    c.set_state(saved)
    c.reseed(12345)
    c.update(result)
    np.testing.assert_array_equal(c.scores, b.scores)
    draws_b = np.concatenate([b.sample(4)["length"] for _ in range(4)])
    draws_c = np.concatenate([c.sample(4)["length"] for _ in range(4)])
    assert not np.array_equal(draws_b, draws_c)


# -- ALP-GMM -----------------------------------------------------------------------------------


def test_gaussian_mixture_finds_two_clusters_and_aic_prefers_them():
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.normal([0.2, 0.2], 0.03, (100, 2)), rng.normal([0.8, 0.6], 0.05, (60, 2))])
    mixture = gmm.fit_best(x, 4, np.random.default_rng(1))
    assert len(mixture.weights) == 2
    order = np.argsort(mixture.means[:, 0])
    np.testing.assert_allclose(mixture.means[order], [[0.2, 0.2], [0.8, 0.6]], atol=0.02)
    np.testing.assert_allclose(mixture.weights[order], [100 / 160, 60 / 160], atol=0.01)
    one, _ = gmm.fit(x[:100], 1, np.random.default_rng(2))  # one component: the sample mean and covariance
    np.testing.assert_allclose(one.means[0], x[:100].mean(axis=0), atol=1e-9)
    np.testing.assert_allclose(one.covs[0], np.cov(x[:100].T, bias=True) + gmm.REG * np.eye(2), atol=1e-9)


def reach_call(distance, radius, episodes, success):
    shape = (1, len(distance))
    return call_stats(
        {"distance": np.asarray(distance, np.float32).reshape(shape), "radius": np.asarray(radius, np.float32).reshape(shape)},
        episodes=np.reshape(episodes, shape),
        success=np.reshape(success, shape),
    )


def test_alp_gmm_progress_by_hand_and_draws_where_it_is(reach):
    alp = ALPGMM({"distance": [0.05, 4.05], "radius": 0.1}, fit_window=8, bootstrap=4, random_share=0.25).bind(reach)
    assert alp.mixture is None and alp.metrics()["sampler/components"] == 0.0
    alp.update(reach_call([1.05, 4.05], [0.1, 0.1], [4, 2], [1, 0]))  # competences 0.25 and 0
    np.testing.assert_allclose(alp.points[:, 0], [0.25, 1.0], atol=1e-6)
    np.testing.assert_allclose(alp.alp, [0, 0])  # nothing earlier to compare with
    assert alp.mixture is None  # 2 tasks known, bootstrap 4: still uniform
    alp.update(reach_call([1.3, 3.8, 1.1, 3.9], [0.1] * 4, [4, 4, 2, 0], [4, 0, 1, 0]))
    # nearest earlier tasks: 1.05 (0.25), 4.05 (0), 1.05 (0.25); the env without episodes is no point
    np.testing.assert_allclose(alp.competence, [0.25, 0, 1.0, 0, 0.5])
    np.testing.assert_allclose(alp.alp, [0, 0, 0.75, 0, 0.25])
    assert alp.mixture is not None and alp.mixture.means.shape[1] == 2  # (distance, ALP)
    drawn = alp.sample(2000)["distance"]
    assert np.all((drawn >= 0.05) & (drawn <= 4.05)) and drawn.dtype == np.float32
    near = np.mean(np.abs(drawn - 1.2) < 0.5)
    assert near > 0.6, near  # most draws around distance 1-1.3, where the progress was
    assert alp.metrics()["sampler/random_share"] == pytest.approx(0.25, abs=0.04)
    np.testing.assert_array_equal(alp.sample(3)["radius"], np.full(3, 0.1, np.float32))


def test_alp_gmm_state_continues_exactly_and_a_reseed_keeps_the_history(reach):
    make = lambda seed: ALPGMM({"distance": [0.05, 5.0], "radius": [0.01, 2.0]}, fit_window=16, seed=seed).bind(reach)
    a = make(0)
    for i in range(4):
        tasks = a.sample(8)
        a.update(reach_call(tasks["distance"], tasks["radius"], np.ones(8), (tasks["distance"] < 1 + i).astype(float)))
    assert a.mixture is not None
    saved = json_round_trip(a.get_state())
    b = make(7)
    b.set_state(saved)
    np.testing.assert_array_equal(a.sample(8)["distance"], b.sample(8)["distance"])
    tasks = a.sample(8)
    b.sample(8)
    result = reach_call(tasks["distance"], tasks["radius"], np.ones(8), np.ones(8))
    a.update(result)
    b.update(result)
    assert a.get_state() == b.get_state() and a.metrics() == b.metrics()
    c, d = make(0), make(0)
    c.set_state(saved)
    d.set_state(saved)
    c.reseed(99)  # a PBT exploit: the donor's history and mixture, a random stream of its own
    np.testing.assert_array_equal(c.alp, saved["alp"])
    np.testing.assert_array_equal(c.mixture.means, d.mixture.means)
    assert not np.array_equal(c.sample(8)["distance"], d.sample(8)["distance"])


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"levels": [{"distance": 1.0}]}, "ALP-GMM fits a mixture over ranges of a space; for a list of levels use plr"),
        ({"space": {"radius": {"values": [0.1, 0.2]}}}, "fits a mixture over ranges [low, high]; the sets ['radius']"),
        ({"space": {"radius": 0.1}}, "fits a mixture over ranges [low, high]; the space has none"),
        ({"space": {"radius": [0.1, 1]}, "random_share": 2}, "task_sampler (ALPGMM): random_share must be in [0, 1], got 2"),
        ({"space": {"radius": [0.1, 1]}, "fit_window": 5000}, "history must be in [5000, inf), got 4096"),
    ],
)
def test_bad_alp_gmm_configs_are_one_line_errors(reach, spec, message):
    with pytest.raises(ConfigError) as info:
        make_sampler({"name": "alp_gmm", "kwargs": spec}).bind(reach)
    assert message in str(info.value) and "\n" not in str(info.value)


# -- config ------------------------------------------------------------------------------------


def test_samplers_from_names_paths_and_instances(corridor):
    by_name = make_sampler({"name": "plr", "kwargs": {"space": {"length": [4, 32]}, "temperature": 0.3}})
    by_path = make_sampler({"class": "ajax_tune.samplers:PrioritizedTaskReplay", "kwargs": {"levels": {"length": [4, 8]}}})
    assert isinstance(by_name, PrioritizedTaskReplay) and by_name.temperature == 0.3
    assert isinstance(by_path, PrioritizedTaskReplay)
    original = LearningProgress({"length": [4, 32]}, bins=4, seed=3)
    copied = make_sampler(original)
    assert copied is not original and copied.config() == {
        "class": "ajax_tune.samplers.learning_progress:LearningProgress",
        "kwargs": {"space": {"length": [4, 32]}, "bins": 4, "seed": 3},
    }
    assert isinstance(make_sampler(copied.config()), LearningProgress)
    # an instance in a Python config is written back as class and kwargs
    written = Config.from_dict({"task_sampler": original}).to_dict()["task_sampler"]
    assert written == original.config()


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"name": "prl"}, "task_sampler: unknown sampler 'prl'; did you mean 'plr'?"),
        ({"name": "plr", "class": "x:Y"}, "task_sampler needs exactly one of 'name'"),
        ({"name": "plr", "kwarg": {}}, "unknown key task_sampler.'kwarg'; did you mean task_sampler.'kwargs'?"),
        (
            {"name": "plr", "kwargs": {"temperature": 0.0}},
            "task_sampler (PrioritizedTaskReplay): temperature must be in (0, inf), got 0.0",
        ),
        ({"name": "plr", "kwargs": {"buffer_size": 4, "min_fill": 5}}, "min_fill must be in [1, 4], got 5"),
        ({"name": "plr", "kwargs": {"replay_prob": 1.5}}, "replay_prob must be in [0, 1], got 1.5"),
        ({"name": "plr", "kwargs": {"temprature": 1.0}}, "task_sampler (PrioritizedTaskReplay): "),
        ({"name": "learning_progress", "kwargs": {"fast": 0.1, "slow": 0.2}}, "slow (0.2) must be smaller than fast (0.1)"),
        ({"name": "learning_progress", "kwargs": {"metric": "return"}}, "metric 'return' needs return_range: [low, high]"),
        ({"name": "learning_progress", "kwargs": {"bins": 0}}, "task_sampler (LearningProgress).bins must be an integer >= 1"),
        ({"name": "uniform", "kwargs": {"space": {"length": [1, 2]}, "levels": [{"length": 1}]}}, "give either space"),
        ({"class": "ajax_tune.curriculum:ThresholdCurriculum"}, "is not a TaskSampler subclass"),
        ({"class": "nowhere:Sampler"}, "cannot import module 'nowhere'"),
    ],
)
def test_bad_sampler_configs_are_one_line_errors(spec, message):
    with pytest.raises(ConfigError) as info:
        make_sampler(spec)
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_bad_sampler_space_stops_the_runner_before_compiling():
    from ajax_tune.runner import Runner
    from tests.support.helpers import corridor_config

    config = corridor_config(task_sampler={"name": "plr", "kwargs": {"space": {"length": [4, 64]}}})
    with pytest.raises(ConfigError, match=r"task_sampler \(PrioritizedTaskReplay\).space.length: \[4.0, 64.0\] is outside"):
        Runner.check(config)
    with pytest.raises(ConfigError, match="heldout.tasks\\[1\\]: corridor: task field 'length'"):
        Runner.check(corridor_config(heldout={"tasks": [{"length": 4}, {"length": 40}]}))


# -- held-out tasks and the task histogram -----------------------------------------------------


def test_heldout_tasks_from_a_list_or_seeded_draws(corridor):
    listed = HeldOut.parse({"tasks": [{"length": 6}, {"length": 20, "exit_reward": 0.1}]})
    listed = listed.batch(corridor, base={"exit_reward": 0.2})
    assert listed["length"].tolist() == [6, 20]
    np.testing.assert_allclose(listed["exit_reward"], [0.2, 0.1])
    spec = {"space": {"length": [4, 32], "exit_reward": 0.1}, "num_tasks": 8, "seed": 3}
    drawn, again = HeldOut.parse(spec).batch(corridor), HeldOut.parse(spec).batch(corridor)
    assert drawn["length"].shape == (8,) and drawn["length"].dtype == np.int32
    np.testing.assert_array_equal(drawn["length"], again["length"])  # seeded: every trial evaluates the same set
    assert not np.array_equal(drawn["length"], HeldOut.parse({**spec, "seed": 4}).batch(corridor)["length"])
    assert HeldOut.parse(None) is None and HeldOut.parse(spec).count == 8
    assert HeldOut.parse(HeldOut.parse(spec).to_dict()) == HeldOut.parse(spec)  # what a checkpoint records reads back
    for bad, message in [
        ({"tasks": []}, "heldout.tasks must be a non-empty list of tasks"),
        ({"space": {"length": [4, 32]}}, "heldout.num_tasks must be an integer >= 1"),
        ({"tasks": [{"length": 4}], "num_tasks": 2}, "apply only to heldout.space"),
        ({"task": [{"length": 4}]}, "did you mean heldout.'tasks'?"),
        ({"space": {"length": [4, 99]}, "num_tasks": 2}, "heldout.space.length: [4.0, 99.0] is outside"),
    ]:
        with pytest.raises(ConfigError) as info:
            HeldOut.parse(bad).batch(corridor)
        assert message in str(info.value)


def test_task_histogram_has_stable_keys_and_shares(corridor, reach):
    hist = TaskHistogram({"length": (4, 11)}, {"length": True})  # 8 integers: one bin each
    out = hist({"length": np.array([[4, 4], [5, 11]])})
    assert out["tasks/length/bin0"] == 0.5 and out["tasks/length/bin1"] == 0.25 and out["tasks/length/bin7"] == 0.25
    assert out["tasks/length/low"] == 3.5 and out["tasks/length/high"] == 11.5 and out["tasks/length/mean"] == 6.0
    assert sorted(out) == sorted(hist.keys()) and sum(v for k, v in out.items() if "/bin" in k) == 1.0
    wide = TaskHistogram({"length": (1, 32), "distance": (0.5, 2.5)}, {"length": True, "distance": False})
    assert len([k for k in wide.keys() if k.startswith("tasks/length/bin")]) == 16  # noqa: SIM118 (its own keys())
    assert wide({"length": np.array([32]), "distance": np.array([2.5])})["tasks/distance/bin15"] == 1.0
