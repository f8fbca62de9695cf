"""Experiments as YAML: the trial config plus how Tune should search, schedule, stop and save.

    name: cartpole_asha
    trial:                      # the trial config (see ajax_tune.config), with search spaces
      env: {name: cartpole}
      agent: {lr: {loguniform: [1.0e-4, 3.0e-3]}}
      train: {total_timesteps: 300000, timesteps_per_iteration: 24576, num_seeds: 2}
    tune:
      metric: eval/return_mean
      mode: max
      num_samples: 8
      search: random            # random (grid_search values expand) | optuna | hyperopt
      scheduler: {name: asha, grace_period: 2, max_t: 12}
      seed: 0                   # the search's seed, unless its options give one
      max_concurrent_trials: 2
      reuse_actors: false
    stop: {training_iteration: 12}
    checkpoint: {frequency: 2, at_end: true, num_to_keep: 2}   # keeps the 2 best by tune.metric, and the latest
    failure: {max_failures: 0}
    wandb: {project: ajax-tune}  # optional; offline unless an API key is set

Search spaces are written as one-key mappings: `{loguniform: [lo, hi]}`, `{uniform: [lo, hi]}`,
`{quniform: [lo, hi, q]}`, `{qloguniform: [lo, hi, q]}`, `{randint: [lo, hi]}`,
`{choice: [a, b, ...]}` and `{grid: [a, b, ...]}`. PBT and PB2 mutations use the same syntax
(for PBT a plain list is a set of choices; PB2 takes `[lo, hi]` bounds).

`search` and `scheduler` are a name, or a mapping with `name` and the options of that class,
written inline (`{name: asha, max_t: 12}`) or under `kwargs` (`{name: optuna, kwargs: {seed: 3}}`).
Both come from one table, `CHOICES`: each name's class, the extra that installs its package, and
how settings reach it (`tune.seed` and `tune.max_concurrent_trials`, options written as search
spaces, defaults). Options are checked against the class's own signature, so a misspelt one is
refused with the nearest valid one (Ray's `create_scheduler` would drop it silently).

Everything is validated before Ray starts: the YAML's own keys, each search space, the search and
scheduler with their options, and the trial config, by checking one sample of the space (the first
grid value, a draw from each domain).
"""

from __future__ import annotations

import copy
import dataclasses
import difflib
import importlib.util
import inspect
import pathlib
from collections.abc import Mapping
from typing import Any

import yaml

from ajax_tune import yaml_loader
from ajax_tune.config import ConfigError, check_keys
from ajax_tune.imports import resolve_import

DOMAINS = {
    "uniform": 2, "loguniform": 2, "quniform": 3, "qloguniform": 3, "randint": 2,
    "choice": None, "grid": None,
}
TOP_LEVEL = ("name", "trial", "tune", "stop", "checkpoint", "failure", "wandb", "storage_path")


@dataclasses.dataclass(frozen=True)
class Domain:
    """A search space as written in YAML, turned into a Tune domain on demand."""

    kind: str
    args: tuple

    def to_tune(self):
        from ray import tune

        if self.kind == "grid":
            return tune.grid_search(list(self.args))
        if self.kind == "choice":
            return tune.choice(list(self.args))
        return getattr(tune, self.kind)(*self.args)

    def sample(self) -> Any:
        """A representative value (for validating the trial config before Ray starts)."""
        if self.kind in ("grid", "choice"):
            return self.args[0]
        if self.kind == "randint":
            return int(self.args[0])
        low, high = self.args[0], self.args[1]
        if self.kind.startswith("q"):
            return float(low)  # on the grid of q by construction
        return float((low * high) ** 0.5 if "log" in self.kind else (low + high) / 2)


