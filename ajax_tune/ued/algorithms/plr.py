"""Prioritised level replay (PLR, Jiang et al. 2021) and robust PLR (Jiang et al. 2021b), as
JaxUED's `maze_plr.py` runs them.

Each rollout either plays fresh levels from the generator, which are then scored and offered to
the buffer, or, with probability `replay_prob` once the buffer is `minimum_fill` full, replays
levels drawn from the buffer by rank and staleness, which are then rescored. One decision per lane
and rollout, for all its envs. PLR learns from both kinds; robust PLR only scores fresh levels and
learns from replays alone, so every gradient comes from levels chosen for their score.

A level's score (`score`) is MaxMC, the mean over the rollout's completed episodes of (the best
return ever seen on the level - V(s)), or positive value loss, the mean clipped GAE advantage; a
rollout that completed no episode scores -inf, as in JaxUED (a fresh level is then not written, a
replayed one drops to the bottom of the ranking).
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import jax
import jax.numpy as jnp
from flax import struct

import ajax_tune.ued.buffer as B
import ajax_tune.ued.scores as S
from ajax_tune.errors import ConfigError
from ajax_tune.fields import static, traced
from ajax_tune.ued.algorithm import Decision, LevelAlgorithm, LevelSettings, Needs, RunShape

NEW, REPLAY = 0, 1
SCORES = ("maxmc", "pvl")
#: The buffer as the call left it: its size and its scores' spread.
BUFFER_ROWS = ("ued/buffer_size", "ued/score_mean", "ued/score_std", "ued/score_max")


@dataclasses.dataclass(frozen=True)
class PLRSettings(LevelSettings):
    buffer_size: int = static(4000, ge=1, doc="levels the buffer holds")
    score: str = static("maxmc", choices=SCORES, doc="the score a level is replayed by: MaxMC regret or positive value loss")
    duplicate_check: bool = static(True, doc="a fresh level already in the buffer updates its entry instead of taking a new one")
    replay_prob: float = traced(0.8, ge=0.0, le=1.0, doc="probability that a rollout replays buffer levels")
    temperature: float = traced(0.3, gt=0.0, doc="rank prioritisation's temperature: lower replays the top more")
    staleness_coef: float = traced(0.3, ge=0.0, le=1.0, doc="weight of staleness against score in replay")
    minimum_fill: float = traced(0.5, ge=0.0, le=1.0, doc="share of the buffer filled before replay starts")


@struct.dataclass
class PLRState:
    buffer: B.LevelBuffer  # extra: each level's best completed return ("max_return", MaxMC's reference)


@struct.dataclass
class Memo:
    kind: jax.Array  # int32: NEW, REPLAY (or an extension's own kind)
    slots: jax.Array  # int32 [num_envs]: the replayed slots, -1 for levels not from the buffer


class PLR(LevelAlgorithm):
    """Prioritised level replay: fresh levels are scored and offered to a buffer, buffer levels are
    replayed by rank and staleness, and the agent learns from both kinds of rollout."""

    Settings = PLRSettings
    row_keys = ("ued/replay", *BUFFER_ROWS)
    latest_keys = BUFFER_ROWS
    #: whether the agent learns from fresh levels' rollouts (PLR) or only scores them (robust PLR)
    learns_from_fresh: ClassVar[bool] = True

    @classmethod
    def needs(cls, settings: PLRSettings) -> Needs:
        return Needs(values=True)

    @classmethod
    def check(cls, settings: PLRSettings, run: RunShape) -> list[str]:
        if settings.buffer_size < run.num_envs:
            raise ConfigError(
                f"ued.buffer_size ({settings.buffer_size}) is smaller than a batch of levels (agent.num_envs = "
                f"{run.num_envs}): the buffer must hold at least one rollout's levels"
            )
        return fill_warnings(settings, run)

    def init(self, level, key) -> PLRState:
        return PLRState(buffer=B.empty(level, self.settings.buffer_size, extra={"max_return": jnp.float32(-jnp.inf)}))

    # -- before the rollout ----------------------------------------------------------------

    def choose(self, state: PLRState, hp, key, context) -> tuple[PLRState, Decision]:
        k_decide, k_branch = jax.random.split(key)
        kind = self.next_kind(state, hp, k_decide)
        buffer, slots, levels = jax.lax.switch(kind, self.branches(state, hp, k_branch), state.buffer)
        learn = (kind == REPLAY) | self.learns_from_fresh
        return state.replace(buffer=buffer), Decision(levels=levels, learn=learn, memo=Memo(kind=kind, slots=slots))

    def next_kind(self, state: PLRState, hp, key) -> jax.Array:
        """REPLAY with probability `replay_prob` once the buffer is full enough, else NEW."""
        buffer = state.buffer
        replay = B.ready(buffer, hp.minimum_fill) & (buffer.size > 0) & (jax.random.uniform(key) < hp.replay_prob)
        return jnp.where(replay, REPLAY, NEW).astype(jnp.int32)

    def branches(self, state: PLRState, hp, key) -> list:
        """One function per kind, `buffer -> (buffer, slots, levels)`, in the kinds' order."""
        k_fresh, k_replay = jax.random.split(key)
        none = jnp.full((self.num_envs,), -1, jnp.int32)

        def fresh(buffer):
            return buffer, none, self.fresh_levels(k_fresh)

        def replay(buffer):
            return B.sample(buffer, k_replay, self.num_envs, hp.temperature, hp.staleness_coef)

        return [fresh, replay]

    # -- after it ----------------------------------------------------------------------------

    def observe(self, state: PLRState, hp, decision: Decision, rollout) -> PLRState:
        memo, buffer = decision.memo, state.buffer
        replayed = memo.kind == REPLAY
        best = S.max_returns(rollout.done, rollout.reward)
        stored = buffer.extra["max_return"][jnp.maximum(memo.slots, 0)]
        best = jnp.where(replayed, jnp.maximum(stored, best), best)
        scores = self.score(rollout, best)
        extra = {"max_return": best}

        def rescore(buffer):
            return B.update(buffer, memo.slots, scores, extra=extra)

        def offer(buffer):
            settings = self.settings
            return B.insert(
                buffer,
                decision.levels,
                scores,
                temperature=hp.temperature,
                staleness_coef=hp.staleness_coef,
                duplicate_check=settings.duplicate_check,
                extra=extra,
            )[0]

        return state.replace(buffer=jax.lax.cond(replayed, rescore, offer, buffer))

    def score(self, rollout, best_returns: jax.Array) -> jax.Array:
        if self.settings.score == "pvl":
            return S.positive_value_loss(rollout.done, rollout.advantages)
        return S.max_mc(rollout.done, rollout.values, best_returns)

    def rows(self, state: PLRState, decision: Decision) -> dict[str, jax.Array]:
        return {"ued/replay": (decision.memo.kind == REPLAY).astype(jnp.float32), **buffer_rows(state.buffer)}


