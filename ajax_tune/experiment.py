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

Everything is validated before Ray starts: the YAML's own keys, each search space, and the trial
config, by checking one sample of the space (the first grid value, a draw from each domain).
"""

from __future__ import annotations

import copy
import dataclasses
import pathlib
from typing import Any, Mapping

import yaml

from ajax_tune import yaml_loader
from ajax_tune.config import ConfigError, check_keys

DOMAINS = {
    "uniform": 2, "loguniform": 2, "quniform": 3, "qloguniform": 3, "randint": 2,
    "choice": None, "grid": None,
}
SCHEDULERS = ("none", "asha", "pbt", "pb2")
SEARCHERS = ("random", "optuna", "hyperopt")
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
class TuneSection:
    metric: str = "eval/return_mean"
    mode: str = "max"
    num_samples: int = 1
    search: str = "random"
    scheduler: dict = dataclasses.field(default_factory=lambda: {"name": "none"})
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
    def load(cls, path: str | pathlib.Path, overrides: list[str] = ()) -> "Experiment":
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
    def from_dict(cls, raw: Any, default_name: str = "experiment") -> "Experiment":
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
        if section.search not in SEARCHERS:
            raise ConfigError(f"tune.search must be one of {list(SEARCHERS)}, got {section.search!r}")
        if not isinstance(section.num_samples, int) or section.num_samples < 1:
            raise ConfigError(f"tune.num_samples must be an integer >= 1, got {section.num_samples!r}")
        scheduler = section.scheduler if isinstance(section.scheduler, Mapping) else {"name": section.scheduler}
        if scheduler.get("name", "none") not in SCHEDULERS:
            raise ConfigError(f"tune.scheduler.name must be one of {list(SCHEDULERS)}, got {scheduler.get('name')!r}")
        if section.search != "random" and has_grid(trial):
            raise ConfigError(f"tune.search: {section.search} cannot expand {{grid: ...}}; use choice")
        if scheduler.get("name") in ("pbt", "pb2") and section.search != "random":
            raise ConfigError(f"tune.search: {scheduler['name']} chooses its own configs; it works with "
                              f"search: random only, got {section.search!r}")
        section = dataclasses.replace(section, scheduler=dict(scheduler))
        build_scheduler(section)  # validates the scheduler's own options without starting anything
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

        from ajax_tune.trainable import AjaxTrainable, trial_dirname

        section = self.tune
        scheduler = build_scheduler(section)
        tune_config = tune.TuneConfig(
            trial_name_creator=trial_dirname,
            metric=section.metric, mode=section.mode, num_samples=section.num_samples,
            search_alg=build_searcher(section), scheduler=scheduler,
            max_concurrent_trials=section.max_concurrent_trials or None,
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


def build_scheduler(section: TuneSection):
    options = dict(section.scheduler)
    name = options.pop("name", "none")
    if name == "none":
        if options:
            raise ConfigError(f"tune.scheduler: 'none' takes no options, got {sorted(options)}")
        return None
    from ray.tune import schedulers

    options.setdefault("time_attr", "training_iteration")
    try:
        if name == "asha":
            return schedulers.ASHAScheduler(**options)
        if name == "pbt":
            mutations = options.pop("hyperparam_mutations", None)
            if not mutations:
                raise ConfigError("tune.scheduler: pbt needs hyperparam_mutations")
            return schedulers.PopulationBasedTraining(hyperparam_mutations=to_tune(parse_spaces(mutations, "hyperparam_mutations")), **options)
        if name == "pb2":
            bounds = options.pop("hyperparam_bounds", None)
            if not bounds:
                raise ConfigError("tune.scheduler: pb2 needs hyperparam_bounds ({key: [low, high]})")
            from ray.tune.schedulers.pb2 import PB2

            return PB2(hyperparam_bounds=bounds, **options)
    except TypeError as exc:
        raise ConfigError(f"tune.scheduler ({name}): {exc}") from None
    except (ImportError, RuntimeError) as exc:  # PB2 raises RuntimeError without scikit-learn
        raise ConfigError(f"tune.scheduler ({name}) needs an extra package ({exc}); "
                          f"pip install 'ajax-tune[{name}]'") from None
    raise ConfigError(f"tune.scheduler.name must be one of {list(SCHEDULERS)}, got {name!r}")


def build_searcher(section: TuneSection):
    if section.search == "random":
        return None
    try:
        if section.search == "optuna":
            from ray.tune.search.optuna import OptunaSearch

            return OptunaSearch(seed=section.seed)
        if section.search == "hyperopt":
            from ray.tune.search.hyperopt import HyperOptSearch

            return HyperOptSearch(random_state_seed=section.seed)
    except (ImportError, AssertionError) as exc:
        raise ConfigError(f"tune.search: {section.search} needs its package ({exc}); "
                          f"pip install 'ajax-tune[{section.search}]'") from None
    raise ConfigError(f"tune.search must be one of {list(SEARCHERS)}")


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

