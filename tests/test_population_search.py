"""Searchers that see members: K suggestions of a Tune searcher packed into one population trial,
each member reported back to the searcher as a trial of its own (`ajax_tune.tune.searchers`)."""

import json
import math

import pytest
import yaml
from ray import tune
from ray.tune.search import Searcher

from ajax_tune.errors import ConfigError
from ajax_tune.results import keys as K
from ajax_tune.tune.experiment import Experiment
from ajax_tune.tune.searchers import PopulationSearcher, VariantSearcher, grid_points, member_result, split_suggestion
from tests.support.helpers import corridor_config, import_extra

METRIC = "eval/return_mean"


def cartpole_trial(**agent):
    """Tiny PPO on cartpole: one call is 512 env steps per seed."""
    config = corridor_config(agent=agent, train={"timesteps_per_iteration": 512, "num_seeds": 1, "eval_episodes": 2})
    config["env"] = {"name": "cartpole"}
    return config


class Recorder(Searcher):
    """A searcher that hands out a fixed list of suggestions (then FINISHED, or None where the
    list says so) and records what it is told, to check the wrapper's bookkeeping."""

    def __init__(self, suggestions):
        super().__init__(metric=METRIC, mode="max")
        self.suggestions, self.asked, self.results, self.completed = list(suggestions), [], [], []

    def suggest(self, trial_id):
        self.asked.append(trial_id)
        return self.suggestions.pop(0) if self.suggestions else Searcher.FINISHED

    def on_trial_result(self, trial_id, result):
        self.results.append((trial_id, result))

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.completed.append((trial_id, result, error))


def wrapped(suggestions, size, num_samples=None, space=None):
    inner = Recorder(suggestions)
    searcher = PopulationSearcher(inner, size=size)
    spec = {} if num_samples is None else {"num_samples": num_samples}
    space = space or cartpole_trial(lr=tune.loguniform(1e-4, 1e-2), num_envs=tune.choice([4, 8]))
    searcher.set_search_properties(METRIC, "max", space, **spec)
    return searcher, inner


def lr(value, **agent):
    return {"agent": {"lr": value, **agent}}


# -- packing (no Ray, nothing compiles) -------------------------------------------------------


def test_a_suggestion_splits_into_its_static_part_and_a_members_override():
    shared, member = split_suggestion(
        {
            "agent": {"lr": {"peak": 1e-3}, "num_envs": 4, "ent_coef": 0.0},
            "train": {"seed": 3, "num_seeds": 2},
            "env": {"name": "x"},
        },
        "ppo",
    )
    assert member == {"agent": {"lr": {"peak": 1e-3}, "ent_coef": 0.0}, "train": {"seed": 3}}
    assert shared == {"agent": {"num_envs": 4}, "train": {"num_seeds": 2}, "env": {"name": "x"}}


def test_suggestions_fill_trials_of_size_and_num_samples_counts_configs():
    searcher, inner = wrapped([lr(v) for v in (1e-3, 2e-3, 3e-3, 4e-3, 5e-3, 6e-3, 7e-3)], size=3, num_samples=5)
    first, second, third = (searcher.suggest(t) for t in ("a", "b", "c"))
    assert [m["agent"]["lr"] for m in first["population"]["members"]] == [1e-3, 2e-3, 3e-3]
    assert first["agent"]["lr"] == 1e-3  # the first member's values are the trial's base: every searched key is set
    assert first["population"]["select"] == {"metric": METRIC, "mode": "max"}
    assert [m["agent"]["lr"] for m in second["population"]["members"]] == [4e-3, 5e-3]  # the budget's remainder
    assert third == Searcher.FINISHED and len(inner.asked) == 5  # 5 configs drawn, not 5 trials
    assert searcher.member_ids("a") == inner.asked[:3] and searcher.member_ids("b") == inner.asked[3:]


