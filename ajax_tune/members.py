"""The members a trial trains: each one's config as it follows now, its curriculum over its own
lanes of the program, and who it is in the population as configured.

A trial of one config is a population of one member, handled by the same code. Each member's
curriculum sees only its member's lanes (in a trial of one, every lane) and is fed its member's
result and per-env statistics, as a single run of that config would feed it. PBT's exploits
(`population/pbt.py`) copy a donor's curriculum into its recipient; a prune
(`population/prune.py`) keeps the survivors' curricula as they were, each bound again to its lanes
of the program rebuilt for them. What a checkpoint keeps of the members is a `checkpoint.TrialRecord`.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from ajax_tune.build import RunStart
from ajax_tune.checkpoint import CheckpointError, TrialRecord
from ajax_tune.config import Config
from ajax_tune.curriculum import Curriculum, CurriculumError
from ajax_tune.curriculum.task_control import EnvContext, StateOwner, TaskControl
from ajax_tune.errors import ConfigError, TaskError
from ajax_tune.population.pbt import InTrialPBT
from ajax_tune.samplers.stats import EnvStats


class Members(Sequence):
    """`members[k]` is the config member k follows now (PBT's explored one, or the population's),
    `curricula[k]` its curriculum and `origin[k]` its index in the population as given.
    `config` is the config the program is built for: the one given, its population restricted to
    the survivors of a prune."""

    def __init__(self, given: Config, survivors: Sequence[int] | None = None):
        self.given = given
        self.origin = _check_survivors(given, survivors)
        pruned = len(self.origin) < given.num_members
        self.config = dataclasses.replace(given, population=given.population.restricted(self.origin)) if pruned else given
        self.curricula: tuple[Curriculum, ...] = ()
        self.levels = None
        self.pbt: InTrialPBT | None = None
        self.rungs = 0  # of halving passed

    def __len__(self) -> int:
        return self.config.num_members

    def __getitem__(self, k):
        return (self.pbt.members if self.pbt is not None else self.config.members)[k]

    @property
    def population(self):
        """The population section the program trains, or None for a trial of one config."""
        return self.config.population

    # -- a run -----------------------------------------------------------------------------

    def start(self, start: RunStart, loop, owner: StateOwner, gather) -> None:
        """A fresh run's members: each one's curriculum over its lanes of `loop` (not set up yet:
        `setup` draws the first tasks once the state exists), PBT's lineage as configured."""
        self.levels = start.levels
        self.curricula = tuple(start.curriculum(k, control, ctx) for k, (control, ctx) in enumerate(self._bindings(loop, owner)))
        self.pbt = None if self.population is None or self.population.pbt is None else InTrialPBT(self.config, gather)
        self.rungs = 0

    def setup(self) -> None:
        for curriculum in self.curricula:
            curriculum.setup()

    def bind(self, loop, owner: StateOwner) -> None:
        """Each curriculum, as it is, over its member's lanes of `loop` (a program rebuilt for
        these members)."""
        for curriculum, (control, ctx) in zip(self.curricula, self._bindings(loop, owner), strict=True):
            curriculum.rebind(control, ctx)

    def _bindings(self, loop, owner: StateOwner):
        """Each member's control over its lanes of `loop` (a trial of one: every lane), and its env context."""
        cfg, size = self.config, len(self)
        for k in range(size):
            lanes = None if size == 1 else loop.member_lanes(k)
            control = TaskControl(loop, self.levels, owner=owner, member=k, lanes=lanes)
            ctx = EnvContext(
                env_config={"name": cfg.env.name, **cfg.env.kwargs},
                num_envs=loop.venv.num_envs,
                num_seeds=cfg.train.num_seeds,
                trial_id=owner.trial_id,
                worker_index=0,
                member=k,
            )
            yield control, ctx

    def after_call(self, results: Sequence[dict], outs: Sequence[Any], diverged: bool, trial_result: dict) -> None:
        """Each member's curriculum moves its tasks on from its own result and per-env
        statistics. In a population a member's failure names it, carrying the trial's result."""
        for k, (curriculum, out, result) in enumerate(zip(self.curricula, outs, results, strict=True)):
            try:
                curriculum.after_call(result, EnvStats.from_call(out.stats), diverged=diverged)
            except CurriculumError as exc:
                if self.population is None:
                    raise
                raise CurriculumError(f"population member {k}: {exc}", trial_result) from exc.__cause__
            except TaskError as exc:
                if self.population is None:
                    raise
                raise TaskError(f"population member {k}: {exc}") from None

    # -- PBT and halving -------------------------------------------------------------------

    def exploit(self, state, results: Sequence[dict]) -> tuple[Any, list[tuple[int, int]]]:
        """PBT's round on the call's per-member results: the recipients' lanes take their donors'
        (the old state donated), their settings are explored, and each recipient's curriculum
        takes a copy of its donor's, drawing on from its own random stream."""
        state, pairs = self.pbt.exploit(state, results, self.config.train.num_seeds)
        for recipient, donor in pairs:
            saved = copy.deepcopy(self.curricula[donor].get_state())  # nothing shared with the donor's
            self.curricula[recipient].set_state(saved, f"member {donor}'s curriculum")
            self.curricula[recipient].reseed(self.pbt.curriculum_salt(recipient))
        return state, pairs

    def kept(self, chosen: Sequence[int]) -> Members:
        """The members `chosen` (indices into these, in their order) after a rung of halving:
        their curricula as they are (to be bound to the rebuilt program), one more rung passed."""
        survivors = Members(self.given, [self.origin[k] for k in chosen])
        survivors.curricula = tuple(self.curricula[k] for k in chosen)
        survivors.levels, survivors.rungs = self.levels, self.rungs + 1
        return survivors

    # -- checkpoints -----------------------------------------------------------------------

    def record(self) -> dict:
        """What a `TrialRecord` keeps of the members."""
        halving = self.given.population is not None and self.given.population.prune is not None
        return {
            "curricula": [curriculum.get_state() for curriculum in self.curricula],
            "pbt": None if self.pbt is None else self.pbt.get_state(),
            "survivors": list(self.origin) if halving else None,
            "rungs": self.rungs,
        }

    def restore(self, record: TrialRecord, where: Any, curricula: bool = True) -> None:
        """The members a checkpoint at `where` recorded: each curriculum's state (unless left
        out), PBT's lineage and explored settings, the rungs passed."""
        if curricula:
            states = record.member_curricula(len(self))
            if len(states) != len(self):
                raise CheckpointError(f"{where} holds the curricula of {len(states)} member(s); this trial has {len(self)}")
            for curriculum, saved in zip(self.curricula, states, strict=True):
                curriculum.set_state(saved, where)
        if self.pbt is not None:
            self.pbt.set_state(record.pbt, where)
        self.rungs = record.rungs

    def reseed(self, salt: int) -> None:
        """Another trial continues from these members (a Tune PBT exploit): their own draws."""
        for curriculum in self.curricula:
            curriculum.reseed(salt)
        if self.pbt is not None:
            self.pbt.reseed(salt)


def _check_survivors(given: Config, survivors: Sequence[int] | None) -> tuple[int, ...]:
    """`survivors` checked against the population as given: None (every member) or a
    non-empty, increasing list of its members."""
    size = given.num_members
    if survivors is None:
        return tuple(range(size))
    chosen = tuple(survivors)
    if (
        given.population is None
        or not chosen
        or not all(isinstance(k, (int, np.integer)) and not isinstance(k, bool) and 0 <= k < size for k in chosen)
        or list(chosen) != sorted(set(chosen))
    ):
        raise ConfigError(
            f"survivors must be increasing member indices in [0, {size - 1}] of the config's population, got {survivors!r}"
        )
    return tuple(int(k) for k in chosen)
