"""`Runner`: a trial as a plain object, which trains its members one call at a time and saves,
restores and reconfigures them.

It is what RLlib's Algorithm is to a function trainable: `train()` runs one call and returns a
result of plain floats; `get_task` / `set_task` steer the envs; `save` / `restore` write and read
checkpoints; `reconfigure` takes a new config, keeping the compiled program when only traced
settings changed. `AjaxTrainable` is a thin Tune shell over it, and it works without Ray.

It composes: `build` makes the program and the start of a run, the loop trains, the `Members`
(`members.py`) hold each member's config and curriculum, `population/` reduces a population's
results and decides PBT's exploits and halving's survivors, `checkpoint` writes. A trial of one
config is one member; with a `population`, results carry each member's keys and the best member's
as the headline, and `evaluate` and `policy` take a member (by default the best one).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune import versions
from ajax_tune.build import RunStart, build_loop, build_run, load_dataset, named_metrics, program_settings
from ajax_tune.checkpoint import CheckpointError, TrialRecord, nonfinite_leaves, refuse_nonfinite, trial_salt
from ajax_tune.config import Config
from ajax_tune.curriculum import CurriculumError
from ajax_tune.envs.base import task_to_jax
from ajax_tune.errors import ConfigError
from ajax_tune.expected_keys import check_metric, keys_of, member_keys_of, member_own_keys
from ajax_tune.loop.rollout import make_evaluate
from ajax_tune.loop.summary import Health
from ajax_tune.members import Members
from ajax_tune.policy import HostPolicy, episode_statistics
from ajax_tune.population import results as population
from ajax_tune.population.pbt import lane_gather
from ajax_tune.population.prune import lane_index, ranked_survivors, take_lanes
from ajax_tune.results import keys as K

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
        self.config = Config.from_dict(config)  # as given: what checkpoints record and `reconfigure` replaces
        self.retired_compilations = 0  # of loops this runner replaced (reconfigure, a prune)
        self.loop = None
        self._train_members(Members(self.config, survivors))
        self._start_run()

    @staticmethod
    def check(config: Mapping | Config) -> Config:
        """Everything a runner would reject, found without compiling: the config's values, the
        env and its kwargs, the starting task, the budget against the unroll, the memory the
        state and a call need against the trial's device (`memory.check_state_fits`), the
        curriculum's imports and the result keys it names. Returns the parsed config."""
        versions.check_once(stacklevel=2)
        cfg = Config.from_dict(config)
        env, loop = build_loop(cfg)
        start = build_run(cfg, env, loop)
        named = named_metrics(start.members[0])  # every member's curriculum is built from the same specs
        own = cfg.population is not None  # in a population each member's curriculum sees its member's result
        if named or own:  # the keys are traced (not compiled) only when something names one
            keys = member_keys_of(cfg, loop, start) if own else keys_of(cfg, loop, start)
            for who, metric in named.items():
                check_metric(metric, keys, f"{who} (each member's curriculum sees its own member's keys)" if own else who)
            if own:
                check_metric(cfg.population.metric, keys, "population.select.metric")
        return cfg

    # -- the program and a run -----------------------------------------------------------

    def _train_members(self, members: Members, built: tuple | None = None) -> None:
        """Train `members` from here on, on a program built for their lanes (`built`, the env and
        loop `build_loop` made for them, or built here; the one it replaces retired). Their state
        and curricula are the caller's to set."""
        env, loop = built or build_loop(members.config)  # a failure leaves everything as it was
        if self.loop is not None:
            self.retired_compilations += self.loop.compilations
        self.members, self.env, self.loop = members, env, loop
        self._evaluators: dict[int, Any] = {}
        self._gather = lane_gather()  # PBT's exploit, compiled on first use

    def _start_run(self, start: RunStart | None = None) -> None:
        """A fresh run of the members (from `start`, the parts `build_run` checked for them, or
        built here): new state, new curricula, counters at zero."""
        cfg = self.members.config
        start = start or build_run(cfg, self.env, self.loop)  # before compiling anything
        pop = cfg.population
        if pop is not None and pop.metric not in (*K.EVAL_KEYS, *K.START_KEYS, *K.TRAIN_KEYS):
            check_metric(pop.metric, member_keys_of(cfg, self.loop, start), "population.select.metric")
        self.heldout = start.heldout
        self.members.start(start, self.loop, owner=self, gather=self._gather)
        self._member_own_keys = sorted(member_own_keys(self.loop, start)) if pop is not None else []
        state = self.loop.init(seed=[m.train.seed for m in cfg.members], task=start.start_task)
        if self.heldout is not None:
            state = self.loop.set_heldout(state, self.heldout)
        self.state = self._set_hparams(state)
        self.iteration = 0
        self.best_member = 0
        self.members.setup()

    def _set_hparams(self, state):
        """Each member's traced settings and horizon on its lanes."""
        members = self.members
        return self.loop.set_hparams(
            state, [m.agent for m in members], [m.train.total_timesteps for m in members], [m.ued for m in members]
        )

    @property
    def curricula(self) -> tuple:
        """Each member's curriculum (one in a trial of one config)."""
        return self.members.curricula

    @property
    def curriculum(self):
        """The curriculum of the member tasks and evaluations default to: the best one."""
        return self.curricula[self._member(None)]

    def reconfigure(self, config: Mapping | Config) -> bool:
        """Start a new run under `config`; rebuild the program only if a static setting changed
        (another dataset of the same shape runs in the same program). Returns whether it rebuilt."""
        new = Config.from_dict(config)
        rebuild = program_settings(new) != program_settings(self.members.config)  # a pruned population's differ too
        dataset = None
        if not rebuild and new.train.dataset != self.members.config.train.dataset:  # a run's input: only its shape is static
            dataset = load_dataset(new, self.env, self.loop.agent)
            rebuild = not self.loop.dataset.fits(dataset)
        # every check (the new program's memory included) before anything of the run is replaced
        members = Members(new)
        if rebuild:
            env, loop = build_loop(new)
            start = build_run(new, env, loop)
            self._train_members(members, (env, loop))
        else:
            start = build_run(new, self.env, self.loop)
            self.loop.reconfigure(new.train, new.agent, dataset=dataset)
            self.members = members
        self.config = new
        self._start_run(start)
        return rebuild

    # -- training ------------------------------------------------------------------------

    def train(self) -> dict[str, float]:
        """One call of `train.timesteps_per_iteration` env steps per seed, then each member's curriculum."""
        start = time.perf_counter()
        self.state, out = self.loop.train(self.state)
        out = jax.device_get(out)
        elapsed = time.perf_counter() - start
        self.iteration += 1
        members, pop = self.members, self.members.population
        outs = population.split(out, len(members))
        results = [self.loop.summarize(part) for part in outs]  # each member's, as a single run of it
        around = {
            "timesteps_this_iter": self.members.config.train.timesteps_per_iteration,
            **self.loop.progress(self.state, elapsed),
            "perf/call_s": elapsed,
            "perf/compilations": self.retired_compilations + self.loop.compilations,
        }
        for member_result in results:
            member_result.update(around)
        if pop is None:
            result = results[0]
        else:
            result, self.best_member = population.reduce(pop, results, members)
        health = Health.of(out)
        diverged = health.diverged and self._on_nonfinite(result, health)
        members.after_call(results, outs, diverged, result)
        if pop is not None:
            population.member_results(pop, result, results, self._member_own_keys, self.best_member)
        if members.pbt is not None:
            self._exploit(result, results)
        if pop is not None and pop.prune is not None:
            self._prune(result, results)
        horizon = max(m.train.total_timesteps for m in self.members)
        on_nonfinite = self.members.config.train.on_nonfinite
        result["done"] = self.loop.timestep(self.state) >= horizon or (diverged and on_nonfinite == "stop")
        return result

    def _exploit(self, result: dict, results: list[dict]) -> None:
        """PBT's round when one is due; `result` then says what each member follows next."""
        if self.members.pbt.due(self.iteration):
            self.state, pairs = self.members.exploit(self.state, results)
            if pairs:
                self.state = self._set_hparams(self.state)
        result.update(self.members.pbt.metrics())

    def _prune(self, result: dict, results: list[dict]) -> None:
        """Successive halving's rung, when this call ends one: the best members go on alone, on
        a program rebuilt for their lanes, each exactly where it was; `result` (this call's,
        numbered as its members were) says who each member is and how many rungs have passed."""
        members = self.members
        pop = members.population
        for k, origin in enumerate(members.origin):
            result[K.member_key(k, K.ORIGIN[0])] = float(origin)
        keep = pop.prune.keep(pop.size)
        if keep < pop.size and self.iteration >= pop.prune.rung_end(members.rungs):
            chosen = ranked_survivors(results, pop.metric, pop.mode, keep)
            state = take_lanes(self.state, jnp.asarray(lane_index(chosen, members.config.train.num_seeds)))
            self._train_members(members.kept(chosen))
            self.members.bind(self.loop, owner=self)
            self.state = self._set_hparams(state)
            self.best_member = chosen.index(self.best_member) if self.best_member in chosen else 0
        result[K.PRUNE_KEYS[0]] = float(self.members.rungs)

    def _on_nonfinite(self, result: dict, health: Health) -> bool:
        """A diverged call: its scores become the worst there is (so ASHA stops it and PBT never
        copies it), the curricula do not move on them, and `train.on_nonfinite` says whether the
        trial stops (the default), raises, or goes on. Checkpoints refuse the state anyway."""
        at, part = health.first()
        on_nonfinite = self.members.config.train.on_nonfinite
        message = (
            f"trial {self.trial_name or self.trial_id or '(no Tune trial)'} diverged in iteration "
            f"{self.iteration}: {part} stopped being finite at env step {int(at)}; "
            f"its scores read as -inf and no checkpoint of this state is written, so the last good "
            f"one stays (train.on_nonfinite: {on_nonfinite})"
        )
        for key in result:  # the start evaluation scored the untrained policy, not this state: it stays
            if (
                key.startswith(("eval/", "train/episode_return"))
                and ("return" in key or "success" in key)
                and not key.startswith(K.START_PREFIX)
            ):
                result[key] = -math.inf
        if on_nonfinite == "error":
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
        record = TrialRecord(
            config=self.config.to_dict(),  # as given: a pruned population's survivors are the record's
            trial_id=self.trial_id,
            iteration=self.iteration,
            best_member=self.best_member,
            result=dict(result or {}),
            **self.members.record(),
        )
        return str(self.loop.save(directory, self.state, extra=record.to_extra()))

    def restore(self, directory, *, curricula: bool = True) -> None:
        """Continue from a checkpoint. One saved by another trial (a PBT exploit) gets this
        trial's random stream; one saved by this trial continues bit-exactly. Traced settings
        come from the current config, so mutated hyperparameters apply from here on. A pruned
        population's checkpoint brings back its survivors' lanes (the program rebuilt for them).
        Without `curricula` the checkpoint's curricula are left out (a runner built without them,
        as `from_checkpoint` builds one to evaluate)."""
        record = TrialRecord.read(directory)
        try:
            wanted = Members(self.config, record.survivors)
        except ConfigError as exc:
            raise CheckpointError(f"{directory} holds a pruned population that does not fit this config: {exc}") from None
        if wanted.origin != self.members.origin:  # a fresh run of the members it holds, then their states
            self._train_members(wanted)
            self._start_run()
        state, _ = self.loop.restore(directory)
        refuse_nonfinite(directory, state.agent)
        self.members.restore(record, directory, curricula=curricula)
        if record.trial_id and self.trial_id and record.trial_id != self.trial_id:
            salt = trial_salt(self.trial_id)
            state = self.loop.reseed(state, salt)
            self.members.reseed(salt)
        if self.heldout is not None:  # the held-out set of the config in force
            state = self.loop.set_heldout(state, self.heldout)
        self.state = self._set_hparams(state)
        self.iteration, self.best_member = record.iteration, record.best_member
        if curricula:
            for curriculum in self.curricula:
                curriculum.on_checkpoint_load(directory)

    @classmethod
    def from_checkpoint(cls, directory, *, curriculum: bool = False) -> Runner:
        """A runner built from the config a checkpoint records, then restored from it.

        Without `curriculum` the env_task_fn, callbacks and task sampler are left out (they may
        not import where the checkpoint is evaluated); the task stays what the checkpoint holds.
        """
        record = TrialRecord.read(directory)
        if record.config is None:
            raise CheckpointError(f"{directory} does not record its config; it was not written by a Runner")
        config = record.config if curriculum else {**record.config, "env_task_fn": None, "callbacks": [], "task_sampler": None}
        runner = cls(config, trial_id=record.trial_id, survivors=record.survivors)
        runner.restore(directory, curricula=curriculum)
        return runner

    # -- the policy ----------------------------------------------------------------------

    def member_lanes(self, member: int | None = None) -> slice:
        """The lanes of `member` (default: the best member of the last call, or the one a
        checkpoint recorded); an index outside the population is refused in one line."""
        return self.loop.member_lanes(self._member(member))

    def _member(self, member: int | None) -> int:
        size = len(self.members)
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
