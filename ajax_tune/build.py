"""A trial's parts, built from its config in one place.

`Runner.check` builds them to find every mistake before compiling, `expected_keys` to learn what
a result will hold, and the `Runner` to train with them; the three cannot disagree because they
call the same functions. Building never compiles and never starts JAX's backends: the env and
the agent are Python objects, the tasks numpy arrays.

Two kinds of part: the program (`build_loop`: the env, the agent and the compiled loop, rebuilt
only when a static setting changes) and the start of a run (`build_run`: the starting task, the
levels, the held-out set and each member's curriculum objects, new for every run). Every member
of a population gets its own task sampler, callbacks and env_task_fn, built from the same specs
the same way, so no two members share the state of one.
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
from ajax_tune.agents import AGENTS, make_agent
from ajax_tune.config import Config, resolve_agent, resolve_callable
from ajax_tune.curriculum import Curriculum, make_callback
from ajax_tune.curriculum.curriculum import callable_name
from ajax_tune.curriculum.task_control import EnvContext, TaskControl
from ajax_tune.envs import EpisodeWrapper, make_env
from ajax_tune.envs.level_list import Levels
from ajax_tune.errors import ConfigError
from ajax_tune.loop import TrainLoop
from ajax_tune.loop.offline import DatasetInput
from ajax_tune.memory import check_state_fits
from ajax_tune.samplers import TaskHistogram, TaskSampler, make_sampler, reads_learning_signal


@dataclasses.dataclass
class CurriculumParts:
    """One member's own curriculum objects, before a control over its lanes exists."""

    sampler: TaskSampler | None
    callbacks: list
    env_task_fn: Callable | None


