"""Whether a trial's training state, and what a call holds beside it, fit the memory it will
train in, known before anything is allocated.

The whole state (parameters, optimiser, env states, a replay buffer, for every seed) is one
pytree whose size follows from shapes alone: `TrainLoop.abstract_state()` traces it without
compiling or allocating. A call holds more at its peak: the unroll's observations, the envs of an
evaluation (`train.eval_episodes` of them per task and lane) or of a level algorithm's scoring;
their least size follows from the same shapes. Without this check, a replay buffer of a large capacity times many seeds, or an
evaluation of a billion episodes, fails only on the first call, after compiling, with an
allocation error deep in XLA, or the kernel kills the trial's worker. `Runner.check` and every
`Runner` apply it.

Memory is what the trial's device has: the host's RAM for a CPU trial; a GPU's memory (times the
trial's share of it) only when JAX is already up in this process, since starting JAX's backends
here would fix the platform and memory settings of everything run after it
(`compat.backends_are_initialized`); otherwise a GPU trial is not checked.
"""

from __future__ import annotations

import os

import jax
import numpy as np

from ajax_tune import compat
from ajax_tune.errors import ConfigError

GIB = 2**30
#: Beside the state: the compiled program, XLA's scratch space for one update, Python, the checkpoint writer.
MARGIN_FRACTION, MARGIN_BYTES = 0.1, GIB // 2


def _bytes(tree) -> int:
    return sum(int(np.prod(leaf.shape)) * np.dtype(leaf.dtype).itemsize for leaf in jax.tree.leaves(tree))


def state_bytes(loop) -> int:
    """The bytes of the loop's whole training state, every seed included."""
    return _bytes(loop.abstract_state())


def working_set(loop) -> tuple[int, str, str]:
    """The least a call holds beside the state at its peak, what makes it, and the settings that
    shrink it: the unroll's observations (every env, step and lane, in an online loop), the envs
    of an evaluation (every episode of every task it evaluates, every lane) or those of a level
    algorithm's scoring (`Needs.scored_levels` x `Needs.scoring_episodes`, every lane), whichever
    is largest. All follow from the state's shapes: an episode is one env's state (and a recurrent
    agent's carry), a step of the unroll at least one env's observation."""
    state = loop.abstract_state()
    seeds = loop.config.num_seeds
    lanes = loop.num_members * seeds
    envs = lanes * loop.program.num_envs
    if not envs:
        return 0, "", ""
    per_env = (_bytes(state.env) + _bytes(state.carry)) // envs
    unroll = 0 if loop.dataset is not None else loop.agent.unroll_length
    rollout = envs * unroll * (_bytes(state.env.obs) // envs)
    tasks = 1 + loop.num_heldout * (2 if loop.heldout_cvar is not None else 1)
    episodes = loop.config.eval_episodes
    evaluation = lanes * tasks * episodes * per_env
    needs = loop.level_needs
    scoring = 0 if needs is None else lanes * needs.scored_levels * needs.scoring_episodes * per_env
    who = _lanes(loop)
    if scoring > max(evaluation, rollout):
        what = (
            f"the level algorithm's scoring: {needs.scored_levels:,} levels x {needs.scoring_episodes:,} episodes x {who}, "
            f"{per_env:,} bytes each"
        )
        return scoring, what, f"ued.scoring_episodes or the levels ued.algorithm {loop.ued.algorithm!r} scores at once"
    if evaluation >= rollout:
        what = (
            f"an evaluation's {episodes:,} episodes (train.eval_episodes) x {tasks:,} task{'s' * (tasks > 1)} x {who}, "
            f"{per_env:,} bytes each"
        )
        return evaluation, what, "train.eval_episodes"
    what = f"the unroll's observations: {loop.program.num_envs:,} envs x {unroll:,} steps x {who}"
    return rollout, what, "agent.num_envs or agent.unroll_length"


def needed_bytes(loop) -> int:
    """The state and a call's working set, plus a rough margin for everything else a trial holds."""
    return int((state_bytes(loop) + working_set(loop)[0]) * (1 + MARGIN_FRACTION)) + MARGIN_BYTES


def host_memory_bytes() -> int:
    """This machine's RAM (MemTotal: what can ever be had, not what is free this moment)."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemTotal:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def device_memory_bytes() -> int | None:
    """The memory of JAX's first accelerator, if JAX is up in this process and has one."""
    if not compat.backends_are_initialized():
        return None
    device = jax.devices()[0]
    if device.platform == "cpu":
        return None
    stats = device.memory_stats() or {}
    return stats.get("bytes_limit")


def check_state_fits(loop, gpu: float = 0.0, who: str = "the trial") -> int:
    """Refuse a loop whose state cannot fit the memory its trial will have (`gpu`: the trial's
    GPUs, as in `resources.gpu`). Returns the bytes it needs."""
    need = needed_bytes(loop)
    if gpu:
        limit = device_memory_bytes()
        if limit is None:
            return need  # unknown without starting JAX here
        share = min(gpu, 1.0)
        have = int(limit * share)
        machine = f"its share of the GPU ({share:g} of {limit / GIB:.1f} GiB) is {have / GIB:.1f} GiB"
    else:
        have = host_memory_bytes()
        machine = f"this machine has {have / GIB:.1f} GiB"
    if need > have:
        working, what, settings = working_set(loop)
        if working > state_bytes(loop):
            raise ConfigError(
                f"{who} needs about {need / GIB:.1f} GiB, {working / GIB:.1f} GiB of it for {what}; {machine}; lower {settings}"
            )
        if _largest(loop)[0].startswith("ued."):
            lower = f"the sizes of ued.algorithm {loop.ued.algorithm!r} (its buffer)"
        elif _capacity(loop):
            lower = "agent.capacity or train.num_seeds"
        else:
            lower = "train.num_seeds or the agent's sizes"
        lower += " (or the population's size)" if loop.num_members > 1 else ""
        raise ConfigError(f"{who} needs about {need / GIB:.1f} GiB of state ({_what_is_big(loop)}); {machine}; lower {lower}")
    return need


def _what_is_big(loop) -> str:
    """The settings that make a state large, in the config's words, and its largest array."""
    capacity = _capacity(loop)
    parts = [f"agent.capacity {capacity:,} transitions x {_lanes(loop)}" if capacity else _lanes(loop)]
    path, leaf = _largest(loop)
    size = _bytes(leaf)
    parts.append(f"the largest array {path} {list(leaf.shape)} {np.dtype(leaf.dtype).name}, {size / GIB:.1f} GiB")
    return "; ".join(parts)


def _largest(loop) -> tuple[str, jax.ShapeDtypeStruct]:
    """The state's largest array and its path (`agent.buffer...`, `ued.own.buffer.levels...`)."""
    paths = jax.tree_util.tree_flatten_with_path(loop.abstract_state())[0]
    path, leaf = max(paths, key=lambda item: _bytes(item[1]))
    return jax.tree_util.keystr(path).lstrip("."), leaf


def _lanes(loop) -> str:
    seeds = f"{loop.config.num_seeds:,} seed{'s' * (loop.config.num_seeds > 1)}"
    return seeds if loop.num_members == 1 else f"{loop.num_members:,} members x {seeds}"


def _capacity(loop) -> int | None:
    """The replay capacity of an off-policy agent (None for others)."""
    return getattr(getattr(loop.agent, "config", None), "capacity", None)
