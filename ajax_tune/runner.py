"""`Runner`: one compiled training loop, its state and its curriculum, as a plain object.

It is what RLlib's Algorithm is to a function trainable: `train()` runs one call and returns a
result of plain floats; `get_task` / `set_task` steer the envs; `save` / `restore` write and read
checkpoints; `reconfigure` takes a new config, keeping the compiled program when only traced
settings changed. `AjaxTrainable` is a thin Tune shell over it, and it works without Ray.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
import zlib
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from ajax_tune import checkpoint
from ajax_tune.build import build_loop, build_run, callable_name, named_metrics
from ajax_tune.checkpoint import CheckpointError
from ajax_tune.config import Config
from ajax_tune.curriculum import EnvContext, TaskSettableEnv
from ajax_tune.envs.base import flatten_task, task_to_jax
from ajax_tune.errors import TaskError
from ajax_tune.evaluation import make_evaluate
from ajax_tune.results import check_metric, keys_of
from ajax_tune.samplers.stats import TASK_PREFIX

logger = logging.getLogger(__name__)


class DivergedError(RuntimeError):
    """Training stopped being finite and `train.on_nonfinite` is "error"."""


class CurriculumError(RuntimeError):
    """An env_task_fn or callback failed after an iteration had trained. `result` holds that
    iteration's result, which was not reported."""

    def __init__(self, message: str, result: dict | None = None):
        super().__init__(message)
        self.result = result


