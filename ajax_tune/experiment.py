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

Search spaces are written as one-key mappings (`ajax_tune.spaces`): `{loguniform: [lo, hi]}`,
`{choice: [a, b, ...]}`, `{grid: [a, b, ...]}` and the like. PBT and PB2 mutations use the same
syntax (for PBT a plain list is a set of choices; PB2 takes `[lo, hi]` bounds).

`search` and `scheduler` are a name, or a mapping with `name` and the options of that class,
written inline (`{name: asha, max_t: 12}`) or under `kwargs` (`{name: optuna, kwargs: {seed: 3}}`).
Both come from one table, `CHOICES` (names checked by `ajax_tune.imports.Registry`): each
name's class, the extra that installs its package, and how settings reach it (`tune.seed` and
`tune.max_concurrent_trials`, options written as search spaces, defaults). Options are checked
against the class's own signature, so a misspelt one is refused with the nearest valid one (Ray's
`create_scheduler` would drop it silently).

Everything is validated in one place (`Experiment.from_dict`) before Ray starts: every section's
keys, types and ranges (`name`, `tune`, `stop`, `checkpoint`, `failure`, `wandb`, `storage_path`),
each search space, the search and scheduler with their options, the trial config for one sample
of the space (the first grid value, a draw from each domain) with its state's size against this
machine's memory, and every metric the experiment names (`tune.metric`, which also scores
checkpoints, each `stop` key, a scheduler's `time_attr`) against the keys that trial's results
hold or Tune adds.
"""

from __future__ import annotations

import copy
import dataclasses
import importlib.util
import inspect
import pathlib
from collections.abc import Mapping
from typing import Any

import yaml

from ajax_tune import keys as K
from ajax_tune import yaml_loader
from ajax_tune.config import ConfigError, check_keys, parse_section
from ajax_tune.fields import static, validate
from ajax_tune.imports import Registry, did_you_mean, resolve_import
from ajax_tune.results import check_metric
from ajax_tune.spaces import DOMAINS, Domain, domains, has_grid, map_spaces, parse_spaces, sample, to_tune  # noqa: F401

TOP_LEVEL = ("name", "trial", "tune", "stop", "checkpoint", "failure", "wandb", "storage_path")


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
    Registry(where, CHOICES[kind], imports="").resolve(name)
    return {"name": name, "kwargs": options}


@dataclasses.dataclass(frozen=True)
class TuneSection:
    metric: str = static("eval/return_mean", doc="the result key searchers, schedulers and checkpoint scores read")
    mode: str = static("max", choices=("min", "max"), doc="whether a higher or a lower metric is better")
    num_samples: int = static(1, ge=1, doc="trials to draw (each grid point this many times)")
    search: Any = static("random", doc="a name, or {name: ..., kwargs: {...}} (options may also be inline)")
    scheduler: Any = static("none", doc="a name, or {name: ..., kwargs: {...}}")
    max_concurrent_trials: int = static(0, ge=0, doc="trials running at once; 0: as many as resources allow")
    reuse_actors: bool = static(False, doc="start a new trial in a finished trial's actor (no recompiling)")
    seed: int = static(0, ge=0, doc="the search's seed, unless its options give one")

    def __post_init__(self):
        validate(self, "tune")


@dataclasses.dataclass(frozen=True)
class CheckpointSection:
    frequency: int = static(0, ge=0, doc="checkpoint every this many iterations; 0: never in between")
    at_end: bool = static(True, doc="checkpoint when a trial ends")
    num_to_keep: int = static(0, ge=0, doc="the best checkpoints kept by tune.metric (and the latest); 0: all")

    def __post_init__(self):
        validate(self, "checkpoint")


@dataclasses.dataclass(frozen=True)
class FailureSection:
    max_failures: int = static(0, ge=-1, doc="restarts of a failed trial from its last checkpoint; -1: no limit")

    def __post_init__(self):
        validate(self, "failure")


#: Result keys Tune adds to every result of a class trainable, valid metrics beside a trial's own.
TUNE_KEYS = frozenset({"training_iteration", "time_total_s", "time_this_iter_s", "timesteps_total",
                       "episodes_total", "timestamp", "time_since_restore", "timesteps_since_restore",
                       "iterations_since_restore"})
#: Keys every trial's results hold, whatever its config.
ALWAYS_REPORTED = frozenset({*K.RUNNER_KEYS, *K.EVAL_KEYS, *K.TRAIN_KEYS})


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
        """Every section checked, in one pass, before anything starts: the cheap ones first, then
        the trial config (built for one sample of its space, never compiled), then every metric
        the experiment names against the keys that trial's results will hold."""
        if not isinstance(raw, Mapping):
            raise ConfigError(f"an experiment must be a mapping with keys {list(TOP_LEVEL)}")
        check_keys(raw, TOP_LEVEL, "")
        name = _name(raw.get("name"), default_name)
        section = parse_section(TuneSection, raw.get("tune") or {}, "tune")
        trial = raw.get("trial") or {}
        if not isinstance(trial, Mapping):
            raise ConfigError(f"trial must be a mapping (the trial config: env, agent, train, ...), got {trial!r}")
        trial = parse_spaces(copy.deepcopy(dict(trial)))
        search, scheduler = parse_choice("search", section.search), parse_choice("scheduler", section.scheduler)
        if search["name"] != "random" and has_grid(trial):
            raise ConfigError(f"tune.search: {search['name']} cannot expand {{grid: ...}}; use choice")
        if scheduler["name"] in ("pbt", "pb2") and search["name"] != "random":
            raise ConfigError(f"tune.search: {scheduler['name']} chooses its own configs; it works with "
                              f"search: random only, got {search['name']!r}")
        section = dataclasses.replace(section, search=search, scheduler=scheduler)
        build_scheduler(section)  # validates the options without starting anything
        build_searcher(section)
        checkpoint = parse_section(CheckpointSection, _mapping(raw, "checkpoint"), "checkpoint")
        failure = parse_section(FailureSection, _mapping(raw, "failure"), "failure")
        stop = _stop(raw.get("stop"))
        wandb = _wandb(raw.get("wandb"))
        storage_path = raw.get("storage_path")
        if storage_path is not None and not (isinstance(storage_path, str) and storage_path.strip()):
            raise ConfigError(f"storage_path must be a directory or a URI (a string), got {storage_path!r}")

        metrics = {"tune.metric": section.metric, **{f"stop.{key}": key for key in stop}}
        time_attr = scheduler["kwargs"].get("time_attr")
        if isinstance(time_attr, str):
            metrics[f"tune.scheduler ({scheduler['name']}).time_attr"] = time_attr
        trial_checks(sample(trial), metrics)
        return cls(name=name, trial=trial, tune=section, stop=stop, checkpoint=checkpoint,
                   max_failures=failure.max_failures, wandb=wandb, storage_path=storage_path)

    # -- building Tune objects ------------------------------------------------------------

    def param_space(self) -> dict:
        return to_tune(self.trial)

    def tuner(self, storage_path: str | None = None, callbacks: list | None = None):
        from ray import tune

        from ajax_tune.trainable import AjaxTrainable, trial_dirname

        section = self.tune
        search = CHOICES["search"][section.search["name"]]
        tune_config = tune.TuneConfig(
            trial_name_creator=trial_dirname,
            metric=section.metric, mode=section.mode, num_samples=section.num_samples,
            search_alg=build_searcher(section), scheduler=build_scheduler(section),
            # a search that takes the limit itself has it already; Tune would only warn
            max_concurrent_trials=None if search.concurrency else section.max_concurrent_trials or None,
            reuse_actors=section.reuse_actors, trial_dirname_creator=trial_dirname,
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


# -- the sections outside `trial` ----------------------------------------------------------------


def _name(value: Any, default: str) -> str:
    if value is None or value == "":
        return default
    if not isinstance(value, str) or "/" in value or value in (".", ".."):
        raise ConfigError(f"name must be a directory name (a string without '/'), got {value!r}")
    return value


def _mapping(raw: Mapping, key: str) -> Mapping:
    value = raw.get(key)
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"{key} must be a mapping, got {value!r}")
    return value


