"""`TrainLoop`: one trial's training program and what a host does around it.

It composes the parts of this package: the pure program (`program.make_program`, or
`offline.make_offline_program` with a dataset), the program under jit (`compiled.Compiled`),
the host-side editing of a state's lanes (`lanes.Lanes`) and checkpoints of its state. It is
built once per configuration and knows nothing about Ray.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune import checkpoint
from ajax_tune.envs.base import task_to_jax
from ajax_tune.envs.wrappers import EpisodeWrapper, VecEnv
from ajax_tune.errors import ConfigError
from ajax_tune.fields import static_values
from ajax_tune.loop.compiled import Compiled
from ajax_tune.loop.config import LoopConfig
from ajax_tune.loop.lanes import Lanes
from ajax_tune.loop.offline import DatasetInput, make_offline_program
from ajax_tune.loop.program import make_program
from ajax_tune.loop.rollout import make_evaluate
from ajax_tune.loop.state import CallOutput, TrainState
from ajax_tune.loop.summary import summarize
from ajax_tune.loop.ued import AGENT_UPDATES
from ajax_tune.results import keys as K
from ajax_tune.ued import LevelSettings, Needs, RunShape, make_level_algorithm, resolve_algorithm, row_keys


class TrainLoop:
    """`train(state)` runs one call (`timesteps_per_iteration` env steps per lane, or gradient
    updates with a dataset) on the state donated; N calls of T steps give the same parameters as
    one call of N*T steps. `init`, `set_task`, `set_hparams`, `save` and `restore` make and edit
    the states it takes."""

    def __init__(
        self,
        env,
        agent,
        config: LoopConfig,
        num_heldout: int = 0,
        num_members: int = 1,
        learning_signal: bool = True,
        dataset: DatasetInput | None = None,
        heldout_names: Sequence[str] | None = None,
        ued: LevelSettings | None = None,
        heldout_cvar: float | None = None,
    ):
        """`heldout_cvar`: the share of held-out tasks whose CVaR results report (`heldout.cvar`)."""
        self.env = env if isinstance(env, EpisodeWrapper) else EpisodeWrapper(env)
        self.agent, self.config, self.dataset = agent, config, dataset
        self.learning_signal = bool(learning_signal)
        # the held-out tasks, by the names results give them (None: by index, never spelt out here)
        self.heldout_names = None if heldout_names is None else tuple(str(name) for name in heldout_names)
        if self.heldout_names is not None and num_heldout and num_heldout != len(self.heldout_names):
            raise ConfigError(f"num_heldout ({num_heldout}) and heldout_names ({len(self.heldout_names)}) disagree")
        self.num_heldout = int(num_heldout) if self.heldout_names is None else len(self.heldout_names)
        self.heldout_cvar = heldout_cvar if self.num_heldout else None
        rescore = self.heldout_cvar is not None
        if int(num_members) < 1:
            raise ConfigError(f"a population needs at least one member, got {num_members}")
        self.num_members = int(num_members)
        lanes = self.num_members * config.num_seeds
        self.ued = ued
        #: what the level algorithm asks of the program (None without one): the memory check reads it
        self.level_needs: Needs | None = None if ued is None else resolve_algorithm(ued.algorithm).needs(ued)
        if dataset is None:
            self.program = make_program(
                self.env,
                agent,
                config,
                num_heldout=self.num_heldout,
                num_lanes=lanes,
                learning_signal=self.learning_signal,
                level_algorithm=None if ued is None else self._level_algorithm(ued),
                rescore_heldout=rescore,
            )
        else:
            if ued is not None:
                raise ConfigError("ued decides the levels of envs the agent trains in; an offline run (train.dataset) steps none")
            self.program = make_offline_program(
                self.env, agent, config, num_heldout=self.num_heldout, num_lanes=lanes, rescore_heldout=rescore
            )
        self.venv = VecEnv(self.env, self.program.num_envs)
        self.lanes = Lanes(self.venv, agent, self.num_members, config.num_seeds, self.num_heldout)
        self.compiled = Compiled(self.program, self.lanes.count, config.devices)

    def _level_algorithm(self, settings: LevelSettings):
        """The trial's level algorithm, checked against the env, the agent and the run's shape."""
        agent, config = self.agent, self.config
        steps_per_update = agent.num_envs * agent.unroll_length
        run = RunShape(
            num_envs=agent.num_envs,
            unroll_length=agent.unroll_length,
            max_episode_steps=self.env.max_episode_steps,
            updates=max(1, config.total_timesteps // steps_per_update),
            updates_per_call=max(1, config.timesteps_per_iteration // steps_per_update),
            max_level_edits=getattr(self.env, "max_level_edits", None),
        )
        evaluate = lambda episodes: make_evaluate(agent, self.env, episodes, per_episode=True, deterministic=False)  # noqa: E731
        return make_level_algorithm(self.env, agent, settings, run, evaluate)

    # -- identity ------------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        """The static settings that give a saved state its meaning (not how a run proceeds:
        budgets and evaluation settings may change between a save and a restore)."""
        env = self.env
        return {
            "env": env.name,
            "observation_space": repr(env.observation_space),
            "action_space": repr(env.action_space),
            "max_episode_steps": env.max_episode_steps,
            "truncation_penalty": env.truncation_penalty,
            "task_fields": sorted(env.task_spec),
            "agent": type(self.agent).__name__,
            **{f"agent.{k}": v for k, v in static_values(self.agent.config).items()},
            "num_seeds": self.config.num_seeds,
            "num_heldout": self.num_heldout,
            **({"num_members": self.num_members} if self.num_members > 1 else {}),
            **({"loop": "offline"} if self.dataset is not None else {}),
            **({"ued": static_values(self.ued)} if self.ued is not None else {}),
        }

    @property
    def recurrent(self) -> bool:
        return self.program.recurrent

    @property
    def steps_per_update(self) -> int:
        return self.program.steps_per_update

    @property
    def updates_per_call(self) -> int:
        return self.program.updates_per_call

    @property
    def num_lanes(self) -> int:
        """Lanes of the state's leading axis: members x seeds."""
        return self.lanes.count

    def member_lanes(self, member: int) -> slice:
        """The lanes of one member (its seeds)."""
        return self.lanes.of_member(member)

    @property
    def compilations(self) -> int:
        return self.compiled.compilations

    @property
    def device(self):
        return self.compiled.device

    def timestep(self, state: TrainState) -> int:
        return int(np.asarray(state.iteration).reshape(-1)[0]) * self.steps_per_update

    def useful_steps(self, state: TrainState) -> float:
        """Unmasked env steps per lane since the run began (the mean over lanes)."""
        return float(np.mean(np.asarray(state.useful_steps, np.float64)))

    def progress(self, state: TrainState, elapsed: float) -> dict[str, float]:
        """Where the run stands after a call of `elapsed` seconds: env steps, or, for an
        offline run, gradient updates (its env steps stay 0: it steps no env to train)."""
        done = self.config.timesteps_per_iteration * self.num_lanes
        if self.dataset is None:
            progress = dict(zip(K.PROGRESS_KEYS, (self.timestep(state), self.useful_steps(state), done / elapsed), strict=True))
            if self.ued is not None:
                scoring = float(np.mean(np.asarray(state.ued.scoring_steps, np.float64)))
                progress.update(zip(K.UED_PROGRESS_KEYS, (scoring,), strict=True))
            return progress
        return {
            **dict(zip(K.PROGRESS_KEYS, (0, 0.0, 0.0), strict=True)),
            **dict(zip(K.OFFLINE_KEYS, (self.timestep(state), done / elapsed), strict=True)),
        }

    def progress_keys(self) -> tuple[str, ...]:
        """The keys `progress` writes."""
        if self.dataset is not None:
            return (*K.PROGRESS_KEYS, *K.OFFLINE_KEYS)
        return (*K.PROGRESS_KEYS, *(K.UED_PROGRESS_KEYS if self.ued is not None else ()))

    def summarize(self, out: CallOutput) -> dict[str, float]:
        latest, summed = self.agent.latest_metrics, ()
        if self.ued is not None:
            latest, summed = (*latest, *row_keys(self.ued)[1]), (AGENT_UPDATES,)
        return summarize(out, latest=latest, summed=summed, heldout_names=self.heldout_names, cvar_share=self.heldout_cvar)

    # -- states --------------------------------------------------------------------------

    def init(self, seed: int | Sequence[int] | None = None, task: Mapping | None = None) -> TrainState:
        """A fresh state. `seed` (one for every member, or one per member) gives each member the
        seeds a single run with that seed would have, so equal members train equal lanes."""
        init = self.compiled.init  # first: it refuses devices this process cannot give, before anything compiles
        seed = self.config.seed if seed is None else seed
        seeds = list(seed) if isinstance(seed, Sequence) else [seed] * self.num_members
        keys = self.lanes.keys(seeds)
        task = self.env.validate_task(task or {})
        return init(keys, task_to_jax(task))

    def abstract_state(self) -> TrainState:
        """The state's shapes and dtypes (`jax.ShapeDtypeStruct` leaves), traced from `init`
        without compiling, allocating or starting JAX's backends: what a checkpoint must fit, and
        what `call` can be traced with to learn the shapes of a call's output."""
        keys = jax.ShapeDtypeStruct((self.num_lanes, 2), jnp.uint32)
        task = {
            k: jax.ShapeDtypeStruct(v.shape, jax.dtypes.canonicalize_dtype(v.dtype))
            for k, v in self.env.validate_task({}).items()
        }
        return jax.eval_shape(self.program.init, keys, task)

    def set_task(
        self, state: TrainState, task: Mapping, eval_task: Mapping | None = None, lanes: slice | None = None
    ) -> TrainState:
        return self.lanes.set_task(state, task, eval_task=eval_task, lanes=lanes)

    def get_task(self, state: TrainState, per_env: bool = False, lanes: slice | None = None) -> dict[str, np.ndarray]:
        return self.lanes.get_task(state, per_env=per_env, lanes=lanes)

    def set_heldout(self, state: TrainState, tasks: Mapping) -> TrainState:
        return self.lanes.set_heldout(state, tasks)

    def set_hparams(
        self, state: TrainState, agent_config=None, total_timesteps: int | Sequence[int] | None = None, ued_config=None
    ) -> TrainState:
        return self.lanes.set_hparams(state, agent_config, total_timesteps, ued_config)

    def reseed(self, state: TrainState, salt: int) -> TrainState:
        return self.lanes.reseed(state, salt)

    def reconfigure(self, config: LoopConfig, agent_config, dataset: DatasetInput | None = None) -> None:
        """Run under another `train` section and agent config (offline, another dataset of the
        same shape) in this program: what a run reads changes (its seeds, horizon and traced
        settings' defaults, the dataset's rows). A static setting the program was built with is
        refused: it needs a new loop."""
        ours, theirs = static_values(self.config), static_values(config)
        differs = [f"train.{k}" for k, v in ours.items() if theirs[k] != v]
        if type(agent_config) is not type(self.agent.config):
            differs.append("agent")
        else:
            ours, theirs = static_values(self.agent.config), static_values(agent_config)
            differs += [f"agent.{k}" for k, v in ours.items() if theirs[k] != v]
        if dataset is not None and (self.dataset is None or not self.dataset.fits(dataset)):
            differs.append("train.dataset's shape")
        if differs:
            raise ConfigError(f"reconfigure changes {', '.join(differs)}, static in this program: build a new loop for it")
        self.config, self.agent.config = config, agent_config
        if dataset is not None:
            self.dataset = dataset

    def save(self, directory, state: TrainState, extra: dict | None = None):
        """Write a checkpoint of `state` (complete on return); `extra` is JSON metadata."""
        if self.dataset is not None:
            extra = {**(extra or {}), **self.dataset.checkpoint_extra()}
        return checkpoint.save(directory, state, settings=self.settings(), timestep=self.timestep(state), extra=extra)

    def restore(self, directory) -> tuple[TrainState, dict]:
        """A state saved by `save` with the same settings, and its metadata."""
        if self.dataset is not None:
            self.dataset.check_restore(directory)
        return checkpoint.restore(directory, self.abstract_state(), settings=self.settings())

    # -- training ------------------------------------------------------------------------

    def inputs(self) -> tuple:
        """What a call takes besides the state: the dataset, once, for an offline program."""
        return () if self.dataset is None else (self.dataset.data(self.compiled.input_placement),)

    def train(self, state: TrainState) -> tuple[TrainState, CallOutput]:
        """One call, `state` donated. Returns the new state and the call's output: per-update
        rows, per-env statistics and the agent's health (`CallOutput`)."""
        return self.compiled.train(state, *self.inputs())

    @property
    def call(self):
        """The pure function `train` compiles (not jitted, not donated): trace it with
        `jax.eval_shape(loop.call, loop.abstract_state(), *loop.inputs())` to learn a call's output."""
        return self.program.call
