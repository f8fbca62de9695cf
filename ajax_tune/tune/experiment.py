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
      population: 0             # K: pack K suggestions per trial as its members (population_search.py)
      time_budget_s: 3600       # the whole search's wall-clock budget in seconds; left out: none
    stop: {training_iteration: 12}
    checkpoint: {frequency: 2, at_end: true, num_to_keep: 2}   # the 2 best by tune.metric, and the latest; left out: all
    failure: {max_failures: 0}
    wandb: {project: ajax-tune}  # optional; offline unless an API key is set

Search spaces are written as one-key mappings (`ajax_tune.spaces`): `{loguniform: [lo, hi]}`,
`{choice: [a, b, ...]}`, `{grid: [a, b, ...]}` and the like. PBT and PB2 mutations use the same
syntax (for PBT a plain list or `{choice: [...]}` is a set of values to step through; PB2 takes
`[lo, hi]` bounds).

`search` and `scheduler` are a name, or a mapping with `name` and the options of that class,
written inline (`{name: asha, max_t: 12}`) or under `kwargs` (`{name: optuna, kwargs: {seed: 3}}`).
Both come from one table, `ajax_tune.tune.choices.CHOICES`, and their options are checked against
the class's own signature.

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
import math
import pathlib
from collections.abc import Mapping
from typing import Any

import yaml

from ajax_tune import yaml_loader
from ajax_tune.errors import ConfigError
from ajax_tune.expected_keys import check_metric
from ajax_tune.fields import check_keys, parse_section
from ajax_tune.imports import did_you_mean
from ajax_tune.results import keys as K
from ajax_tune.spaces import Domain, domains, has_grid, parse_spaces, sample, to_tune
from ajax_tune.tune.choices import (
    CHOICES,
    build_scheduler,
    build_searcher,
    check_choice,
    check_population_search,
    config_paths,
    leaf_paths,
    named_metrics,
    parse_choice,
)
from ajax_tune.tune.sections import (
    CheckpointSection,
    FailureSection,
    TuneSection,
    apply_overrides,
    experiment_name,
    parse_stop,
    parse_wandb,
    section_mapping,
)

TOP_LEVEL = ("name", "trial", "tune", "stop", "checkpoint", "failure", "wandb", "storage_path")


# -- the experiment ------------------------------------------------------------------------------


