"""Populations: members that differ in traced settings, trained as lanes of one compiled program.

Tolerance of "a member trains as a single run of its config": the state's arrays agree to
`rtol=1e-5, atol=1e-6` (on the CPU they are bit-identical; a vmap over more lanes may reorder a
reduction elsewhere) and the evaluation returns are equal.
"""

import math
import re

import jax
import numpy as np
import pytest
import yaml

from ajax_tune import compat
from ajax_tune.cli import main
from ajax_tune.config import Config
from ajax_tune.errors import ConfigError
from ajax_tune.population.draws import draw_stratified
from ajax_tune.population.results import best_member, reduce
from ajax_tune.results import keys as K
from ajax_tune.runner import Runner
from ajax_tune.spaces import parse_spaces
from tests.support.helpers import (
    assert_refused_before_compiling,
    assert_trees_equal,
    corridor_config,
    host,
    tiny_off_policy_config,
)

RTOL, ATOL = 1e-5, 1e-6

# Members 0 and 2 are the same config; member 3 follows another schedule over another horizon.
MEMBERS = [
    {"agent": {"lr": 1e-3}},
    {"agent": {"lr": 3e-3, "ent_coef": 0.0}},
    {"agent": {"lr": 1e-3}},
    {"agent": {"lr": {"kind": "linear", "peak": 3e-3}, "gamma": 0.9}, "train": {"total_timesteps": 20_000}},
]


def population_config(**population):
    return corridor_config(length=6, population={"members": MEMBERS, **population})


def member_config(k: int) -> dict:
    """The single-run config of member `k`, written out by hand."""
    config = corridor_config(length=6)
    override = MEMBERS[k]
    config["agent"] = {**config["agent"], **override.get("agent", {})}
    config["train"] = {**config["train"], **override.get("train", {})}
    return config


@pytest.fixture(scope="module")
def trained():
    """A population of 4 after its first call, and that call's result."""
    runner = Runner(population_config(), trial_id="pop")
    first = runner.train()
    return runner, first, host(runner.state)


def lanes(tree, member: int, num_seeds: int = 2):
    return jax.tree.map(lambda x: x[member * num_seeds : (member + 1) * num_seeds], tree)


def test_lanes_are_members_by_seeds(trained):
    runner, _, state = trained
    assert runner.loop.num_members == 4 and runner.loop.num_lanes == 8
    assert all(leaf.shape[0] == 8 for leaf in jax.tree.leaves(state))
    # each member's traced settings are on its lanes, its horizon too
    np.testing.assert_allclose(state.agent.hp.lr.peak, np.repeat([1e-3, 3e-3, 1e-3, 3e-3], 2).astype(np.float32))
    np.testing.assert_array_equal(state.agent.hp.ent_coef, np.repeat([0.01, 0.0, 0.01, 0.01], 2).astype(np.float32))
    np.testing.assert_array_equal(state.horizon, np.repeat([50_000, 50_000, 50_000, 20_000], 2).astype(np.float32))


def test_per_member_settings_write_the_settings_and_hand_on_every_other_leaf(trained):
    """One config per member: each member's traced settings land on its lanes, and every other
    leaf of the agent's state (parameters, optimiser state) is passed on as the same array, not
    sliced and joined again."""
    loop = trained[0].loop
    state = loop.init(seed=0)
    configs = [Config.from_dict(member_config(k)).agent for k in (3, 2, 1, 0)]
    new = loop.set_hparams(state, configs)
    np.testing.assert_allclose(new.agent.hp.lr.peak, np.repeat([3e-3, 1e-3, 3e-3, 1e-3], 2).astype(np.float32))
    np.testing.assert_array_equal(new.agent.hp.ent_coef, np.repeat([0.01, 0.01, 0.0, 0.01], 2).astype(np.float32))
    np.testing.assert_array_equal(new.agent.hp.gamma, np.repeat([0.9, 0.99, 0.99, 0.99], 2).astype(np.float32))
    before = jax.tree_util.tree_flatten_with_path(state.agent)[0]
    after = dict(jax.tree_util.tree_flatten_with_path(new.agent)[0])
    others = [(path, leaf) for path, leaf in before if path[0] != jax.tree_util.GetAttrKey("hp")]
    assert others and all(after[path] is leaf for path, leaf in others)


