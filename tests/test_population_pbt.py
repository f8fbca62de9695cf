"""PBT inside a trial: exploits gather lanes on the device, explore writes traced settings, the
lineage is in results and checkpoints, and nothing recompiles.

How an exploit is checked: a twin runner trains the same population without `pbt`, so its state
after the call is the PBT runner's state just before its exploit (the same program on the same
lanes: bit-identical on the CPU). After the exploit every recipient lane equals its donor's lane
of the twin in every leaf but the traced settings (the explored ones) and the key (re-keyed).
"""

import json
import math

import jax
import numpy as np
import pytest

from ajax_tune.agents.hparams import init_hparams
from ajax_tune.checkpoint import nonfinite_leaves
from ajax_tune.cli import main
from ajax_tune.cli.report import best_member_lines
from ajax_tune.config import Config
from ajax_tune.errors import ConfigError
from ajax_tune.expected_keys import result_keys
from ajax_tune.population.pbt import InTrialPBT, explore_value, plan
from ajax_tune.population.spec import Mutation
from ajax_tune.results import keys as K
from ajax_tune.runner import Runner
from ajax_tune.spaces import Domain
from tests.support.helpers import (
    assert_refused_before_compiling,
    assert_trees_equal,
    corridor_config,
    host,
    tiny_off_policy_config,
)

LR = {"loguniform": [1e-4, 1e-2]}
MEMBERS = [{"agent": {"lr": p}} for p in (3e-4, 1e-3, 3e-3, 6e-3)]  # inside LR, so a perturbation always moves one


def pbt_config(pbt=None, members=MEMBERS, **sections):
    pbt = {"interval": 1, "quantile": 0.5, "seed": 0, "mutations": {"agent": {"lr": {"peak": LR}}}, **(pbt or {})}
    return corridor_config(length=6, population={"members": members, "pbt": pbt}, **sections)


def without_pbt(config):
    return {**config, "population": {k: v for k, v in config["population"].items() if k != "pbt"}}


def assert_same_result(a: dict, b: dict):
    """Equal keys and values (NaN equal to NaN), timings aside."""
    keep = lambda r: {k: v for k, v in r.items() if k not in ("perf/call_s", "perf/env_steps_per_s")}  # noqa: E731
    a, b = keep(a), keep(b)
    assert a.keys() == b.keys()
    assert not [k for k in a if a[k] != b[k] and not (math.isnan(a[k]) and math.isnan(b[k]))]


def lanes(tree, member: int, num_seeds: int):
    return jax.tree.map(lambda x: x[member * num_seeds : (member + 1) * num_seeds], tree)


def exploits_of(result, size: int) -> dict[int, int]:
    """Recipient -> donor, from a result's lineage (members exploited at most once so far)."""
    return {k: int(result[K.member_key(k, "parent")]) for k in range(size) if result[K.member_key(k, "parent")] >= 0}


def assert_recipient_is_its_donor(after, before, recipient: int, donor: int, num_seeds: int):
    """Every leaf of the recipient's lanes is its donor's, but its traced settings and its key."""
    mine, theirs = lanes(after, recipient, num_seeds), lanes(before, donor, num_seeds)
    assert_trees_equal(
        mine.replace(agent=mine.agent.replace(hp=None), key=None), theirs.replace(agent=theirs.agent.replace(hp=None), key=None)
    )
    assert not np.array_equal(mine.key, theirs.key)  # re-keyed: the copy does not replay its donor's stream
    assert not np.array_equal(mine.key[0], mine.key[1])  # and its seeds stay apart


