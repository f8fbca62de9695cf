"""The level algorithms that decide every rollout inside the compiled program.

Each update of a lane (see `loop/program.py`) asks the decider for the levels of its `num_envs`
envs, resets every env onto them, collects the unroll (an env whose episode ends replays its
level), lets the agent learn from it or not, and hands the decider the levels' scores:

- `dr`: fresh levels from the generator every rollout; the agent always learns.
- `plr`: replay buffer levels by priority with probability `replay_prob` once the buffer is
  `minimum_fill` full, else fresh levels, which are scored and offered to the buffer; the agent
  learns from both.
- `robust_plr`: as `plr`, but the agent learns only from replayed levels; fresh levels are only
  scored.
- `accel`: robust PLR whose every replay is followed by a rollout on the replayed levels edited
  `edits` times by the env's mutator; the edited levels are scored and offered to the buffer.
- `sfl`: every `sfl_every` updates, `sfl_levels` fresh levels are played `sfl_rollouts` times
  each with the sampling policy and the `sfl_keep` most learnable (p (1 - p)) are kept; each
  rollout draws a share `sfl_fraction` of its envs' levels from those, the rest fresh. The
  scoring episodes' env steps are counted apart (`UEDState.scoring_steps`, reported as
  `ued/scoring_env_steps`): `env_steps` counts the steps the agent trains on.

One decision per lane and rollout, for all its envs (as JaxUED's): every lane's program holds
every branch its algorithm may take, selected with `lax.switch`, so a decision never compiles
anything. The decider's state (its buffer, ACCEL's last replayed levels, its traced settings)
is part of the training state: checkpoints and PBT exploits carry it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

import ajax_tune.ued.buffer as B
import ajax_tune.ued.scores as S
from ajax_tune.agents.hparams import init_hparams
from ajax_tune.ued.config import UEDConfig

DR, REPLAY, MUTATE = 0, 1, 2
#: The rows every update writes (`ued/*`): whether it replayed or edited buffer levels, and the
#: buffer's size and scores after it. Results report the share of replayed and edited rollouts
#: over the call, and the buffer as the call left it (`LATEST`).
ROWS = ("ued/replay", "ued/mutate", "ued/buffer_size", "ued/score_mean", "ued/score_std", "ued/score_max")
LATEST = ("ued/buffer_size", "ued/score_mean", "ued/score_std", "ued/score_max")


@struct.dataclass
class UEDState:
    buffer: B.LevelBuffer  # SFL: its most learnable levels
    last: Any  # the levels of the last rollout, [num_envs] (ACCEL edits them after a replay)
    mutate_next: jax.Array  # bool: ACCEL's next rollout edits `last`
    hp: Any  # the traced settings (UEDHparams)
    scoring_steps: jax.Array  # int32: env steps of SFL's scoring episodes since the run began (not in `env_steps`)


@struct.dataclass
class Plan:
    kind: jax.Array  # int32: DR, REPLAY or MUTATE
    slots: jax.Array  # int32 [num_envs]: the buffer slot of each env's level (replay), else -1
    learn: jax.Array  # bool: whether the agent learns from this rollout


class Decider:
    def __init__(
        self,
        config: UEDConfig,
        num_envs: int,
        generate: Callable,
        mutate: Callable | None,
        evaluate: Callable | None = None,
    ):
        """`generate(key) -> level`, `mutate(key, level, num_edits) -> level` (levels: one env's
        task); `evaluate(agent_state, level, key) -> per-episode rows` with the sampling policy
        and `sfl_rollouts` episodes (SFL only)."""
        self.config, self.num_envs = config, num_envs
        self.generate, self.mutate, self.evaluate = generate, mutate, evaluate

    def init(self, task: Any) -> UEDState:
        """A fresh state: an empty buffer shaped as `task` (one env's level)."""
        cfg = self.config
        capacity = cfg.sfl_keep if cfg.algorithm == "sfl" else cfg.buffer_size if cfg.prioritised else 1
        last = jax.tree.map(lambda x: jnp.broadcast_to(x, (self.num_envs, *jnp.shape(x))), task)
        return UEDState(
            buffer=B.empty(task, capacity),
            last=last,
            mutate_next=jnp.zeros((), jnp.bool_),
            hp=init_hparams(cfg),
            scoring_steps=jnp.zeros((), jnp.int32),
        )

    # -- before the rollout --------------------------------------------------------------

    def choose(self, state: UEDState, key: jax.Array, agent_state: Any, iteration: jax.Array) -> tuple[UEDState, Any, Plan]:
        """The levels of this rollout's envs, and what follows from them."""
        cfg, hp = self.config, state.hp
        k_new, k_decide, k_replay, k_edit, k_sfl = jax.random.split(key, 5)
        fresh = jax.vmap(self.generate)(jax.random.split(k_new, self.num_envs))
        none = jnp.full((self.num_envs,), -1, jnp.int32)
        if cfg.algorithm == "dr":
            return state, fresh, Plan(kind=jnp.int32(DR), slots=none, learn=jnp.bool_(True))
        if cfg.algorithm == "sfl":
            return self._sfl(state, fresh, k_sfl, agent_state, iteration)

        buf = state.buffer
        ready = buf.size >= jnp.ceil(hp.minimum_fill * B.capacity(buf)).astype(jnp.int32)
        replay = ready & (jax.random.uniform(k_decide) < hp.replay_prob) & (buf.size > 0)
        kind = jnp.where(state.mutate_next, MUTATE, jnp.where(replay, REPLAY, DR)).astype(jnp.int32)

        def on_new(buf):
            return buf, none, fresh

        def on_replay(buf):
            return B.sample(buf, k_replay, self.num_envs, hp.temperature, hp.staleness_coef)

        def on_mutate(buf):
            edits = jnp.round(hp.edits).astype(jnp.int32)
            edited = jax.vmap(self.mutate, in_axes=(0, 0, None))(jax.random.split(k_edit, self.num_envs), state.last, edits)
            return buf, none, edited

        branches = [on_new, on_replay] + ([on_mutate] if cfg.algorithm == "accel" else [])
        buf, slots, levels = jax.lax.switch(jnp.minimum(kind, len(branches) - 1), branches, buf)
        learn = (kind == REPLAY) | (not cfg.robust)
        return state.replace(buffer=buf), levels, Plan(kind=kind, slots=slots, learn=jnp.asarray(learn))

    def _sfl(self, state: UEDState, fresh: Any, key: jax.Array, agent_state: Any, iteration) -> tuple[UEDState, Any, Plan]:
        cfg, hp = self.config, state.hp
        k_refresh, k_eval, k_pick = jax.random.split(key, 3)

        def refresh(buf):
            candidates = jax.vmap(self.generate)(jax.random.split(k_refresh, cfg.sfl_levels))
            rows = jax.vmap(self.evaluate, in_axes=(None, 0, 0))(
                agent_state, candidates, jax.random.split(k_eval, cfg.sfl_levels)
            )
            score = S.learnability(jnp.mean(jnp.nan_to_num(rows["eval/success"]), axis=-1))
            _, top = jax.lax.top_k(score, cfg.sfl_keep)
            kept = buf.replace(
                levels=jax.tree.map(lambda x: x[top], candidates),
                scores=score[top],
                size=jnp.int32(cfg.sfl_keep),
                clock=buf.clock + 1,
            )
            # the scoring episodes' own steps: env interaction the training steps do not count
            return kept, jnp.sum(rows["eval/length"]).astype(jnp.int32)

        buf, scored = jax.lax.cond(
            iteration % cfg.sfl_every == 0, refresh, lambda buf: (buf, jnp.zeros((), jnp.int32)), state.buffer
        )
        state = state.replace(scoring_steps=state.scoring_steps + scored)
        picks = jax.random.randint(k_pick, (self.num_envs,), 0, cfg.sfl_keep)
        kept = jnp.arange(self.num_envs) < jnp.round(hp.sfl_fraction * self.num_envs)
        levels = jax.tree.map(lambda k, f: jnp.where(kept.reshape(-1, *([1] * (f.ndim - 1))), k[picks], f), buf.levels, fresh)
        slots = jnp.where(kept, picks, -1).astype(jnp.int32)
        return state.replace(buffer=buf), levels, Plan(kind=jnp.int32(REPLAY), slots=slots, learn=jnp.bool_(True))

    # -- after the rollout ---------------------------------------------------------------

    def observe(self, state: UEDState, plan: Plan, levels: Any, values, advantages, episodes: dict) -> UEDState:
        """Score the rollout's levels and update the buffer: replayed levels are rescored, fresh
        and edited ones offered. `episodes` holds the unroll's per-env `count`, `max_return` and
        per-step `valid`."""
        cfg = self.config
        state = state.replace(last=levels, mutate_next=(cfg.algorithm == "accel") & (plan.kind == REPLAY))
        if not cfg.prioritised:
            return state
        buf, valid = state.buffer, episodes["valid"]
        replayed = plan.kind == REPLAY
        stored_best = jnp.where(replayed, buf.max_returns[jnp.maximum(plan.slots, 0)], -jnp.inf)
        best = jnp.maximum(stored_best, episodes["max_return"])
        completed = episodes["count"] > 0
        if cfg.score == "pvl":
            score = S.positive_value_loss(advantages, valid, completed)
        else:
            score = jnp.where(completed, S.max_mc(values, valid, best), -jnp.inf)

        def on_replay(buf):
            return B.rescore(buf, plan.slots, score, best)

        def on_offer(buf):
            return B.insert(buf, levels, score, best, state.hp, cfg.duplicate_check)[0]

        return state.replace(buffer=jax.lax.cond(replayed, on_replay, on_offer, buf))

    def rows(self, state: UEDState, plan: Plan) -> dict[str, jax.Array]:
        buf = state.buffer
        filled = jnp.arange(B.capacity(buf)) < buf.size
        finite = filled & jnp.isfinite(buf.scores)
        count = jnp.maximum(finite.sum(), 1)
        mean = jnp.where(finite, buf.scores, 0.0).sum() / count
        spread = jnp.sqrt(jnp.where(finite, (buf.scores - mean) ** 2, 0.0).sum() / count)
        nan = jnp.float32(jnp.nan)
        values = (
            (plan.kind == REPLAY).astype(jnp.float32),
            (plan.kind == MUTATE).astype(jnp.float32),
            buf.size.astype(jnp.float32),
            jnp.where(finite.any(), mean, nan),
            jnp.where(finite.any(), spread, nan),
            jnp.where(finite.any(), jnp.max(jnp.where(finite, buf.scores, -jnp.inf)), nan),
        )
        return dict(zip(ROWS, values, strict=True))
