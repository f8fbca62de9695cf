"""The resumable, jitted training loop.

`TrainLoop` is built once per configuration. Its `train` function is compiled once, takes the
state donated, runs exactly `timesteps_per_iteration` env steps for each of `num_seeds` seeds
(vmapped) and returns the new state with one row per update. The iteration counter in the state
is absolute, so schedules, evaluation cadence and warm-up continue across calls as if the run
were one long call: N calls of T steps give the same parameters as one call of N*T steps.

The loop owns collection, evaluation, the rows and resuming; the agent only acts and learns.
Nothing here knows about Ray.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

import jax
import jax.numpy as jnp
import numpy as np
from flax import struct

from ajax_tune import checkpoint
from ajax_tune.agents.base import Clock, Rollout
from ajax_tune.envs.base import EnvState, Task, task_to_jax
from ajax_tune.envs.wrappers import EpisodeWrapper, VecEnv
from ajax_tune.evaluation import make_evaluate, no_evaluation
from ajax_tune.fields import ConfigError, init_only, static, static_values, traced, validate


@dataclasses.dataclass(frozen=True)
class LoopConfig:
    total_timesteps: int = traced(1_000_000, ge=1, doc="the run's horizon: schedules span it")
    timesteps_per_iteration: int = static(50_000, ge=1, doc="env steps per seed in one train() call")
    eval_every: int = static(0, ge=0, doc="env steps between evaluations; 0: once per call")
    eval_episodes: int = static(10, ge=1)
    num_seeds: int = static(1, ge=1, doc="independent seeds trained side by side")
    seed: int = init_only(0, ge=0)

    def __post_init__(self):
        validate(self, "train")

    @property
    def eval_interval(self) -> int:
        return self.eval_every or self.timesteps_per_iteration


@struct.dataclass
class TrainState:
    """Everything the next call reads. Leading axis: seeds."""

    agent: Any
    env: EnvState  # [num_envs] per seed
    key: jax.Array  # raw uint32 key data
    iteration: jax.Array  # int32 updates done since the run began
    eval_task: Task  # the task evaluations run on
    horizon: jax.Array  # float32 total_timesteps


class TrainLoop:
    def __init__(self, env, agent, config: LoopConfig):
        self.env = env if isinstance(env, EpisodeWrapper) else EpisodeWrapper(env)
        self.agent = agent
        self.config = config
        self.venv = VecEnv(self.env, agent.num_envs)
        self.steps_per_update = agent.num_envs * agent.unroll_length
        budget = config.timesteps_per_iteration
        if budget % self.steps_per_update:
            lower = budget // self.steps_per_update * self.steps_per_update
            raise ConfigError(
                f"train.timesteps_per_iteration ({budget}) must be a whole number of unrolls of "
                f"num_envs * unroll_length = {agent.num_envs} * {agent.unroll_length} = "
                f"{self.steps_per_update} env steps; nearest: {lower or self.steps_per_update} or "
                f"{lower + self.steps_per_update}"
            )
        self.updates_per_call = budget // self.steps_per_update
        self.device = jax.devices()[0]
        self._evaluate = make_evaluate(agent, self.env, config.eval_episodes)
        self.traces = 0
        # Seeds are initialised one after another (lax.map), not vmapped: XLA's CPU runtime can
        # deadlock in LAPACK's batched QR, which a vmapped orthogonal initialiser produces.
        self._init = jax.jit(lambda keys, task: jax.lax.map(lambda key: self._init_one(key, task), keys))
        self._train = jax.jit(jax.vmap(self._train_one), donate_argnums=0)

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
        }

    @property
    def compilations(self) -> int:
        """Programs compiled for `train` so far: 1 unless something forced a recompilation.

        Counted from jit's own cache, which also sees recompilations without a retrace (an
        argument with another placement); falls back to counting traces."""
        cache_size = getattr(self._train, "_cache_size", None)
        return max(self.traces, cache_size()) if callable(cache_size) else self.traces

    def timestep(self, state: TrainState) -> int:
        return int(np.asarray(state.iteration).reshape(-1)[0]) * self.steps_per_update

    # -- state ---------------------------------------------------------------------------

    def init(self, seed: int | None = None, task: Mapping | None = None) -> TrainState:
        seed = self.config.seed if seed is None else seed
        task = self.env.validate_task(task or {})
        keys = jax.random.split(jax.random.PRNGKey(seed), self.config.num_seeds)
        return self._init(keys, task_to_jax(task))

    def _init_one(self, key, task) -> TrainState:
        k_agent, k_env, k_loop = jax.random.split(key, 3)
        state = TrainState(
            agent=self.agent.init(k_agent),
            env=self.venv.reset(k_env, task),
            key=k_loop,
            iteration=jnp.zeros((), jnp.int32),
            eval_task=task,
            horizon=jnp.asarray(self.config.total_timesteps, jnp.float32),
        )
        # Weak types (from Python scalars such as brax's std_eps) would not survive a
        # checkpoint, and a restored state would then retrace; make every leaf strongly typed.
        return jax.tree.map(lambda x: jax.lax.convert_element_type(x, jnp.result_type(x)), state)

    def set_task(self, state: TrainState, task: Mapping, eval_task: Mapping | None = None) -> TrainState:
        """Apply a task (one for all envs, or one per env) to every seed; validated first.

        Evaluations follow `eval_task`, by default the task itself or, for a per-env batch, the
        task of env 0. Envs whose task changed start a new episode at the next unroll.
        """
        current = self.get_task(state, per_env=True)
        new = self.env.validate_task(task, num_envs=self.venv.num_envs, current=current)
        if eval_task is not None:
            eval_new = self.env.validate_task(eval_task)
        else:
            eval_new = {k: (v[0] if v.ndim > len(self.env.task_spec[k].shape) else v) for k, v in new.items()}
        set_one = jax.vmap(self.venv.set_task, in_axes=(0, None))
        num_seeds = self.config.num_seeds
        return state.replace(
            env=set_one(state.env, task_to_jax(new)),
            eval_task={k: jnp.broadcast_to(jnp.asarray(v), (num_seeds, *v.shape)) for k, v in eval_new.items()},
        )

    def get_task(self, state: TrainState, per_env: bool = False) -> dict[str, np.ndarray]:
        """The evaluation task (or each env's task) of seed 0, as numpy arrays."""
        source = state.env.task if per_env else state.eval_task
        return {k: np.asarray(v[0]) for k, v in source.items()}

    def set_hparams(self, state: TrainState, agent_config=None, total_timesteps: int | None = None) -> TrainState:
        """New traced hyperparameters for the rest of the run, without recompiling."""
        if agent_config is not None:
            if static_values(agent_config) != static_values(self.agent.config):
                raise ConfigError("set_hparams changes only traced fields; static fields differ: rebuild the loop")
            state = state.replace(agent=jax.vmap(self.agent.with_hparams, in_axes=(0, None))(state.agent, agent_config))
        if total_timesteps is not None:
            state = state.replace(horizon=jnp.full_like(state.horizon, float(total_timesteps)))
        return state

    def save(self, directory, state: TrainState, extra: dict | None = None):
        """Write a checkpoint of `state` (complete on return); `extra` is JSON metadata."""
        return checkpoint.save(directory, state, settings=self.settings(), timestep=self.timestep(state), extra=extra)

    def restore(self, directory) -> tuple[TrainState, dict]:
        """A state saved by `save` with the same settings, and its metadata."""
        keys = jax.ShapeDtypeStruct((self.config.num_seeds, 2), jnp.uint32)
        task = task_to_jax(self.env.validate_task({}))
        target = jax.eval_shape(self._init, keys, task)
        return checkpoint.restore(directory, target, settings=self.settings())

    # -- training ------------------------------------------------------------------------

    def train(self, state: TrainState) -> tuple[TrainState, dict[str, jax.Array]]:
        """One call: `timesteps_per_iteration` env steps per seed. `state` is donated.

        Every state is committed to the loop's device first (free when it already is), so a
        state fresh from `init`, restored from a checkpoint or edited on the host all match
        the one compiled program."""
        return self._train(jax.device_put(state, self.device))

    def _train_one(self, state: TrainState):
        self.traces += 1  # runs only while tracing
        return jax.lax.scan(self._update, state, None, length=self.updates_per_call)

    def _update(self, state: TrainState, _):
        key, k_reset, k_roll, k_update, k_eval = jax.random.split(state.key, 5)
        clock = Clock(
            timestep=(state.iteration * self.steps_per_update).astype(jnp.float32),
            horizon=state.horizon,
        )
        env_state = self.venv.reset_done(state.env, k_reset)
        env_state, rollout, episodes = self._collect(state.agent, env_state, k_roll)
        agent_state, metrics = self.agent.update(state.agent, rollout, k_update, clock)

        iteration = state.iteration + 1
        timestep = iteration * self.steps_per_update
        interval = self.config.eval_interval
        due = timestep // interval > (timestep - self.steps_per_update) // interval
        evaluation = jax.lax.cond(
            due, lambda: self._evaluate(agent_state, state.eval_task, k_eval), no_evaluation)
        row = {
            "timestep": timestep,
            "eval/timestep": jnp.where(due, timestep, -1),
            **evaluation,
            **{f"task/{k}": v.astype(jnp.float32) for k, v in _flat_task(state.eval_task).items()},
            **metrics,
            **episodes,
        }
        new_state = state.replace(agent=agent_state, env=env_state, key=key, iteration=iteration)
        return new_state, row

    def _collect(self, agent_state, env_state: EnvState, key):
        def step(env_state, k):
            k_act, k_env = jax.random.split(k)
            action, extras = self.agent.act(agent_state, env_state.obs, k_act)
            nxt = self.venv.step(env_state, action, k_env)
            transition = (
                env_state.obs, extras["raw_action"], extras["log_prob"], nxt.reward,
                nxt.terminated, nxt.truncated, nxt.episode.post_done,
            )
            ended = nxt.terminated | nxt.truncated
            return nxt, (transition, ended, nxt.episode.ret, nxt.episode.step)

        keys = jax.random.split(key, self.agent.unroll_length)
        env_state, (transition, ended, ret, length) = jax.lax.scan(step, env_state, keys)
        rollout = Rollout(*transition, last_obs=env_state.obs)
        count = jnp.sum(ended)
        per_episode = lambda x: jnp.where(count > 0, jnp.sum(x * ended) / jnp.maximum(count, 1), jnp.nan)
        episodes = {
            "train/episode_return": per_episode(ret),
            "train/episode_length": per_episode(length.astype(jnp.float32)),
            "train/episodes": count.astype(jnp.float32),
        }
        return env_state, rollout, episodes


def _flat_task(task: Task) -> dict[str, jax.Array]:
    flat = {}
    for name, value in task.items():
        if value.ndim == 0:
            flat[name] = value
        else:
            for i, v in enumerate(value.reshape(-1)):
                flat[f"{name}_{i}"] = v
    return flat