def assert_exploit(runner, twin_state, result, num_seeds: int):
    size = runner.config.num_members
    after = host(runner.state)
    pairs = exploits_of(result, size)
    assert pairs, "no member was exploited"
    for recipient, donor in pairs.items():
        assert_recipient_is_its_donor(after, twin_state, recipient, donor, num_seeds)
        # the explored settings are on its lanes and in the result, and it follows its donor's other settings
        explored = runner.members[recipient]
        expected = jax.tree.map(np.asarray, init_hparams(explored.agent))
        for x, y in zip(jax.tree.leaves(lanes(after, recipient, num_seeds).agent.hp), jax.tree.leaves(expected)):
            np.testing.assert_array_equal(x, np.broadcast_to(y, x.shape))
        assert result[K.member_key(recipient, "agent/lr/peak")] == explored.agent.lr.peak
        assert explored.agent.lr.peak != runner.members[donor].agent.lr.peak
        assert result[K.member_key(recipient, "exploits")] == 1.0
    for k in set(range(size)) - set(pairs):  # the others are untouched
        assert_trees_equal(lanes(after, k, num_seeds), lanes(twin_state, k, num_seeds))
        assert result[K.member_key(k, "parent")] == -1.0 and result[K.member_key(k, "exploits")] == 0.0
    assert result["population/exploits"] == len(pairs)
    return pairs


@pytest.fixture(scope="module")
def ppo_exploited():
    config = pbt_config()
    twin = Runner(without_pbt(config))
    twin_result = twin.train()
    runner = Runner(config)
    result = runner.train()
    return runner, result, host(twin.state), twin_result


@pytest.mark.heavy
def test_after_an_exploit_the_recipient_holds_its_donors_state_and_explored_settings(ppo_exploited):
    runner, result, twin_state, twin_result = ppo_exploited
    pairs = assert_exploit(runner, twin_state, result, num_seeds=2)
    # the worst half took the best half's states, ranked by the call's select metric
    returns = [twin_result[K.member_key(k, "eval/return_mean")] for k in range(4)]
    assert [result[K.member_key(k, "eval/return_mean")] for k in range(4)] == returns
    assert dict(plan(returns, "max", 0.5, np.random.default_rng([0, 0, 0]))) == pairs  # the first round's draws
    assert len(pairs) == 2 and not set(pairs) & set(pairs.values())
    assert all(returns[r] <= returns[d] for r, d in pairs.items())
    assert result["perf/compilations"] == 1 and result["perf/exploit_compilations"] == 1


def test_run_prints_the_settings_a_member_holds_after_an_exploit_not_its_starting_override(ppo_exploited):
    """`ajax-tune run`'s "its config" line, from a real result: a recipient's explored rate."""
    runner, result, _, _ = ppo_exploited
    recipient = min(exploits_of(result, 4))
    lines = best_member_lines(pbt_config(), {**result, "population/best_member": float(recipient)})
    explored, started = runner.members[recipient].agent.lr.peak, MEMBERS[recipient]["agent"]["lr"]
    assert lines[0].startswith(f"  best member              {recipient} of 4 ")
    assert f"agent.lr.peak={explored:.6g}" in lines[1].split() and f"{started:.6g}" not in lines[1]


@pytest.mark.heavy
def test_a_dqn_recipient_takes_its_donors_replay_buffer():
    base = tiny_off_policy_config("dqn", train={"timesteps_per_iteration": 64, "num_seeds": 2})
    members = [{"agent": {"lr": 1e-3}}, {"agent": {"lr": 3e-3}, "train": {"seed": 1}}]
    config = {**base, "population": {"members": members, "pbt": {"mutations": {"agent": {"lr": {"peak": LR}}}, "quantile": 0.5}}}
    twin = Runner(without_pbt(config))
    twin.train()
    before = host(twin.state)
    runner = Runner(config)
    result = runner.train()
    ((recipient, donor),) = exploits_of(result, 2).items()
    buffer = lambda state, k: jax.tree.leaves(lanes(state.agent.buffer, k, 2))  # noqa: E731
    assert any(not np.array_equal(a, b) for a, b in zip(buffer(before, recipient), buffer(before, donor)))  # it had its own
    assert_exploit(runner, before, result, num_seeds=2)
    for a, b in zip(buffer(host(runner.state), recipient), buffer(before, donor)):
        np.testing.assert_array_equal(a, b)


