"""ACCEL (Parker-Holder et al. 2022), as JaxUED's `maze_plr.py --use_accel` runs it: robust PLR
whose every replay is followed by a rollout on the replayed levels, each edited `edits` times by
the env's mutator; the edited levels are scored and offered to the buffer like fresh ones, and
the agent does not learn from them. A buffer that starts from easy generated levels thus grows
harder by small steps the agent can follow."""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import jax.numpy as jnp
from flax import struct

from ajax_tune.errors import ConfigError
from ajax_tune.fields import traced
from ajax_tune.ued.algorithm import Decision, Needs, RunShape
from ajax_tune.ued.algorithms.plr import BUFFER_ROWS, REPLAY, PLRSettings, PLRState, RobustPLR

MUTATE = 2


@dataclasses.dataclass(frozen=True)
class ACCELSettings(PLRSettings):
    edits: int = traced(5, ge=1, doc="edits applied to each replayed level by the mutator")


@struct.dataclass
class ACCELState(PLRState):
    last: Any  # the levels of the last rollout, [num_envs]: the parents of the next edits
    mutate_next: jax.Array  # bool: the last rollout replayed, so the next one edits its levels


class ACCEL(RobustPLR):
    """ACCEL: robust PLR whose every replay is followed by a rollout on its levels edited `edits`
    times; the edited levels are scored and offered to the buffer, and the agent does not learn
    from them."""

    Settings = ACCELSettings
    row_keys = ("ued/replay", "ued/mutate", *BUFFER_ROWS)

    @classmethod
    def needs(cls, settings: ACCELSettings) -> Needs:
        return Needs(values=True, mutator=True)

    @classmethod
    def check(cls, settings: ACCELSettings, run: RunShape) -> list[str]:
        if run.max_level_edits is not None and settings.edits > run.max_level_edits:
            raise ConfigError(
                f"ued.edits ({settings.edits}) is more than the env's mutator applies per call ({run.max_level_edits}, "
                f"its max_edits): edits past it would do nothing"
            )
        return super().check(settings, run)

    def init(self, level, key) -> ACCELState:
        plr = super().init(level, key)
        last = jax.tree.map(lambda x: jnp.broadcast_to(x, (self.num_envs, *jnp.shape(x))), level)
        return ACCELState(buffer=plr.buffer, last=last, mutate_next=jnp.zeros((), jnp.bool_))

    def next_kind(self, state: ACCELState, hp, key) -> jax.Array:
        return jnp.where(state.mutate_next, MUTATE, super().next_kind(state, hp, key)).astype(jnp.int32)

    def branches(self, state: ACCELState, hp, key) -> list:
        k_plr, k_edit = jax.random.split(key)
        none = jnp.full((self.num_envs,), -1, jnp.int32)

        def mutate(buffer):
            edits = jnp.round(hp.edits).astype(jnp.int32)
            keys = jax.random.split(k_edit, self.num_envs)
            return buffer, none, jax.vmap(self.tools.mutate, in_axes=(0, 0, None))(keys, state.last, edits)

        return [*super().branches(state, hp, k_plr), mutate]

    def observe(self, state: ACCELState, hp, decision: Decision, rollout) -> ACCELState:
        state = super().observe(state, hp, decision, rollout)
        return state.replace(last=decision.levels, mutate_next=decision.memo.kind == REPLAY)

    def rows(self, state: ACCELState, decision: Decision) -> dict[str, jax.Array]:
        return {**super().rows(state, decision), "ued/mutate": (decision.memo.kind == MUTATE).astype(jnp.float32)}