def test_suggestions_that_differ_in_a_static_setting_go_to_different_trials():
    drawn = [lr(1e-3, num_envs=4), lr(2e-3, num_envs=8), lr(3e-3, num_envs=4), lr(4e-3, num_envs=8), lr(5e-3, num_envs=4)]
    searcher, _ = wrapped(drawn, size=3)
    trials = [searcher.suggest(t) for t in ("a", "b", "c")]
    assert trials[0]["agent"]["num_envs"] == 4 and [m["agent"]["lr"] for m in trials[0]["population"]["members"]] == [
        1e-3,
        3e-3,
        5e-3,
    ]
    # the searcher finished with two of num_envs 8 waiting: they go out together, never dropped
    assert trials[1]["agent"]["num_envs"] == 8 and [m["agent"]["lr"] for m in trials[1]["population"]["members"]] == [2e-3, 4e-3]
    assert all("num_envs" not in m["agent"] for t in trials[:2] for m in t["population"]["members"])
    assert trials[2] == Searcher.FINISHED


def test_finished_or_nothing_mid_pack_sends_what_waits():
    searcher, _ = wrapped([lr(1e-3), lr(2e-3)], size=4)  # FINISHED after two
    assert [m["agent"]["lr"] for m in searcher.suggest("a")["population"]["members"]] == [1e-3, 2e-3]
    assert searcher.suggest("b") == Searcher.FINISHED

    searcher, inner = wrapped([lr(1e-3), None, lr(2e-3), lr(3e-3)], size=2)  # None: nothing to suggest now
    assert [m["agent"]["lr"] for m in searcher.suggest("a")["population"]["members"]] == [1e-3]
    assert [m["agent"]["lr"] for m in searcher.suggest("b")["population"]["members"]] == [2e-3, 3e-3]
    inner.suggestions = [None]
    assert searcher.suggest("c") is None  # nothing waits and nothing comes: Tune asks again later


def test_each_member_reports_to_the_wrapped_searcher_under_its_own_id():
    searcher, inner = wrapped([lr(1e-3), lr(2e-3)], size=2)
    searcher.suggest("trial")
    ids = searcher.member_ids("trial")
    result = {
        "training_iteration": 1,
        METRIC: 7.0,
        K.member_key(0, METRIC): 3.0,
        K.member_key(1, METRIC): 7.0,
        K.member_key(0, "agent/lr"): 1e-3,
        K.member_key(1, "agent/lr"): 2e-3,
    }
    searcher.on_trial_result("trial", {**result, K.member_key(0, METRIC): math.nan})  # a NaN is not a report
    assert [(i, r[METRIC]) for i, r in inner.results] == [(ids[1], 7.0)]
    searcher.on_trial_complete("trial", result)
    searcher.on_trial_complete("trial", result)  # once only
    assert [(i, r[METRIC], r["training_iteration"], r["agent/lr"], e) for i, r, e in inner.completed] == [
        (ids[0], 3.0, 1, 1e-3, False),
        (ids[1], 7.0, 1, 2e-3, False),
    ]
    assert member_result(result, 1) == {"training_iteration": 1, METRIC: 7.0, "agent/lr": 2e-3}


def test_random_and_grid_draws_count_every_grid_point_num_samples_times():
    space = {"agent": {"lr": {"loguniform": [1e-4, 1e-2]}, "gamma": {"grid": [0.9, 0.99]}}}
    experiment = Experiment.from_dict({"trial": cartpole_trial(**space["agent"]), "tune": {"population": 3, "num_samples": 2}})
    assert experiment.num_configs() == 4
    searcher = PopulationSearcher(VariantSearcher(random_state=0), size=3)
    searcher.set_search_properties(METRIC, "max", experiment.param_space(), num_samples=experiment.num_configs())
    trials = [searcher.suggest(t) for t in "abc"]
    members = [m["agent"] for t in trials[:2] for m in t["population"]["members"]]
    assert [m["gamma"] for m in members] == [0.9, 0.99, 0.9, 0.99] and len({m["lr"] for m in members}) == 4
    assert trials[2] == Searcher.FINISHED
    result = {"training_iteration": 1, **{K.member_key(k, METRIC): 1.0 for k in range(3)}}
    for trial_id in "ab":  # what Tune does when a trial ends: random draws take it and learn nothing
        searcher.on_trial_result(trial_id, result)
        searcher.on_trial_complete(trial_id, result)


