"""The search algorithms and schedulers an experiment may name, from one table, `CHOICES`.

Each name's class, the extra that installs its package, and how settings reach it (`tune.seed`
and `tune.max_concurrent_trials`, options written as search spaces, defaults). Options are
checked against the class's own signature, so a misspelt one is refused with the nearest valid
one (Ray's `create_scheduler` would drop it silently). Building one starts nothing.
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Mapping
from typing import Any

from ajax_tune.errors import ConfigError
from ajax_tune.imports import Registry, did_you_mean, resolve_import
from ajax_tune.spaces import DESCEND, Domain, map_spaces, parse_spaces, to_tune
from ajax_tune.tune.sections import TuneSection, option_names


@dataclasses.dataclass(frozen=True)
class TuneChoice:
    """A search algorithm or scheduler a YAML experiment may name, and how settings reach it."""

    target: str | None  # "module:Class"; None: Tune's default, which takes no options
    extra: str = ""  # the ajax-tune extra that installs its package ...
    requires: str = ""  # ... which is this importable module
    defaults: Mapping = dataclasses.field(default_factory=dict)  # options set unless given
    required: Mapping = dataclasses.field(default_factory=dict)  # options it needs: option -> what it is
    spaces: tuple = ()  # options written as search spaces (converted to Tune's)
    choices_as_lists: bool = False  # in those, {choice: [...]} becomes a plain list (PBT's set of values)
    seed: str = ""  # its keyword for `tune.seed`; the option `seed` is accepted as an alias
    concurrency: str = ""  # its keyword for `tune.max_concurrent_trials`, where Tune would not pass it
    metrics: tuple = ()  # options that name a result key (checked like tune.metric)
    config_keys: tuple = ()  # options whose keys are paths into the trial config (checked against it)


# Set by other keys of the experiment: never options.
FROM_EXPERIMENT = {"metric": "tune.metric", "mode": "tune.mode", "space": "the trial's search spaces"}
BY_ITERATION = {"time_attr": "training_iteration"}
TIMED = {"defaults": BY_ITERATION, "metrics": ("time_attr",)}

CHOICES: dict[str, dict[str, TuneChoice]] = {
    "search": {
        "random": TuneChoice(
            "ray.tune.search.basic_variant:BasicVariantGenerator", seed="random_state", concurrency="max_concurrent"
        ),
        "optuna": TuneChoice("ray.tune.search.optuna:OptunaSearch", extra="optuna", requires="optuna", seed="seed"),
        "hyperopt": TuneChoice(
            "ray.tune.search.hyperopt:HyperOptSearch", extra="hyperopt", requires="hyperopt", seed="random_state_seed"
        ),
    },
    "scheduler": {
        "none": TuneChoice(None),
        "asha": TuneChoice("ray.tune.schedulers:ASHAScheduler", **TIMED),
        "pbt": TuneChoice(
            "ray.tune.schedulers:PopulationBasedTraining",
            **TIMED,
            required={"hyperparam_mutations": "{key: search space or list of values}"},
            spaces=("hyperparam_mutations",),
            # Tune's PBT steps through a list, but perturbs a tune.choice domain by multiplying
            # its value (a string or a list fails then, at the first exploit)
            choices_as_lists=True,
            config_keys=("hyperparam_mutations",),
        ),
        "pb2": TuneChoice(
            "ray.tune.schedulers.pb2:PB2",
            extra="pb2",
            requires="sklearn",
            **TIMED,
            required={"hyperparam_bounds": "{key: [low, high]}"},
            config_keys=("hyperparam_bounds",),
        ),
    },
}
DEFAULT_CHOICE = {"search": "random", "scheduler": "none"}


def parse_choice(kind: str, value: Any) -> dict:
    """`tune.search` or `tune.scheduler` as {"name": ..., "kwargs": {...}}, name checked."""
    where = f"tune.{kind}"
    if value is None:
        value = DEFAULT_CHOICE[kind]
    if isinstance(value, str):
        name, options = value, {}
    elif isinstance(value, Mapping):
        options = dict(value)
        name = options.pop("name", DEFAULT_CHOICE[kind])
        where = f"{where}.name"
        if "kwargs" in options:
            kwargs = options.pop("kwargs") or {}
            if not isinstance(kwargs, Mapping):
                raise ConfigError(f"tune.{kind}.kwargs must be a mapping of options, got {kwargs!r}")
            if options:
                raise ConfigError(f"tune.{kind}: give options inline or under kwargs, not both (inline: {sorted(options)})")
            options = dict(kwargs)
    else:
        raise ConfigError(f"tune.{kind} must be a name or a mapping with 'name' and options, got {value!r}")
    Registry(where, CHOICES[kind], imports="").resolve(name)
    return {"name": name, "kwargs": options}


def build_scheduler(section: TuneSection):
    """The Tune scheduler `tune.scheduler` names, with its options (None: Tune's default)."""
    return build_choice("scheduler", parse_choice("scheduler", section.scheduler), section)


def build_searcher(section: TuneSection):
    """The Tune search algorithm `tune.search` names, with its options and seed."""
    return build_choice("search", parse_choice("search", section.search), section)


def check_choice(kind: str, section: TuneSection) -> None:
    """`tune.search` or `tune.scheduler` checked as `build_choice` would, without building it.
    One given no options is not imported (importing Ray Tune takes a second, which the driver
    then spends while its Ray starts): its name is known and nothing else could be wrong."""
    spec = parse_choice(kind, getattr(section, kind))
    choice = CHOICES[kind][spec["name"]]
    if spec["kwargs"] or choice.required:
        build_choice(kind, spec, section)
    elif choice.requires and importlib.util.find_spec(choice.requires) is None:
        raise ConfigError(missing_package(f"tune.{kind} ({spec['name']})", choice))


#: The options `search: random` takes under `tune.population` (the rest are trial-making
#: options of `BasicVariantGenerator`; `tune.max_concurrent_trials` limits trials as ever).
POPULATION_RANDOM_OPTIONS = ("seed", "random_state", "constant_grid_search")


def check_population_search(section: TuneSection) -> dict | None:
    """`tune.search` as `tune.population` wraps it, checked without building it: for random
    search, the keyword arguments of its variant searcher; None for another search, whose
    options `check_choice` checks (the experiment calls it) and `build_searcher` builds."""
    spec = parse_choice("search", section.search)
    options = spec["kwargs"]
    if spec["name"] != "random":
        return None
    unknown = sorted(set(options) - set(POPULATION_RANDOM_OPTIONS))
    if unknown:
        raise ConfigError(
            f"tune.search (random) with tune.population takes only {list(POPULATION_RANDOM_OPTIONS)}, got {unknown}; "
            f"tune.max_concurrent_trials limits the trials"
        )
    if "seed" in options and "random_state" in options:
        raise ConfigError("tune.search (random): give the seed once, as 'seed' or 'random_state'")
    seed = options.get("seed", options.get("random_state", section.seed))
    return {"random_state": seed, "constant_grid_search": bool(options.get("constant_grid_search", False))}


def build_choice(kind: str, spec: Mapping, section: TuneSection):
    name, options = spec["name"], dict(spec["kwargs"])
    choice, where = CHOICES[kind][name], f"tune.{kind} ({name})"
    if choice.target is None:
        if options:
            raise ConfigError(f"tune.{kind}: {name!r} takes no options, got {sorted(options)}")
        return None
    if choice.requires and importlib.util.find_spec(choice.requires) is None:
        raise ConfigError(missing_package(where, choice))
    cls = resolve_import(choice.target, where)
    accepted = option_names(cls)
    taken = {k: v for k, v in FROM_EXPERIMENT.items() if k in accepted}
    if choice.concurrency:
        taken[choice.concurrency] = "tune.max_concurrent_trials"
    if choice.seed:
        taken[choice.seed] = "tune.seed or the option 'seed'"
        if "seed" in options and choice.seed != "seed":
            if choice.seed in options:
                raise ConfigError(f"{where}: give the seed once, as 'seed' or {choice.seed!r}")
            options[choice.seed] = options.pop("seed")
    for key in options:
        if key in taken and key != choice.seed:
            raise ConfigError(f"{where}: {key!r} is not an option here; it is set by {taken[key]}")
        if key not in accepted:
            valid = [k for k in accepted if k not in taken] + (["seed"] if choice.seed else [])
            raise ConfigError(
                f"{where}: unknown option {key!r}{did_you_mean(key, valid, cutoff=0.5)} Options: {', '.join(valid)}"
            )
    kwargs = {**choice.defaults, **options}
    for key, what in choice.required.items():
        if not kwargs.get(key):
            raise ConfigError(f"{where} needs the option {key} ({what})")
    for key in choice.spaces:
        if key in kwargs:
            parsed = parse_spaces(kwargs[key], f"tune.{kind}.{key}")
            kwargs[key] = to_tune_mutations(parsed) if choice.choices_as_lists else to_tune(parsed)
            if choice.choices_as_lists and "custom_explore_fn" in accepted and "custom_explore_fn" not in kwargs:
                kwargs["custom_explore_fn"] = KeepInBounds.of(parsed)
    if choice.seed:
        kwargs.setdefault(choice.seed, section.seed)
    if choice.concurrency and section.max_concurrent_trials:
        kwargs[choice.concurrency] = section.max_concurrent_trials
    try:
        return cls(**kwargs)
    except (TypeError, ValueError, AssertionError) as exc:
        raise ConfigError(f"{where}: {exc}".splitlines()[0]) from None


def to_tune_mutations(space: Any) -> Any:
    """A parsed space as PBT's mutations: `{choice: [...]}` as the plain list PBT steps through
    (a neighbour, or a draw), every other domain as Tune's."""

    def one(node, _):
        if isinstance(node, Domain):
            return list(node.args) if node.kind == "choice" else node.to_tune()
        return DESCEND

    return map_spaces(space, one)


class KeepInBounds:
    """Tune PBT's `custom_explore_fn`: each numeric mutation clipped back into its domain's
    `[low, high]`. Tune perturbs a domain's value by multiplying it (0.8 or 1.2) and never
    clips, so a `gamma: {uniform: [0.95, 0.999]}` left 1.0 at the second exploit and the trial
    failed on `agent.gamma must be <= 1.0`; the in-trial PBT (`population.pbt`) clips the same
    way. A plain class, so that Tune can pickle the scheduler with the experiment."""

    def __init__(self, bounds: list[tuple[tuple, float, float, bool]]):
        self.bounds = bounds  # (path, low, high, whole numbers)

    @classmethod
    def of(cls, space: Any) -> KeepInBounds:
        bounds = []

        def walk(node, path):
            if isinstance(node, Domain):
                if node.kind in ("uniform", "loguniform", "quniform", "qloguniform", "randint"):
                    high = node.args[1] - 1 if node.kind == "randint" else node.args[1]  # randint's high is excluded
                    bounds.append((path, node.args[0], high, node.kind == "randint"))
            elif isinstance(node, Mapping):
                for key, value in node.items():
                    walk(value, (*path, key))

        walk(space, ())
        return cls(bounds)

    def __call__(self, config: dict) -> dict:
        for path, low, high, whole in self.bounds:
            node = config
            for key in path[:-1]:
                node = node.get(key) if isinstance(node, Mapping) else None
            if isinstance(node, dict) and isinstance(node.get(path[-1]), (int, float)):
                value = min(max(node[path[-1]], low), high)
                node[path[-1]] = int(round(value)) if whole else value
        return config


def missing_package(where: str, choice: TuneChoice) -> str:
    return f"{where} needs the {choice.requires!r} package; pip install 'ajax-tune[{choice.extra}]'"


def named_metrics(kind: str, spec: Mapping) -> dict[str, str]:
    """The result keys a parsed choice's options name: who names it -> the key."""
    choice = CHOICES[kind][spec["name"]]
    options = {**choice.defaults, **spec["kwargs"]}
    return {f"tune.{kind} ({spec['name']}).{key}": options[key] for key in choice.metrics if isinstance(options.get(key), str)}


def config_paths(kind: str, spec: Mapping) -> dict[str, list[tuple]]:
    """The trial-config paths a parsed choice's options mutate (PBT's `hyperparam_mutations`):
    who names them -> each path, as a tuple of keys, down to the first search space or value."""
    choice = CHOICES[kind][spec["name"]]
    out = {}
    for key in choice.config_keys:
        value = spec["kwargs"].get(key)
        if isinstance(value, Mapping):
            out[f"tune.{kind} ({spec['name']}).{key}"] = leaf_paths(parse_spaces(value, f"tune.{kind}.{key}"))
    return out


def leaf_paths(tree: Mapping, prefix: tuple = ()) -> list[tuple]:
    """Each path of `tree` down to a value that is not a non-empty mapping, as a tuple of keys."""
    paths = []
    for key, value in tree.items():
        if isinstance(value, Mapping) and value:
            paths += leaf_paths(value, (*prefix, key))
        else:
            paths.append((*prefix, key))
    return paths