def _stop(value: Any) -> dict:
    """`stop`: result key -> the value at which a trial ends (Tune stops at the first result at
    or past it). Its keys are checked as metrics once the trial's result keys are known."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"stop must be a mapping of result key to the value that ends a trial "
                          f"(for example {{training_iteration: 12}}), got {value!r}")
    for key, limit in value.items():
        if not isinstance(limit, (int, float)) or isinstance(limit, bool):
            raise ConfigError(f"stop.{key} must be a number (a trial ends at the first result with {key} >= it), "
                              f"got {limit!r}")
    return dict(value)


WANDB_OWN = ("project", "group", "mode")
WANDB_MODES = ("online", "offline", "disabled")


def _wandb(value: Any) -> dict | None:
    """`wandb`: the keyword arguments of `wandb_callback`, `WandbLoggerCallback` or `wandb.init`;
    a misspelt one would reach `wandb.init` inside every trial's logging actor."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigError(f"wandb must be a mapping (for example {{project: my-project}}), got {value!r}")
    if not value:
        return {}
    valid = wandb_options()
    for key in value:
        if key not in valid:
            hint = did_you_mean(key, valid, cutoff=0.5)
            raise ConfigError(f"wandb: unknown option {key!r}{hint} Options: {', '.join(valid)}")
    for key in ("project", "group"):
        if value.get(key) is not None and not isinstance(value[key], str):
            raise ConfigError(f"wandb.{key} must be a string, got {value[key]!r}")
    if value.get("mode") is not None and value["mode"] not in WANDB_MODES:
        raise ConfigError(f"wandb.mode must be one of {list(WANDB_MODES)}, got {value['mode']!r}")
    return dict(value)