def test_from_python_num_samples_counts_the_grids_points_as_configs():
    """A Tuner's num_samples is the wrapper's budget in configs: with an 8-point grid, 8 is each
    point once and 16 each twice; a count that cuts a pass of the grid short is refused."""
    space = {"agent": {"lr": tune.grid_search([1e-3 * (i + 1) for i in range(8)])}}
    for num_samples, passes in ((8, 1), (16, 2)):
        searcher = PopulationSearcher(size=8)
        searcher.set_search_properties(METRIC, "max", space, num_samples=num_samples)
        members = [m["agent"]["lr"] for t in "ab"[:passes] for m in searcher.suggest(t)["population"]["members"]]
        assert sorted(members) == sorted(space["agent"]["lr"]["grid_search"] * passes)
        assert searcher.suggest("c") == Searcher.FINISHED
    with pytest.raises(ConfigError, match=r"^PopulationSearcher: num_samples counts .* grid has 8 points, .* got 1$"):
        PopulationSearcher(size=8).set_search_properties(METRIC, "max", space, num_samples=1)
    assert grid_points({"a": tune.grid_search([1, 2]), "b": {"c": tune.grid_search([1, 2, 3])}, "d": 1}) == 6
    assert grid_points({"a": tune.uniform(0, 1)}) == 1


def test_a_saved_search_restores_and_draws_on_as_if_it_never_stopped(tmp_path):
    """What an experiment's checkpoint holds of the search (`SearchGenerator.save_to_dir`: the
    wrapper's state beside its searcher's), restored into fresh objects as `ajax-tune resume`
    rebuilds them: the same trials' member ids, the same next draws, the same budget."""
    from ray.tune.search.search_generator import SearchGenerator

    experiment = Experiment.from_dict(
        {"trial": cartpole_trial(lr={"loguniform": [1e-4, 1e-2]}), "tune": {"population": 2, "num_samples": 6}}
    )

    def fresh(random_state):
        searcher = PopulationSearcher(VariantSearcher(random_state=random_state), size=2)
        searcher.set_search_properties(METRIC, "max", experiment.param_space(), num_samples=6)
        return searcher

    whole = fresh(0)
    expected = [whole.suggest(t) for t in "abcd"]
    assert (
        expected[3] == Searcher.FINISHED
        and len({m["agent"]["lr"] for t in expected[:3] for m in t["population"]["members"]}) == 6
    )
    first = fresh(0)
    assert first.suggest("a") == expected[0]
    SearchGenerator(first).save_to_dir(str(tmp_path), "session")
    second = fresh(None)  # another seed: only the restore can make it draw as the first would
    SearchGenerator(second).restore_from_dir(str(tmp_path))
    assert second.member_ids("a") == first.member_ids("a")
    assert [second.suggest(t) for t in "bcd"] == expected[1:]


@pytest.mark.parametrize(
    "section, trial, message",
    [
        ({"population": 0}, {}, r"^tune.population must be a whole number of configs per trial >= 1, got 0"),
        ({"population": 2.5}, {}, r"^tune.population must be an integer, got 2.5"),
        (
            {"population": 2},
            {"population": {"size": 2}},
            r"^tune.population packs the search's suggestions .* cannot have a population section too",
        ),
        (
            {"population": 2, "scheduler": {"name": "pbt", "hyperparam_mutations": {"agent": {"lr": [1e-3]}}}},
            {},
            r"^tune.population: pbt mutates a trial's config",
        ),
        (
            {"population": 2, "search": {"name": "random", "points_to_evaluate": [{"agent": {"lr": 1e-3}}]}},
            {},
            r"^tune.search \(random\) with tune.population takes only \['seed', 'random_state', 'constant_grid_search'\], "
            r"got \['points_to_evaluate'\]",
        ),
        ({"population": 2, "search": {"name": "optuna", "seeed": 1}}, {}, r"^tune.search \(optuna\): unknown option 'seeed'"),
        (
            {"population": 2, "num_samples": 2, "metric": "loss/totl"},
            {},
            r"^tune.metric: metric 'loss/totl' is not in any",
        ),
    ],
)
def test_bad_population_searches_are_one_line_before_ray_starts(section, trial, message):
    with pytest.raises(ConfigError, match=message) as info:
        Experiment.from_dict({"trial": {**cartpole_trial(), **trial}, "tune": section})
    assert len(str(info.value).splitlines()) == 1


