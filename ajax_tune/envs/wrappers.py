"""Episode bookkeeping and lock-step vectorisation.

`EpisodeWrapper` adds time limits and episode statistics to any `Env`. Once an episode is done
the env is frozen: further steps return the same observation with zero reward and
`post_done=True`; `info` keeps the values of the final step, so an episode's outcome (such as
`success`) can be read from a finished env. `VecEnv` steps many such envs in lock-step and resets the finished ones only
at the start of an unroll, so within an unroll every observation is the true successor of the
previous one (truncated transitions bootstrap from a real final observation), and a reset never
hides a transition from the learner.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from ajax_tune.envs.base import Env, EnvState, Episode, Task


def _select(pred: jax.Array, on_true, on_false):
    """Tree-wise `where` with a scalar predicate (vmapped callers make it per env)."""
    return jax.tree.map(lambda a, b: jnp.where(pred, a, b), on_true, on_false)


def _delegate(wrapper, name):
    # Only called for missing attributes; guard `env` and dunders so that copying and
    # pickling (which probe attributes before `__init__` ran) do not recurse.
    if name == "env" or name.startswith("__"):
        raise AttributeError(name)
    return getattr(wrapper.env, name)


class EpisodeWrapper:
    """Time limit, optional truncation penalty, and episode statistics for one env."""

    def __init__(self, env: Env, max_episode_steps: int | None = None, truncation_penalty: float = 0.0):
        self.env = env
        self.max_episode_steps = int(env.max_episode_steps if max_episode_steps is None else max_episode_steps)
        if self.max_episode_steps < 1:
            raise ValueError(f"{env.name}: max_episode_steps must be >= 1, got {self.max_episode_steps}")
        self.truncation_penalty = float(truncation_penalty)

    def __getattr__(self, name):  # spaces, task_spec, validate_task, ...
        return _delegate(self, name)

    def reset(self, key: jax.Array, task: Task) -> EnvState:
        return self.env.reset(key, task).replace(episode=Episode.zeros())

    def step(self, state: EnvState, action: jax.Array, key: jax.Array) -> EnvState:
        ep = state.episode
        nxt = self.env.step(state, action, key)
        steps = ep.step + 1
        truncated = (steps >= self.max_episode_steps) & ~nxt.terminated
        reward = nxt.reward - self.truncation_penalty * truncated
        stepped = nxt.replace(
            reward=reward,
            truncated=truncated,
            episode=Episode(
                step=steps,
                done=nxt.terminated | truncated,
                post_done=jnp.zeros((), jnp.bool_),
                ret=ep.ret + reward,
            ),
        )
        frozen = state.replace(
            reward=jnp.zeros_like(state.reward),
            terminated=jnp.zeros_like(state.terminated),
            truncated=jnp.zeros_like(state.truncated),
            episode=ep.replace(post_done=jnp.ones((), jnp.bool_)),
        )
        return _select(ep.done, frozen, stepped)


class VecEnv:
    """`num_envs` episode-wrapped envs stepped in lock-step; tasks are per env."""

    def __init__(self, env: EpisodeWrapper, num_envs: int):
        if not isinstance(env, EpisodeWrapper):
            env = EpisodeWrapper(env)
        self.env = env
        self.num_envs = int(num_envs)

    def __getattr__(self, name):
        return _delegate(self, name)

    def batch_task(self, task: Task) -> Task:
        """Broadcast an unbatched or per-env task to one value per env."""
        spec = self.env.task_spec

        def one(name, value):
            value = jnp.asarray(value, spec[name].dtype)
            return jnp.broadcast_to(value, (self.num_envs, *spec[name].shape))

        return {name: one(name, value) for name, value in task.items()}

    def reset(self, key: jax.Array, task: Task) -> EnvState:
        keys = jax.random.split(key, self.num_envs)
        return jax.vmap(self.env.reset)(keys, self.batch_task(task))

    def reset_done(self, state: EnvState, key: jax.Array) -> EnvState:
        """Reset the envs whose episode is done, each on its own task."""
        return self.reset_done_each(state, jax.random.split(key, self.num_envs))

    def reset_done_each(self, state: EnvState, keys: jax.Array) -> EnvState:
        """`reset_done` with one key per env. A loop that draws every step's keys in one batch
        before its scan saves a key split per step (on the CPU, each split is a small loop of
        its own)."""
        fresh = jax.vmap(self.env.reset)(keys, state.task)
        return jax.vmap(_select)(state.episode.done, fresh, state)

    def step(self, state: EnvState, action: jax.Array, key: jax.Array) -> EnvState:
        return self.step_each(state, action, jax.random.split(key, self.num_envs))

    def step_each(self, state: EnvState, action: jax.Array, keys: jax.Array) -> EnvState:
        """`step` with one key per env (see `reset_done_each`)."""
        return jax.vmap(self.env.step)(state, action, keys)

    def set_task(self, state: EnvState, task: Task) -> EnvState:
        """Replace tasks (fields not given keep their values); envs whose task changed end their
        episode and restart on the new one at the next unroll (the last transition already
        bootstrapped from its observation)."""
        task = {**state.task, **self.batch_task(task)}
        changed = jnp.zeros((self.num_envs,), jnp.bool_)
        for name, value in task.items():
            diff = value != state.task[name]
            changed = changed | diff.reshape(self.num_envs, -1).any(axis=1)
        episode = state.episode.replace(done=state.episode.done | changed)
        return state.replace(task=task, episode=episode)