def test_settings_are_placed_from_the_host_as_with_hparams_places_them_lane_by_lane(trained):
    """`set_hparams` makes each lane's traced settings on the host (built-in agents): the same
    arrays, bit for bit and of the same placement, as the agent's own `with_hparams` applied lane
    by lane on the device, and no XLA program is compiled for it."""
    loop = trained[0].loop
    state = jax.device_put(loop.init(seed=0), loop.device)
    configs = [Config.from_dict(member_config(k)).agent for k in (1, 3, 0, 2)]
    compiles = []
    listener = lambda event, seconds, **_: compiles.append(event) if event.endswith("backend_compile_duration") else None  # noqa: E731
    jax.monitoring.register_event_duration_secs_listener(listener)
    try:
        new = loop.set_hparams(state, configs)
    finally:
        compat.unregister_event_duration_listener(listener)
    assert compiles == []
    seeds = loop.config.num_seeds
    by_lane = [
        jax.vmap(loop.agent.with_hparams, in_axes=(0, None))(
            jax.tree.map(lambda x, m=m: x[m * seeds : (m + 1) * seeds], state.agent), c
        )
        for m, c in enumerate(configs)
    ]
    expected = jax.tree.map(lambda *xs: np.concatenate([np.asarray(x) for x in xs]), *by_lane)
    for ours, theirs, old in zip(jax.tree.leaves(new.agent.hp), jax.tree.leaves(expected.hp), jax.tree.leaves(state.agent.hp)):
        assert ours.dtype == theirs.dtype and np.array_equal(np.asarray(ours), theirs)
        assert ours.committed == old.committed and ours.sharding == old.sharding


def test_members_with_the_same_config_and_seed_train_identical_lanes(trained):
    _, _, state = trained
    assert_trees_equal(lanes(state, 0), lanes(state, 2))
    same = [
        np.array_equal(a, b)
        for a, b in zip(jax.tree.leaves(lanes(state.agent.params, 0)), jax.tree.leaves(lanes(state.agent.params, 1)))
    ]
    assert not all(same)  # another learning rate trained other parameters


@pytest.mark.parametrize("member", [1, 3])
def test_a_members_first_call_matches_a_single_run_of_its_config(trained, member):
    _, first, state = trained
    single = Runner(member_config(member))
    result = single.train()
    ours, theirs = lanes(state, member), host(single.state)
    assert jax.tree.structure(ours) == jax.tree.structure(theirs)
    for x, y in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
        np.testing.assert_allclose(x, y, rtol=RTOL, atol=ATOL)
    for name in ("eval/return_mean", "eval/return_std", "eval/success_rate_mean"):
        assert first[K.member_key(member, name)] == result[name], name


def test_results_carry_every_member_and_the_best_members_headline(trained):
    runner, first, _ = trained
    assert first["population/size"] == 4.0
    best = int(first["population/best_member"])
    returns = [first[K.member_key(k, "eval/return_mean")] for k in range(4)]
    assert best == int(np.nanargmax(returns)) and runner.best_member == best
    for name in K.MEMBER_METRICS:
        assert first[name] == first[K.member_key(best, name)] or (
            math.isnan(first[name]) and math.isnan(first[K.member_key(best, name)])
        ), name
    # the headline is the best member's own seeds, not the population's
    seeds = [first[f"eval/return_seed{i}"] for i in range(2)]
    assert first["eval/return_mean"] == pytest.approx(np.mean(seeds))
    assert "eval/return_seed2" not in first
    # each member's traced settings as plain floats
    assert first["member/1/agent/lr/peak"] == pytest.approx(3e-3) and first["member/1/agent/ent_coef"] == 0.0
    assert first["member/3/agent/lr/kind"] == 1.0 and first["member/3/train/total_timesteps"] == 20_000.0
    assert first["member/3/agent/gamma"] == pytest.approx(0.9)
    assert all(isinstance(v, (int, float, bool)) for v in first.values())