def test_a_population_searcher_needs_a_size_of_at_least_one():
    with pytest.raises(ConfigError, match=r"^PopulationSearcher: size must be a whole number of members >= 1, got 0$"):
        PopulationSearcher(size=0)


# -- through Tuner.fit ---------------------------------------------------------------------


def test_optuna_learns_from_every_member_of_one_trial(ray_session, tmp_path):
    """`tune: {search: optuna, population: 4, num_samples: 4}`, the experiment's own Tuner: one
    trial, TPE with `constant_liar`, and Optuna's study holds 4 completed trials whose values are
    the members' own last reports. (README's example runs `PopulationSearcher` from Python.)"""
    optuna = import_extra("optuna", extra="optuna")
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend
    from optuna.trial import TrialState

    from ajax_tune.tune.searchers import searcher_for

    storage = JournalStorage(JournalFileBackend(str(tmp_path / "study.log")))  # read back after the fit
    experiment = Experiment.from_dict(
        {
            "name": "optuna",
            "trial": cartpole_trial(lr={"loguniform": [1e-4, 1e-2]}, ent_coef={"uniform": [0.0, 0.02]}),
            "tune": {
                "search": {"name": "optuna", "storage": storage, "study_name": "members"},
                "population": 4,
                "num_samples": 4,
                "seed": 3,
                "metric": METRIC,
            },
            "stop": {"training_iteration": 2},
        }
    )
    # the option is the sampler's own (no public accessor): a pack's suggestions spread out
    assert (
        searcher_for(experiment.tune, experiment.param_space(), experiment.num_configs()).searcher._sampler._constant_liar is True
    )
    results = experiment.tuner(storage_path=str(tmp_path)).fit()
    assert results.num_errors == 0, [r.error for r in results if r.error]
    assert len(results) == 1
    result = results[0]
    assert result.metrics["population/size"] == 4.0 and result.metrics["perf/compilations"] == 1
    members = result.config["population"]["members"]
    study = [t for t in optuna.load_study(study_name="members", storage=storage).trials if t.state == TrialState.COMPLETE]
    assert len(study) == 4
    reported = [result.metrics[K.member_key(k, METRIC)] for k in range(4)]
    assert [t.value for t in study] == reported
    # each Optuna trial is the member that ran its suggestion, and saw its intermediate reports
    for k, trial in enumerate(study):
        assert trial.params == {"agent/lr": members[k]["agent"]["lr"], "agent/ent_coef": members[k]["agent"]["ent_coef"]}
        assert result.metrics[K.member_key(k, "agent/lr/peak")] == pytest.approx(trial.params["agent/lr"])
        # Tune hands a searcher every result but the one that stops the trial, which completes it
        first = result.metrics_dataframe.set_index("training_iteration").loc[1]
        assert trial.intermediate_values == {1: first[K.member_key(k, METRIC)]}


