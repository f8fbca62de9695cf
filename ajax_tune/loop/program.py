"""The compiled training program, as pure functions (PureJaxRL's `make_train`).

`make_program` closes over everything static (the env, the agent, the loop settings, the number
of lanes, a level algorithm) and returns a `Program`: `init(keys, task)` makes a fresh state, one
lane after another, and `call(state)` runs exactly `timesteps_per_iteration` env steps for every
lane and returns the new state with fixed-shape rows. Neither is jitted here: `compiled.Compiled`
jits, donates and counts compilations; `lanes.py` edits a state's lanes on the host; `frame.py`
holds what every program has around its updates (a fresh lane, evaluation, the call's output).

One call is a scan over iterations. The scan runs outside the vmap over lanes, so every lane is
at the same iteration: the evaluation cadence (and an agent's own conditions on the clock) are
real branches, not work done at every update. Each lane has its own traced settings (in the
agent's state) and its own horizon, so members of a population differ only in the values of
arrays the one program reads. The iteration in the state is absolute, so schedules, evaluation
cadence and warm-up continue across calls as if the run were one long call.

A lane's update reads top to bottom: start the envs (restart those that finished, or, with a
level algorithm, start every env on the level it chooses), collect an unroll, let the agent learn
from it (with a level algorithm, only where it says, and then let it observe the rollout), add the
unroll's episodes to the call's per-env statistics.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp

from ajax_tune.agents.base import Carries, Clock, is_recurrent, reset_carry
from ajax_tune.envs.wrappers import EpisodeWrapper, VecEnv
from ajax_tune.errors import ConfigError
from ajax_tune.loop.config import LoopConfig
from ajax_tune.loop.frame import CallFrame, Program
from ajax_tune.loop.rollout import TRAIN_ROWS, make_collect
from ajax_tune.loop.state import CallStats
from ajax_tune.loop.ued import LevelUpdate
from ajax_tune.ued import LevelAlgorithm


def make_program(
    env: EpisodeWrapper,
    agent,
    config: LoopConfig,
    *,
    num_heldout: int = 0,
    num_lanes: int = 1,
    learning_signal: bool = True,
    level_algorithm: LevelAlgorithm | None = None,
    rescore_heldout: bool = False,
) -> Program:
    """The online program: envs stepped, the agent learning from each unroll.

    `learning_signal`: whether each call's statistics carry the agent's learning signal. Where
    they do not, nothing reads what the agent computed for it and tracing drops that work (SAC's
    TD errors on the fresh unroll: one actor and two twin-critic passes per update).
    `level_algorithm`: one that decides every rollout's levels (`ajax_tune.ued`).
    `rescore_heldout`: the held-out set is played twice per evaluation, for its CVaR."""
    if config.reset_mode not in agent.reset_modes:
        raise ConfigError(
            f"train.reset_mode {config.reset_mode!r} does not suit agent {type(agent).__name__}: "
            f"it learns from {list(agent.reset_modes)}"
        )
    venv = VecEnv(env, agent.num_envs)
    recurrent = is_recurrent(agent)
    steps_per_update = agent.num_envs * agent.unroll_length
    check_budget(config.timesteps_per_iteration, agent, steps_per_update)
    levels = None if level_algorithm is None else LevelUpdate(level_algorithm, agent, venv)
    frame = CallFrame(env, agent, config, venv, num_heldout, num_lanes, levels, rescore_heldout)
    collect = make_collect(agent, venv, config.reset_mode, per_step=levels is not None)

    def lane_update(agent_state, env_state, carry, ued_state, key, stats: CallStats, clock: Clock, iteration):
        """One lane's update."""
        k_reset, k_roll, k_update = jax.random.split(key, 3)
        fresh = None
        if levels is None:
            if recurrent:
                fresh = env_state.episode.done  # what reset_done restarts
                carry = reset_carry(agent, carry, fresh)
            env_state = venv.reset_done(env_state, k_reset)
        else:
            ued_state, decision, env_state, carry, fresh = levels.start(ued_state, agent_state, carry, k_reset, iteration)
        start = carry
        env_state, carry, resets, transitions, episodes = collect(agent_state, env_state, carry, fresh, k_roll)
        carries = {"carries": Carries(start=start, reset=resets)} if recurrent else {}

        def update(**estimates):
            return agent.update(agent_state, transitions, k_update, clock, **carries, **estimates)

        if levels is None:
            agent_state, metrics, signal = update()
            health = agent.health(agent_state, metrics)
        else:
            ued_state, agent_state, metrics, signal, health = levels.learn(
                ued_state, decision, agent_state, transitions, episodes["per_step"], update, carries, clock
            )
        stats = add_episodes(stats, episodes, signal if learning_signal else None)
        row = {**train_rows(episodes), **metrics}
        health = {k: v.astype(jnp.float32) for k, v in health.items()}
        return agent_state, env_state, carry, ued_state, row, health, stats

    def iteration_update(carry):
        """Every lane's update at the state's iteration, then the evaluation when one is due."""
        state, stats = carry
        # Every lane is at the same iteration: the timestep and the evaluation cadence are not
        # batched, so conditions on them are real branches. The horizon is each lane's own.
        iteration = state.iteration[0]
        timestep_now = (iteration * steps_per_update).astype(jnp.float32)
        keys = jax.vmap(lambda k: jax.random.split(k, 4))(state.key)
        agent_state, env_state, carry, ued_state, row, health, stats = over_lanes(
            lambda agent_state, env_state, carry, ued_state, key, stats, horizon: lane_update(
                agent_state,
                env_state,
                carry,
                ued_state,
                key,
                stats,
                Clock(timestep_now, horizon, env.max_episode_steps),
                iteration,
            ),
            num_lanes,
        )(state.agent, state.env, state.carry, state.ued, keys[:, 1], stats, state.horizon)
        row = {**frame.evaluation_rows(state, agent_state, iteration, steps_per_update, lambda: keys[:, 2]), **row}
        new_state = state.replace(
            agent=agent_state,
            env=env_state,
            carry=carry,
            ued=ued_state,
            key=keys[:, 0],
            iteration=state.iteration + 1,
            useful_steps=state.useful_steps + row["train/useful_steps"].astype(jnp.int32),
        )
        return (new_state, stats), (row, health)

    return frame.program(iteration_update, steps_per_update)


