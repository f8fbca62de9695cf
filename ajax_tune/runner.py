"""`Runner`: one compiled training loop, its state and its curriculum, as a plain object.

It is what RLlib's Algorithm is to a function trainable: `train()` runs one call and returns a
result of plain floats; `get_task` / `set_task` steer the envs; `save` / `restore` write and read
checkpoints; `reconfigure` takes a new config, keeping the compiled program when only traced
settings changed. `AjaxTrainable` is a thin Tune shell over it, and it works without Ray.

It composes: `build` makes the parts, the loop trains, `loop.summary.summarize` reduces a call
to floats, the `Curriculum` moves the tasks on through a `TaskControl`, `checkpoint` writes.

With a `population` in its config, one runner trains every member as lanes of its one program
(`ajax_tune/population/`): results carry each member's keys and the best member's as the headline;
`evaluate` and `policy` take a member (by default the best one). Each member has its own
curriculum (`curricula[k]`) over its own lanes, fed its own results and per-env statistics.
With `population.pbt`, calls end with an exploit every `interval` calls (`population/pbt.py`):
the lanes move on the device, each recipient's curriculum takes its donor's state, and the
lineage goes into results and checkpoints. With `population.prune`, rungs end with the worse
members stopped (`population/prune.py`): the program is rebuilt for the survivors' lanes, which
go on exactly where they were, and checkpoints record who survived.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune import checkpoint, versions
from ajax_tune.build import build_loop, build_run, load_dataset, named_metrics
from ajax_tune.checkpoint import CheckpointError, nonfinite_leaves, refuse_nonfinite, trial_salt
from ajax_tune.config import Config
from ajax_tune.curriculum import CurriculumError
from ajax_tune.curriculum.task_control import EnvContext, TaskControl
from ajax_tune.envs.base import task_to_jax
from ajax_tune.errors import TaskError
from ajax_tune.fields import ConfigError
from ajax_tune.loop.rollout import make_evaluate
from ajax_tune.loop.summary import Health
from ajax_tune.policy import HostPolicy, episode_statistics
from ajax_tune.population import pbt as population_pbt
from ajax_tune.population import prune as population_prune
from ajax_tune.population import results as population
from ajax_tune.results import keys as K
from ajax_tune.results.keys import EVAL_KEYS, START_KEYS, START_PREFIX, TRAIN_KEYS
from ajax_tune.results.predict import check_metric, keys_of, member_keys_of, member_own_keys
from ajax_tune.samplers.stats import EnvStats

__all__ = ["CurriculumError", "DivergedError", "Runner"]

logger = logging.getLogger(__name__)


class DivergedError(RuntimeError):
    """Training stopped being finite and `train.on_nonfinite` is "error"."""


class Runner:
    def __init__(
        self,
        config: Mapping | Config,
        *,
        trial_id: str = "",
        trial_name: str = "",
        survivors: Sequence[int] | None = None,
    ):
        """`survivors`: the members of the config's population this runner trains (those a
        pruned population kept, as its checkpoints record them); default every member."""
        versions.check_once(stacklevel=2)  # the first runner of a process: installed versions in range?
        self.trial_id, self.trial_name = trial_id, trial_name
        self.asked = Config.from_dict(config)  # as given; `config` is what trains now (a pruned population's survivors)
        self.retired_compilations = 0  # of loops this runner replaced (reconfigure, a prune)
        self.survivors, self.rungs = self._check_survivors(survivors), 0
        self.config = self._live_config()
        self._build_loop()
        self._start_run()

    # -- building ------------------------------------------------------------------------

    @staticmethod
    def check(config: Mapping | Config) -> Config:
        """Everything a runner would reject, found without compiling: the config's values, the
        env and its kwargs, the starting task, the budget against the unroll, the curriculum's
        imports and the result keys it names. Returns the parsed config."""
        versions.check_once(stacklevel=2)
        cfg = Config.from_dict(config)
        env, loop = build_loop(cfg)
        parts = build_run(cfg, env)
        named = named_metrics(parts)
        if named:
            # in a population each member's curriculum sees its member's result, not the trial's
            own = cfg.population is not None
            keys = member_keys_of(cfg, loop, parts) if own else keys_of(cfg, loop, parts)
            for who, metric in named.items():
                check_metric(metric, keys, f"{who} (each member's curriculum sees its own member's keys)" if own else who)
        if cfg.population is not None:
            check_metric(cfg.population.metric, member_keys_of(cfg, loop, parts), "population.select.metric")
        return cfg

    def _check_survivors(self, survivors: Sequence[int] | None) -> tuple[int, ...] | None:
        """`survivors` checked against the population as given: None (every member) or a
        non-empty, increasing list of its members."""
        if survivors is None:
            return None
        size = self.asked.num_members
        chosen = tuple(survivors)
        if (
            self.asked.population is None
            or not chosen
            or not all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) and 0 <= k < size for k in chosen)
            or list(chosen) != sorted(set(chosen))
        ):
            raise ConfigError(
                f"survivors must be increasing member indices in [0, {size - 1}] of the config's population, got {survivors!r}"
            )
        chosen = tuple(int(k) for k in chosen)
        return None if len(chosen) == size else chosen

    def _live_config(self) -> Config:
        """The config as given, its population restricted to the survivors."""
        if self.survivors is None:
            return self.asked
        return dataclasses.replace(self.asked, population=self.asked.population.restricted(self.survivors))

    @property
    def origin(self) -> tuple[int, ...]:
        """Each member's index in the population as configured."""
        return self.survivors if self.survivors is not None else tuple(range(self.asked.num_members))

    def _build_loop(self) -> None:
        self.env, self.loop = build_loop(self.config)
        self._evaluators: dict[int, Any] = {}
        self._gather = population_pbt.lane_gather()  # PBT's exploit, compiled on first use

    def _use_survivors(self, survivors: Sequence[int] | None) -> None:
        """Train `survivors` of the population as given from here on: the config and the
        program for their lanes (the old program's compilations retired). State and curricula
        are the caller's to set."""
        self.survivors = self._check_survivors(survivors)
        old_loop, self.config = self.loop, self._live_config()
        self._build_loop()
        self.retired_compilations += old_loop.compilations

    def _start_run(self) -> None:
        """A fresh run of the current config: new state, new curriculum, counters at zero."""
        cfg = self.config
        parts = build_run(cfg, self.env)  # before compiling anything
        pop = cfg.population
        if pop is not None and pop.metric not in (*EVAL_KEYS, *START_KEYS, *TRAIN_KEYS):
            check_metric(pop.metric, member_keys_of(cfg, self.loop, parts), "population.select.metric")
        self.heldout = parts.heldout
        controls, contexts = self._controls(parts.levels)
        self.control = controls[0]  # member 0's (every lane's in a trial of one)
        self.curricula = parts.curricula(controls, contexts)
        self._member_own_keys = sorted(member_own_keys(self.loop, parts)) if pop is not None else []
        self.pbt = None if pop is None or pop.pbt is None else population_pbt.InTrialPBT(cfg, self._gather)
        state = self.loop.init(seed=[m.train.seed for m in cfg.members], task=parts.start_task)
        if self.heldout is not None:
            state = self.loop.set_heldout(state, self.heldout)
        self.state = self._set_hparams(state)
        self.iteration = 0
        self.best_member = 0
        for curriculum in self.curricula:
            curriculum.setup()

    def _controls(self, levels) -> tuple[list[TaskControl], list[EnvContext]]:
        """Each member's control over its lanes of the current loop, and its env context."""
        cfg, size = self.config, self.config.num_members
        controls = [
            TaskControl(self.loop, levels, owner=self, member=k, lanes=None if size == 1 else self.loop.member_lanes(k))
            for k in range(size)
        ]
        contexts = [
            EnvContext(
                env_config={"name": cfg.env.name, **cfg.env.kwargs},
                num_envs=self.loop.venv.num_envs,
                num_seeds=cfg.train.num_seeds,
                trial_id=self.trial_id,
                worker_index=0,
                member=k,
            )
            for k in range(size)
        ]
        return controls, contexts

    @property
    def curriculum(self):
        """The curriculum of member 0: the trial's only one, unless it holds a population."""
        return self.curricula[0]

    @property
    def members(self) -> tuple:
        """The config each member follows now: the population's, or as PBT explored them."""
        return tuple(self.pbt.members) if self.pbt is not None else self.config.members

    def _set_hparams(self, state):
        """Each member's traced settings and horizon on its lanes."""
        members = self.members
        return self.loop.set_hparams(
            state, [m.agent for m in members], [m.train.total_timesteps for m in members], [m.ued for m in members]
        )

    def reconfigure(self, config: Mapping | Config) -> bool:
        """Start a new run under `config`; rebuild the loop only if a static setting changed.

        Returns whether the program was rebuilt.
        """
        new = Config.from_dict(config)
        rebuild = new.static_settings() != self.config.static_settings()  # a pruned population's differ too
        dataset = None
        if not rebuild and new.train.dataset != self.config.train.dataset:  # a run's input: only its shape is static
            dataset = load_dataset(new, self.env, self.loop.agent)
            rebuild = not self.loop.dataset.fits(dataset)
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
            if dataset is not None:
                self.loop.dataset = dataset
        self.asked, self.survivors, self.rungs = new, None, 0
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
        pop = self.config.population
        outs = [out] if pop is None else population.split(out, pop.size)
        results = [self.loop.summarize(part) for part in outs]  # each member's, as a single run of it
        around = {
            "timesteps_this_iter": budget,
            **self.loop.progress(self.state, elapsed),
            "perf/call_s": elapsed,
            "perf/compilations": self.retired_compilations + self.loop.compilations,
        }
        for member_result in results:
            member_result.update(around)
        if pop is None:
            result = results[0]
        else:
            result, self.best_member = population.reduce(pop, results, self.members)
        health = Health.of(out)
        diverged = health.diverged and self._on_nonfinite(result, health)
        for k, (curriculum, part, member_result) in enumerate(zip(self.curricula, outs, results, strict=True)):
            try:
                curriculum.after_call(member_result, EnvStats.from_call(part.stats), diverged=diverged)
            except CurriculumError as exc:  # a member's failure, with the trial's result
                if pop is None:
                    raise
                raise CurriculumError(f"population member {k}: {exc}", result) from exc.__cause__
            except TaskError as exc:
                if pop is None:
                    raise
                raise TaskError(f"population member {k}: {exc}") from None
        if pop is not None:
            population.member_results(pop, result, results, self._member_own_keys, self.best_member)
        if self.pbt is not None:
            self._exploit(result, results)
        if pop is not None and pop.prune is not None:
            self._prune(result, results)
        horizon = max(m.train.total_timesteps for m in self.members)
        result["done"] = self.loop.timestep(self.state) >= horizon or (diverged and self.config.train.on_nonfinite == "stop")
        return result

    def _exploit(self, result: dict, results: list[dict]) -> None:
        """PBT's round when one is due, on each member's result: the lanes of the worst members
        take their donors' on the device, then their explored settings, and their curricula take
        their donors' state; `result` then says what each member follows next."""
        if self.pbt.due(self.iteration):
            self.state, pairs = self.pbt.exploit(self.state, results, self.config.train.num_seeds)
            if pairs:
                self.state = self._set_hparams(self.state)
            for recipient, donor in pairs:
                state = copy.deepcopy(self.curricula[donor].get_state())  # nothing shared with the donor's
                self.curricula[recipient].set_state(state, f"member {donor}'s curriculum")
                self.curricula[recipient].reseed(self.pbt.curriculum_salt(recipient))
        result.update(self.pbt.metrics())

    def _prune(self, result: dict, results: list[dict]) -> None:
        """Successive halving's rung, when this call ends one: the best members go on alone, on
        a program rebuilt for their lanes, each exactly where it was; `result` (this call's,
        numbered as its members were) says who each member is and how many rungs have passed."""
        pop = self.config.population
        for k, origin in enumerate(self.origin):
            result[K.member_key(k, K.ORIGIN[0])] = float(origin)
        keep = pop.prune.keep(pop.size)
        if keep < pop.size and self.iteration >= pop.prune.rung_end(self.rungs):
            chosen = population_prune.ranked_survivors(results, pop.metric, pop.mode, keep)
            lanes = population_prune.lane_index(chosen, self.config.train.num_seeds)
            state = population_prune.take_lanes(self.state, jnp.asarray(lanes))
            curricula, levels = [self.curricula[k] for k in chosen], self.control.levels
            self._use_survivors([self.origin[k] for k in chosen])
            controls, contexts = self._controls(levels)
            for curriculum, control, context in zip(curricula, controls, contexts, strict=True):
                curriculum.rebind(control, context)
            self.curricula, self.control = tuple(curricula), controls[0]
            self.state = self._set_hparams(state)
            self.best_member = chosen.index(self.best_member) if self.best_member in chosen else 0
            self.rungs += 1
        result[K.PRUNE_KEYS[0]] = float(self.rungs)

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

    def get_task(self, per_env: bool = False, member: int | None = None) -> dict[str, Any]:
        """The task evaluations run on, or each env's, of `member` (default: the best)."""
        return self.curricula[self._member(member)].control.get_task(per_env=per_env)

    def get_level(self, per_env: bool = False, member: int | None = None) -> int | np.ndarray:
        """The level (with `env.levels`) evaluations run on, or one per env (-1: no level), of
        `member` (default: the best)."""
        return self.curricula[self._member(member)].control.get_level(per_env=per_env)

    def set_task(self, task: Any, eval_task: Any = None, member: int | None = None) -> None:
        """Validated before anything changes: a task that does not fit leaves the state as it was.

        With `env.levels`, a level number (or a list of one per env) stands for its task. In a
        population it sets every member's envs, or only `member`'s; each member's curriculum
        hears of its own change."""
        targets = self.curricula if member is None else [self.curricula[self._member(member)]]
        for curriculum in targets:
            curriculum.control.set_task(task, eval_task=eval_task)

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
        for curriculum in self.curricula:
            curriculum.on_checkpoint_save(directory)
        states = [curriculum.get_state() for curriculum in self.curricula]
        extra = {
            "trial_id": self.trial_id,
            "iteration": self.iteration,
            "best_member": self.best_member,
            **states[0],  # where a trial of one has always kept its curriculum
            **({"curricula": states} if len(states) > 1 else {}),
            **({"pbt": self.pbt.get_state()} if self.pbt is not None else {}),
            **({"prune": {"survivors": list(self.origin), "rungs": self.rungs}} if self._prunes else {}),
            "config": self.asked.to_dict(),  # a pruned population's survivors are in "prune"
            "result": {k: v for k, v in (result or {}).items() if isinstance(v, (int, float, str, bool))},
        }
        return str(self.loop.save(directory, self.state, extra=extra))

    def restore(self, directory) -> None:
        """Continue from a checkpoint. One saved by another trial (a PBT exploit) gets this
        trial's random stream; one saved by this trial continues bit-exactly. Traced settings
        come from the current config, so mutated hyperparameters apply from here on. A pruned
        population's checkpoint brings back its survivors' lanes (the program rebuilt for them)."""
        self._restore_survivors(directory)
        state, metadata = self.loop.restore(directory)
        refuse_nonfinite(directory, state.agent)
        extra = metadata.get("extra", {})
        # a population's curricula, one per member (written before they existed: all empty, as the top level's)
        states = extra.get("curricula") or [extra] * len(self.curricula)
        if len(states) != len(self.curricula):
            raise CheckpointError(
                f"{directory} holds the curricula of {len(states)} member(s); this population has {len(self.curricula)}"
            )
        for curriculum, saved in zip(self.curricula, states):
            curriculum.set_state(saved, directory)
        if self.pbt is not None:  # the population restored whole, lineage and explored settings too
            self.pbt.set_state(extra.get("pbt"), directory)
        source = extra.get("trial_id", "")
        if source and self.trial_id and source != self.trial_id:
            salt = trial_salt(self.trial_id)
            state = self.loop.reseed(state, salt)
            for curriculum in self.curricula:
                curriculum.reseed(salt)
            if self.pbt is not None:
                self.pbt.reseed(salt)
        if self.heldout is not None:  # the held-out set of the config in force
            state = self.loop.set_heldout(state, self.heldout)
        self.state = self._set_hparams(state)
        self.rungs = int((extra.get("prune") or {}).get("rungs", 0))
        self.iteration = int(extra.get("iteration", 0))
        self.best_member = int(extra.get("best_member", 0))
        for curriculum in self.curricula:
            curriculum.on_checkpoint_load(directory)

    @property
    def _prunes(self) -> bool:
        return self.asked.population is not None and self.asked.population.prune is not None

    def _restore_survivors(self, directory) -> None:
        """Rebuild for the members a checkpoint holds, when they are not the ones training now
        (a fresh run: its curricula get their states from the checkpoint next)."""
        saved = (checkpoint.read_metadata(directory).get("extra", {}).get("prune") or {}).get("survivors")
        try:
            wanted = self._check_survivors(saved)
        except ConfigError as exc:
            raise CheckpointError(f"{directory} holds a pruned population that does not fit this config: {exc}") from None
        if wanted != self.survivors:
            self._use_survivors(wanted)
            self._start_run()

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
        prune = extra.get("prune") or {}
        runner = cls(config, trial_id=extra.get("trial_id", ""), survivors=prune.get("survivors"))
        if curriculum:
            runner.restore(directory)
        else:
            state, _ = runner.loop.restore(directory)
            refuse_nonfinite(directory, state.agent)
            runner.state, runner.iteration = state, int(extra.get("iteration", 0))
            runner.rungs = int(prune.get("rungs", 0))
            runner.best_member = int(extra.get("best_member", 0))
            if runner.pbt is not None:
                runner.pbt.set_state(extra.get("pbt"), directory)
        return runner

    # -- the policy ----------------------------------------------------------------------

    def member_lanes(self, member: int | None = None) -> slice:
        """The lanes of `member` (default: the best member of the last call, or the one a
        checkpoint recorded); an index outside the population is refused in one line."""
        return self.loop.member_lanes(self._member(member))

    def _member(self, member: int | None) -> int:
        size = self.loop.num_members
        member = self.best_member if member is None else member
        if isinstance(member, bool) or not isinstance(member, (int, np.integer)) or not 0 <= member < size:
            raise ConfigError(f"member must be in [0, {size - 1}] (the population has {size} member(s)), got {member!r}")
        return int(member)

    def evaluate(
        self, episodes: int = 10, task: Mapping[str, Any] | None = None, seed: int = 0, member: int | None = None
    ) -> dict:
        """Deterministic-policy episodes of every seed of `member` (default: the best) on `task`
        (default: the current one)."""
        lanes = self.member_lanes(member)
        task = self.env.validate_task(task or {}, current=self.get_task(member=member))
        if episodes not in self._evaluators:
            self._evaluators[episodes] = jax.jit(
                jax.vmap(make_evaluate(self.loop.agent, self.env, episodes, per_episode=True), in_axes=(0, None, None))
            )
        agent_state = jax.tree.map(lambda x: x[lanes], self.state.agent)
        out = jax.device_get(self._evaluators[episodes](agent_state, task_to_jax(task), jax.random.PRNGKey(seed)))
        return {"task": {k: v.tolist() for k, v in task.items()}, **{k.split("/")[-1]: np.asarray(v) for k, v in out.items()}}

    def evaluation_statistics(
        self, episodes: int = 10, task: Mapping[str, Any] | None = None, seed: int = 0, member: int | None = None
    ) -> dict:
        """`evaluate`'s episodes reduced to what a person reads: the task, the return's mean,
        spread and range over every seed's episodes, each seed's mean, the mean length and, where
        the env reports it, the success rate."""
        out = self.evaluate(episodes, task=task, seed=seed, member=member)
        success = out["success"] if self.env.has_success else None
        return {"task": out["task"], **episode_statistics(out["return"], out["length"], success)}

    def policy(self, member: int | None = None) -> HostPolicy:
        """A numpy policy `obs -> action` of seed 0 of `member` (default: the best),
        deterministic, for use outside JAX; call its `reset()` when an episode starts (a
        recurrent agent's policy keeps its carry between calls)."""
        lane = self.member_lanes(member).start
        return HostPolicy(self.loop.agent, jax.tree.map(lambda x: x[lane], self.state.agent))