def test_asha_stops_a_population_trial_as_a_whole(ray_session, tmp_path):
    """ASHA over population trials, on a metric whose order is known before any training:
    `population/size` (3 configs packed 2 to a trial make trials of 2 and 1 members). One trial
    at a time, the second reaches the first rung below the first's value and ASHA stops it there,
    all of its members; the first runs to max_t. Every member completes at the searcher once,
    with its own last result."""
    from ray.tune.schedulers import ASHAScheduler

    from ajax_tune import AjaxTrainable
    from ajax_tune.tune.output import trial_names

    inner = Recorder([lr(1e-3), lr(2e-3), lr(3e-3)])
    searcher = PopulationSearcher(inner, size=2)
    results = tune.Tuner(
        AjaxTrainable,
        param_space=cartpole_trial(),
        tune_config=tune.TuneConfig(
            metric="population/size",
            mode="max",
            num_samples=3,
            search_alg=searcher,
            scheduler=ASHAScheduler(max_t=3, grace_period=1, reduction_factor=2),
            max_concurrent_trials=1,
            # the second trial starts in the first one's actor (rebuilt there for its size)
            reuse_actors=True,
            **trial_names(),
        ),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="asha", stop={"training_iteration": 3}, verbose=0),
    ).fit()
    assert results.num_errors == 0, [r.error for r in results if r.error]
    by_size = {int(r.metrics["population/size"]): r for r in results}
    assert sorted(by_size) == [1, 2]
    assert by_size[2].metrics["training_iteration"] == 3  # to max_t
    assert by_size[1].metrics["training_iteration"] == 1  # stopped at the first rung, whole
    assert list(by_size[1].metrics_dataframe["training_iteration"]) == [1]
    completed = {virtual_id: result for virtual_id, result, error in inner.completed if not error}
    assert len(inner.completed) == 3 and len(completed) == 3
    for size, result in by_size.items():
        ids = searcher.member_ids(result.metrics["trial_id"])
        assert len(ids) == size
        for k, virtual_id in enumerate(ids):
            mine = completed[virtual_id]
            assert mine["training_iteration"] == result.metrics["training_iteration"]
            assert mine[METRIC] == result.metrics[K.member_key(k, METRIC)]


def test_hyperopt_fills_trials_of_two_through_ajax_tune_run(ray_session, tmp_path, capsys):
    """`tune.population: 2` with HyperOpt and 4 configs, by `ajax-tune run`: two trials of two
    members, the members the values HyperOpt suggests when asked 4 times alike outside Tune;
    the run names the best member's config, and the plot draws every member's curve."""
    import_extra("hyperopt", extra="hyperopt")
    from ajax_tune.cli import main
    from ajax_tune.results.series import learning_curve, load_trials, member_series
    from ajax_tune.tune.searchers import searcher_for

    raw = {
        "name": "hyperopt_population",
        "trial": cartpole_trial(lr={"loguniform": [1e-4, 1e-2]}),
        "stop": {"training_iteration": 1},
        "checkpoint": {"at_end": False},
        "tune": {"search": {"name": "hyperopt", "seed": 5}, "num_samples": 4, "population": 2, "reuse_actors": True},
    }
    path = tmp_path / "experiment.yaml"
    path.write_text(yaml.safe_dump(raw))
    assert main(["run", str(path), "--storage-path", str(tmp_path / "results")]) == 0
    out = capsys.readouterr().out
    directory = tmp_path / "results" / "hyperopt_population"
    rows = {p.parent.name: json.loads(p.read_text().splitlines()[-1]) for p in directory.glob("*/result.json")}
    configs = {p.parent.name: json.loads(p.read_text()) for p in directory.glob("*/params.json")}
    assert len(rows) == 2 and all(len(c["population"]["members"]) == 2 for c in configs.values())
    ran = sorted(m["agent"]["lr"] for c in configs.values() for m in c["population"]["members"])

    experiment = Experiment.from_dict(raw)
    alone = searcher_for(experiment.tune, experiment.param_space(), experiment.num_configs()).searcher
    assert ran == sorted(alone.suggest(f"v{i}")["agent"]["lr"] for i in range(4))
    assert len(set(ran)) == 4 and all(1e-4 <= v <= 1e-2 for v in ran)

    # the best trial's best member and its rate, a schedule's peak (trials may tie on the metric:
    # the run names one of the tied trials' best members)
    top = max(row[METRIC] for row in rows.values())
    named = set()
    for name, row in rows.items():
        if row[METRIC] == top:
            best = int(row["population/best_member"])
            assert row[METRIC] == row[K.member_key(best, METRIC)]
            best_lr = configs[name]["population"]["members"][best]["agent"]["lr"]
            named.add((f"  best member              {best} of 2 ", f"  its config               agent.lr.peak={best_lr:.6g}\n"))
    assert any(member in out and config in out for member, config in named), out[-2000:]

    # every member's curve: the plot's series are the members, with their own returns
    assert (directory / "plots" / "learning_curves.png").is_file()
    trials = load_trials(directory)
    members = [m for t in trials for m in member_series(t)]
    assert len(members) == 4
    for trial in trials:
        last = rows[next(n for n in rows if rows[n]["trial_id"] == trial.trial_id)]
        for k, member in enumerate(member_series(trial)):
            _, returns, _, _ = learning_curve(member.segments[0])
            assert returns[-1] == last[K.member_key(k, METRIC)]
            assert f"m{k} " in member.label


