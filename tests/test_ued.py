"""Level algorithms deciding every rollout inside the compiled program (`ajax_tune/ued/`): the
buffer's rules, the scores, and the program's guarantees (nothing recompiles as levels change,
the buffer is part of the state: checkpoints, PBT exploits and population members)."""

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune import Runner
from ajax_tune.errors import ConfigError
from ajax_tune.results.predict import result_keys
from ajax_tune.ued import buffer as B
from ajax_tune.ued import scores as S
from ajax_tune.ued.config import UEDConfig
from tests.support.helpers import assert_refused_before_compiling, assert_trees_equal, corridor_config, host

HP = UEDConfig()  # its traced settings, as the buffer functions read them
TINY = {"num_envs": 4, "unroll_length": 16, "num_minibatches": 2, "update_epochs": 1, "hidden_sizes": [16]}


def ued_config(algorithm="robust_plr", **ued):
    return corridor_config(
        length=4,
        env={"name": "corridor", "kwargs": {"max_length": 12, "max_episode_steps": 16}, "task": {"length": 4}},
        agent=TINY,
        train={"timesteps_per_iteration": 4 * 16 * 4, "num_seeds": 2, "eval_episodes": 2},
        ued={"algorithm": algorithm, "buffer_size": 8, "minimum_fill": 0.5, **ued},
    )


def level(length: int) -> dict:
    return {"length": jnp.int32(length), "exit_reward": jnp.float32(0.0)}


def batch(*lengths) -> dict:
    return {"length": jnp.array(lengths, jnp.int32), "exit_reward": jnp.zeros(len(lengths), jnp.float32)}


# -- the buffer and the scores -----------------------------------------------------------------


def test_a_buffer_fills_free_slots_then_replaces_the_least_weighted_only_when_beaten():
    buf = B.empty(level(1), 3)
    buf, slots = B.insert(buf, batch(2, 3, 4), jnp.array([0.5, -jnp.inf, 0.2]), jnp.zeros(3), HP, duplicate_check=False)
    assert slots.tolist() == [0, -1, 1]  # a level that completed no episode is never written
    assert int(buf.size) == 2 and buf.levels["length"][:2].tolist() == [2, 4]
    buf, _ = B.insert(buf, batch(5), jnp.array([0.1]), jnp.zeros(1), HP, duplicate_check=False)
    assert int(buf.size) == 3
    # full: a new level takes the slot of least replay weight (the lowest score here: fresh
    # staleness counts too) only when it scores higher than that slot
    buf, slots = B.insert(buf, batch(6, 7), jnp.array([0.05, 0.9]), jnp.zeros(2), HP, duplicate_check=False)
    assert slots.tolist() == [-1, 2] and sorted(buf.levels["length"].tolist()) == [2, 4, 7]


def test_a_level_already_in_the_buffer_updates_its_own_entry():
    buf = B.empty(level(1), 4)
    buf, _ = B.insert(buf, batch(2, 3), jnp.array([0.5, 0.4]), jnp.zeros(2), HP, duplicate_check=True)
    buf, slots = B.insert(buf, batch(3), jnp.array([0.1]), jnp.zeros(1), HP, duplicate_check=True)
    assert slots.tolist() == [1] and int(buf.size) == 2 and float(buf.scores[1]) == pytest.approx(0.1)
    assert int(B.find(buf, level(9))) == -1


def test_replay_weights_mix_rank_and_staleness():
    buf = B.empty(level(1), 4)
    buf, _ = B.insert(buf, batch(2, 3, 4), jnp.array([0.3, 0.9, 0.1]), jnp.zeros(3), HP, duplicate_check=False)
    by_rank = np.asarray(B.weights(buf, 1.0, 0.0))
    expected = np.array([1 / 2, 1, 1 / 3, 0.0])
    np.testing.assert_allclose(by_rank, expected / expected.sum(), rtol=1e-6)
    by_staleness = np.asarray(B.weights(buf, 1.0, 1.0))  # written at clock 1, 2, 3; now 3
    np.testing.assert_allclose(by_staleness, [2 / 3, 1 / 3, 0, 0], rtol=1e-6)
    buf, slots, levels = B.sample(buf, jax.random.key(0), 64, 0.3, 0.0)
    assert set(np.asarray(slots).tolist()) <= {0, 1, 2} and np.mean(np.asarray(slots) == 1) > 0.6  # the top one mostly
    assert int(buf.clock) == 3 + 64 and levels["length"].shape == (64,)


def test_rescoring_a_replayed_slot_keeps_its_best_return_and_ignores_an_empty_rollout():
    buf = B.empty(level(1), 2)
    buf, _ = B.insert(buf, batch(2, 3), jnp.array([0.5, 0.4]), jnp.array([1.0, 2.0]), HP, duplicate_check=False)
    buf = B.rescore(buf, jnp.array([0, 1]), jnp.array([0.7, -jnp.inf]), jnp.array([0.5, 3.0]))
    np.testing.assert_allclose(np.asarray(buf.scores), [0.7, 0.4])
    np.testing.assert_allclose(np.asarray(buf.max_returns), [1.0, 3.0])


def test_scores():
    valid = jnp.array([[1, 1], [1, 1], [1, 0]], jnp.float32)  # [T, N]: env 1's last step was masked
    advantages = jnp.array([[1.0, -1.0], [-2.0, 3.0], [2.0, 9.0]])
    pvl = S.positive_value_loss(advantages, valid, jnp.array([True, False]))
    assert float(pvl[0]) == pytest.approx(1.0) and float(pvl[1]) == -math.inf
    values = jnp.array([[0.5, 0.0], [0.25, 0.0], [0.0, 0.0]])
    mc = S.max_mc(values, valid, jnp.array([1.0, -jnp.inf]))
    assert float(mc[0]) == pytest.approx(1.0 - 0.25) and float(mc[1]) == -math.inf
    np.testing.assert_allclose(np.asarray(S.learnability(jnp.array([0.0, 0.5, 1.0]))), [0, 0.25, 0])
