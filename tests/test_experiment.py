"""YAML experiments: searchers and schedulers with options, from one table, checked against the
classes' own signatures. Building these objects starts no Ray."""

import dataclasses
import importlib.util
import pickle

import pytest
from ray import tune
from ray.tune.schedulers import ASHAScheduler, PopulationBasedTraining
from ray.tune.search.basic_variant import BasicVariantGenerator

from ajax_tune.errors import ConfigError
from ajax_tune.spaces import parse_spaces
from ajax_tune.tune.choices import CHOICES, KeepInBounds, TuneChoice, build_scheduler, build_searcher, to_tune_mutations
from ajax_tune.tune.experiment import Experiment

TRIAL = {"env": {"name": "corridor"}, "agent": {"num_envs": 8, "unroll_length": 16}, "train": {"timesteps_per_iteration": 128}}


def experiment(**tune_section):
    return Experiment.from_dict({"trial": TRIAL, "tune": tune_section})


class Recorder:
    """A stand-in search algorithm that keeps what it was given."""

    def __init__(
        self, metric=None, mode=None, points_to_evaluate=None, random_state=None, max_concurrent=0, mutations=None, patience=3
    ):
        self.kwargs = dict(
            points_to_evaluate=points_to_evaluate,
            random_state=random_state,
            max_concurrent=max_concurrent,
            mutations=mutations,
            patience=patience,
        )


@pytest.fixture
def recorder(monkeypatch):
    choice = TuneChoice(
        "tests.test_experiment:Recorder",
        seed="random_state",
        concurrency="max_concurrent",
        defaults={"patience": 5},
        spaces=("mutations",),
    )
    monkeypatch.setitem(CHOICES["search"], "recorder", choice)


@pytest.mark.usefixtures("recorder")
def test_how_settings_reach_a_search_algorithm():
    built = build_searcher(experiment(search="recorder", seed=7, max_concurrent_trials=2).tune)
    assert built.kwargs == dict(points_to_evaluate=None, random_state=7, max_concurrent=2, mutations=None, patience=5)
    # options inline or under kwargs; `seed` is an alias of the class's own seed keyword
    inline = build_searcher(experiment(search={"name": "recorder", "seed": 3, "patience": 1}).tune)
    nested = build_searcher(experiment(search={"name": "recorder", "kwargs": {"seed": 3, "patience": 1}}).tune)
    assert inline.kwargs == nested.kwargs and nested.kwargs["random_state"] == 3 and nested.kwargs["patience"] == 1
    assert build_searcher(experiment(search={"name": "recorder", "random_state": 4}).tune).kwargs["random_state"] == 4
    # options written as search spaces become Tune's domains
    mutations = {"agent": {"lr": {"uniform": [0.1, 0.2]}}}
    spaced = build_searcher(experiment(search={"name": "recorder", "mutations": mutations}).tune)
    assert isinstance(spaced.kwargs["mutations"]["agent"]["lr"], tune.search.sample.Float)


@pytest.mark.parametrize(
    "search, message",
    [
        ({"name": "recorder", "patiense": 1}, "unknown option 'patiense'; did you mean 'patience'?"),
        ({"name": "recorder", "kwargs": {"sede": 1}}, "unknown option 'sede'; did you mean 'seed'?"),
        ({"name": "recorder", "metric": "x"}, "'metric' is not an option here; it is set by tune.metric"),
        ({"name": "recorder", "max_concurrent": 2}, "it is set by tune.max_concurrent_trials"),
        ({"name": "recorder", "seed": 1, "random_state": 2}, "give the seed once"),
        ({"name": "recorder", "patience": 1, "kwargs": {"seed": 1}}, "inline or under kwargs, not both"),
        ({"name": "recorder", "kwargs": [1]}, "tune.search.kwargs must be a mapping"),
        (
            {"name": "optuan"},
            "tune.search.name must be one of ['random', 'optuna', 'hyperopt', 'recorder'], got 'optuan'; did you mean 'optuna'?",
        ),
        ("bayes", "tune.search must be one of"),
        (3, "tune.search must be a name or a mapping"),
    ],
)
@pytest.mark.usefixtures("recorder")
def test_bad_search_options_are_refused_by_name(search, message):
    with pytest.raises(ConfigError) as error:
        experiment(search=search)
    assert message in str(error.value)