def parse_spaces(value: Any, where: str = "trial") -> Any:
    """Replace one-key search-space mappings in nested config values by `Domain`s."""
    if isinstance(value, Mapping):
        if len(value) == 1:
            (key, args), = value.items()
            if key in DOMAINS:
                return _domain(key, args, where)
        return {k: parse_spaces(v, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [parse_spaces(v, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _domain(kind: str, args: Any, where: str) -> Domain:
    arity = DOMAINS[kind]
    if not isinstance(args, list) or not args:
        raise ConfigError(f"{where}: {{{kind}: ...}} takes a non-empty list, got {args!r}")
    if arity is not None:
        if len(args) != arity or not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args):
            raise ConfigError(f"{where}: {{{kind}: ...}} takes {arity} numbers, got {args!r}")
        if args[0] >= args[1]:
            raise ConfigError(f"{where}: {{{kind}: [low, high]}} needs low < high, got {args!r}")
        if "log" in kind and args[0] <= 0:
            raise ConfigError(f"{where}: {{{kind}: ...}} needs a positive lower bound, got {args!r}")
    return Domain(kind, tuple(args))


def to_tune(value: Any) -> Any:
    if isinstance(value, Domain):
        return value.to_tune()
    if isinstance(value, Mapping):
        return {k: to_tune(v) for k, v in value.items()}
    if isinstance(value, list):
        return [to_tune(v) for v in value]
    return value


def sample(value: Any) -> Any:
    if isinstance(value, Domain):
        return sample(value.sample())
    if isinstance(value, Mapping):
        return {k: sample(v) for k, v in value.items()}
    if isinstance(value, list):
        return [sample(v) for v in value]
    return value


def has_grid(value: Any) -> bool:
    if isinstance(value, Domain):
        return value.kind == "grid"
    if isinstance(value, Mapping):
        return any(has_grid(v) for v in value.values())
    if isinstance(value, list):
        return any(has_grid(v) for v in value)
    return False


# -- the experiment ------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class TuneChoice:
    """A search algorithm or scheduler a YAML experiment may name, and how settings reach it."""

    target: str | None  # "module:Class"; None: Tune's default, which takes no options
    extra: str = ""  # the ajax-tune extra that installs its package ...
    requires: str = ""  # ... which is this importable module
    defaults: Mapping = dataclasses.field(default_factory=dict)  # options set unless given
    required: Mapping = dataclasses.field(default_factory=dict)  # options it needs: option -> what it is
    spaces: tuple = ()  # options written as search spaces (converted to Tune's)
    seed: str = ""  # its keyword for `tune.seed`; the option `seed` is accepted as an alias
    concurrency: str = ""  # its keyword for `tune.max_concurrent_trials`, where Tune would not pass it


# Set by other keys of the experiment: never options.
FROM_EXPERIMENT = {"metric": "tune.metric", "mode": "tune.mode", "space": "the trial's search spaces"}
BY_ITERATION = {"time_attr": "training_iteration"}

CHOICES: dict[str, dict[str, TuneChoice]] = {
    "search": {
        "random": TuneChoice("ray.tune.search.basic_variant:BasicVariantGenerator",
                             seed="random_state", concurrency="max_concurrent"),
        "optuna": TuneChoice("ray.tune.search.optuna:OptunaSearch", extra="optuna", requires="optuna",
                             seed="seed"),
        "hyperopt": TuneChoice("ray.tune.search.hyperopt:HyperOptSearch", extra="hyperopt", requires="hyperopt",
                               seed="random_state_seed"),
    },
    "scheduler": {
        "none": TuneChoice(None),
        "asha": TuneChoice("ray.tune.schedulers:ASHAScheduler", defaults=BY_ITERATION),
        "pbt": TuneChoice("ray.tune.schedulers:PopulationBasedTraining", defaults=BY_ITERATION,
                          required={"hyperparam_mutations": "{key: search space or list of values}"},
                          spaces=("hyperparam_mutations",)),
        "pb2": TuneChoice("ray.tune.schedulers.pb2:PB2", extra="pb2", requires="sklearn", defaults=BY_ITERATION,
                          required={"hyperparam_bounds": "{key: [low, high]}"}),
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
                raise ConfigError(f"tune.{kind}: give options inline or under kwargs, not both "
                                  f"(inline: {sorted(options)})")
            options = dict(kwargs)
    else:
        raise ConfigError(f"tune.{kind} must be a name or a mapping with 'name' and options, got {value!r}")
    names = list(CHOICES[kind])
    if name not in names:
        close = difflib.get_close_matches(str(name), names, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise ConfigError(f"{where} must be one of {names}, got {name!r}{hint}")
    return {"name": name, "kwargs": options}


@dataclasses.dataclass(frozen=True)
class TuneSection:
    metric: str = "eval/return_mean"
    mode: str = "max"
    num_samples: int = 1
    search: Any = "random"  # a name, or {name: ..., kwargs: {...}} (options may also be inline)
    scheduler: Any = "none"
    max_concurrent_trials: int = 0
    reuse_actors: bool = False
    seed: int = 0


@dataclasses.dataclass(frozen=True)
class CheckpointSection:
    frequency: int = 0
    at_end: bool = True
    num_to_keep: int = 0


@dataclasses.dataclass(frozen=True)
class Experiment:
    name: str
    trial: dict  # with Domains inside
    tune: TuneSection
    stop: dict
    checkpoint: CheckpointSection
    max_failures: int = 0
    wandb: dict | None = None
    storage_path: str | None = None

    # -- loading -----------------------------------------------------------------------

    @classmethod
    def load(cls, path: str | pathlib.Path, overrides: list[str] = ()) -> Experiment:
        path = pathlib.Path(path)
        if not path.is_file():
            raise ConfigError(f"no config file at {path}")
        try:
            raw = yaml_loader.load(path.read_text())
        except yaml.YAMLError as exc:
            raise ConfigError(f"{path} is not valid YAML: {exc}".splitlines()[0]) from None
        if raw is None:
            raw = {}
        raw = apply_overrides(raw, overrides)
        return cls.from_dict(raw, default_name=path.stem)

    @classmethod
    def from_dict(cls, raw: Any, default_name: str = "experiment") -> Experiment:
        if not isinstance(raw, Mapping):
            raise ConfigError(f"an experiment must be a mapping with keys {list(TOP_LEVEL)}")
        check_keys(raw, TOP_LEVEL, "")
        trial = parse_spaces(copy.deepcopy(raw.get("trial", {})))
        from ajax_tune.runner import Runner

        Runner.check(sample(trial))  # the trial config is valid for a sample of the space

        tune_raw = dict(raw.get("tune") or {})
        check_keys(tune_raw, [f.name for f in dataclasses.fields(TuneSection)], "tune.")
        section = TuneSection(**tune_raw)
        if section.mode not in ("min", "max"):
            raise ConfigError(f"tune.mode must be 'min' or 'max', got {section.mode!r}")
        if not isinstance(section.num_samples, int) or section.num_samples < 1:
            raise ConfigError(f"tune.num_samples must be an integer >= 1, got {section.num_samples!r}")
        for key in ("seed", "max_concurrent_trials"):
            value = getattr(section, key)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ConfigError(f"tune.{key} must be an integer >= 0, got {value!r}")
        search, scheduler = parse_choice("search", section.search), parse_choice("scheduler", section.scheduler)
        if search["name"] != "random" and has_grid(trial):
            raise ConfigError(f"tune.search: {search['name']} cannot expand {{grid: ...}}; use choice")
        if scheduler["name"] in ("pbt", "pb2") and search["name"] != "random":
            raise ConfigError(f"tune.search: {scheduler['name']} chooses its own configs; it works with "
                              f"search: random only, got {search['name']!r}")
        section = dataclasses.replace(section, search=search, scheduler=scheduler)
        build_scheduler(section)  # validates the options without starting anything
        build_searcher(section)

        ck_raw = dict(raw.get("checkpoint") or {})
        check_keys(ck_raw, [f.name for f in dataclasses.fields(CheckpointSection)], "checkpoint.")
        stop = dict(raw.get("stop") or {})
        failure = dict(raw.get("failure") or {})
        check_keys(failure, ["max_failures"], "failure.")
        wandb = raw.get("wandb")
        if wandb is not None and not isinstance(wandb, Mapping):
            raise ConfigError(f"wandb must be a mapping (for example {{project: my-project}}), got {wandb!r}")
        return cls(
            name=str(raw.get("name") or default_name), trial=trial, tune=section, stop=stop,
            checkpoint=CheckpointSection(**ck_raw), max_failures=int(failure.get("max_failures", 0)),
            wandb=dict(wandb) if wandb is not None else None, storage_path=raw.get("storage_path"),
        )

    # -- building Tune objects ------------------------------------------------------------

    def param_space(self) -> dict:
        return to_tune(self.trial)

    def tuner(self, storage_path: str | None = None, callbacks: list | None = None):
        from ray import tune

        from ajax_tune.trainable import AjaxTrainable, trial_names

        section = self.tune
        search = CHOICES["search"][section.search["name"]]
        tune_config = tune.TuneConfig(
            metric=section.metric, mode=section.mode, num_samples=section.num_samples,
            search_alg=build_searcher(section), scheduler=build_scheduler(section),
            # a search that takes the limit itself has it already; Tune would only warn
            max_concurrent_trials=None if search.concurrency else section.max_concurrent_trials or None,
            reuse_actors=section.reuse_actors, **trial_names(),
        )
        run_config = tune.RunConfig(
            name=self.name,
            storage_path=str(pathlib.Path(storage_path or self.storage_path or "results").absolute()),
            stop=self.stop or None,
            # Scored by the experiment's metric: `num_to_keep` keeps the best checkpoints by it, and
            # Tune never deletes a trial's latest one, so the best survives beside the newest.
            checkpoint_config=tune.CheckpointConfig(
                checkpoint_frequency=self.checkpoint.frequency,
                checkpoint_at_end=self.checkpoint.at_end,
                num_to_keep=self.checkpoint.num_to_keep or None,
                checkpoint_score_attribute=section.metric,
                checkpoint_score_order=section.mode,
            ),
            failure_config=tune.FailureConfig(max_failures=self.max_failures),
            callbacks=callbacks or None,
            verbose=1,
        )
        return tune.Tuner(AjaxTrainable, param_space=self.param_space(), tune_config=tune_config, run_config=run_config)


def build_scheduler(section: TuneSection):
    """The Tune scheduler `tune.scheduler` names, with its options (None: Tune's default)."""
    return build_choice("scheduler", parse_choice("scheduler", section.scheduler), section)


def build_searcher(section: TuneSection):
    """The Tune search algorithm `tune.search` names, with its options and seed."""
    return build_choice("search", parse_choice("search", section.search), section)


def build_choice(kind: str, spec: Mapping, section: TuneSection):
    name, options = spec["name"], dict(spec["kwargs"])
    choice, where = CHOICES[kind][name], f"tune.{kind} ({name})"
    if choice.target is None:
        if options:
            raise ConfigError(f"tune.{kind}: {name!r} takes no options, got {sorted(options)}")
        return None
    if choice.requires and importlib.util.find_spec(choice.requires) is None:
        raise ConfigError(f"{where} needs the {choice.requires!r} package; pip install 'ajax-tune[{choice.extra}]'")
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
            close = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise ConfigError(f"{where}: unknown option {key!r}{hint} Options: {', '.join(valid)}")
    kwargs = {**choice.defaults, **options}
    for key, what in choice.required.items():
        if not kwargs.get(key):
            raise ConfigError(f"{where} needs the option {key} ({what})")
    for key in choice.spaces:
        if key in kwargs:
            kwargs[key] = to_tune(parse_spaces(kwargs[key], f"tune.{kind}.{key}"))
    if choice.seed:
        kwargs.setdefault(choice.seed, section.seed)
    if choice.concurrency and section.max_concurrent_trials:
        kwargs[choice.concurrency] = section.max_concurrent_trials
    try:
        return cls(**kwargs)
    except (TypeError, ValueError, AssertionError) as exc:
        raise ConfigError(f"{where}: {exc}".splitlines()[0]) from None


def option_names(cls) -> list[str]:
    """The keyword arguments `cls` takes, from its signature. Every class in `CHOICES` names all
    of its options (no **kwargs), so this is the whole list (tests/test_compat.py checks it)."""
    kinds = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    return [n for n, p in inspect.signature(cls).parameters.items() if p.kind in kinds]


# -- overrides -----------------------------------------------------------------------------------


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """`key.path=value` assignments (values parsed as YAML, numbers as in the file) onto the loaded experiment."""
    raw = copy.deepcopy(raw)
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--set expects key.path=value, got {item!r}")
        try:
            value = yaml_loader.load(text)
        except yaml.YAMLError:
            value = text
        node = raw
        parts = key.split(".")
        for part in parts[:-1]:
            child = node.get(part)
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"--set {key}: {part!r} is not a section")
            node = child
        node[parts[-1]] = value
    return raw

