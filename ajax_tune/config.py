"""The trial config: typed, validated, built from the nested dicts that Tune and YAML produce.

    {
      "env": {"name": "corridor", "kwargs": {"max_length": 32}, "task": {"length": 4}},
      "agent": {"name": "ppo", "lr": {"kind": "warmup_cosine", "peak": 3e-4}, "ent_coef": 0.01},
      "train": {"total_timesteps": 500_000, "timesteps_per_iteration": 25_600},
      "env_task_fn": "my_module:grow_corridor",      # optional
      "callbacks": [{"class": "ajax_tune.curriculum:ThresholdCurriculum", "kwargs": {...}}],
      "task_sampler": {"name": "plr", "kwargs": {"space": {"length": [4, 32]}}},  # optional
      "heldout": {"space": {"length": [4, 32]}, "num_tasks": 8, "seed": 0},       # optional
      "resources": {"cpu": 1, "gpu": 0},
      "population": {"members": [{"agent": {"lr": 1e-3}}, {"agent": {"lr": 3e-3}}]},  # optional
      "ued": {"algorithm": "robust_plr", "buffer_size": 4000},                     # optional
    }

Every section is checked before anything is built: an unknown key names the nearest valid one,
and a wrong type or range names the key and what is allowed.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping
from typing import Any

from ajax_tune.agents import AGENTS
from ajax_tune.envs.level_list import level_list
from ajax_tune.errors import ConfigError
from ajax_tune.fields import check_keys, init_only, parse_section, static, static_values, validate
from ajax_tune.heldout import HeldOut
from ajax_tune.imports import Registry, resolve_import
from ajax_tune.loop import LoopConfig
from ajax_tune.population.spec import Population, merge
from ajax_tune.ued import LevelSettings, parse_settings

__all__ = ["Config", "EnvConfig", "HeldOut", "ResourcesConfig", "resolve_agent"]


@dataclasses.dataclass(frozen=True)
class EnvConfig:
    name: str = static("cartpole", doc="a registered env, brax/<name>, gymnax/<id>, or 'module:factory'")
    kwargs: dict = static({}, doc="keyword arguments of the env's constructor")
    task: Any = init_only(
        {}, doc="the task training starts on (fields not given keep their defaults), or a name the env knows (a shipped level)"
    )
    max_episode_steps: int = static(0, ge=0, doc="time limit; 0: the env's own")
    truncation_penalty: float = static(0.0, doc="subtracted from the reward of a truncated step")
    levels: Any = init_only(
        None,
        doc="numbered tasks, [task, ...] or {field: [value per level]}: "
        "curricula then speak level numbers (RLlib's get_task() -> int)",
    )
    level: int = init_only(0, ge=0, doc="the level training starts on (with env.levels)")
    level_overflow: str = init_only("error", choices=("error", "clamp"), doc="a level past either end: an error, or clamped")

    def __post_init__(self):
        validate(self, "env")
        if not isinstance(self.task, (dict, str)):
            raise ConfigError(f"env.task must be a mapping of field to value, or a name the env knows, got {self.task!r}")
        if self.levels is None:
            if self.level:
                raise ConfigError(f"env.level ({self.level}) needs env.levels: a list of tasks to number")
            return
        if isinstance(self.levels, str):  # a set of tasks the env knows: counted when the env is built
            return
        count = len(level_list(self.levels, "env.levels"))
        if self.level >= count:
            raise ConfigError(f"env.level must be in [0, {count - 1}] (env.levels has {count}), got {self.level}")


@dataclasses.dataclass(frozen=True)
class ResourcesConfig:
    cpu: float = static(1.0, ge=0.0, doc="CPUs per trial (0 only beside a GPU)")
    gpu: float = static(0.0, ge=0.0, doc="GPUs per trial (fractions share a GPU)")

    def __post_init__(self):
        validate(self, "resources")
        if not self.cpu and not self.gpu:
            raise ConfigError("resources asks for nothing (cpu 0, gpu 0): a trial needs part of a CPU or a GPU to run on")


_AGENTS = Registry("agent.name", AGENTS, imports="module:Class")
SECTIONS = {"env": EnvConfig, "train": LoopConfig, "resources": ResourcesConfig}
TOP_LEVEL = ("env", "agent", "train", "env_task_fn", "callbacks", "task_sampler", "heldout", "resources", "population", "ued")


@dataclasses.dataclass(frozen=True)
class Config:
    env: EnvConfig
    agent_name: str
    agent: Any  # the agent's config dataclass, e.g. PPOConfig
    train: LoopConfig
    env_task_fn: Any = None  # callable or "module:function"
    callbacks: tuple = ()
    resources: ResourcesConfig = dataclasses.field(default_factory=ResourcesConfig)
    task_sampler: Any = None  # a TaskSampler, or {"name" | "class": ..., "kwargs": {...}}
    heldout: HeldOut | None = None  # parsed from {"tasks": [...]}, {"space": {...}, "num_tasks": K, "seed": s} or {"named": set}
    population: Population | None = None  # the members trained as lanes of this trial (see population/)
    ued: LevelSettings | None = None  # a level algorithm's settings: it decides every rollout's levels (see ued/)

    @classmethod
    def from_dict(cls, config: Mapping | Config) -> Config:
        if isinstance(config, Config):
            return config
        if not isinstance(config, Mapping):
            raise ConfigError(f"a config must be a mapping with keys {list(TOP_LEVEL)}, got {type(config).__name__}")
        check_keys(config, TOP_LEVEL, "")
        sections = {name: parse_section(kind, config.get(name, {}), name) for name, kind in SECTIONS.items()}
        agent_values = dict(config.get("agent", {}))
        if not isinstance(agent_values, Mapping):
            raise ConfigError(f"agent must be a mapping, got {agent_values!r}")
        agent_name = agent_values.pop("name", "ppo")
        _, agent_config = resolve_agent(agent_name)
        if "recurrent" in agent_values and "recurrent" not in {f.name for f in dataclasses.fields(agent_config)}:
            raise ConfigError(
                f"agent.recurrent: agent {agent_name!r} has no recurrent form; "
                "the recurrent agent is {name: ppo, recurrent: {cell: gru | lstm, size: 128}}"
            )
        agent = parse_section(agent_config, agent_values, "agent")
        callbacks = config.get("callbacks") or ()
        if not isinstance(callbacks, (list, tuple)):
            raise ConfigError(f"callbacks must be a list, got {callbacks!r}")
        base = cls(
            env=sections["env"],
            agent_name=agent_name,
            agent=agent,
            train=sections["train"],
            env_task_fn=config.get("env_task_fn"),
            callbacks=tuple(callbacks),
            resources=sections["resources"],
            task_sampler=config.get("task_sampler"),
            heldout=HeldOut.parse(config.get("heldout")),  # its shape; its tasks are checked against the env later
            ued=None if config.get("ued") is None else parse_settings(config["ued"]),
        )
        if config.get("population") is None:
            return base
        population = Population.parse(config["population"], base, make_member=base.member)
        return dataclasses.replace(base, population=population)

    def member(self, override: Mapping, where: str) -> Config:
        """This config (without its population) under one member's override of it."""
        allowed = ("agent", "train", "ued")
        for key, value in override.items():
            if key not in allowed:
                raise ConfigError(
                    f"{where}.{key}: a member overrides only {list(allowed)} (its traced settings and train.seed); "
                    f"{key} is shared by the whole population"
                )
            if not isinstance(value, Mapping):
                raise ConfigError(f"{where}.{key} must be a mapping, got {value!r}")
        if "name" in override.get("agent", {}):
            raise ConfigError(f"{where} changes agent.name, a static setting: members share every static setting")
        # the member's sections: this config's, as plain values, under the override (only the
        # sections a member may change; nothing else is converted or parsed again)
        agent_values = merge({k: v for k, v in self._agent_dict().items() if k != "name"}, override.get("agent", {}))
        train_values = merge(dataclasses.asdict(self.train), override.get("train", {}))
        _, agent_config = resolve_agent(self.agent_name)
        if "ued" in override and self.ued is None:
            raise ConfigError(f"{where}.ued: the trial has no ued section for a member to override")
        try:
            agent = parse_section(agent_config, agent_values, "agent")
            train = parse_section(LoopConfig, train_values, "train")
            ued = self.ued
            if "ued" in override:
                ued = parse_settings(merge(dataclasses.asdict(self.ued), override["ued"]))
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
        return dataclasses.replace(self, agent=agent, train=train, ued=ued, population=None)

    @property
    def members(self) -> tuple[Config, ...]:
        """The config of each member the trial trains (itself, without a population)."""
        return (self,) if self.population is None else self.population.members

    @property
    def num_members(self) -> int:
        return len(self.members)

    def _agent_dict(self) -> dict:
        agent = {"name": self.agent_name}
        for f in dataclasses.fields(self.agent):
            value = getattr(self.agent, f.name)
            agent[f.name] = (
                dataclasses.asdict(value)
                if dataclasses.is_dataclass(value)
                else (list(value) if isinstance(value, tuple) else value)
            )
        return agent

    def to_dict(self) -> dict:
        """A JSON-able dict that `from_dict` reads back (callables as import paths)."""
        return {
            "env": dataclasses.asdict(self.env),
            "agent": self._agent_dict(),
            "train": dataclasses.asdict(self.train),
            "env_task_fn": import_path(self.env_task_fn),
            "callbacks": [import_path(c) for c in self.callbacks],
            "resources": dataclasses.asdict(self.resources),
            "task_sampler": _sampler_entry(self.task_sampler),
            "heldout": None if self.heldout is None else self.heldout.to_dict(),
            "population": None if self.population is None else self.population.to_dict(),
            "ued": None if self.ued is None else dataclasses.asdict(self.ued),
        }

    def static_settings(self) -> dict:
        """The sections' static settings: with whether the program computes the learning signal
        (`build.program_settings`), everything whose change needs a new program."""
        return {
            "env": static_values(self.env),
            "agent_name": self.agent_name,
            "agent": static_values(self.agent),
            "train": static_values(self.train),
            "num_heldout": None if self.heldout is None else self.heldout.static_key,
            "num_members": self.num_members,
            "ued": None if self.ued is None else static_values(self.ued),
        }

    @property
    def num_heldout(self) -> int | None:
        """How many held-out tasks the loop evaluates (a static shape; 0 without a set). A named
        set's size is its env's (None here: `HeldOut.labels(env)` has it)."""
        return 0 if self.heldout is None else self.heldout.count


