"""Successive halving inside a trial (`population.prune`): at the end of each rung the best
members go on alone, on a program rebuilt for their lanes, each exactly where it was.

How "exactly where it was" is checked: a twin runner trains the same population without
`prune`. After the call that ends a rung, the pruned runner's state is the twin's state on the
survivors' lanes, bit for bit (a gather of the same arrays). After that, the survivors train on
a program of fewer lanes, so the twin's survivors and the pruned runner's agree to the
tolerance of "a member trains as a single run of its config" (tests/test_population.py: a vmap
over more lanes may reorder a reduction) and their evaluations are equal.
"""

import math

import jax
import numpy as np
import pytest

from ajax_tune.cli import main
from ajax_tune.errors import CheckpointError, ConfigError
from ajax_tune.expected_keys import result_keys
from ajax_tune.population.prune import lane_index, survivors
from ajax_tune.population.spec import Prune
from ajax_tune.results import keys as K
from ajax_tune.runner import Runner
from tests.support.helpers import (
    assert_refused_before_compiling,
    assert_trees_equal,
    corridor_config,
    host,
    tiny_off_policy_config,
)
from tests.test_population_pbt import CARTPOLE_PBT

RTOL, ATOL = 1e-5, 1e-6
MEMBERS = [{"agent": {"lr": p}} for p in (3e-4, 1e-3, 3e-3, 6e-3)]
#: every member solves the corridor's evaluations from the first call; the training return tells them apart
SELECT = "train/episode_return_mean"


def prune_config(prune=None, members=MEMBERS, **sections):
    prune = {"grace_period": 1, "reduction_factor": 2, **(prune or {})}
    population = {"members": members, "prune": prune, "select": {"metric": SELECT}}
    return corridor_config(length=6, population=population, **sections)


def without_prune(config):
    return {**config, "population": {k: v for k, v in config["population"].items() if k != "prune"}}


def member_values(result, name, size):
    return [result[K.member_key(k, name)] for k in range(size)]


def expected_survivors(result, size, keep):
    """The `keep` best members of a call by its selection metric (NaN worst, ties to the lower index)."""
    values = [-math.inf if math.isnan(v) else v for v in member_values(result, SELECT, size)]
    return sorted(sorted(range(size), key=lambda k: (-values[k], k))[:keep])


def take(tree, members, num_seeds=2):
    index = lane_index(members, num_seeds)
    return jax.tree.map(lambda x: np.asarray(x)[index], tree)


@pytest.fixture(scope="module")
def halved():
    """A population of 4 and its unpruned twin, after the first call (the end of rung 0)."""
    runner, twin = Runner(prune_config(), trial_id="prune"), Runner(without_prune(prune_config()), trial_id="prune")
    first, twin_first = runner.train(), twin.train()
    return runner, twin, first, twin_first


def test_the_first_rung_keeps_the_better_half_exactly_as_they_were(halved):
    runner, twin, first, twin_first = halved
    kept = expected_survivors(twin_first, 4, 2)
    # the call itself reports all four members, numbered as they trained, and who they are
    assert first["population/size"] == 4.0 and first["population/rungs"] == 1.0
    assert member_values(first, "origin", 4) == [0.0, 1.0, 2.0, 3.0]
    assert member_values(first, SELECT, 4) == member_values(twin_first, SELECT, 4)
    assert len(set(member_values(first, SELECT, 4))) == 4  # no tie decides who goes on
    declared = result_keys(prune_config())  # what the first call reports, so a metric may name it
    assert declared == frozenset(first), (sorted(declared - set(first)), sorted(set(first) - declared))
    # then only the survivors train, renumbered in their order, on half the lanes
    assert runner.members.origin == tuple(kept) and len(runner.members) == 2 and runner.loop.num_lanes == 4
    assert [m.agent.lr.peak for m in runner.members] == [MEMBERS[k]["agent"]["lr"] for k in kept]
    assert runner.best_member == kept.index(int(first["population/best_member"]))
    assert_trees_equal(host(runner.state), take(host(twin.state), kept))  # parameters, optimiser, envs, keys: all of it