def test_time_budget_reaches_the_tuner(tmp_path):
    """`tune.time_budget_s` is Tune's `time_budget_s` (in the tuner's saved state, which a resume
    reads); left out (None), the default, is no budget."""
    assert experiment().tune.time_budget_s is None
    for budget, expected in ((90, 90.0), (None, None)):
        name = f"budget{budget}"
        Experiment.from_dict({"name": name, "trial": TRIAL, "tune": {"time_budget_s": budget}}).tuner(storage_path=str(tmp_path))
        state = pickle.loads((tmp_path / name / "tuner.pkl").read_bytes())
        assert state["_tune_config"].time_budget_s == expected


def test_schedulers_with_options():
    options = {"max_t": 7, "grace_period": 2}
    for form in ({"name": "asha", **options}, {"name": "asha", "kwargs": options}):
        assert isinstance(build_scheduler(experiment(scheduler=form).tune), ASHAScheduler)
    assert build_scheduler(experiment(scheduler="none").tune) is None
    assert build_scheduler(experiment().tune) is None
    pbt = experiment(
        scheduler={
            "name": "pbt",
            "perturbation_interval": 2,
            "hyperparam_mutations": {"agent": {"ent_coef": {"uniform": [0.0, 0.1]}}},
        }
    )
    assert isinstance(build_scheduler(pbt.tune), PopulationBasedTraining)
    # PBT multiplies the value of a tune.choice domain when it perturbs it: a choice reaches it as a list
    lr = {"kind": {"choice": ["constant", "linear"]}, "peak": {"loguniform": [1e-4, 1e-2]}}
    mutations = to_tune_mutations(parse_spaces({"agent": {"lr": lr, "ent_coef": [0.0, 0.01]}}))
    assert mutations["agent"]["lr"]["kind"] == ["constant", "linear"] and mutations["agent"]["ent_coef"] == [0.0, 0.01]
    assert isinstance(mutations["agent"]["lr"]["peak"], tune.search.sample.Float)
    # Tune multiplies a domain's value by 0.8 or 1.2 and never clips: ajax_tune clips it back
    keep = build_scheduler(
        experiment(scheduler={"name": "pbt", "hyperparam_mutations": {"agent": {"gamma": {"uniform": [0.95, 0.999]}}}}).tune
    )._custom_explore_fn
    assert keep({"agent": {"gamma": 1.14}, "train": {}}) == {"agent": {"gamma": 0.999}, "train": {}}
    assert keep({"agent": {"gamma": 0.97}})["agent"] == {"gamma": 0.97}
    whole = KeepInBounds.of(parse_spaces({"n": {"randint": [1, 4]}}))  # randint's high is excluded
    assert whole({"n": 5.4}) == {"n": 3} and whole({"n": 0.2}) == {"n": 1}
    pickle.dumps(keep)  # Tune saves the scheduler with the experiment
    # Ray's own create_scheduler drops an unknown keyword silently; here it is an error
    message = r"scheduler \(asha\): unknown option 'grace_perod'; did you mean 'grace_period'"
    with pytest.raises(ConfigError, match=message):
        experiment(scheduler={"name": "asha", "grace_perod": 2})
    with pytest.raises(ConfigError, match="set by tune.mode"):
        experiment(scheduler={"name": "asha", "mode": "min"})
    with pytest.raises(ConfigError, match="needs the option hyperparam_mutations"):
        experiment(scheduler={"name": "pbt"})
    with pytest.raises(ConfigError, match="'none' takes no options"):
        experiment(scheduler={"name": "none", "max_t": 3})
    with pytest.raises(ConfigError, match=r"tune.scheduler \(asha\): Max \(time_attr\) not valid"):  # Ray's own check
        experiment(scheduler={"name": "asha", "max_t": 0})
    with pytest.raises(ConfigError, match="tune.scheduler.name must be one of .*did you mean 'asha'"):
        experiment(scheduler={"name": "ahsa"})


def test_seeded_optuna_suggests_the_same_configs():
    def suggestions(search):
        searcher = build_searcher(experiment(search=search).tune)
        searcher.set_search_properties("eval/return_mean", "max", {"lr": tune.loguniform(1e-4, 1e-2)})
        return [searcher.suggest(f"t{i}")["lr"] for i in range(3)]

    three = suggestions({"name": "optuna", "kwargs": {"seed": 3}})
    assert three == suggestions({"name": "optuna", "seed": 3})
    assert three != suggestions({"name": "optuna", "kwargs": {"seed": 4}})
    assert suggestions("optuna") == suggestions({"name": "optuna", "seed": 0})  # tune.seed (0) by default