def test_a_population_of_eight_stays_compiled_once_through_exploits():
    space = {"agent": {"lr": {"peak": LR}, "ent_coef": {"uniform": [0.0, 0.02]}}}
    mutations = {"agent": {"lr": {"peak": LR}, "ent_coef": [0.0, 0.005, 0.01, 0.02]}}
    config = corridor_config(
        train={"num_seeds": 1}, population={"size": 8, "space": space, "seed": 0, "pbt": {"mutations": mutations, "seed": 3}}
    )
    runner = Runner(config)
    results = [runner.train() for _ in range(4)]
    assert [r["perf/compilations"] for r in results] == [1, 1, 1, 1]
    assert [r["perf/exploit_compilations"] for r in results] == [1, 1, 1, 1]
    assert [r["population/exploits"] for r in results] == [2, 4, 6, 8]  # ceil(8 * 0.25) recipients a round
    assert runner.loop.compilations == 1
    declared = result_keys(config)  # lineage keys included, so a metric may name them
    assert declared == frozenset(results[0]), (sorted(declared - set(results[0])), sorted(set(results[0]) - declared))
    assert {"member/7/parent", "member/7/exploits", "population/exploits", "perf/exploit_compilations"} <= declared
    settings = [[r[K.member_key(k, "agent/lr/peak")] for k in range(8)] for r in results]
    assert len({tuple(s) for s in settings}) == 4  # every round explored something
    assert all(1e-4 <= p <= 1e-2 for s in settings for p in s)
    assert {r[K.member_key(k, "agent/ent_coef")] for r in results[1:] for k in range(8)} <= {
        *(results[0][K.member_key(k, "agent/ent_coef")] for k in range(8)),
        0.0,
        0.005,
        0.01,
        0.02,
    }


@pytest.mark.heavy
def test_a_restored_population_exploits_and_trains_as_the_uninterrupted_one(tmp_path):
    config = pbt_config({"interval": 2, "quantile": 0.25})
    runner = Runner(config)
    for _ in range(3):  # an exploit after call 2; the save falls between two
        runner.train()
    path = runner.save(tmp_path / "ckpt")
    later = [runner.train() for _ in range(3)]  # exploits after calls 4 and 6
    final = host(runner.state)

    resumed = Runner(config)
    resumed.restore(path)
    restored_lineage = resumed.members.pbt.get_state()  # as the checkpoint restores it, before training on
    again = [resumed.train() for _ in range(3)]
    assert_trees_equal(resumed.state, final)
    for a, b in zip(later, again):
        assert_same_result(a, b)
    assert again[-1]["population/exploits"] == 3 and again[-1]["perf/compilations"] == 1
    assert [m.agent.lr.peak for m in resumed.members] == [m.agent.lr.peak for m in runner.members]

    # a checkpoint rebuilt for evaluation knows each member's explored settings
    rebuilt = Runner.from_checkpoint(path)
    assert rebuilt.members.pbt.get_state() == restored_lineage and sum(rebuilt.members.pbt.exploits) == 1
    assert [m.agent.lr.peak for m in rebuilt.members] != [m["agent"]["lr"] for m in MEMBERS]
    assert main(["evaluate", path, "--episodes", "1", "--json", "--member", "3"]) == 0


@pytest.mark.heavy
def test_a_member_that_stopped_being_finite_is_replaced_never_copied(tmp_path):
    config = pbt_config({"quantile": 0.5}, members=MEMBERS[:2], train={"num_seeds": 1, "on_nonfinite": "continue"})
    # ranked by the lowest return, where the poisoned member (it scores 0) would be the best
    config["population"]["select"] = {"metric": "eval/return_mean", "mode": "min"}
    runner = Runner(config)
    state = runner.state  # member 1's parameters poisoned: whatever it scores, it is the worst
    runner.state = state.replace(
        agent=state.agent.replace(params=jax.tree.map(lambda x: x.at[1].set(np.nan), state.agent.params))
    )
    result = runner.train()
    assert not result["done"]  # the trial diverged (a warning says so) but goes on, as configured
    assert result[K.member_key(1, "parent")] == 0.0 and result[K.member_key(0, "parent")] == -1.0
    assert not nonfinite_leaves(runner.state.agent)  # the population is whole again: it may be saved
    runner.save(tmp_path / "ckpt")
    assert runner.train()["train/nonfinite"] == 0.0