#: Result keys Tune adds to every result of a class trainable, valid metrics beside a trial's own.
TUNE_KEYS = frozenset(K.TUNE_KEYS)
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
        name = experiment_name(raw.get("name"), default_name)
        section = parse_section(TuneSection, raw.get("tune") or {}, "tune")
        trial = raw.get("trial") or {}
        if not isinstance(trial, Mapping):
            raise ConfigError(f"trial must be a mapping (the trial config: env, agent, train, ...), got {trial!r}")
        trial = copy.deepcopy(dict(trial))
        members = trial.pop("population", None)  # its space is drawn inside the trial, never by Tune
        trial = parse_spaces(trial)
        if members is not None:
            trial["population"] = members
        search, scheduler = parse_choice("search", section.search), parse_choice("scheduler", section.scheduler)
        if search["name"] != "random" and has_grid(trial):
            raise ConfigError(f"tune.search: {search['name']} cannot expand {{grid: ...}}; use choice")
        if scheduler["name"] in ("pbt", "pb2") and search["name"] != "random":
            raise ConfigError(
                f"tune.search: {scheduler['name']} chooses its own configs; it works with "
                f"search: random only, got {search['name']!r}"
            )
        section = dataclasses.replace(section, search=search, scheduler=scheduler)
        check_choice("scheduler", section)  # the options, without starting anything
        check_choice("search", section)
        if section.population or "population" in (raw.get("tune") or {}):
            _check_population(section, members, scheduler, configs_drawn(section.num_samples, trial))
        if members is not None:
            _check_mutations_reach_members(members, config_paths("scheduler", scheduler))
        checkpoint = parse_section(CheckpointSection, section_mapping(raw, "checkpoint"), "checkpoint")
        failure = parse_section(FailureSection, section_mapping(raw, "failure"), "failure")
        stop = parse_stop(raw.get("stop"))
        wandb = parse_wandb(raw.get("wandb"))
        storage_path = raw.get("storage_path")
        if storage_path is not None and not (isinstance(storage_path, str) and storage_path.strip()):
            raise ConfigError(f"storage_path must be a directory or a URI (a string), got {storage_path!r}")

        metrics = {
            "tune.metric": section.metric,
            **{f"stop.{key}": key for key in stop},
            **named_metrics("search", search),
            **named_metrics("scheduler", scheduler),
        }
        checked = sample(trial)
        if section.population:  # each trial is a population: its member keys, selected by tune.metric
            checked["population"] = {"size": section.population, "select": {"metric": section.metric, "mode": section.mode}}
        try:
            trial_checks(checked, metrics, config_paths("scheduler", scheduler))
        except ConfigError as exc:  # the members' selection metric is tune.metric: name what the user wrote
            select = "population.select.metric"
            if section.population and str(exc).startswith(select):
                raise ConfigError(f"tune.metric{str(exc)[len(select) :]} (tune.population selects members by it)") from None
            raise
        return cls(
            name=name,
            trial=trial,
            tune=section,
            stop=stop,
            checkpoint=checkpoint,
            max_failures=failure.max_failures,
            wandb=wandb,
            storage_path=storage_path,
        )

    # -- building Tune objects ------------------------------------------------------------

    def param_space(self) -> dict:
        """The trial section as Tune's search space. A search over task samplers of which one
        reads the agent's learning signal (PLR) has every trial compute it
        (`train.learning_signal: always`): its trials then keep one program between them, as
        reused actors switch samplers."""
        from ajax_tune.samplers import reads_learning_signal

        space = to_tune(self.trial)
        sampler = self.trial.get("task_sampler")
        if isinstance(sampler, Domain) and any(reads_learning_signal(s) for s in sampler.args):
            train = space.setdefault("train", {})
            if isinstance(train, dict):
                train.setdefault("learning_signal", "always")
        return space

    def num_configs(self) -> int:
        """The configs the search draws: `num_samples`, times the grid's points where it has one."""
        return configs_drawn(self.tune.num_samples, self.trial)

    def tuner(self, storage_path: str | None = None, callbacks: list | None = None):
        from ray import tune

        from ajax_tune.tune.output import trial_names
        from ajax_tune.tune.trainable import AjaxTrainable

        section = self.tune
        search = CHOICES["search"][section.search["name"]]
        if section.population:
            from ajax_tune.tune.searchers import searcher_for

            # num_samples counts configs (each grid point num_samples times): the wrapper stops there
            num_samples, limit = self.num_configs(), section.max_concurrent_trials or None
            search_alg = searcher_for(section, space=self.param_space(), num_samples=num_samples)
        else:
            # a search that takes the limit itself has it already; Tune would only warn
            limit = None if search.concurrency else section.max_concurrent_trials or None
            search_alg, num_samples = build_searcher(section), section.num_samples
        tune_config = tune.TuneConfig(
            metric=section.metric,
            mode=section.mode,
            num_samples=num_samples,
            search_alg=search_alg,
            scheduler=build_scheduler(section),
            max_concurrent_trials=limit,
            reuse_actors=section.reuse_actors,
            time_budget_s=section.time_budget_s,
            **trial_names(),
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
                num_to_keep=self.checkpoint.num_to_keep,
                checkpoint_score_attribute=section.metric,
                checkpoint_score_order=section.mode,
            ),
            failure_config=tune.FailureConfig(max_failures=self.max_failures),
            callbacks=callbacks or None,
            verbose=1,
        )
        # a population's searcher holds the space itself (see PopulationSearcher's `space`)
        param_space = {} if section.population else self.param_space()
        return tune.Tuner(AjaxTrainable, param_space=param_space, tune_config=tune_config, run_config=run_config)


# -- the sections outside `trial` ----------------------------------------------------------------


def configs_drawn(num_samples: int, trial: Any) -> int:
    """The configs a search draws: `num_samples`, times the grid's points where it has one."""
    return num_samples * math.prod(len(d.args) for d in domains(trial) if d.kind == "grid")