def test_random_search_is_seeded_and_limited():
    """Random search draws from `tune.seed` (or its own `seed` option): the same seed, the same
    trials."""
    tune.register_trainable("ajax_tune_noop", lambda config: None)

    def drawn(**tune_section):
        searcher = build_searcher(experiment(**tune_section).tune)
        assert isinstance(searcher, BasicVariantGenerator)
        searcher.add_configurations(
            {"e": {"run": "ajax_tune_noop", "num_samples": 3, "config": {"lr": tune.loguniform(1e-4, 1e-2)}}}
        )
        trials = iter(searcher.next_trial, None)
        return [trial.config["lr"] for trial in trials]

    assert drawn(seed=1) == drawn(seed=1) == drawn(search={"name": "random", "kwargs": {"seed": 1}})
    assert drawn(seed=1) != drawn(seed=2)
    # tune.max_concurrent_trials reaches it: two trials out, then it waits for one to finish
    assert len(drawn(max_concurrent_trials=2)) == 2


def test_search_needs_its_extra():
    if importlib.util.find_spec("hyperopt") is None:
        with pytest.raises(ConfigError, match="needs the 'hyperopt' package; pip install 'ajax-tune\\[hyperopt\\]'"):
            experiment(search="hyperopt")
    else:
        assert type(build_searcher(experiment(search="hyperopt").tune)).__name__ == "HyperOptSearch"


def test_existing_forms_still_load():
    plain = experiment(search="random", scheduler={"name": "asha", "max_t": 12, "grace_period": 2})
    assert plain.tune.search == {"name": "random", "kwargs": {}}
    assert plain.tune.scheduler == {"name": "asha", "kwargs": {"max_t": 12, "grace_period": 2}}
    # the normalised section builds the same objects again (as `tuner()` does)
    assert isinstance(build_scheduler(dataclasses.replace(plain.tune)), ASHAScheduler)
    with pytest.raises(ConfigError, match="works with search: random only"):
        experiment(search="optuna", scheduler={"name": "pbt", "hyperparam_mutations": {"agent": {"ent_coef": [0.0]}}})


def test_one_walk_over_a_search_space():
    from ajax_tune.spaces import Domain, domains, has_grid, parse_spaces, sample, to_tune

    written = {
        "agent": {
            "lr": {"loguniform": [1e-4, 1e-2]},
            "hidden_sizes": {"choice": [[32], [64, 64]]},
            "schedule": {"kind": "linear", "peak": {"grid": [1e-3, 3e-3]}},
        },
        "callbacks": [{"kwargs": {"patience": {"randint": [1, 4]}}}],
        "train": {"num_seeds": 2},
    }
    space = parse_spaces(written)
    assert space["agent"]["lr"] == Domain("loguniform", (1e-4, 1e-2)) and space["train"] == {"num_seeds": 2}
    assert [d.kind for d in domains(space)] == ["loguniform", "choice", "grid", "randint"] and has_grid(space)
    one = sample(space)
    assert one["agent"]["lr"] == pytest.approx(1e-3) and one["agent"]["schedule"]["peak"] == 1e-3
    assert one["callbacks"][0]["kwargs"]["patience"] == 1 and one["agent"]["hidden_sizes"] == [32]
    one["agent"]["hidden_sizes"].append(8)  # a sample is a copy: the space is untouched
    assert space["agent"]["hidden_sizes"].args[0] == [32]
    tuned = to_tune(space)
    assert isinstance(tuned["agent"]["lr"], tune.search.sample.Float) and tuned["agent"]["schedule"]["peak"] == {
        "grid_search": [1e-3, 3e-3]
    }
    assert not has_grid(parse_spaces({"a": {"choice": [1, 2]}}))
    with pytest.raises(ConfigError, match=r"trial.callbacks\[0\].kwargs.patience: \{randint: \[low, high\]\} needs low < high"):
        parse_spaces({"callbacks": [{"kwargs": {"patience": {"randint": [4, 1]}}}]})