@pytest.mark.heavy
def test_a_tune_exploit_of_a_population_trial_restores_the_whole_population(tmp_path):
    """What Tune's PBT does to a population trial, through the Runner as the trainable calls it:
    another trial loads the donor trial's checkpoint, and takes every member with its lineage."""
    config = pbt_config({"quantile": 0.25})
    donor = Runner(config, trial_id="donor")
    donor.train()
    path = donor.save(tmp_path / "ckpt")
    saved = host(donor.state)
    lineage = donor.members.pbt.get_state()

    other = Runner(config, trial_id="other")
    other.restore(path)
    state = host(other.state)
    assert_trees_equal(state.replace(key=None), saved.replace(key=None))
    assert not np.array_equal(state.key, saved.key)  # this trial's own random stream
    restored = other.members.pbt.get_state()
    assert restored["overrides"] == lineage["overrides"] and restored["parent"] == lineage["parent"]
    assert restored["salt"] != lineage["salt"]  # and its own exploit draws
    assert [m.agent.lr.peak for m in other.members] == [m.agent.lr.peak for m in donor.members]
    assert other.train()["perf/compilations"] == 1


@pytest.mark.heavy
def test_a_recipient_takes_its_donors_curriculum_and_sampler_state():
    """Member 0 (lr 3e-3) climbs a ladder on `lr >= 2e-3` and member 1 (lr 1e-3) does not, so with
    the level as the selection metric member 1 takes member 0's state, curriculum included."""
    threshold = {
        "class": "ajax_tune.curriculum:ThresholdCurriculum",
        "kwargs": {"levels": {"length": [2, 4, 6]}, "metric": "lr", "threshold": 2e-3},
    }
    sampler = {"name": "plr", "kwargs": {"space": {"exit_reward": [0.0, 0.5]}, "buffer_size": 8, "seed": 3}}
    pbt = {"quantile": 0.5, "mutations": {"agent": {"lr": {"peak": {"uniform": [2.5e-3, 4e-3]}}}}}
    members = [{"agent": {"lr": 3e-3}}, {"agent": {"lr": 1e-3}}]
    config = corridor_config(
        length=2,
        callbacks=[threshold],
        task_sampler=sampler,
        population={"members": members, "select": {"metric": "curriculum/level"}, "pbt": pbt},
    )
    runner = Runner(config)
    first = runner.train()
    assert first[K.member_key(0, "curriculum/level")] == 1.0 and first[K.member_key(1, "curriculum/level")] == 0.0
    assert first[K.member_key(1, "parent")] == 0.0 and first[K.member_key(0, "parent")] == -1.0
    donor, recipient = (c.get_state() for c in runner.curricula)
    assert recipient["callbacks"] == donor["callbacks"]
    assert {k: v for k, v in recipient["sampler"].items() if k != "rng"} == {
        k: v for k, v in donor["sampler"].items() if k != "rng"
    }
    assert recipient["sampler"]["rng"] != donor["sampler"]["rng"]  # its own draws from here on
    tasks = host(runner.state.env.task)
    for values in tasks.values():
        np.testing.assert_array_equal(values[2:], values[:2])  # its envs' tasks are its donor's
    second = runner.train()  # now at a rate above the threshold, it climbs from its donor's level
    assert second[K.member_key(1, "curriculum/level")] == second[K.member_key(0, "curriculum/level")] == 2.0
    assert second["perf/compilations"] == 1


def test_tunes_pbt_exploits_population_trials_whole(ray_session, tmp_path):
    """Tune's PBT over two population trials, each running PBT inside: a trial that loads another's
    checkpoint continues its lineage (the exploit count goes on from the donor's) and its members
    follow the setting Tune mutated (ent_coef, which neither the members nor the in-trial PBT set)."""
    from ray import tune

    from tests.test_tune import fit_synch_pbt

    space = pbt_config({"quantile": 0.5}, members=MEMBERS[:2], train={"num_seeds": 1})
    space["agent"] = {**space["agent"], "ent_coef": tune.choice([0.0, 0.02])}
    mutations = {"agent": {"ent_coef": [0.0, 0.01, 0.02]}}
    _, per_trial, exploits = fit_synch_pbt(
        space, tmp_path, "population_pbt", mutations, metric="train/episode_return_mean", num_samples=2
    )
    assert exploits and all(exploits), "Tune's PBT never exploited"
    budget = space["train"]["timesteps_per_iteration"]
    for rows in per_trial.values():
        for r in rows:
            assert r["perf/compilations"] == 1 and r["env_steps"] == r["training_iteration"] * budget
            assert r["population/exploits"] == r["training_iteration"]  # one in-trial exploit a call, lineage and all
            assert all(r[K.member_key(k, "agent/ent_coef")] == r["config"]["agent"]["ent_coef"] for k in range(2))


