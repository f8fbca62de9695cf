"""Stepping envs with a policy: the unroll that training learns from, and the episodes that
evaluation scores.

Both are one function for every agent. A recurrent agent's carry (one per env) goes into `act`
and the next one comes out; where an env starts a new episode, so does its carry. A feed-forward
agent's carry is None: the same function then holds nothing of it, so its program is the one a
carry-free loop would have compiled.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from ajax_tune.agents.base import is_recurrent, reset_carry
from ajax_tune.envs.base import EnvState
from ajax_tune.envs.wrappers import EpisodeWrapper, VecEnv

#: The rows one evaluation writes (per lane: means over its episodes).
EVAL_ROWS = ("eval/return", "eval/length", "eval/success")
#: The rows of the episodes an update's unroll finished, and its unmasked steps.
TRAIN_ROWS = ("train/episode_return", "train/episode_length", "train/episodes", "train/useful_steps")


def make_collect(agent, venv: VecEnv, reset_mode: str, per_step: bool = False) -> Callable:
    """`collect(agent_state, env_state, carry, fresh, key)`: `unroll_length` lock-step steps of
    every env. Returns the env state and carry after the unroll, whether each step acted on a
    fresh carry (None without a carry), the agent's transitions and per-env episode sums.

    `fresh` says which envs start the unroll with a fresh carry. With `reset_mode` "next_step" a
    finished env starts its next episode on the very next step (the transition keeps the real
    final observation); otherwise it stays frozen, masked, until the next unroll. With
    `per_step`, the episode sums also hold the unroll's steps as a level algorithm reads them
    (`per_step`: `done`, `reward`, `success` and `valid`, each [T, N])."""
    recurrent = is_recurrent(agent)
    next_step = reset_mode == "next_step"
    env = venv.env
    length, num_envs = agent.unroll_length, venv.num_envs

    def step_out(env_state: EnvState, action, extras, nxt: EnvState):
        transition = agent.transition(env_state.obs, action, extras, nxt)
        ended = (nxt.terminated | nxt.truncated).astype(jnp.float32)
        success = nxt.info["success"].astype(jnp.float32) if env.has_success else jnp.zeros_like(ended)
        length, valid = nxt.episode.step.astype(jnp.float32), (~nxt.episode.post_done).astype(jnp.float32)
        if per_step:
            return transition, ended, nxt.episode.ret, length, success, valid, nxt.reward
        return transition, ended, nxt.episode.ret, length, success, valid

    def collect(agent_state, env_state: EnvState, carry, fresh, key):
        def step(loop_carry, keys):
            env_state, carry, fresh = loop_carry
            k_act, k_env, k_reset = keys
            if recurrent:
                action, extras, carry = agent.act(agent_state, env_state.obs, k_act, carry=carry)
            else:
                action, extras = agent.act(agent_state, env_state.obs, k_act)
            nxt = venv.step_each(env_state, action, k_env)
            out = (fresh, step_out(env_state, action, extras, nxt))
            restarted = jnp.zeros_like(fresh) if recurrent else None
            if next_step:  # the next episode starts now; the transition kept the real final obs
                if recurrent:
                    restarted = nxt.episode.done
                    carry = reset_carry(agent, carry, restarted)
                nxt = venv.reset_done_each(nxt, k_reset)
            return (nxt, carry, restarted), out

        (env_state, carry, _), (resets, outs) = jax.lax.scan(step, (env_state, carry, fresh), unroll_keys(key))
        return env_state, carry, resets, *episode_sums(*outs, per_step=per_step)

    def unroll_keys(key):
        # Every step's keys in three batched draws: splitting inside the step would cost the
        # rollout a few small sequential programs per step.
        k_act, k_env, k_reset = jax.random.split(key, 3)
        return (
            jax.random.split(k_act, length),
            jax.random.split(k_env, (length, num_envs)),
            jax.random.split(k_reset, (length, num_envs)),
        )

    return collect


def episode_sums(transitions, ended, ret, length, success, valid, reward=None, per_step: bool = False):
    """The unroll's transitions, and per env the sums over the episodes that ended in it (with
    `per_step`, also the steps themselves, for a level algorithm: `per_step`)."""
    episodes = {
        "count": jnp.sum(ended, axis=0),
        "return_sum": jnp.sum(ret * ended, axis=0),
        "length_sum": jnp.sum(length * ended, axis=0),
        "success_sum": jnp.sum(success * ended, axis=0),
        "steps": jnp.sum(valid, axis=0),
    }
    if per_step:
        episodes["per_step"] = {"done": ended > 0, "reward": reward, "success": success * ended, "valid": valid > 0}
    return transitions, episodes


def make_evaluate(agent, env: EpisodeWrapper, episodes: int, per_episode: bool = False, deterministic: bool = True) -> Callable:
    """`evaluate(agent_state, task, key)`: `episodes` envs run the deterministic policy (or, with
    `deterministic=False`, the sampling one) on `task` until all are done (at most the time
    limit). Returns means over episodes, or (`per_episode`) every episode's values. A recurrent
    agent's episodes each start from a fresh carry (one episode per env: none restarts)."""
    recurrent = is_recurrent(agent)
    venv = VecEnv(env, episodes)
    reduce = (lambda x: x) if per_episode else jnp.mean

    def evaluate(agent_state, task, key) -> dict[str, jax.Array]:
        k_reset, k_run = jax.random.split(key)
        state = venv.reset(k_reset, task)

        def running(loop):
            state, _, t, _ = loop
            return (t < env.max_episode_steps) & ~jnp.all(state.episode.done)

        def step(loop):
            state, carry, t, k = loop
            k, k_act, k_env = jax.random.split(k, 3)
            if recurrent:
                action, _, carry = agent.act(agent_state, state.obs, k_act, deterministic=deterministic, carry=carry)
            else:
                action, _ = agent.act(agent_state, state.obs, k_act, deterministic=deterministic)
            return venv.step(state, action, k_env), carry, t + 1, k

        carry = agent.init_carry(episodes) if recurrent else None
        state, _, _, _ = jax.lax.while_loop(running, step, (state, carry, jnp.zeros((), jnp.int32), k_run))
        success = state.info["success"] if env.has_success else jnp.full((episodes,), jnp.nan)
        return dict(zip(EVAL_ROWS, (reduce(state.episode.ret), reduce(state.episode.step.astype(jnp.float32)), reduce(success))))

    return evaluate