def _check_population(section: TuneSection, members: Any, scheduler: Mapping, configs: int) -> None:
    """`tune.population`: a whole number of members per trial, a trial config without a
    population of its own, a scheduler that treats trials as wholes, the wrapped search's options
    (without importing Tune for a random search), and no more members than the search draws
    configs (a trial would hold fewer than asked, without a word)."""
    if section.population < 1:
        raise ConfigError(
            f"tune.population must be a whole number of configs per trial >= 1, got {section.population!r} "
            f"(leave it out for one config per trial)"
        )
    if members is not None:
        raise ConfigError(
            "tune.population packs the search's suggestions into each trial's population; "
            "the trial config cannot have a population section too (give one or the other)"
        )
    if scheduler["name"] in ("pbt", "pb2"):
        raise ConfigError(
            f"tune.population: {scheduler['name']} mutates a trial's config, which a population's members override; "
            f"use population-based training inside the trial, or no tune.population"
        )
    check_population_search(section)
    if section.population > configs:
        points = configs // section.num_samples
        grid = f" x {points} grid points" if points > 1 else ""
        raise ConfigError(
            f"tune.population packs {section.population} configs per trial, but the search draws {configs} in all "
            f"(tune.num_samples {section.num_samples}{grid}): raise tune.num_samples to "
            f"{math.ceil(section.population / points)} or lower tune.population to {configs}"
        )


def _check_mutations_reach_members(population: Any, mutated: Mapping[str, list[tuple]]) -> None:
    """Tune's PBT mutates a population trial's config; a setting its members override keeps each
    member's own value, so a mutation of one would change nothing: refused, with its path."""
    if not isinstance(population, Mapping):
        return  # the trial's own checks refuse it, in its words
    overridden = set()
    for override in population.get("members") or ():
        if isinstance(override, Mapping):
            overridden.update(leaf_paths(override))
    space = population.get("space")
    if isinstance(space, Mapping):
        overridden.update(leaf_paths(parse_spaces(copy.deepcopy(dict(space)), "trial.population.space")))
    overridden = sorted(overridden)  # the first hit named is the same every time
    for who, paths in mutated.items():
        for path in paths:
            hit = next((o for o in overridden if o[: len(path)] == path or path[: len(o)] == o), None)
            if hit is not None:
                raise ConfigError(
                    f"{who} mutates {'.'.join(map(str, path))}, which trial.population's members override "
                    f"({'.'.join(map(str, hit))}): each member keeps its own value, so the mutation would change "
                    f"nothing; mutate settings the members share, or use population.pbt inside the trial"
                )


def trial_checks(trial: dict, metrics: Mapping[str, str], paths: Mapping[str, list[tuple]] | None = None) -> None:
    """The trial config checked for one sample of its space: everything `Runner.check` checks,
    that its training state fits this machine and its resources give it `train.devices`, each of
    `metrics` (who names it -> the metric) against the keys its results will hold (or Tune adds),
    and each of `paths` (PBT's mutations) against the config's sections and their keys."""
    from ajax_tune.build import build_loop, build_run
    from ajax_tune.expected_keys import keys_of
    from ajax_tune.loop.compiled import check_devices, trial_devices
    from ajax_tune.runner import Runner

    cfg = Runner.check(trial)  # the state's memory included
    env, loop = build_loop(cfg)
    check_devices(cfg.train.devices, loop.num_lanes, *trial_devices(cfg.resources.gpu))  # what Runner checks once JAX runs
    keys = TUNE_KEYS | ALWAYS_REPORTED
    if not set(metrics.values()) <= keys:  # the config's own keys, traced (not compiled) only when needed
        keys |= keys_of(cfg, loop, build_run(cfg, env))
    for who, metric in metrics.items():
        check_metric(metric, keys, who)
    written = cfg.to_dict()
    for who, mutated in (paths or {}).items():
        for path in mutated:
            _check_config_path(written, path, who)


def _check_config_path(config: Mapping, path: tuple, who: str) -> None:
    """A path PBT mutates must name a section and one of its keys (deeper keys, such as a
    schedule's or an env's own kwargs, are the section's to check): a misspelt one would be
    added to every trial's config by Tune and refused inside the trial, after Ray started."""
    node = config
    for depth, key in enumerate(path[:2]):
        if not isinstance(node, Mapping):
            return
        if key not in node:
            where = ".".join(map(str, path[:depth])) or "the trial config"
            raise ConfigError(
                f"{who}: {'.'.join(map(str, path))} is not a key of the trial config ({where} has no "
                f"{key!r}{did_you_mean(key, list(node), cutoff=0.5)})"
            )
        node = node[key]


# -- overrides -----------------------------------------------------------------------------------