def test_tunes_pbt_mutating_what_the_members_override_is_refused_in_one_line():
    """A mutation Tune's PBT makes to a setting every member overrides would change nothing."""
    from ajax_tune.tune.experiment import Experiment

    def experiment(population, mutations):
        trial = {**corridor_config(length=6), "population": population}
        scheduler = {"name": "pbt", "perturbation_interval": 1, "hyperparam_mutations": mutations}
        return Experiment.from_dict({"trial": trial, "tune": {"scheduler": scheduler}})

    members = {"members": MEMBERS[:2]}
    with pytest.raises(ConfigError) as refused:
        experiment(members, {"agent": {"lr": {"peak": LR}}})
    assert str(refused.value) == (
        "tune.scheduler (pbt).hyperparam_mutations mutates agent.lr.peak, which trial.population's members override "
        "(agent.lr): each member keeps its own value, so the mutation would change nothing; mutate settings the "
        "members share, or use population.pbt inside the trial"
    )
    drawn = {"size": 2, "seed": 0, "space": {"agent": {"ent_coef": {"uniform": [0.0, 0.02]}}}}
    with pytest.raises(ConfigError, match=r"^tune.scheduler \(pbt\).hyperparam_mutations mutates agent.ent_coef, which"):
        experiment(drawn, {"agent": {"ent_coef": [0.0, 0.01]}})
    experiment(members, {"agent": {"ent_coef": [0.0, 0.01]}})  # shared by the members: Tune's to mutate
    experiment(drawn, {"agent": {"lr": {"peak": LR}}})


# -- ranking and exploring (nothing compiles) ---------------------------------------------------


def test_ranking_quantiles_and_donors():
    rng = lambda: np.random.default_rng(0)  # noqa: E731
    scores = [5.0, 1.0, math.nan, 4.0, 3.0, 2.0, 6.0, 0.5]
    pairs = plan(scores, "max", 0.25, rng())
    assert [r for r, _ in pairs] == [2, 7] and all(d in (0, 6) for _, d in pairs)  # NaN is the worst
    assert pairs == plan(scores, "max", 0.25, rng())  # deterministic given the seed
    assert [r for r, _ in plan(scores, "min", 0.25, rng())] == [2, 6]
    assert len(plan(scores, "max", 0.5, rng())) == 4 and len(plan([1.0, 2.0, 3.0], "max", 0.5, rng())) == 1
    assert plan([math.nan] * 4, "max", 0.25, rng()) == [] and plan([1.0], "max", 0.5, rng()) == []
    assert {d for _, d in plan([1.0, 2.0, 3.0, 4.0], "max", 0.5, np.random.default_rng(1))} <= {2, 3}


def test_explore_perturbs_within_bounds_steps_through_lists_and_resamples():
    cfg = Config.from_dict(pbt_config({"perturbation_factors": [0.5, 2.0], "resample_probability": 0.0}))
    settings = cfg.population.pbt
    number = Mutation(("agent", "lr", "peak"), domain=Domain("loguniform", (1e-4, 1e-2)))
    values = {explore_value(number, 1e-3, settings, np.random.default_rng(s)) for s in range(20)}
    assert values == {5e-4, 2e-3}
    assert {explore_value(number, 8e-3, settings, np.random.default_rng(s)) for s in range(20)} == {4e-3, 1e-2}  # clipped
    listed = Mutation(("agent", "lr", "kind"), choices=("constant", "linear", "cosine"))
    assert {explore_value(listed, "linear", settings, np.random.default_rng(s)) for s in range(20)} == {"constant", "cosine"}
    assert {explore_value(listed, "constant", settings, np.random.default_rng(s)) for s in range(20)} == {"constant", "linear"}
    assert {explore_value(listed, "step", settings, np.random.default_rng(s)) for s in range(40)} <= set(listed.choices)
    always = Config.from_dict(pbt_config({"resample_probability": 1.0})).population.pbt
    drawn = [explore_value(number, 1e-3, always, np.random.default_rng(s)) for s in range(20)]
    assert len(set(drawn)) == 20 and all(1e-4 <= v <= 1e-2 for v in drawn)
    integer = Mutation(("agent", "x"), domain=Domain("randint", (1, 4)))
    assert {explore_value(integer, 3, settings, np.random.default_rng(s)) for s in range(20)} == {2, 3}  # 6 -> 3