def test_survivors_go_on_as_the_unpruned_twin_trains_them_and_each_size_compiles_once(halved):
    runner, twin, _, _ = halved
    kept = list(runner.members.origin)
    second, twin_second = runner.train(), twin.train()
    assert second["population/size"] == 2.0 and second["population/rungs"] == 1.0  # rung 1 ends at call 3
    assert member_values(second, "origin", 2) == [float(k) for k in kept]
    for new, old in enumerate(kept):
        for name in ("eval/return_mean", SELECT):
            assert second[K.member_key(new, name)] == pytest.approx(twin_second[K.member_key(old, name)], rel=RTOL), name
        assert second[K.member_key(new, "agent/lr/peak")] == twin_second[K.member_key(old, "agent/lr/peak")]
    for x, y in zip(jax.tree.leaves(host(runner.state)), jax.tree.leaves(take(host(twin.state), kept)), strict=True):
        np.testing.assert_allclose(x, y, rtol=RTOL, atol=ATOL)
    assert second["env_steps"] == twin_second["env_steps"] == 2 * second["timesteps_this_iter"]

    third = runner.train()  # the end of rung 1: one member left
    assert third["population/rungs"] == 2.0 and len(runner.members) == 1
    best = expected_survivors(third, 2, 1)[0]
    assert runner.members.origin == (kept[best],)
    fourth = runner.train()
    assert fourth["population/size"] == 1.0 and fourth["population/rungs"] == 2.0  # min_members reached: no more rungs
    assert fourth[K.member_key(0, "origin")] == float(kept[best])
    assert fourth["perf/compilations"] == 3  # 4, 2 and 1 members: one program each
    assert fourth["env_steps"] == 4 * fourth["timesteps_this_iter"]


@pytest.mark.heavy
def test_a_recurrent_survivor_keeps_its_carries():
    config = prune_config()
    config["agent"] = {**config["agent"], "recurrent": {"cell": "lstm", "size": 16}}
    runner, twin = Runner(config), Runner(without_prune(config))
    runner.train()
    kept = expected_survivors(twin.train(), 4, 2)
    assert runner.members.origin == tuple(kept)
    assert_trees_equal(host(runner.state), take(host(twin.state), kept))  # the LSTM's carries with the rest
    assert runner.train()["perf/compilations"] == 2


@pytest.mark.heavy
@pytest.mark.parametrize("agent", ["dqn", "sac"])
def test_an_off_policy_survivor_keeps_its_own_replay_buffer_and_trains_on(agent):
    """Replay buffers, target networks and two optimisers are lanes of the state like the rest:
    a rung gathers them whole, and the survivors' next call runs on the smaller program."""
    base = tiny_off_policy_config(agent, train={"timesteps_per_iteration": 64, "num_seeds": 2})
    members = [{"agent": {"lr": lr}, "train": {"seed": k}} for k, lr in enumerate((1e-3, 3e-3, 1e-4))]
    config = {**base, "population": {"members": members, "prune": {"reduction_factor": 3}, "select": {"metric": SELECT}}}
    runner, twin = Runner(config), Runner(without_prune(config))
    first, twin_first = runner.train(), twin.train()
    kept = expected_survivors(twin_first, 3, 1)
    assert len(set(member_values(twin_first, SELECT, 3))) == 3  # chosen by its score, not by a tie
    assert runner.members.origin == tuple(kept) and runner.loop.num_lanes == 2
    assert_trees_equal(host(runner.state), take(host(twin.state), kept))
    buffers = jax.tree.leaves(host(runner.state).agent.buffer)
    assert buffers and any(np.any(b != 0) for b in buffers)  # a filled buffer came along
    second = runner.train()
    assert second["population/size"] == 1.0 and second["perf/compilations"] == 2
    assert second["env_steps"] == 2 * first["timesteps_this_iter"]