@dataclasses.dataclass
class RunStart:
    """What a fresh run of a config starts from besides its program: the first task, the levels,
    the held-out tasks and each member's curriculum objects (`members[k]` is member k's)."""

    levels: Levels | None
    start_task: dict
    histogram: TaskHistogram | None
    heldout: dict | None  # field -> [num_heldout, *shape]
    members: list[CurriculumParts]

    def curriculum(self, member: int, control: TaskControl, env_ctx: EnvContext) -> Curriculum:
        """Member `member`'s curriculum over `control`: its parts, owned by it from here on."""
        parts = self.members[member]
        return Curriculum(
            control,
            env_ctx,
            env_task_fn=parts.env_task_fn,
            callbacks=parts.callbacks,
            sampler=parts.sampler,
            histogram=self.histogram,
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
    encoder = getattr(cfg.agent, "encoder", None)
    image_shape = None
    if encoder is not None:  # it reads the env's image: refused here, in one line, where there is none
        image_shape = getattr(env, "image_shape", None)
        encoder.check(image_shape, int(np.prod(env.observation_space.shape)), cfg.env.name)
        image_shape = tuple(image_shape)
    agent = make_agent(agent_cls, cfg.agent, env.observation_space, env.action_space, image_shape=image_shape)
    check_run = getattr(agent, "check_run", None)
    if callable(check_run):  # settings that only make sense against the run (a warm-up within each member's horizon)
        for train in dict.fromkeys([cfg.train, *(m.train for m in cfg.members)]):
            check_run(train)
    dataset = load_dataset(cfg, wrapped, agent) if cfg.train.dataset or getattr(agent, "offline", False) else None
    labels = 0 if cfg.heldout is None else heldout_labels(cfg, env)
    return wrapped, TrainLoop(
        wrapped,
        agent,
        cfg.train,
        num_heldout=labels if isinstance(labels, int) else 0,
        heldout_names=None if isinstance(labels, int) else labels,
        num_members=cfg.num_members,
        learning_signal=learning_signal(cfg),
        dataset=dataset,
        ued=cfg.ued,
        heldout_cvar=None if cfg.heldout is None else cfg.heldout.cvar,
    )


def learning_signal(cfg: Config) -> bool:
    """Whether each call's statistics carry the agent's learning signal: where it costs nothing
    (`learning_signal_is_free`: PPO's), where `train.learning_signal` is "always", or where the
    task sampler reads it (`TaskSampler.reads_learning_signal`: PLR). A static setting of the
    program, decided from three sections of the config."""
    agent_cls, _ = resolve_agent(cfg.agent_name)
    if getattr(agent_cls, "learning_signal_is_free", False) or cfg.train.learning_signal == "always":
        return True
    return reads_learning_signal(cfg.task_sampler)


def program_settings(cfg: Config) -> dict:
    """Everything whose change needs a new program: the config's static settings and whether
    the program computes the learning signal."""
    return {**cfg.static_settings(), "learning_signal": learning_signal(cfg)}


def heldout_labels(cfg: Config, env) -> tuple[str, ...] | int:
    """The held-out tasks' names in results (or their count, named by index), checked against the
    env (a named set it has)."""
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


def build_run(cfg: Config, env, loop=None) -> RunStart:
    """The start of a fresh run, each part checked against the env; with the run's `loop`, its
    memory too (`memory.check_state_fits`), once the tasks are checked and before a held-out set
    is drawn (an env may compute shapes by building something; a set may be too large to draw)."""
    refuse_tasks_without_fields(env, cfg)
    levels, start_task = start_task_of(env, cfg)
    if loop is not None:
        check_state_fits(loop, cfg.resources.gpu)
    task_fn = resolve_callable(cfg.env_task_fn, "env_task_fn") if cfg.env_task_fn else None
    given: set[int] = set()  # the ids of objects a member already holds: every other member gets a copy
    members = []
    for _ in range(cfg.num_members):
        callbacks = [_own(make_callback(spec), given, f"callbacks[{i}]") for i, spec in enumerate(cfg.callbacks)]
        fn = task_fn if task_fn is None or _keeps_nothing(task_fn) else _own(task_fn, given, "env_task_fn")
        members.append(CurriculumParts(make_task_sampler(env, cfg, levels, start_task), callbacks, fn))
    return RunStart(
        levels=levels,
        start_task=start_task,
        histogram=histogram(env, members[0].sampler),  # every member's sampler has the same space
        heldout=None if cfg.heldout is None else cfg.heldout.batch(env, base=start_task),
        members=members,
    )


def _own(obj, given: set[int], where: str):
    """`obj` for the first member that takes it; a copy for every later one, so that members
    never share an object that may keep state (a callback instance, a callable object)."""
    if id(obj) not in given:
        given.add(id(obj))
        return obj
    try:
        return copy.deepcopy(obj)
    except Exception as exc:
        what = "callable object" if where == "env_task_fn" else "callback"
        instead = (
            "give a function instead"
            if where == "env_task_fn"
            else "give its class, or {class: 'module:Class', kwargs: {...}}, instead"
        )
        raise ConfigError(
            f"{where} ({type(_unwrapped(obj)).__name__}): each member of a population gets its own copy of a {what}, "
            f"and this one cannot be copied ({type(exc).__name__}: {exc}); {instead}"
        ) from None


def _keeps_nothing(task_fn: Callable) -> bool:
    """A function (through any partial) keeps nothing between calls: members share it."""
    return isinstance(_unwrapped(task_fn), (types.FunctionType, types.BuiltinFunctionType, type))


def _unwrapped(fn):
    while isinstance(fn, functools.partial):
        fn = fn.func
    return fn


def refuse_tasks_without_fields(env, cfg: Config) -> None:
    """An env whose task has no fields (MinAtar, Jumanji, a user's env with `task_spec = {}`)
    trains on its one task; what would choose among tasks has nothing to choose from."""
    if env.task_spec:
        return
    asked = [
        name
        for name, given in (
            ("heldout", cfg.heldout is not None),
            ("task_sampler", cfg.task_sampler is not None),
            ("env.levels", cfg.env.levels is not None),
        )
        if given
    ]
    if asked:
        raise ConfigError(
            f"{asked[0]}: {env.name} has no task fields (its task is empty), so there are no tasks to "
            f"{'hold out' if asked[0] == 'heldout' else 'choose from'}; leave {' and '.join(asked)} out"
        )


def start_task_of(env, cfg: Config) -> tuple[Levels | None, dict]:
    """The env's levels (if any) and the task training starts on, checked against the env."""
    if cfg.env.levels is None:
        return None, env.validate_task(cfg.env.task)
    levels = Levels(env, cfg.env.levels, base=cfg.env.task, overflow=cfg.env.level_overflow)
    return levels, levels.task(cfg.env.level)


def make_task_sampler(env, cfg: Config, levels: Levels | None, start_task: dict) -> TaskSampler | None:
    """A member's task sampler, its space checked against the env (None without one)."""
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


def named_metrics(parts: CurriculumParts) -> dict[str, str]:
    """Where a member's curriculum names a result key to watch: who names it -> the key."""
    named = {}
    task_fn = parts.env_task_fn
    if isinstance(task_fn, functools.partial) and isinstance(task_fn.keywords.get("metric"), str):
        named[f"env_task_fn {callable_name(task_fn)}"] = task_fn.keywords["metric"]
    for i, cb in enumerate(parts.callbacks):
        if isinstance(getattr(cb, "metric", None), str):
            named[f"callbacks[{i}] ({type(cb).__name__})"] = cb.metric
    return named