def test_a_recipient_follows_its_donors_settings_with_the_mutated_ones_explored():
    members = [{"agent": {"lr": {"kind": "cosine", "peak": 1e-3, "end_fraction": 0.1}, "gamma": 0.9}}, {"agent": {"lr": 3e-3}}]
    mutations = {"agent": {"lr": {"peak": LR, "kind": ["constant", "linear", "cosine"]}}}
    cfg = Config.from_dict(pbt_config({"mutations": mutations, "resample_probability": 0.0}, members=members))
    for seed in range(6):
        pbt = InTrialPBT(cfg)
        pbt.explore(1, 0, np.random.default_rng(seed))
        explored = pbt.members[1].agent
        assert explored.gamma == 0.9 and explored.lr.end_fraction == 0.1  # the donor's, not its own
        assert explored.lr.peak in (pytest.approx(8e-4), pytest.approx(1.2e-3)) and explored.lr.kind in ("linear", "cosine")
        assert pbt.members[0] == cfg.members[0] and (pbt.parent, pbt.exploits) == ([-1, 0], [0, 1])
        assert json.loads(json.dumps(pbt.get_state())) == pbt.get_state()  # checkpoint metadata is JSON


def test_the_section_round_trips_and_explores_a_schedules_kind():
    mutations = {"agent": {"lr": {"peak": LR, "kind": ["constant", "linear", "cosine"]}, "ent_coef": [0.0, 0.01]}}
    cfg = Config.from_dict(pbt_config({"mutations": mutations, "interval": 3}))
    assert Config.from_dict(cfg.to_dict()) == cfg
    assert [m.name for m in cfg.population.mutations] == ["agent.lr.peak", "agent.lr.kind", "agent.ent_coef"]
    assert cfg.population.pbt.interval == 3 and cfg.population.pbt.perturbation_factors == (0.8, 1.2)


@pytest.mark.parametrize(
    "pbt, message",
    [
        ({"quantile": 0.6}, r"^population.pbt.quantile must be <= 0.5, got 0.6$"),
        ({"quantile": 0}, r"^population.pbt.quantile must be > 0.0, got 0.0$"),
        ({"interval": 0}, r"^population.pbt.interval must be >= 1, got 0$"),
        ({"interval": 1.5}, r"^population.pbt.interval must be an integer, got 1.5 \(float\)$"),
        ({"resample_probability": 2}, r"^population.pbt.resample_probability must be <= 1.0, got 2.0$"),
        ({"perturbation_factors": []}, r"population.pbt.perturbation_factors must be a non-empty list of positive numbers"),
        ({"perturbation_factors": [0.8, -1]}, r"^population.pbt.perturbation_factors must be > 0.0, got \(0.8, -1.0\)$"),
        ({"perturbation_factors": [0.8, "x"]}, r"^population.pbt.perturbation_factors must be a list of numbers, got"),
        ({"mutations": {}}, r"population.pbt.mutations must name at least one traced setting"),
        (
            {"mutations": {"agent": {"num_envs": [4, 8]}}},
            r"population.pbt.mutations.agent.num_envs: agent.num_envs is not traced \(changing it would recompile\)",
        ),
        ({"mutations": {"agent": {"ent_coeff": [0.0]}}}, r"agent has no setting 'ent_coeff'; did you mean 'ent_coef'\?"),
        ({"mutations": {"agent": {"lr": LR}}}, r"agent.lr is a schedule; mutate its parts, one of agent.lr.\{kind, peak,"),
        ({"mutations": {"agent": {"lr": {"kind": ["cosine", "cosin"]}}}}, r"'cosin' is not a schedule kind"),
        ({"mutations": {"agent": {"lr": {"kind": {"uniform": [0, 1]}}}}}, r"a schedule's kind is explored from a list of kinds"),
        ({"mutations": {"agent": {"gamma": {"uniform": [0.9, 1.5]}}}}, r"mutations.agent.gamma: agent.gamma must be <= 1"),
        ({"mutations": {"agent": {"gamma": 0.99}}}, r"mutations.agent.gamma must be a list of values or a distribution"),
        ({"mutations": {"agent": {"gamma": {"grid": [0.9, 0.99]}}}}, r"\{grid: ...\} is not something to explore"),
        ({"mutations": {"train": {"total_timesteps": [1000]}}}, r"mutates traced settings of the agent"),
        ({"perturb": [0.8]}, r"unknown key population.pbt.'perturb'"),
        ("yes", r"population.pbt must be a mapping"),
    ],
)
def test_bad_pbt_sections_are_one_line_before_compiling(pbt, message):
    section = pbt if not isinstance(pbt, dict) else {"mutations": {"agent": {"lr": {"peak": LR}}}, **pbt}
    assert_refused_before_compiling(corridor_config(population={"size": 2, "pbt": section}), message)