@pytest.mark.heavy
def test_a_pruned_population_saves_and_restores_its_survivors_and_continues_bit_identically(tmp_path):
    runner = Runner(prune_config(), trial_id="prune")
    start = runner.save(tmp_path / "start")  # four members, before any rung
    runner.train()
    path = runner.save(tmp_path / "ckpt")
    saved, kept = host(runner.state), runner.members.origin
    second = runner.train()
    after = host(runner.state)

    fresh = Runner(prune_config(), trial_id="prune")  # as Tune restores a trial: its config, then the checkpoint
    fresh.restore(path)
    assert fresh.members.origin == kept and fresh.loop.num_lanes == 4 and fresh.members.rungs == 1
    assert_trees_equal(fresh.state, saved)
    again = fresh.train()
    assert_trees_equal(fresh.state, after)
    assert member_values(again, "eval/return_mean", 2) == member_values(second, "eval/return_mean", 2)

    rebuilt = Runner.from_checkpoint(path)  # the survivors only, their members numbered as they were saved
    assert rebuilt.members.origin == kept and len(rebuilt.members) == 2
    assert_trees_equal(rebuilt.state, saved)
    assert rebuilt.evaluate(episodes=2, member=1)["return"].shape == (2, 2)
    with pytest.raises(ConfigError, match=r"member must be in \[0, 1\] \(the population has 2 member\(s\)\), got 2"):
        rebuilt.evaluate(episodes=2, member=2)

    fresh.restore(start)  # an earlier checkpoint: the whole population again
    assert fresh.members.origin == (0, 1, 2, 3) and fresh.loop.num_lanes == 8 and fresh.members.rungs == 0
    assert fresh.train()["population/rungs"] == 1.0 and fresh.members.origin == kept


def test_a_checkpoint_of_survivors_that_this_population_does_not_have_is_refused(tmp_path):
    runner = Runner(prune_config(), trial_id="prune", survivors=[1, 3])  # as a checkpoint of a pruned run rebuilds it
    assert runner.loop.num_lanes == 4 and runner.members.origin == (1, 3)
    path = runner.save(tmp_path / "ckpt")
    two = Runner(prune_config(members=MEMBERS[:2]), trial_id="prune")
    with pytest.raises(CheckpointError, match=r"holds a pruned population that does not fit this config: survivors must"):
        two.restore(path)
    assert two.loop.num_lanes == 4 and two.members.origin == (0, 1)  # nothing changed