def check_budget(budget: int, agent, steps_per_update: int) -> None:
    """A call runs whole unrolls of every env: its budget must be a multiple of one."""
    if budget % steps_per_update:
        lower = budget // steps_per_update * steps_per_update
        nearest = f"nearest: {lower} or {lower + steps_per_update}" if lower else f"the least is one unroll, {steps_per_update}"
        raise ConfigError(
            f"train.timesteps_per_iteration ({budget}) must be a whole number of unrolls of "
            f"num_envs * unroll_length = {agent.num_envs} * {agent.unroll_length} = "
            f"{steps_per_update} env steps; {nearest}"
        )


def add_episodes(stats: CallStats, episodes: dict, signal: jax.Array | None) -> CallStats:
    """The call's per-env statistics with an unroll's episodes (and the agent's learning signal,
    where the call's statistics carry it: otherwise `signal_count` stays 0 and reads as NaN)."""
    stats = stats.replace(
        episodes=stats.episodes + episodes["count"],
        return_sum=stats.return_sum + episodes["return_sum"],
        success_sum=stats.success_sum + episodes["success_sum"],
        steps=stats.steps + episodes["steps"],
    )
    if signal is None:
        return stats
    defined = ~jnp.isnan(signal)
    return stats.replace(signal_sum=stats.signal_sum + jnp.where(defined, signal, 0.0), signal_count=stats.signal_count + defined)


def train_rows(episodes: dict) -> dict[str, jax.Array]:
    """`TRAIN_ROWS` of one unroll: its finished episodes' mean return and length (NaN where none
    finished), how many finished, and its useful steps."""
    count = jnp.sum(episodes["count"])
    per_episode = lambda total: jnp.where(count > 0, total / jnp.maximum(count, 1.0), jnp.nan)  # noqa: E731
    sums = (per_episode(jnp.sum(episodes["return_sum"])), per_episode(jnp.sum(episodes["length_sum"])))
    return dict(zip(TRAIN_ROWS, (*sums, count, jnp.sum(episodes["steps"]))))


def over_lanes(f: Callable, num_lanes: int) -> Callable:
    """`f` over the lane axis of its arguments and results: `jax.vmap`, except for one lane,
    where `f` runs on that lane's slice. A vmap turns every `lax.cond` and `lax.switch` whose
    predicate is per lane into a select that computes all branches; run unbatched, a lane's
    branches stay branches (robust PLR's scoring-only rollouts then skip the agent's update, and
    an off-policy agent's warm-up skips its gradient steps), so a single-lane trial does only the
    work its decisions ask for. Lanes of a population all compute every branch, as any SIMD
    program must."""
    if num_lanes > 1:
        return jax.vmap(f)

    def one_lane(*args):
        out = f(*jax.tree.map(lambda x: x[0], args))
        return jax.tree.map(lambda x: x[None], out)

    return one_lane
