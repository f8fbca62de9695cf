"""A trial's parts, built from its config in one place.

`Runner.check` builds them to find every mistake before compiling, `result_keys` to learn what
a result will hold, and the `Runner` to train with them; the three cannot disagree because they
call the same functions. Building never compiles and never starts JAX's backends: the env and
the agent are Python objects, the tasks numpy arrays.

Two kinds of part: the program (`build_loop`: the env and the compiled loop, rebuilt only when a
static setting changes) and the run (`build_run`: the starting task, the levels, the task
sampler, the held-out set and the curriculum's functions, new for every run). In a population
every member gets a curriculum of its own: its own callbacks and sampler, built from the same
specs, so no two members share the state of one.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import pathlib
import types
from collections.abc import Callable

import numpy as np

from ajax_tune import compat, datasets
from ajax_tune.agents import AGENTS
from ajax_tune.config import Config, ConfigError, resolve_agent, resolve_callable
from ajax_tune.curriculum import Curriculum, make_callback
from ajax_tune.curriculum.curriculum import callable_name
from ajax_tune.curriculum.task_control import EnvContext, TaskControl
from ajax_tune.envs import EpisodeWrapper, make_env
from ajax_tune.envs.level_list import Levels
from ajax_tune.loop import TrainLoop
from ajax_tune.loop.offline import DatasetInput
from ajax_tune.samplers import TaskHistogram, TaskSampler, make_sampler


@dataclasses.dataclass
class RunParts:
    """What a fresh run of a config starts from, besides the program."""

    levels: Levels | None
    start_task: dict
    sampler: TaskSampler | None
    histogram: TaskHistogram | None
    heldout: dict | None  # field -> [num_heldout, *shape]
    env_task_fn: Callable | None
    callbacks: list = dataclasses.field(default_factory=list)
    #: the sampler, callbacks and env_task_fn of members 1.. of a population (member 0 has those above)
    others: list[tuple[TaskSampler | None, list, Callable | None]] = dataclasses.field(default_factory=list)

    def curriculum(self, control: TaskControl, env_ctx: EnvContext) -> Curriculum:
        """The run's curriculum over `control`: these parts, owned by it from here on."""
        return self._curriculum(control, env_ctx, self.sampler, self.callbacks, self.env_task_fn)

    def curricula(self, controls: list[TaskControl], contexts: list[EnvContext]) -> tuple[Curriculum, ...]:
        """One curriculum per member, each over its member's control: member 0's from the parts
        above, every other member's from its own copies."""
        own = [(self.sampler, self.callbacks, self.env_task_fn), *self.others]
        if not len(own) == len(controls) == len(contexts):
            raise ValueError(f"{len(own)} members' curriculum parts for {len(controls)} controls")
        return tuple(self._curriculum(control, ctx, *parts) for control, ctx, parts in zip(controls, contexts, own))

    def _curriculum(self, control, env_ctx, sampler, callbacks, env_task_fn) -> Curriculum:
        return Curriculum(
            control, env_ctx, env_task_fn=env_task_fn, callbacks=callbacks, sampler=sampler, histogram=self.histogram
        )


def build_loop(cfg: Config) -> tuple[EpisodeWrapper, TrainLoop]:
    """The wrapped env and the training loop (traced and compiled later, on first use)."""
    try:
        env = make_env(cfg.env.name, **cfg.env.kwargs)
    except (KeyError, ImportError) as exc:
        raise ConfigError(f"env.name: {exc.args[0]}") from None
    except TypeError as exc:
        raise ConfigError(f"env.kwargs do not fit {cfg.env.name}: {exc}") from None
    wrapped = EpisodeWrapper(env, cfg.env.max_episode_steps or None, cfg.env.truncation_penalty)
    agent_cls, _ = resolve_agent(cfg.agent_name)
    form = getattr(agent_cls, "form", None)  # a user's agent class need not have forms
    encoder = getattr(cfg.agent, "encoder", None)
    extra = {}
    if encoder is not None:  # it reads the env's image: refused here, in one line, where there is none
        image_shape = getattr(env, "image_shape", None)
        encoder.check(image_shape, int(np.prod(env.observation_space.shape)), cfg.env.name)
        extra["image_shape"] = tuple(image_shape)
    agent = (form(cfg.agent) if callable(form) else agent_cls)(cfg.agent, env.observation_space, env.action_space, **extra)
    check_run = getattr(agent, "check_run", None)
    if callable(check_run):  # settings that only make sense against the run (a warm-up within each member's horizon)
        for train in dict.fromkeys([cfg.train, *(m.train for m in cfg.members)]):
            check_run(train)
    dataset = load_dataset(cfg, wrapped, agent) if cfg.train.dataset or getattr(agent, "offline", False) else None
    heldout_names = None if cfg.heldout is None else heldout_labels(cfg, env)
    return wrapped, TrainLoop(
        wrapped,
        agent,
        cfg.train,
        heldout_names=heldout_names,
        num_members=cfg.num_members,
        learning_signal=cfg.learning_signal,
        dataset=dataset,
        ued=cfg.ued,
    )


def heldout_labels(cfg: Config, env) -> tuple[str, ...]:
    """The held-out tasks' names in results, checked against the env (a named set it has)."""
    try:
        return cfg.heldout.labels(env)
    except ConfigError as exc:
        raise ConfigError(f"heldout: {exc}") from None