class Runner:
    def __init__(self, config: Mapping | Config, *, trial_id: str = "", trial_name: str = ""):
        self.trial_id, self.trial_name = trial_id, trial_name
        self.config = Config.from_dict(config)
        self.retired_compilations = 0  # of loops this runner replaced (reconfigure)
        self._build_loop()
        self._start_run()

    # -- building ------------------------------------------------------------------------

    @staticmethod
    def check(config: Mapping | Config) -> Config:
        """Everything a runner would reject, found without compiling: the config's values, the
        env and its kwargs, the starting task, the budget against the unroll, the curriculum's
        imports and the metrics it names. Returns the parsed config."""
        cfg = Config.from_dict(config)
        env, loop = build_loop(cfg)
        parts = build_run(cfg, env)
        named = named_metrics(parts)
        if named:
            keys = keys_of(cfg, loop, parts)
            for who, metric in named.items():
                check_metric(metric, keys, who)
        return cfg

    def _build_loop(self) -> None:
        self.env, self.loop = build_loop(self.config)
        self._evaluators: dict[int, Any] = {}

    def _start_run(self) -> None:
        """A fresh run of the current config: new state, new curriculum, counters at zero."""
        cfg = self.config
        parts = build_run(cfg, self.env)  # before compiling anything
        self.env_task_fn, self.callbacks = parts.env_task_fn, parts.callbacks
        self.levels, start_task, self.sampler = parts.levels, parts.start_task, parts.sampler
        self.heldout, self.histogram = parts.heldout, parts.histogram
        self.env_ctx = EnvContext(
            env_config={"name": cfg.env.name, **cfg.env.kwargs}, num_envs=self.loop.venv.num_envs,
            num_seeds=cfg.train.num_seeds, trial_id=self.trial_id, worker_index=0,
        )
        self.task_settable_env = TaskSettableEnv(self)
        self.env_stats: dict[str, np.ndarray] = {}
        state = self.loop.init(seed=cfg.train.seed, task=start_task)
        if self.heldout is not None:
            state = self.loop.set_heldout(state, self.heldout)
        self.state = self.loop.set_hparams(state, cfg.agent, cfg.train.total_timesteps)
        self.iteration = 0
        if self.sampler is not None:
            self._sample_tasks()
        for cb in self.callbacks:
            _hook(cb, "on_setup", self)

    def reconfigure(self, config: Mapping | Config) -> bool:
        """Start a new run under `config`; rebuild the loop only if a static setting changed.

        Returns whether the program was rebuilt.
        """
        new = Config.from_dict(config)
        rebuild = new.static_settings() != self.config.static_settings()
        if rebuild:
            old, old_loop, self.config = self.config, self.loop, new
            try:
                self._build_loop()
            except Exception:
                self.config = old
                raise
            self.retired_compilations += old_loop.compilations
        else:
            self.config = new
            self.loop.config = new.train  # same static fields; seed and horizon are read at init
            self.loop.agent.config = new.agent
        self._start_run()
        return rebuild

    # -- training ------------------------------------------------------------------------

    def train(self) -> dict[str, float]:
        """One call of `train.timesteps_per_iteration` env steps per seed, then the curriculum."""
        start = time.perf_counter()
        self.state, rows = self.loop.train(self.state)
        rows = jax.device_get(rows)
        elapsed = time.perf_counter() - start
        self.iteration += 1
        budget = self.config.train.timesteps_per_iteration
        result = self.loop.summarize(rows)
        self.env_stats = {k: v for k, v in rows.items() if k.startswith("per_env/")}
        result.update({
            "timesteps_this_iter": budget,
            "env_steps": self.loop.timestep(self.state),
            "useful_env_steps": self.loop.useful_steps(self.state),
            "perf/call_s": elapsed,
            "perf/env_steps_per_s": budget * self.config.train.num_seeds / elapsed,
            "perf/compilations": self.retired_compilations + self.loop.compilations,
        })
        diverged = result.get("train/nonfinite", 0.0) > 0 and self._on_nonfinite(result)
        if self.sampler is not None and not diverged:
            self.sampler.update(self.env_stats)
        if self.env_task_fn is not None and not diverged:
            who = f"env_task_fn {callable_name(self.env_task_fn)}"
            with self._curriculum_step(who, result, "returned"):
                new_task = self.env_task_fn(result, self.task_settable_env, self.env_ctx)
                if new_task is not None:
                    self.set_task(new_task)
        for i, cb in enumerate(() if diverged else self.callbacks):
            with self._curriculum_step(f"callbacks[{i}] ({type(cb).__name__})", result, "set"):
                _hook(cb, "on_train_result", self, result)
        if self.sampler is not None:
            if not diverged:
                self._sample_tasks()
            result.update(self.sampler.metrics())
        if self.histogram is not None:  # the tasks this call trained on
            result.update(self.histogram({k[len(TASK_PREFIX):]: v for k, v in self.env_stats.items()
                                          if k.startswith(TASK_PREFIX)}))
        if self.levels is not None:
            level = self.levels.level_of(self.get_task())
            result["curriculum/level"] = math.nan if level is None else float(level)
        for cb in self.callbacks:
            result.update(_call(cb, "metrics", {}))
        result.update(flatten_task(self.get_task(), prefix="curriculum/next_task/"))
        result["done"] = result["env_steps"] >= self.config.train.total_timesteps or (
            diverged and self.config.train.on_nonfinite == "stop")
        return result

    def _on_nonfinite(self, result: dict) -> bool:
        """A diverged call: its scores become the worst there is (so ASHA stops it and PBT never
        copies it), the curriculum does not move on them, and `train.on_nonfinite` says whether
        the trial stops (the default), raises, or goes on. Checkpoints refuse the state anyway."""
        first = min(((at, key[len("health/"):-len("_nonfinite_at")]) for key, at in result.items()
                     if key.startswith("health/") and key.endswith("_nonfinite_at") and at >= 0), default=(-1, "?"))
        message = (f"trial {self.trial_name or self.trial_id or '(no Tune trial)'} diverged in iteration "
                   f"{self.iteration}: {first[1]} stopped being finite at env step {int(first[0])}; "
                   f"its scores read as -inf and no checkpoint of this state is written, so the last good "
                   f"one stays (train.on_nonfinite: {self.config.train.on_nonfinite})")
        for key in result:
            if key.startswith(("eval/", "train/episode_return")) and ("return" in key or "success" in key):
                result[key] = -math.inf
        if self.config.train.on_nonfinite == "error":
            raise DivergedError(message)
        logger.warning(message)
        return True

    @contextlib.contextmanager
    def _curriculum_step(self, who: str, result: dict, verb: str):
        """Errors of a curriculum name it and the iteration, and say that the iteration had
        trained: the runner holds its state, but its result is not reported."""
        where = (f"iteration {self.iteration} (trained to env_steps {result['env_steps']}; the runner keeps "
                 f"that state and the previous task, but the result is not reported, and a Tune trial "
                 f"retried after this error restarts from its last checkpoint)")
        try:
            yield
        except TaskError as exc:
            raise TaskError(f"{who} {verb} a task that does not fit after {where}: {exc}") from None
        except Exception as exc:
            raise CurriculumError(f"{who} raised {type(exc).__name__}: {exc} after {where}", result) from exc

    # -- tasks ---------------------------------------------------------------------------

    def get_task(self, per_env: bool = False) -> dict[str, Any]:
        task = self.loop.get_task(self.state, per_env=per_env)
        return {k: (v.item() if v.ndim == 0 else v) for k, v in task.items()}

    def get_level(self, per_env: bool = False) -> int | np.ndarray:
        """The level (with `env.levels`) evaluations run on, or one per env (-1: no level)."""
        if self.levels is None:
            raise TaskError("get_level needs env.levels: a list of tasks to number")
        if per_env:
            tasks = self.get_task(per_env=True)
            found = [self.levels.level_of({k: v[i] for k, v in tasks.items()}) for i in range(self.loop.venv.num_envs)]
            return np.array([-1 if level is None else level for level in found])
        task = self.get_task()
        level = self.levels.level_of(task)
        if level is None:
            raise TaskError(f"the current task {flatten_task(task)} is none of env.levels (it was set as a mapping)")
        return level

    def set_task(self, task: Any, eval_task: Any = None) -> None:
        """Validated before anything changes: a task that does not fit leaves the state as it was.

        With `env.levels`, a level number (or a list of one per env) stands for its task."""
        task = self._as_task(task)
        eval_task = None if eval_task is None else self._as_task(eval_task)
        old = self.get_task()
        self.state = self.loop.set_task(self.state, task, eval_task=eval_task)
        new = self.get_task()
        if any(not np.array_equal(old[k], new[k]) for k in new):
            for cb in self.callbacks:
                _hook(cb, "on_task_change", self, old, new)

    def _sample_tasks(self) -> None:
        """The sampler's tasks for the next call, one per env. Evaluations stay on the task they
        ran on (the held-out set is what measures the distribution); fields outside the
        sampler's space keep what the env runs, so an env_task_fn may steer those."""
        tasks = self.sampler.sample(self.loop.venv.num_envs)
        self.set_task(tasks, eval_task=self.get_task())

    def _as_task(self, task: Any) -> Mapping[str, Any]:
        if isinstance(task, Mapping):
            return task
        if self.levels is None:
            raise TaskError(f"a task must be a mapping of field name to value, got {task!r}; level numbers "
                            "need env.levels (a list of tasks to number)")
        if isinstance(task, (list, tuple, np.ndarray)) and np.ndim(task) == 1:
            if len(task) != self.loop.venv.num_envs:
                raise TaskError(f"a list of levels needs one per env ({self.loop.venv.num_envs}), got {len(task)}")
            return self.levels.batch(task)
        return self.levels.task(task)

    # -- checkpoints ---------------------------------------------------------------------

    def save(self, directory, result: Mapping | None = None) -> str:
        """Write a checkpoint; `result` (the last one reported, as Tune saw it) is kept in its
        metadata, so a checkpoint found on disk says where its run stood without Tune's records.

        A state whose agent holds a non-finite number is refused (CheckpointError), so that a
        diverged run never replaces its last good checkpoint, whatever is kept."""
        bad = nonfinite_leaves(self.state.agent)
        if bad:
            raise CheckpointError(f"not saving {directory}: the state of iteration {self.iteration} is not finite "
                                  f"({', '.join(bad)}); the last good checkpoint stays as it was")
        for cb in self.callbacks:
            _hook(cb, "on_checkpoint_save", self, str(directory))
        extra = {
            "trial_id": self.trial_id,
            "iteration": self.iteration,
            "callbacks": [_call(cb, "get_state", {}) for cb in self.callbacks],
            "sampler": None if self.sampler is None else self.sampler.get_state(),
            "config": self.config.to_dict(),
            "result": {k: v for k, v in (result or {}).items() if isinstance(v, (int, float, str, bool))},
        }
        return str(self.loop.save(directory, self.state, extra=extra))

    def restore(self, directory) -> None:
        """Continue from a checkpoint. One saved by another trial (a PBT exploit) gets this
        trial's random stream; one saved by this trial continues bit-exactly. Traced settings
        come from the current config, so mutated hyperparameters apply from here on."""
        state, metadata = self.loop.restore(directory)
        _refuse_nonfinite(directory, state)
        extra = metadata.get("extra", {})
        saved_states = extra.get("callbacks", [])
        if len(saved_states) != len(self.callbacks):
            raise CheckpointError(
                f"{directory} holds the state of {len(saved_states)} callback(s); this config has "
                f"{len(self.callbacks)}")
        sampler_state = extra.get("sampler")
        if (sampler_state is None) != (self.sampler is None):
            raise CheckpointError(
                f"{directory} {'holds no' if sampler_state is None else 'holds a'} task sampler's state; this "
                f"config has {'one' if self.sampler is not None else 'none'}")
        if self.sampler is not None:
            self.sampler.set_state(sampler_state)
        source = extra.get("trial_id", "")
        if source and self.trial_id and source != self.trial_id:
            salt = zlib.crc32(self.trial_id.encode()) & 0x7FFFFFFF
            state = state.replace(key=jax.vmap(lambda k: jax.random.fold_in(k, salt))(state.key))
            if self.sampler is not None:
                self.sampler.reseed(salt)
        if self.heldout is not None:  # the held-out set of the config in force
            state = self.loop.set_heldout(state, self.heldout)
        self.state = self.loop.set_hparams(state, self.config.agent, self.config.train.total_timesteps)
        self.iteration = int(extra.get("iteration", 0))
        for cb, saved in zip(self.callbacks, saved_states):
            if hasattr(cb, "set_state"):
                cb.set_state(saved)
            _hook(cb, "on_checkpoint_load", self, str(directory))

    @classmethod
    def from_checkpoint(cls, directory, *, curriculum: bool = False) -> Runner:
        """A runner rebuilt from the config a checkpoint records, holding its state.

        Without `curriculum` the env_task_fn and callbacks are left out (they may not import
        where the checkpoint is evaluated); the task stays what the checkpoint holds.
        """
        extra = checkpoint.read_metadata(directory).get("extra", {})
        config = extra.get("config")
        if config is None:
            raise CheckpointError(f"{directory} does not record its config; it was not written by a Runner")
        if not curriculum:
            config = {**config, "env_task_fn": None, "callbacks": [], "task_sampler": None}
        runner = cls(config, trial_id=extra.get("trial_id", ""))
        if curriculum:
            runner.restore(directory)
        else:
            state, _ = runner.loop.restore(directory)
            _refuse_nonfinite(directory, state)
            runner.state, runner.iteration = state, int(extra.get("iteration", 0))
        return runner

    def evaluate(self, episodes: int = 10, task: Mapping[str, Any] | None = None, seed: int = 0) -> dict:
        """Deterministic-policy episodes of every seed on `task` (default: the current one)."""
        task = self.env.validate_task(task or {}, current=self.get_task())
        if episodes not in self._evaluators:
            self._evaluators[episodes] = jax.jit(jax.vmap(
                make_evaluate(self.loop.agent, self.env, episodes, per_episode=True), in_axes=(0, None, None)))
        out = jax.device_get(self._evaluators[episodes](self.state.agent, task_to_jax(task), jax.random.PRNGKey(seed)))
        return {"task": {k: v.tolist() for k, v in task.items()},
                **{k.split("/")[-1]: np.asarray(v) for k, v in out.items()}}

    def evaluate_policy(self):
        """A numpy policy `obs -> action` of seed 0, deterministic, for use outside JAX."""
        agent, agent_state = self.loop.agent, jax.tree.map(lambda x: x[0], self.state.agent)
        act = jax.jit(lambda obs: agent.act(agent_state, obs, jax.random.PRNGKey(0), deterministic=True)[0])
        return lambda obs: np.asarray(act(np.asarray(obs, np.float32)))


def nonfinite_leaves(tree, limit: int = 3) -> list[str]:
    """Paths of the first floating-point leaves of `tree` holding NaN or infinity (on the host)."""
    bad = []
    for path, leaf in jax.tree_util.tree_flatten_with_path(jax.device_get(tree))[0]:
        leaf = np.asarray(leaf)
        if np.issubdtype(leaf.dtype, np.inexact) and not np.isfinite(leaf).all():
            bad.append(jax.tree_util.keystr(path))
            if len(bad) == limit:
                break
    return bad


def _refuse_nonfinite(directory, state) -> None:
    bad = nonfinite_leaves(state.agent)
    if bad:
        raise CheckpointError(f"{directory} holds a non-finite state ({', '.join(bad)}): its run had diverged; "
                              f"use an earlier checkpoint")


def _hook(callback, name: str, *args) -> None:
    method = getattr(callback, name, None)
    if callable(method):
        method(*args)


def _call(callback, name: str, default):
    method = getattr(callback, name, None)
    return method() if callable(method) else default
