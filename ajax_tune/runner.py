"""`Runner`: one compiled training loop, its state and its curriculum, as a plain object.

It is what RLlib's Algorithm is to a function trainable: `train()` runs one call and returns a
result of plain floats; `get_task` / `set_task` steer the envs; `save` / `restore` write and read
checkpoints; `reconfigure` takes a new config, keeping the compiled program when only traced
settings changed. `AjaxTrainable` is a thin Tune shell over it, and it works without Ray.

It composes: `build` makes the parts, the loop trains, `evaluation.summarize` reduces a call
to floats, the `Curriculum` moves the tasks on through a `TaskControl`, `checkpoint` writes.

With a `population` in its config, one runner trains every member as lanes of its one program
(`population.py`): results carry each member's keys and the best member's as the headline;
`evaluate` and `policy` take a member (by default the best one).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from typing import Any

import jax
import numpy as np

from ajax_tune import checkpoint, population
from ajax_tune.build import build_loop, build_run, named_metrics
from ajax_tune.checkpoint import CheckpointError, nonfinite_leaves, refuse_nonfinite, trial_salt
from ajax_tune.config import Config
from ajax_tune.curriculum import CurriculumError
from ajax_tune.envs.base import task_to_jax
from ajax_tune.evaluation import Health, HostPolicy, make_evaluate
from ajax_tune.fields import ConfigError
from ajax_tune.keys import EVAL_KEYS, START_KEYS, START_PREFIX, TRAIN_KEYS
from ajax_tune.results import check_metric, keys_of, member_keys_of
from ajax_tune.samplers.stats import EnvStats
from ajax_tune.task_control import EnvContext, TaskControl

__all__ = ["CurriculumError", "DivergedError", "Runner"]

logger = logging.getLogger(__name__)


class DivergedError(RuntimeError):
    """Training stopped being finite and `train.on_nonfinite` is "error"."""


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
        imports and the result keys it names. Returns the parsed config."""
        cfg = Config.from_dict(config)
        env, loop = build_loop(cfg)
        parts = build_run(cfg, env)
        named = named_metrics(parts)
        if named:
            keys = keys_of(cfg, loop, parts)
            for who, metric in named.items():
                check_metric(metric, keys, who)
        if cfg.population is not None:
            check_metric(cfg.population.metric, member_keys_of(cfg, loop, parts), "population.select.metric")
        return cfg

    def _build_loop(self) -> None:
        self.env, self.loop = build_loop(self.config)
        self._evaluators: dict[int, Any] = {}

    def _start_run(self) -> None:
        """A fresh run of the current config: new state, new curriculum, counters at zero."""
        cfg = self.config
        parts = build_run(cfg, self.env)  # before compiling anything
        pop = cfg.population
        if pop is not None and pop.metric not in (*EVAL_KEYS, *START_KEYS, *TRAIN_KEYS):
            check_metric(pop.metric, member_keys_of(cfg, self.loop, parts), "population.select.metric")
        self.heldout = parts.heldout
        self.control = TaskControl(self.loop, parts.levels, owner=self)
        env_ctx = EnvContext(
            env_config={"name": cfg.env.name, **cfg.env.kwargs},
            num_envs=self.loop.venv.num_envs,
            num_seeds=cfg.train.num_seeds,
            trial_id=self.trial_id,
            worker_index=0,
            member=0,
        )
        self.curriculum = parts.curriculum(self.control, env_ctx)
        state = self.loop.init(seed=[m.train.seed for m in cfg.members], task=parts.start_task)
        if self.heldout is not None:
            state = self.loop.set_heldout(state, self.heldout)
        self.state = self._set_hparams(state)
        self.iteration = 0
        self.best_member = 0
        self.curriculum.setup()

    def _set_hparams(self, state):
        """Each member's traced settings and horizon on its lanes."""
        members = self.config.members
        return self.loop.set_hparams(state, [m.agent for m in members], [m.train.total_timesteps for m in members])

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
        self.state, out = self.loop.train(self.state)
        out = jax.device_get(out)
        elapsed = time.perf_counter() - start
        self.iteration += 1
        budget = self.config.train.timesteps_per_iteration
        result = self._summarize(out)
        result.update(
            {
                "timesteps_this_iter": budget,
                "env_steps": self.loop.timestep(self.state),
                "useful_env_steps": self.loop.useful_steps(self.state),
                "perf/call_s": elapsed,
                "perf/env_steps_per_s": budget * self.loop.num_lanes / elapsed,
                "perf/compilations": self.retired_compilations + self.loop.compilations,
            }
        )
        health = Health.of(out)
        diverged = health.diverged and self._on_nonfinite(result, health)
        self.curriculum.after_call(result, EnvStats.from_call(out.stats), diverged=diverged)
        horizon = max(m.train.total_timesteps for m in self.config.members)
        result["done"] = result["env_steps"] >= horizon or (diverged and self.config.train.on_nonfinite == "stop")
        return result

    def _summarize(self, out) -> dict[str, float]:
        """The call's result: the run's, or with a population each member's and the headline."""
        pop = self.config.population
        if pop is None:
            return self.loop.summarize(out)
        results = [self.loop.summarize(part) for part in population.split(out, pop.size)]
        result, self.best_member = population.reduce(pop, results)
        return result

    def _on_nonfinite(self, result: dict, health: Health) -> bool:
        """A diverged call: its scores become the worst there is (so ASHA stops it and PBT never
        copies it), the curriculum does not move on them, and `train.on_nonfinite` says whether
        the trial stops (the default), raises, or goes on. Checkpoints refuse the state anyway."""
        at, part = health.first()
        message = (
            f"trial {self.trial_name or self.trial_id or '(no Tune trial)'} diverged in iteration "
            f"{self.iteration}: {part} stopped being finite at env step {int(at)}; "
            f"its scores read as -inf and no checkpoint of this state is written, so the last good "
            f"one stays (train.on_nonfinite: {self.config.train.on_nonfinite})"
        )
        for key in result:  # the start evaluation scored the untrained policy, not this state: it stays
            if (
                key.startswith(("eval/", "train/episode_return"))
                and ("return" in key or "success" in key)
                and not key.startswith(START_PREFIX)
            ):
                result[key] = -math.inf
        if self.config.train.on_nonfinite == "error":
            raise DivergedError(message)
        logger.warning(message)
        return True

    # -- tasks ---------------------------------------------------------------------------

    def get_task(self, per_env: bool = False) -> dict[str, Any]:
        return self.control.get_task(per_env=per_env)

    def get_level(self, per_env: bool = False) -> int | np.ndarray:
        """The level (with `env.levels`) evaluations run on, or one per env (-1: no level)."""
        return self.control.get_level(per_env=per_env)

    def set_task(self, task: Any, eval_task: Any = None) -> None:
        """Validated before anything changes: a task that does not fit leaves the state as it was.

        With `env.levels`, a level number (or a list of one per env) stands for its task."""
        self.control.set_task(task, eval_task=eval_task)

    # -- checkpoints ---------------------------------------------------------------------

    def save(self, directory, result: Mapping | None = None) -> str:
        """Write a checkpoint; `result` (the last one reported, as Tune saw it) is kept in its
        metadata, so a checkpoint found on disk says where its run stood without Tune's records.

        A state whose agent holds a non-finite number is refused (CheckpointError), so that a
        diverged run never replaces its last good checkpoint, whatever is kept."""
        bad = nonfinite_leaves(self.state.agent)
        if bad:
            raise CheckpointError(
                f"not saving {directory}: the state of iteration {self.iteration} is not finite "
                f"({', '.join(bad)}); the last good checkpoint stays as it was"
            )
        self.curriculum.on_checkpoint_save(directory)
        extra = {
            "trial_id": self.trial_id,
            "iteration": self.iteration,
            "best_member": self.best_member,
            **self.curriculum.get_state(),
            "config": self.config.to_dict(),
            "result": {k: v for k, v in (result or {}).items() if isinstance(v, (int, float, str, bool))},
        }
        return str(self.loop.save(directory, self.state, extra=extra))

    def restore(self, directory) -> None:
        """Continue from a checkpoint. One saved by another trial (a PBT exploit) gets this
        trial's random stream; one saved by this trial continues bit-exactly. Traced settings
        come from the current config, so mutated hyperparameters apply from here on."""
        state, metadata = self.loop.restore(directory)
        refuse_nonfinite(directory, state.agent)
        extra = metadata.get("extra", {})
        self.curriculum.set_state(extra, directory)
        source = extra.get("trial_id", "")
        if source and self.trial_id and source != self.trial_id:
            salt = trial_salt(self.trial_id)
            state = self.loop.reseed(state, salt)
            self.curriculum.reseed(salt)
        if self.heldout is not None:  # the held-out set of the config in force
            state = self.loop.set_heldout(state, self.heldout)
        self.state = self._set_hparams(state)
        self.iteration = int(extra.get("iteration", 0))
        self.best_member = int(extra.get("best_member", 0))
        self.curriculum.on_checkpoint_load(directory)

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
            refuse_nonfinite(directory, state.agent)
            runner.state, runner.iteration = state, int(extra.get("iteration", 0))
            runner.best_member = int(extra.get("best_member", 0))
        return runner

    # -- the policy ----------------------------------------------------------------------

    def member_lanes(self, member: int | None = None) -> slice:
        """The lanes of `member` (default: the best member of the last call, or the one a
        checkpoint recorded); an index outside the population is refused in one line."""
        size = self.loop.num_members
        member = self.best_member if member is None else member
        if isinstance(member, bool) or not isinstance(member, (int, np.integer)) or not 0 <= member < size:
            raise ConfigError(f"member must be in [0, {size - 1}] (the population has {size} member(s)), got {member!r}")
        return self.loop.member_lanes(int(member))

    def evaluate(
        self, episodes: int = 10, task: Mapping[str, Any] | None = None, seed: int = 0, member: int | None = None
    ) -> dict:
        """Deterministic-policy episodes of every seed of `member` (default: the best) on `task`
        (default: the current one)."""
        lanes = self.member_lanes(member)
        task = self.env.validate_task(task or {}, current=self.get_task())
        if episodes not in self._evaluators:
            self._evaluators[episodes] = jax.jit(
                jax.vmap(make_evaluate(self.loop.agent, self.env, episodes, per_episode=True), in_axes=(0, None, None))
            )
        agent_state = jax.tree.map(lambda x: x[lanes], self.state.agent)
        out = jax.device_get(self._evaluators[episodes](agent_state, task_to_jax(task), jax.random.PRNGKey(seed)))
        return {"task": {k: v.tolist() for k, v in task.items()}, **{k.split("/")[-1]: np.asarray(v) for k, v in out.items()}}

    def policy(self, member: int | None = None) -> HostPolicy:
        """A numpy policy `obs -> action` of seed 0 of `member` (default: the best),
        deterministic, for use outside JAX; call its `reset()` when an episode starts (a
        recurrent agent's policy keeps its carry between calls)."""
        lane = self.member_lanes(member).start
        return HostPolicy(self.loop.agent, jax.tree.map(lambda x: x[lane], self.state.agent))