def load_dataset(cfg: Config, env: EpisodeWrapper, agent) -> DatasetInput:
    """The dataset of a config with `train.dataset`, read and checked against the env and the
    agent (one line for whatever does not fit), before anything compiles."""
    if not getattr(agent, "offline", False):
        offline = sorted(name for name, (cls, _) in AGENTS.items() if getattr(cls, "offline", False))
        raise ConfigError(
            f"train.dataset trains offline, but agent.name {cfg.agent_name!r} learns online; "
            f"use an offline agent ({', '.join(offline)})"
        )
    path = cfg.train.dataset
    if not path.startswith(datasets.MINARI_PREFIX):
        path = pathlib.Path(path).expanduser()
        if not path.is_absolute():  # a Tune trial runs in its own directory: relative to where the run started
            path = pathlib.Path(compat.original_working_dir()) / path
    return DatasetInput(datasets.load(path, env, continuous=agent.continuous), str(path))


def build_run(cfg: Config, env) -> RunParts:
    """The parts of a fresh run, each checked against the env."""
    levels, start_task = start_task_of(env, cfg)
    sampler = make_task_sampler(env, cfg, levels, start_task)
    callbacks = [make_callback(spec) for spec in cfg.callbacks]
    task_fn = resolve_callable(cfg.env_task_fn, "env_task_fn") if cfg.env_task_fn else None
    others = [
        (make_task_sampler(env, cfg, levels, start_task), member_callbacks(cfg, callbacks), member_task_fn(task_fn))
        for _ in cfg.members[1:]
    ]
    return RunParts(
        levels=levels,
        start_task=start_task,
        sampler=sampler,
        histogram=histogram(env, sampler),
        heldout=None if cfg.heldout is None else cfg.heldout.batch(env, base=start_task),
        env_task_fn=task_fn,
        callbacks=callbacks,
        others=others,
    )


def member_callbacks(cfg: Config, first: list) -> list:
    """Another member's callbacks, built from the same specs. A spec that is an instance gives
    the same instance each time: that member gets a copy of it, so members never share one."""
    out = []
    for i, (spec, ours) in enumerate(zip(cfg.callbacks, first)):
        callback = make_callback(spec)
        if callback is ours:
            try:
                callback = copy.deepcopy(ours)
            except Exception as exc:
                raise ConfigError(
                    f"callbacks[{i}] ({type(ours).__name__}): each member of a population gets its own copy of a "
                    f"callback, and this instance cannot be copied ({type(exc).__name__}: {exc}); give its class, "
                    f"or {{class: 'module:Class', kwargs: {{...}}}}, instead"
                ) from None
        out.append(callback)
    return out


def member_task_fn(task_fn: Callable | None) -> Callable | None:
    """Another member's env_task_fn: a function keeps nothing between calls and is shared; an
    object that may (a callable instance, a bound method) is copied, so members never share it."""
    inner = task_fn
    while isinstance(inner, functools.partial):
        inner = inner.func
    if task_fn is None or isinstance(inner, (types.FunctionType, types.BuiltinFunctionType, type)):
        return task_fn
    try:
        return copy.deepcopy(task_fn)
    except Exception as exc:
        raise ConfigError(
            f"env_task_fn ({type(inner).__name__}): each member of a population gets its own copy of a callable object, "
            f"and this one cannot be copied ({type(exc).__name__}: {exc}); give a function instead"
        ) from None


def start_task_of(env, cfg: Config) -> tuple[Levels | None, dict]:
    """The env's levels (if any) and the task training starts on, checked against the env."""
    if cfg.env.levels is None:
        return None, env.validate_task(cfg.env.task)
    levels = Levels(env, cfg.env.levels, base=cfg.env.task, overflow=cfg.env.level_overflow)
    return levels, levels.task(cfg.env.level)


def make_task_sampler(env, cfg: Config, levels: Levels | None, start_task: dict) -> TaskSampler | None:
    """The trial's task sampler, its space checked against the env (None without one)."""
    if cfg.task_sampler is None:
        return None
    env_levels = None if levels is None else levels.tasks
    return make_sampler(cfg.task_sampler).bind(env, base=start_task, env_levels=env_levels)


def histogram(env, sampler: TaskSampler | None) -> TaskHistogram | None:
    """Result keys for the share of envs per part of each sampled field's range."""
    if sampler is None:
        return None
    ranges = sampler.space.ranges()
    return TaskHistogram(ranges, {k: env.task_spec[k].is_integer for k in ranges}) if ranges else None


def named_metrics(parts: RunParts) -> dict[str, str]:
    """Where a curriculum names a result key to watch: who names it -> the key."""
    named = {}
    task_fn = parts.env_task_fn
    if isinstance(task_fn, functools.partial) and isinstance(task_fn.keywords.get("metric"), str):
        named[f"env_task_fn {callable_name(task_fn)}"] = task_fn.keywords["metric"]
    for i, cb in enumerate(parts.callbacks):
        if isinstance(getattr(cb, "metric", None), str):
            named[f"callbacks[{i}] ({type(cb).__name__})"] = cb.metric
    return named