def _sampler_entry(sampler: Any) -> Any:
    config = getattr(sampler, "config", None)  # a TaskSampler instance writes itself as class + kwargs
    return import_path(config() if callable(config) and not isinstance(sampler, type) else sampler)


def resolve_agent(name: Any) -> tuple[type, type]:
    """The agent class and its config class named by `agent.name`.

    Built-in agents are listed in `AGENTS`. A user's agent is named by import path,
    "module:Class", so Tune workers need no registration step; such a class follows the
    built-ins' contract:

    - `Class.Config` is its config: a frozen dataclass whose fields are declared with
      `ajax_tune.fields` (`static`, `traced`, `init_only`), checked in `__post_init__` (call
      `ajax_tune.fields.validate(self, "agent")`), so that the config's `agent` section is
      parsed and validated like a built-in's and Tune may change its traced fields;
    - `Class(config, observation_space, action_space)` builds the agent, which implements
      `ajax_tune.agents.base.Agent`.
    """
    found = _AGENTS.resolve(name)
    if not _AGENTS.is_import_path(name):
        return found
    config = getattr(found, "Config", None)
    if not isinstance(found, type) or not (isinstance(config, type) and dataclasses.is_dataclass(config)):
        raise ConfigError(
            f"agent.name {name!r} must name an agent class whose `Config` attribute is its config dataclass, got {found!r}"
        )
    return found, config


def resolve_callable(spec: Any, what: str) -> Callable:
    """Like `resolve_import`, and {"function": "module:name", "kwargs": {...}} binds keyword
    arguments, so YAML can configure a generic function."""
    if isinstance(spec, Mapping):
        check_keys(spec, ("function", "kwargs"), f"{what}.")
        if "function" not in spec:
            raise ConfigError(f"{what} given as a mapping needs 'function' (and optional 'kwargs')")
        return functools.partial(resolve_callable(spec["function"], what), **dict(spec.get("kwargs") or {}))
    target = resolve_import(spec, what)
    if not callable(target):
        raise ConfigError(f"{what} must be callable, got {target!r}")
    return target


def import_path(value: Any) -> Any:
    """Callables and classes as "module:qualname" where that imports back, inside mappings and
    lists too; other values as they are, and anything else as its repr."""
    if isinstance(value, Mapping):
        return {str(k): import_path(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [import_path(v) for v in value]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    target = value if callable(value) and hasattr(value, "__qualname__") else type(value)
    module, name = getattr(target, "__module__", None), getattr(target, "__qualname__", "")
    if module and "<" not in name:
        return f"{module}:{name}"
    return repr(value)