def test_the_best_members_config_when_members_were_drawn_inside_the_trial():
    from ajax_tune.cli.report import best_member_lines

    row = {"population/size": 2.0, "population/best_member": 1.0}
    row |= {
        "member/0/agent/lr/peak": 1e-3,
        "member/1/agent/lr/peak": 2e-3,
        "member/0/agent/gamma": 0.99,
        "member/1/agent/gamma": 0.99,
    }
    lines = best_member_lines({"population": {"size": 2, "space": {}}}, row)
    assert (
        lines[0].startswith("  best member              1 of 2 ") and lines[1] == "  its config               agent.lr.peak=0.002"
    )
    assert best_member_lines({}, {"eval/return_mean": 1.0}) == []  # not a population trial


def test_the_best_members_config_names_its_overrides_and_what_sets_it_apart():
    from ajax_tune.cli.report import best_member_lines

    members = [{"agent": {"lr": {"kind": "linear", "peak": 1e-4}}}, {"agent": {"lr": {"kind": "cosine", "peak": 3e-3}}}]
    row = {"population/size": 2.0, "population/best_member": 1.0}
    row |= {"member/0/agent/lr/kind": 1.0, "member/1/agent/lr/kind": 2.0, "member/0/agent/lr/peak": 1e-4}
    row |= {"member/1/agent/lr/peak": 3.6e-3, "member/0/agent/gamma": 0.99, "member/1/agent/gamma": 0.99}
    # a metric is a headline too, a setting is not: members differ in it, but it is no setting
    row |= {
        "train/episode_return_mean": 20.0,
        "member/0/train/episode_return_mean": 9.0,
        "member/1/train/episode_return_mean": 20.0,
    }
    # the row's values (3.6e-3: explored since the override), a schedule's kind by its name
    assert best_member_lines({"population": {"members": members}}, row)[1] == (
        "  its config               agent.lr.kind=cosine agent.lr.peak=0.0036"
    )
    # a rate given as a number is reported by its schedule's parameters: those that differ
    members = [{"agent": {"lr": 1e-3, "gamma": 0.99}}, {"agent": {"lr": 2e-3, "gamma": 0.99}}]
    row |= {"member/0/agent/lr/kind": 0.0, "member/1/agent/lr/kind": 0.0, "member/0/agent/lr/peak": 1e-3}
    row |= {"member/1/agent/lr/peak": 2e-3}
    assert best_member_lines({"population": {"members": members}}, row)[1] == (
        "  its config               agent.gamma=0.99 agent.lr.peak=0.002"
    )


def test_constants_a_searcher_repeats_stay_out_of_a_members_override():
    space = cartpole_trial(lr={"loguniform": [1e-4, 1e-2]})
    whole = {**space, "agent": {**space["agent"], "lr": 2e-3, "hidden_sizes": (32, 32)}}  # as HyperOpt suggests
    searcher, _ = wrapped([whole], size=1, space=space)
    assert searcher.suggest("a")["population"]["members"] == [{"agent": {"lr": 2e-3}}]


def test_a_trial_keeps_the_spaces_constants_whatever_the_searcher_suggests():
    # Optuna suggests only what it draws, and the Tuner gets no param_space to merge the rest
    # from: the trial must still run the space's env, network and horizon (it ran cartpole's
    # defaults on acrobot's search before)
    space = cartpole_trial(lr={"loguniform": [1e-4, 1e-2]})
    space["env"] = {"name": "gymnax/Acrobot-v1"}
    searcher, _ = wrapped([{"agent": {"lr": 2e-3}}, {"agent": {"lr": 3e-3}}], size=2, space=space)
    config = searcher.suggest("a")
    assert config["env"] == {"name": "gymnax/Acrobot-v1"}
    assert config["train"] == space["train"] and config["agent"]["lr"] == 2e-3
    assert config["population"]["members"] == [{"agent": {"lr": 2e-3}}, {"agent": {"lr": 3e-3}}]