def wandb_options() -> list[str]:
    """What the `wandb` section may set: `wandb_callback`'s own arguments, then Ray's callback's,
    then `wandb.init`'s (where the rest go)."""
    import wandb
    from ray.air.integrations.wandb import WandbLoggerCallback

    names = [*WANDB_OWN, *option_names(WandbLoggerCallback), *option_names(wandb.init)]
    return list(dict.fromkeys(names))


def trial_checks(trial: dict, metrics: Mapping[str, str]) -> None:
    """The trial config checked for one sample of its space: everything `Runner.check` checks,
    that its training state fits this machine, and each of `metrics` (who names it -> the
    metric) against the keys its results will hold (or Tune adds)."""
    from ajax_tune.build import build_loop, build_run
    from ajax_tune.memory import check_state_fits
    from ajax_tune.results import keys_of
    from ajax_tune.runner import Runner

    cfg = Runner.check(trial)
    env, loop = build_loop(cfg)
    check_state_fits(loop, cfg.resources.gpu)
    keys = TUNE_KEYS | ALWAYS_REPORTED
    if not set(metrics.values()) <= keys:  # the config's own keys, traced (not compiled) only when needed
        keys |= keys_of(cfg, loop, build_run(cfg, env))
    for who, metric in metrics.items():
        check_metric(metric, keys, who)


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
            raise ConfigError(f"{where}: unknown option {key!r}{did_you_mean(key, valid, cutoff=0.5)} "
                              f"Options: {', '.join(valid)}")
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


def parse_assignment(item: str, flag: str, form: str = "key.path=value") -> tuple[str, Any]:
    """`key=value` as the command line gives it: the value read as YAML (numbers as in a file),
    or kept as text where it is not YAML."""
    key, sep, text = item.partition("=")
    if not sep or not key:
        raise ConfigError(f"{flag} expects {form}, got {item!r}")
    try:
        return key, yaml_loader.load(text)
    except yaml.YAMLError:
        return key, text


def apply_overrides(raw: dict, overrides: list[str]) -> dict:
    """`--set key.path=value` assignments onto the loaded experiment."""
    raw = copy.deepcopy(raw)
    for item in overrides:
        key, value = parse_assignment(item, "--set")
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