def test_pbt_needs_two_members():
    assert_refused_before_compiling(
        corridor_config(population={"size": 1, "pbt": {"mutations": {"agent": {"ent_coef": [0.0]}}}}),
        r"^population.pbt needs a population of at least 2 members to exploit, got 1$",
    )


# -- learning -------------------------------------------------------------------------------------

CARTPOLE_PBT = {
    "env": {"name": "cartpole"},
    "agent": {"num_envs": 16, "unroll_length": 128, "num_minibatches": 4, "update_epochs": 4, "ent_coef": 0.0},
    "train": {"total_timesteps": 400_000, "timesteps_per_iteration": 16 * 128 * 5, "num_seeds": 4, "eval_episodes": 4},
    "population": {
        "members": [{"agent": {"lr": {"kind": "linear", "peak": peak}}} for peak in (1e-4, 3e-4, 1e-3, 3e-3)],
        "pbt": {"interval": 1, "quantile": 0.25, "seed": 0, "mutations": {"agent": {"lr": {"peak": LR}}}},
    },
}


@pytest.mark.learning
def test_pbt_over_learning_rates_solves_cartpole_and_its_checkpoint_continues_exactly(tmp_path):
    """4 members x 4 seeds, PBT over the peak of a linear learning-rate schedule after every call of
    10,240 env steps per seed. Measured 2026-12-05 (users' build, 2 quiet cores, cold cache): the
    best member's 4 seeds all score 500 after 51,200 env steps per seed (5 calls of the 16 allowed;
    819,200 over the 16 lanes), member 3; 16 s with the compilation. An earlier build: 61,440 env
    steps (6 calls), member 1, three exploits behind it (the last from member 3) and its rate
    explored to 3.6e-3."""
    runner = Runner(CARTPOLE_PBT)
    history, result = [], {}
    while result.get("eval/return_mean", 0.0) < 500.0 and len(history) < 16:
        result = runner.train()
        history.append((result["env_steps"], result["eval/return_mean"], int(result["population/best_member"])))
        if len(history) == 2:  # after two exploits: a checkpoint, and the call that follows it
            path = runner.save(tmp_path / "ckpt")
            after_save, state_after_save = runner.train(), host(runner.state)
            history.append((after_save["env_steps"], after_save["eval/return_mean"], int(after_save["population/best_member"])))
            result = after_save
    print("cartpole, in-trial PBT over learning rates (env steps per seed, best member's mean eval return, member):", history)
    assert result["eval/return_mean"] == 500.0, history
    assert history[0][1] < 500.0  # it had to learn
    assert result["perf/compilations"] == 1 and result["population/exploits"] == len(history)
    best = int(result["population/best_member"])
    assert all(result[f"eval/return_seed{i}"] == 500.0 for i in range(4))
    assert result[K.member_key(best, "exploits")] >= 1  # the winner continues from another member's state

    runner.restore(path)  # the population as it was after call 2, lineage and explored rates included
    again = runner.train()
    assert_same_result(again, after_save)
    assert_trees_equal(runner.state, state_after_save)