def test_a_mean_headline_reports_the_members_means_of_the_same_run(trained):
    """`headline: mean` changes what the trial reports, not what trains: the same members' values
    as the best-member run (one program, read from the shared cache), their mean as the headline."""
    _, first, _ = trained
    runner = Runner(population_config(headline="mean"), trial_id="pop")
    result = runner.train()
    assert runner.retired_compilations + runner.loop.compilations == 1
    for name in K.MEMBER_METRICS:
        values = [result[K.member_key(k, name)] for k in range(4)]
        same = [first[K.member_key(k, name)] for k in range(4)]
        assert values == same or np.allclose(values, same, equal_nan=True), name
        finite = [v for v in values if not math.isnan(v)]
        assert result[name] == pytest.approx(np.mean(finite)) if finite else math.isnan(result[name]), name
    assert result["population/best_member"] == first["population/best_member"]


@pytest.mark.heavy
def test_save_restore_continues_bit_identically_and_rebuilds_the_population(trained, tmp_path):
    runner, _, _ = trained
    path = runner.save(tmp_path / "ckpt")
    saved = host(runner.state)
    second = runner.train()
    after = host(runner.state)

    runner.restore(path)
    assert_trees_equal(runner.state, saved)
    again = runner.train()
    assert_trees_equal(runner.state, after)
    assert again["eval/return_mean"] == second["eval/return_mean"]
    assert again["perf/compilations"] == 1

    rebuilt = Runner.from_checkpoint(path)
    assert rebuilt.config.num_members == 4 and rebuilt.loop.num_lanes == 8
    assert [m.agent.lr.peak for m in rebuilt.config.members] == [1e-3, 3e-3, 1e-3, 3e-3]
    assert_trees_equal(rebuilt.state, saved)
    # member k's evaluation runs member k's lanes: equal members score the same
    zero, two = rebuilt.evaluate(episodes=2, member=0), rebuilt.evaluate(episodes=2, member=2)
    assert zero["return"].shape == (2, 2)
    np.testing.assert_array_equal(zero["return"], two["return"])
    policy = rebuilt.policy(member=1)
    assert np.asarray(policy(np.zeros(rebuilt.env.observation_space.shape, np.float32))).shape == ()
    with pytest.raises(ConfigError, match=r"^member must be in \[0, 3\] \(the population has 4 member\(s\)\), got 4$"):
        rebuilt.evaluate(member=4)

    # the command line: the best member by default, any member by --member, out of range refused
    assert main(["evaluate", path, "--episodes", "2", "--json", "--member", "2"]) == 0
    assert main(["evaluate", path, "--member", "4"]) == 2