def test_the_command_line_counts_a_pruned_checkpoints_survivors(tmp_path, capsys):
    runner = Runner(prune_config(), trial_id="prune", survivors=[1, 3])
    path = runner.save(tmp_path / "ckpt")
    assert main(["evaluate", path, "--episodes", "2", "--json", "--member", "1"]) == 0
    capsys.readouterr()
    assert main(["evaluate", path, "--member", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and err.endswith(
        "--member must be in [0, 1] (the checkpoint's population has 2 member(s)), got 2"
    )


def test_survivors_rank_by_the_selection_metric_nan_and_diverged_members_last():
    assert survivors([1.0, 3.0, 2.0, 0.0], "max", 2) == [1, 2]
    assert survivors([1.0, 3.0, 2.0, 0.0], "min", 2) == [0, 3]
    assert survivors([math.nan, 1.0, 1.0, 0.5], "max", 2) == [1, 2]  # ties to the lower index, NaN last
    assert survivors([math.nan, math.nan, 0.0], "max", 1) == [2]
    assert list(lane_index([1, 3], 2)) == [2, 3, 6, 7]


def test_rungs_double_in_length_as_members_halve():
    prune = Prune(grace_period=2, reduction_factor=2, min_members=2)
    assert [prune.rung_end(i) for i in range(4)] == [2, 6, 14, 30]  # each rung trains as many env steps as the first
    assert [prune.keep(n) for n in (16, 8, 4, 3, 2)] == [8, 4, 2, 2, 2]
    thirds = Prune(grace_period=1, reduction_factor=3)
    assert [thirds.rung_end(i) for i in range(3)] == [1, 4, 13] and thirds.keep(16) == 6 and thirds.keep(2) == 1


@pytest.mark.parametrize(
    ("prune", "message"),
    [
        ({"grace_period": 0}, r"^population.prune.grace_period must be >= 1, got 0$"),
        ({"reduction_factor": 1}, r"^population.prune.reduction_factor must be >= 2, got 1$"),
        ({"reduction_factor": 1.5}, r"^population.prune.reduction_factor must be an integer, got 1.5 \(float\)$"),
        ({"min_members": 4}, r"^population.prune.min_members must be below the population's size \(4\)"),
        ({"every": 2}, r"^unknown key population.prune.'every'\. Valid keys: grace_period, reduction_factor, min_members$"),
    ],
)
def test_bad_prune_sections_are_one_line_before_compiling(prune, message):
    assert_refused_before_compiling(prune_config(prune), message)


def test_prune_and_pbt_together_are_refused_in_one_line():
    config = prune_config()
    config["population"]["pbt"] = {"mutations": {"agent": {"ent_coef": [0.0, 0.01]}}}
    assert_refused_before_compiling(config, r"^population: give pbt or prune, not both")


def test_survivors_outside_the_population_are_refused():
    with pytest.raises(ConfigError, match=r"survivors must be increasing member indices in \[0, 3\]"):
        Runner(prune_config(), survivors=[2, 1])


# -- through Tune -----------------------------------------------------------------------------------


def test_a_pruned_population_trial_through_tune_reports_its_rungs_and_checkpoints_its_survivors(ray_session, tmp_path):
    from ray import tune

    from ajax_tune.tune.trainable import AjaxTrainable
    from tests.test_tune import CollectResults, fit

    # The in-process tests' population (2 seeds a member): the trial's programs of 8, 4 and 2 lanes
    # are those they built, read from the compilation cache. One checkpoint, at the end, is the one read.
    collect = CollectResults()
    results = fit(
        AjaxTrainable,
        prune_config(),
        tmp_path,
        "prune",
        stop={"training_iteration": 4},
        checkpoint_every=4,
        callbacks=[collect],
        tune_config=tune.TuneConfig(metric=SELECT, mode="max"),
    )
    (rows,) = collect.rows.values()
    assert [r["population/size"] for r in rows] == [4.0, 2.0, 2.0, 1.0]
    assert [r["population/rungs"] for r in rows] == [1.0, 1.0, 2.0, 2.0]
    assert [r["perf/compilations"] for r in rows] == [1, 2, 2, 3]
    last = Runner.from_checkpoint(results.get_best_result().checkpoint.path)
    assert last.members.origin == (int(rows[-1][K.member_key(0, "origin")]),) and last.iteration == 4


# -- learning -------------------------------------------------------------------------------------

CARTPOLE_PRUNE = {  # the in-trial PBT learning test's run (same env, agent and budget), halved instead
    **{key: value for key, value in CARTPOLE_PBT.items() if key != "population"},
    "population": {
        "members": [{"agent": {"lr": {"kind": "linear", "peak": peak}}} for peak in (1e-5, 3e-3, 3e-5, 6e-3)],
        "prune": {"grace_period": 1, "reduction_factor": 2},
    },
}


@pytest.mark.learning
@pytest.mark.long
def test_halving_keeps_the_learning_rates_that_learn_and_the_survivor_solves_cartpole():
    """4 members x 4 seeds, two with learning rates far too small to learn in this budget. The first
    rung (one call of 10,240 env steps per seed) stops those two, and the last member left solves
    cartpole on every seed, on a program of its 4 lanes only. Measured 2026-12-06: survivors
    (1, 3) after call 1, member 3 (peak 6e-3) alone after call 3, 500 on all 4 seeds after call 4
    (40,960 env steps per seed); 9 s with the compilations."""
    runner = Runner(CARTPOLE_PRUNE)
    history, result = [], {}
    # on to 500, and at least one call past the second rung (it ends after call 3)
    while (result.get("eval/return_mean", 0.0) < 500.0 or len(history) < 4) and len(history) < 16:
        result = runner.train()
        history.append((result["env_steps"], result["eval/return_mean"], runner.members.origin))
    print("cartpole, halving 4 learning rates (env steps per seed, best member's mean eval return, survivors):", history)
    assert history[0][2] == (1, 3)  # after the first rung: the two rates that learn
    assert result["eval/return_mean"] == 500.0 and all(result[f"eval/return_seed{i}"] == 500.0 for i in range(4)), history
    assert history[0][1] < 500.0  # it had to learn
    # past the second rung: one member of the two, on a third program (16, 8, then 4 lanes)
    assert runner.members.origin in ((1,), (3,)) and result["perf/compilations"] == 3, history