class RobustPLR(PLR):
    """Robust PLR: PLR whose agent learns from replayed levels only; fresh levels are only scored,
    so every gradient comes from levels chosen for their score."""

    learns_from_fresh = False


def buffer_rows(buffer: B.LevelBuffer) -> dict[str, jax.Array]:
    """`BUFFER_ROWS`: the buffer's size and the mean, spread and top of its finite scores (NaN
    while it holds none)."""
    filled = jnp.arange(B.capacity(buffer)) < buffer.size
    finite = filled & jnp.isfinite(buffer.scores)
    count = jnp.maximum(finite.sum(), 1)
    mean = jnp.where(finite, buffer.scores, 0.0).sum() / count
    spread = jnp.sqrt(jnp.where(finite, (buffer.scores - mean) ** 2, 0.0).sum() / count)
    top = jnp.max(jnp.where(finite, buffer.scores, -jnp.inf))
    nan = jnp.float32(jnp.nan)
    values = [buffer.size.astype(jnp.float32), *(jnp.where(finite.any(), v, nan) for v in (mean, spread, top))]
    return dict(zip(BUFFER_ROWS, values, strict=True))


def fill_warnings(settings: PLRSettings, run: RunShape) -> list[str]:
    """Settings under which the buffer cannot fill, or fills slowly: a level scores only when an
    episode ends within its rollout, and replay waits for `minimum_fill` of the buffer."""
    out = []
    needed = math.ceil(settings.minimum_fill * settings.buffer_size)
    if run.max_episode_steps > run.unroll_length:
        out.append(
            f"ued: episodes last up to {run.max_episode_steps} steps and a rollout is agent.unroll_length = "
            f"{run.unroll_length} steps: a level scores (and enters the buffer) only when an episode ends within "
            f"its rollout, so the buffer may fill slowly and replay ({needed} levels) start late or never; "
            f"an unroll_length of at least the episode's length lets every level score"
        )
    offered = run.num_envs * run.updates
    if offered < needed:
        out.append(
            f"ued: the run offers the buffer at most {offered} levels (agent.num_envs x {run.updates} updates), "
            f"fewer than minimum_fill x buffer_size = {needed}: it never replays a level"
        )
    return out
