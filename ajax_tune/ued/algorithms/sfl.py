"""Sampling For Learnability (SFL, Rutherford et al. 2024): train on the levels the agent solves
about half the time.

Every `refresh_every` updates, `candidates` fresh levels are each played `scoring_episodes` times
by the sampling policy, and the `keep` with the highest learnability p (1 - p), p the success
rate, replace the kept set. Each rollout draws a share `buffer_share` of its envs' levels from the
kept set (uniformly), the rest fresh, and the agent learns from every rollout. The scoring
episodes' env steps are counted apart from training's (`ued/scoring_env_steps`).
"""

from __future__ import annotations

import dataclasses

import jax
import jax.numpy as jnp
from flax import struct

import ajax_tune.ued.buffer as B
import ajax_tune.ued.scores as S
from ajax_tune.errors import ConfigError
from ajax_tune.fields import static, traced
from ajax_tune.ued.algorithm import Decision, LevelAlgorithm, LevelSettings, Needs, RunShape
from ajax_tune.ued.algorithms.plr import BUFFER_ROWS, buffer_rows


@dataclasses.dataclass(frozen=True)
class SFLSettings(LevelSettings):
    candidates: int = static(256, ge=1, doc="fresh levels scored by learnability at each refresh")
    keep: int = static(64, ge=1, doc="the most learnable candidates kept")
    scoring_episodes: int = static(4, ge=1, doc="episodes per candidate to estimate its success rate")
    refresh_every: int = static(10, ge=1, doc="updates between refreshes of the kept set")
    buffer_share: float = traced(0.5, ge=0.0, le=1.0, doc="share of each rollout's envs playing kept levels")

    def __post_init__(self):
        super().__post_init__()
        if self.keep > self.candidates:
            raise ConfigError(f"ued.keep ({self.keep}) must be <= ued.candidates ({self.candidates})")


@struct.dataclass
class SFLState:
    kept: B.LevelBuffer  # the most learnable levels of the last refresh, scored by learnability


class SFL(LevelAlgorithm):
    """Sampling For Learnability: every `refresh_every` updates, the `keep` of `candidates` fresh
    levels with the highest p (1 - p) over `scoring_episodes` episodes each are kept; a share
    `buffer_share` of each rollout's envs plays them, the rest fresh levels; the agent learns from
    every rollout."""

    Settings = SFLSettings
    row_keys = BUFFER_ROWS
    latest_keys = BUFFER_ROWS

    @classmethod
    def needs(cls, settings: SFLSettings) -> Needs:
        return Needs(success=True, scoring_episodes=settings.scoring_episodes, scored_levels=settings.candidates)

    @classmethod
    def check(cls, settings: SFLSettings, run: RunShape) -> list[str]:
        if settings.refresh_every > run.updates:
            return [
                f"ued.refresh_every ({settings.refresh_every}) is more than the run's {run.updates} updates: "
                f"the kept set is scored once, at the first update"
            ]
        return []

    def init(self, level, key) -> SFLState:
        return SFLState(kept=B.empty(level, self.settings.keep))

    def choose(self, state: SFLState, hp, key, context) -> tuple[SFLState, Decision]:
        k_refresh, k_fresh, k_pick = jax.random.split(key, 3)
        due = context.iteration % self.settings.refresh_every == 0
        kept, scoring_steps = jax.lax.cond(
            due,
            lambda kept: self.refresh(kept, k_refresh, context.agent_state),
            lambda kept: (kept, jnp.zeros((), jnp.int32)),
            state.kept,
        )
        picks = jax.random.randint(k_pick, (self.num_envs,), 0, self.settings.keep)
        from_kept = jnp.arange(self.num_envs) < jnp.round(hp.buffer_share * self.num_envs)
        fresh = self.fresh_levels(k_fresh)
        levels = jax.tree.map(
            lambda k, f: jnp.where(from_kept.reshape(-1, *([1] * (f.ndim - 1))), k[picks], f), kept.levels, fresh
        )
        decision = Decision(levels=levels, learn=jnp.bool_(True), scoring_steps=scoring_steps)
        return state.replace(kept=kept), decision

    def refresh(self, kept: B.LevelBuffer, key, agent_state) -> tuple[B.LevelBuffer, jax.Array]:
        """The `keep` most learnable of `candidates` fresh levels, and the env steps their scoring
        episodes took."""
        settings = self.settings
        k_levels, k_eval = jax.random.split(key)
        candidates = self.fresh_levels(k_levels, settings.candidates)
        episodes = jax.vmap(self.tools.evaluate, in_axes=(None, 0, 0))(
            agent_state, candidates, jax.random.split(k_eval, settings.candidates)
        )
        learnability = S.learnability(jnp.mean(jnp.nan_to_num(episodes["eval/success"]), axis=-1))
        _, top = jax.lax.top_k(learnability, settings.keep)
        kept = kept.replace(
            levels=jax.tree.map(lambda x: x[top], candidates),
            scores=learnability[top],
            size=jnp.int32(settings.keep),
            clock=kept.clock + 1,
        )
        return kept, jnp.sum(episodes["eval/length"]).astype(jnp.int32)

    def rows(self, state: SFLState, decision: Decision) -> dict[str, jax.Array]:
        return buffer_rows(state.kept)