def test_best_member_recorded_by_a_checkpoint(trained, tmp_path, capsys):
    runner, _, _ = trained
    runner.best_member = 3
    path = runner.save(tmp_path / "ckpt", result={"population/best_member": 3.0})
    assert Runner.from_checkpoint(path).best_member == 3
    assert main(["evaluate", path, "--episodes", "2", "--json"]) == 0
    assert '"member": 3' in capsys.readouterr().out
    assert main(["evaluate", path, "--member", "-1"]) == 2
    err = capsys.readouterr().err.strip()
    assert (
        len(err.splitlines()) == 1 and "--member must be in [0, 3] (the checkpoint's population has 4 member(s)), got -1" in err
    )
    # `collect` checks its --member the same way, before restoring anything
    assert main(["collect", path, "--steps", "16", "--member", "4", "--out", str(tmp_path / "rows")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith("--member must be in [0, 3] (the checkpoint's population has 4 member(s)), got 4")
    assert len(err.splitlines()) == 1 and not (tmp_path / "rows").exists()


def test_a_population_of_eight_compiles_once_and_reconfigures_without_rebuilding():
    space = {"agent": {"lr": {"peak": {"loguniform": [1e-4, 1e-2]}}, "ent_coef": {"uniform": [0.0, 0.02]}}}
    config = corridor_config(train={"num_seeds": 1}, population={"size": 8, "space": space, "seed": 0})
    runner = Runner(config)
    results = [runner.train() for _ in range(3)]
    assert [r["perf/compilations"] for r in results] == [1, 1, 1]
    assert {k for k in results[0] if k.startswith("member/7/eval/")} >= {"member/7/eval/return_mean"}
    peaks = [results[0][K.member_key(k, "agent/lr/peak")] for k in range(8)]
    assert len(set(peaks)) == 8 and all(1e-4 <= p <= 1e-2 for p in peaks)

    other = corridor_config(train={"num_seeds": 1}, population={"size": 8, "space": space, "seed": 1})
    assert runner.reconfigure(other) is False
    result = runner.train()
    assert result["perf/compilations"] == 1
    assert [result[K.member_key(k, "agent/lr/peak")] for k in range(8)] != peaks
    assert result["env_steps"] == config["train"]["timesteps_per_iteration"]  # a new run

    assert runner.reconfigure(corridor_config(train={"num_seeds": 1}, population={"size": 4, "space": space})) is True


# -- the section itself (nothing compiles) ------------------------------------------------


def test_draws_are_seeded_and_within_their_space():
    space = {"agent": {"lr": {"peak": {"loguniform": [1e-4, 1e-2]}}, "gamma": {"choice": [0.9, 0.99]}}}

    def peaks(seed):
        cfg = Config.from_dict(corridor_config(population={"size": 5, "space": space, "seed": seed}))
        return [(m.agent.lr.peak, m.agent.gamma) for m in cfg.members]

    assert peaks(0) == peaks(0) != peaks(1)
    assert all(1e-4 <= p <= 1e-2 and g in (0.9, 0.99) for p, g in peaks(0))
    # the drawn members are written out, so a checkpoint's config rebuilds the same population
    cfg = Config.from_dict(corridor_config(population={"size": 5, "space": space, "seed": 0}))
    assert Config.from_dict(cfg.to_dict()) == cfg


def test_stratified_draws_cover_each_setting_one_stratum_per_member():
    space = {
        "agent": {
            "lr": {"peak": {"loguniform": [1e-4, 1e-2]}},
            "ent_coef": {"uniform": [0.0, 0.04]},
            "gamma": {"choice": [0.9, 0.99]},
        }
    }

    def members(seed, draw="stratified", size=8):
        population = {"size": size, "space": space, "seed": seed, "draw": draw}
        return Config.from_dict(corridor_config(population=population)).members

    drawn = members(0)
    strata = lambda values, lo, hi: sorted(int(v) for v in (np.asarray(values) - lo) / (hi - lo) * 8)  # noqa: E731
    assert strata(np.log([m.agent.lr.peak for m in drawn]), np.log(1e-4), np.log(1e-2)) == list(range(8))
    assert strata([m.agent.ent_coef for m in drawn], 0.0, 0.04) == list(range(8))
    assert sorted(m.agent.gamma for m in drawn) == [0.9] * 4 + [0.99] * 4
    ints = draw_stratified(parse_spaces({"k": {"randint": [1, 9]}}), np.random.default_rng(0), 8)
    assert sorted(m["k"] for m in ints) == list(range(1, 9))
    # seeded, and the strata are paired across settings by the seed
    assert [m.agent for m in members(0)] == [m.agent for m in drawn] != [m.agent for m in members(1)]
    # independent draws of the same size usually leave strata empty: this seed does
    assert strata(np.log([m.agent.lr.peak for m in members(0, "random")]), np.log(1e-4), np.log(1e-2)) != list(range(8))
    # a choice taken in turn when the size does not divide: each option 3 or 4 times of 7
    counts = [sum(m.agent.gamma == g for m in members(3, size=7)) for g in (0.9, 0.99)]
    assert sorted(counts) == [3, 4]


@pytest.mark.parametrize(
    "population, message",
    [
        ({"size": 4, "draw": "sobol"}, "population.draw must be one of ['random', 'stratified'], got 'sobol'"),
        ({"members": [{}], "draw": "stratified"}, "give members or size (with space, seed and draw), not both"),
    ],
)
def test_a_bad_draw_is_refused_in_one_line(population, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        Config.from_dict(corridor_config(population=population))


def test_without_a_space_members_are_copies_and_a_population_of_one_is_a_single_run():
    cfg = Config.from_dict(corridor_config(population={"size": 3}))
    assert cfg.num_members == 3 and all(m.agent == cfg.agent for m in cfg.members)
    assert Config.from_dict(corridor_config()).members == (Config.from_dict(corridor_config()),)


def test_selection_by_metric_and_mode_and_the_mean_headline():
    results = [{"eval/return_mean": 1.0, "x": 5.0}, {"eval/return_mean": 3.0, "x": 1.0}, {"eval/return_mean": math.nan, "x": 3.0}]
    assert best_member(results, "eval/return_mean", "max") == 1
    assert best_member(results, "x", "min") == 1 and best_member(results, "x", "max") == 0
    assert best_member([{"eval/return_mean": math.nan}] * 2, "eval/return_mean", "max") == 0
    cfg = Config.from_dict(corridor_config(population={"size": 3, "headline": "mean", "select": {"metric": "x", "mode": "min"}}))
    result, best = reduce(cfg.population, results)
    assert best == 1 and result["population/best_member"] == 1.0
    assert result["x"] == 3.0 and result["eval/return_mean"] == 2.0  # means over members (NaN left out)
    assert result["member/0/x"] == 5.0 and result["member/2/eval/return_mean"] != result["member/2/eval/return_mean"]


@pytest.mark.parametrize(
    "population, message",
    [
        ({"size": 0}, r"^population.size must be >= 1, got 0$"),
        ({}, r"^population needs members \(a list of overrides\) or size"),
        ({"members": {"agent": {}}}, r"^population.members must be a list of overrides of the trial config"),
        ({"members": ["fast"]}, r"^population.members\[0\] must be a mapping"),
        ({"members": []}, r"population must have at least one member, got 0"),
        (
            {"members": [{}, {"agent": {"num_envs": 4}}]},
            r"population.members\[1\] changes agent.num_envs \(8 -> 4\), a static setting",
        ),
        (
            {"members": [{"train": {"num_seeds": 3}}]},
            r"population.members\[0\] changes train.num_seeds \(2 -> 3\), a static setting",
        ),
        ({"members": [{"train": {"on_nonfinite": "error"}}]}, r"changes train.on_nonfinite .* a setting read once per trial"),
        ({"members": [{"agent": {"name": "sac"}}]}, r"population.members\[0\] changes agent.name, a static setting"),
        (
            {"members": [{"env": {"task": {"length": 5}}}]},
            r"population.members\[0\].env: a member overrides only \['agent', 'train', 'ued'\]",
        ),
        ({"members": [{"agent": {"lrr": 1e-3}}]}, r"population.members\[0\]: unknown key agent.'lrr'; did you mean agent.'lr'"),
        ({"members": [{}], "size": 1}, r"population: give members or size"),
        (
            {"size": 2, "space": {"agent": {"lr": {"grid": [1e-3, 3e-3]}}}},
            r"population.space.agent.lr: \{grid: ...\} is not a draw",
        ),
        ({"size": 2, "select": {"mode": "best"}}, r"population.select.mode must be one of \['max', 'min'\]"),
        (
            {"size": 2, "select": {"metric": "eval/retrun_mean"}},
            r"population.select.metric: metric 'eval/retrun_mean' is not in any",
        ),
        ({"size": 2, "headline": "median"}, r"population.headline must be one of \['best', 'mean'\]"),
        ({"size": 2, "seeds": 3}, r"unknown key population.'seeds'"),
    ],
)
def test_bad_populations_are_one_line_before_compiling(population, message):
    assert_refused_before_compiling(corridor_config(population=population), message)


@pytest.mark.parametrize(
    "name, traced, static",
    [("sac", {"tau": 0.02, "gamma": 0.9}, ("capacity", 40)), ("dqn", {"epsilon_start": 0.5, "tau": 1.0}, ("batch_size", 8))],
)
def test_off_policy_populations_from_yaml_are_checked_before_ray_starts(name, traced, static, tmp_path):
    """An experiment file's population of SAC or DQN: members that differ in traced settings
    pass, one that changes a static setting is refused by `Experiment.load`, naming it."""
    from ajax_tune.tune.experiment import Experiment

    def experiment(members):
        path = tmp_path / "off.yaml"
        path.write_text(yaml.safe_dump({"trial": tiny_off_policy_config(name, population={"members": members})}))
        return Experiment.load(path)

    trial = experiment([{}, {"agent": traced}]).trial
    assert trial["population"]["members"][1] == {"agent": traced}
    key, value = static
    default = tiny_off_policy_config(name)["agent"][key]
    with pytest.raises(ConfigError, match=rf"^population.members\[1\] changes agent.{key} \({default} -> {value}\), a static"):
        experiment([{}, {"agent": {key: value}}])


def test_a_curriculum_with_more_than_one_member_is_one_per_member():
    """Each member runs its own copy (tests/test_population_curricula.py trains them)."""
    callbacks = [{"class": "ajax_tune.curriculum:ThresholdCurriculum", "kwargs": {"levels": {"length": [4, 8]}}}]
    assert Runner.check(corridor_config(callbacks=callbacks, population={"size": 2})).num_members == 2
    Runner.check(corridor_config(callbacks=callbacks, population={"size": 1}))  # one member is a single run


OFF_POLICY = {
    agent: tiny_off_policy_config(agent, train={"timesteps_per_iteration": 64, "num_seeds": 2}) for agent in ("sac", "dqn")
}
OFF_POLICY_MEMBER = {"agent": {"lr": 1e-3, "gamma": 0.9}, "train": {"total_timesteps": 600, "seed": 3}}


@pytest.mark.parametrize("name", sorted(OFF_POLICY))
@pytest.mark.heavy
def test_off_policy_members_train_as_their_single_runs(name):
    """Replay buffers, per-member horizons (DQN's epsilon follows its member's) and per-member seeds."""
    base = OFF_POLICY[name]
    population = Runner({**base, "population": {"members": [{}, OFF_POLICY_MEMBER]}})
    result = population.train()
    member = {
        **base,
        "agent": {**base["agent"], **OFF_POLICY_MEMBER["agent"]},
        "train": {**base["train"], **OFF_POLICY_MEMBER["train"]},
    }
    for k, config in enumerate((base, member)):
        single = Runner(config)
        single_result = single.train()
        for x, y in zip(jax.tree.leaves(lanes(host(population.state), k)), jax.tree.leaves(host(single.state))):
            np.testing.assert_allclose(x, y, rtol=RTOL, atol=ATOL)
        assert result[K.member_key(k, "eval/return_mean")] == single_result["eval/return_mean"]


def test_a_yaml_trial_draws_its_population_inside_the_trial_not_through_tune():
    from ajax_tune.tune.experiment import Experiment

    space = {"agent": {"lr": {"peak": {"loguniform": [1e-4, 1e-2]}}}}
    trial = corridor_config(population={"size": 3, "space": space, "seed": 2})
    experiment = Experiment.from_dict({"trial": trial, "tune": {"metric": "member/2/eval/return_mean"}})
    assert experiment.param_space()["population"] == {"size": 3, "space": space, "seed": 2}
    assert Config.from_dict(experiment.param_space()).num_members == 3
    with pytest.raises(ConfigError, match=r"tune.metric: metric 'member/3/eval/return_mean' is not in any result"):
        Experiment.from_dict({"trial": trial, "tune": {"metric": "member/3/eval/return_mean"}})


def test_a_population_trial_through_tune(ray_session, tmp_path):
    """One Tune trial per config, each training its members as lanes; its checkpoint rebuilds them.
    The second trial continues in the first one's actor (`reuse_actors`: clip_eps is traced, so it
    reconfigures without a rebuild), which spares a trial process and its start; one checkpoint a
    trial, at its end, is the one the test reads."""
    from ray import tune

    from ajax_tune import AjaxTrainable
    from ajax_tune.tune.output import trial_dirname

    space = population_config()
    space["agent"] = {**space["agent"], "clip_eps": tune.grid_search([0.1, 0.2])}
    tuner = tune.Tuner(
        AjaxTrainable,
        param_space=space,
        tune_config=tune.TuneConfig(
            metric="eval/return_mean", mode="max", trial_dirname_creator=trial_dirname, reuse_actors=True
        ),
        run_config=tune.RunConfig(
            storage_path=str(tmp_path),
            name="population",
            stop={"training_iteration": 2},
            verbose=0,
            checkpoint_config=tune.CheckpointConfig(checkpoint_at_end=True),
        ),
    )
    results = tuner.fit()
    assert results.num_errors == 0, [r.error for r in results if r.error]
    assert len(results) == 2
    for result in results:
        metrics = result.metrics
        assert metrics["population/size"] == 4.0 and metrics["perf/compilations"] == 1
        best = int(metrics["population/best_member"])
        assert metrics["eval/return_mean"] == metrics[K.member_key(best, "eval/return_mean")]
        assert metrics["member/3/train/total_timesteps"] == 20_000.0
        rebuilt = Runner.from_checkpoint(result.checkpoint.path)
        assert rebuilt.config.num_members == 4 and rebuilt.best_member == best
        assert rebuilt.config.agent.clip_eps == result.config["agent"]["clip_eps"]
