"""`Runner`: one compiled training loop, its state and its curriculum, as a plain object.

It is what RLlib's Algorithm is to a function trainable: `train()` runs one call and returns a
result of plain floats; `get_task` / `set_task` steer the envs; `save` / `restore` write and read
checkpoints; `reconfigure` takes a new config, keeping the compiled program when only traced
settings changed. `AjaxTrainable` is a thin Tune shell over it, and it works without Ray.
"""

from __future__ import annotations

import time
import zlib
from typing import Any, Mapping

import jax
import numpy as np

from ajax_tune import checkpoint
from ajax_tune.checkpoint import CheckpointError
from ajax_tune.config import Config, ConfigError, resolve_agent, resolve_callable
from ajax_tune.curriculum import EnvContext, TaskSettableEnv, make_callback
from ajax_tune.envs import EpisodeWrapper, make_env
from ajax_tune.envs.base import flatten_task, task_to_jax
from ajax_tune.evaluation import make_evaluate
from ajax_tune.loop import TrainLoop


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
        imports. Returns the parsed config."""
        cfg = Config.from_dict(config)
        env, _ = _build_loop(cfg)
        env.validate_task(cfg.env.task)
        if cfg.env_task_fn:
            resolve_callable(cfg.env_task_fn, "env_task_fn")
        for spec in cfg.callbacks:
            make_callback(spec)
        return cfg

    def _build_loop(self) -> None:
        self.env, self.loop = _build_loop(self.config)
        self._evaluators: dict[int, Any] = {}

    def _start_run(self) -> None:
        """A fresh run of the current config: new state, new curriculum, counters at zero."""
        cfg = self.config
        self.env_task_fn = resolve_callable(cfg.env_task_fn, "env_task_fn") if cfg.env_task_fn else None
        self.callbacks = [make_callback(spec) for spec in cfg.callbacks]
        self.env.validate_task(cfg.env.task)  # before compiling anything
        self.env_ctx = EnvContext(
            env_config={"name": cfg.env.name, **cfg.env.kwargs}, num_envs=self.loop.venv.num_envs,
            num_seeds=cfg.train.num_seeds, trial_id=self.trial_id, worker_index=0,
        )
        self.task_settable_env = TaskSettableEnv(self)
        state = self.loop.init(seed=cfg.train.seed, task=cfg.env.task)
        self.state = self.loop.set_hparams(state, cfg.agent, cfg.train.total_timesteps)
        self.iteration = 0
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
        if self.env_task_fn is not None:
            new_task = self.env_task_fn(result, self.task_settable_env, self.env_ctx)
            if new_task is not None:
                self.set_task(new_task)
        for cb in self.callbacks:
            _hook(cb, "on_train_result", self, result)
        for cb in self.callbacks:
            result.update(_call(cb, "metrics", {}))
        result.update(flatten_task(self.get_task(), prefix="curriculum/next_task/"))
        result["done"] = result["env_steps"] >= self.config.train.total_timesteps
        return result

    # -- tasks ---------------------------------------------------------------------------

    def get_task(self, per_env: bool = False) -> dict[str, Any]:
        task = self.loop.get_task(self.state, per_env=per_env)
        return {k: (v.item() if v.ndim == 0 else v) for k, v in task.items()}

    def set_task(self, task: Mapping[str, Any], eval_task: Mapping[str, Any] | None = None) -> None:
        """Validated before anything changes: a task that does not fit leaves the state as it was."""
        old = self.get_task()
        self.state = self.loop.set_task(self.state, task, eval_task=eval_task)
        new = self.get_task()
        if any(not np.array_equal(old[k], new[k]) for k in new):
            for cb in self.callbacks:
                _hook(cb, "on_task_change", self, old, new)

    # -- checkpoints ---------------------------------------------------------------------

    def save(self, directory) -> str:
        for cb in self.callbacks:
            _hook(cb, "on_checkpoint_save", self, str(directory))
        extra = {
            "trial_id": self.trial_id,
            "iteration": self.iteration,
            "callbacks": [_call(cb, "get_state", {}) for cb in self.callbacks],
            "config": self.config.to_dict(),
        }
        return str(self.loop.save(directory, self.state, extra=extra))

    def restore(self, directory) -> None:
        """Continue from a checkpoint. One saved by another trial (a PBT exploit) gets this
        trial's random stream; one saved by this trial continues bit-exactly. Traced settings
        come from the current config, so mutated hyperparameters apply from here on."""
        state, metadata = self.loop.restore(directory)
        extra = metadata.get("extra", {})
        saved_states = extra.get("callbacks", [])
        if len(saved_states) != len(self.callbacks):
            raise CheckpointError(
                f"{directory} holds the state of {len(saved_states)} callback(s); this config has "
                f"{len(self.callbacks)}")
        source = extra.get("trial_id", "")
        if source and self.trial_id and source != self.trial_id:
            salt = zlib.crc32(self.trial_id.encode()) & 0x7FFFFFFF
            state = state.replace(key=jax.vmap(lambda k: jax.random.fold_in(k, salt))(state.key))
        self.state = self.loop.set_hparams(state, self.config.agent, self.config.train.total_timesteps)
        self.iteration = int(extra.get("iteration", 0))
        for cb, saved in zip(self.callbacks, saved_states):
            if hasattr(cb, "set_state"):
                cb.set_state(saved)
            _hook(cb, "on_checkpoint_load", self, str(directory))

    @classmethod
    def from_checkpoint(cls, directory, *, curriculum: bool = False) -> "Runner":
        """A runner rebuilt from the config a checkpoint records, holding its state.

        Without `curriculum` the env_task_fn and callbacks are left out (they may not import
        where the checkpoint is evaluated); the task stays what the checkpoint holds.
        """
        extra = checkpoint.read_metadata(directory).get("extra", {})
        config = extra.get("config")
        if config is None:
            raise CheckpointError(f"{directory} does not record its config; it was not written by a Runner")
        if not curriculum:
            config = {**config, "env_task_fn": None, "callbacks": []}
        runner = cls(config, trial_id=extra.get("trial_id", ""))
        if curriculum:
            runner.restore(directory)
        else:
            state, _ = runner.loop.restore(directory)
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


def _build_loop(cfg: Config) -> tuple[EpisodeWrapper, TrainLoop]:
    try:
        env = make_env(cfg.env.name, **cfg.env.kwargs)
    except (KeyError, ImportError) as exc:
        raise ConfigError(f"env.name: {exc.args[0]}") from None
    except TypeError as exc:
        raise ConfigError(f"env.kwargs do not fit {cfg.env.name}: {exc}") from None
    wrapped = EpisodeWrapper(env, cfg.env.max_episode_steps or None, cfg.env.truncation_penalty)
    agent_cls, _ = resolve_agent(cfg.agent_name)
    agent = agent_cls(cfg.agent, env.observation_space, env.action_space)
    check_run = getattr(agent, "check_run", None)
    if callable(check_run):  # settings that only make sense against the run (a warm-up within the horizon)
        check_run(cfg.train)
    return wrapped, TrainLoop(wrapped, agent, cfg.train)


def _hook(callback, name: str, *args) -> None:
    method = getattr(callback, name, None)
    if callable(method):
        method(*args)


def _call(callback, name: str, default):
    method = getattr(callback, name, None)
    return method() if callable(method) else default
