"""The level buffer and the scores as a standalone API (`ajax_tune/ued/buffer.py`, `scores.py`):
its rules on small hand-made cases, its settings traced, its misuse refused in one line, and
docs/level-buffer.md's example run as written. Equality with JaxUED on many random cases is
`tests/test_ued_parity.py`'s."""

import math
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune import compat
from ajax_tune.errors import ConfigError
from ajax_tune.ued import buffer as B
from ajax_tune.ued import scores as S
from tests.test_readme import fenced_blocks

PAGE = pathlib.Path(__file__).resolve().parent.parent / "docs" / "level-buffer.md"
SETTINGS = {"temperature": 1.0, "staleness_coef": 0.3}
# jitted, so that each test compiles a few programs (kept by the suite's compilation cache)
# rather than running every operation of a scan on its own
insert = jax.jit(B.insert, static_argnames="duplicate_check")
sample = jax.jit(B.sample, static_argnames="count")
update, weights = jax.jit(B.update), jax.jit(B.weights)


def level(length: int) -> dict:
    return {"length": jnp.int32(length), "exit_reward": jnp.float32(0.0)}


def batch(*lengths) -> dict:
    return {"length": jnp.array(lengths, jnp.int32), "exit_reward": jnp.zeros(len(lengths), jnp.float32)}


def test_a_buffer_fills_free_slots_then_replaces_the_least_weighted_only_when_beaten():
    buf = B.empty(level(1), 3)
    buf, slots = insert(buf, batch(2, 3, 4), jnp.array([0.5, -jnp.inf, 0.2]), duplicate_check=False, **SETTINGS)
    assert slots.tolist() == [0, -1, 1]  # a level that completed no episode is never written
    assert int(buf.size) == 2 and buf.levels["length"][:2].tolist() == [2, 4]
    assert int(buf.clock) == 3 and buf.last_seen[:2].tolist() == [1, 3]  # every offer ticks the clock
    buf, _ = insert(buf, batch(5), jnp.array([0.1]), duplicate_check=False, **SETTINGS)
    assert int(buf.size) == 3
    # full: a new level takes the slot of least replay weight (the lowest score, also the
    # freshest) only when it scores higher than that slot
    buf, slots = insert(buf, batch(6, 7), jnp.array([0.05, 0.9]), duplicate_check=False, **SETTINGS)
    assert slots.tolist() == [-1, 2] and sorted(buf.levels["length"].tolist()) == [2, 4, 7]
    assert int(buf.size) == 3 and int(buf.clock) == 6


def test_a_level_already_in_the_buffer_updates_its_own_entry_whatever_its_score():
    buf = B.empty(level(1), 4)
    buf, _ = insert(buf, batch(2, 3), jnp.array([0.5, 0.4]), **SETTINGS)
    buf, slots = insert(buf, batch(3), jnp.array([0.1]), **SETTINGS)
    assert slots.tolist() == [1] and int(buf.size) == 2 and float(buf.scores[1]) == pytest.approx(0.1)
    assert int(buf.last_seen[1]) == 3  # seen now
    buf, slots = insert(buf, batch(2), jnp.array([-jnp.inf]), **SETTINGS)  # as JaxUED: even -inf
    assert slots.tolist() == [0] and float(buf.scores[0]) == -math.inf and int(buf.size) == 2
    assert int(B.find(buf, level(3))) == 1 and int(B.find(buf, level(9))) == -1
    assert int(B.find(buf, level(1))) == -1  # the placeholder in the empty slots is no level


def test_replay_weights_mix_rank_and_staleness():
    buf = B.empty(level(1), 4)
    buf, _ = insert(buf, batch(2, 3, 4), jnp.array([0.3, 0.9, 0.1]), duplicate_check=False, **SETTINGS)
    by_rank = np.asarray(weights(buf, 1.0, 0.0))
    expected = np.array([1 / 2, 1, 1 / 3, 0.0])
    np.testing.assert_allclose(by_rank, expected / expected.sum(), rtol=1e-6)
    sharper = np.asarray(weights(buf, 0.5, 0.0))  # (1/r)^(1/temperature)
    np.testing.assert_allclose(sharper, expected**2 / (expected**2).sum(), rtol=1e-6)
    by_staleness = np.asarray(weights(buf, 1.0, 1.0))  # written at clock 1, 2, 3; now 3
    np.testing.assert_allclose(by_staleness, [2 / 3, 1 / 3, 0, 0], rtol=1e-6)
    assert np.asarray(weights(B.empty(level(1), 4), 1.0, 0.5)).tolist() == [0, 0, 0, 0]


def test_replay_draws_one_after_another_and_each_draw_is_seen_at_once():
    buf = B.empty(level(1), 4)
    buf, _ = insert(buf, batch(2, 3, 4), jnp.array([0.3, 0.9, 0.1]), duplicate_check=False, **SETTINGS)
    buf, slots, levels = sample(buf, jax.random.key(0), 64, 0.3, 0.0)
    slots = np.asarray(slots)
    assert set(slots.tolist()) <= {0, 1, 2} and np.mean(slots == 1) > 0.6  # the top one mostly
    assert int(buf.clock) == 3 + 64 and levels["length"].tolist() == [[2, 3, 4][s] for s in slots]
    for slot in set(slots.tolist()):  # each slot was seen at its last draw
        assert int(buf.last_seen[slot]) == 3 + 1 + int(np.flatnonzero(slots == slot)[-1])
    # all staleness: a slot just drawn weighs 0 and is never drawn next
    _, slots, _ = sample(buf, jax.random.key(1), 32, 1.0, 1.0)
    assert np.all(np.diff(np.asarray(slots)) != 0)


def test_readiness_is_the_filled_share():
    buf, _ = insert(B.empty(level(1), 4), batch(2, 3), jnp.array([0.5, 0.4]), **SETTINGS)
    assert [bool(B.ready(buf, f)) for f in (0.0, 0.5, 0.51, 1.0)] == [True, True, False, False]


def test_update_writes_scores_and_extras_the_last_repeat_wins_and_minus_one_is_skipped():
    buf = B.empty(level(1), 3, extra={"max_return": jnp.float32(-jnp.inf)})
    buf, _ = insert(buf, batch(2, 3), jnp.array([0.5, 0.4]), extra={"max_return": jnp.array([1.0, 2.0])}, **SETTINGS)
    before = buf
    buf = update(buf, jnp.array([0, 1, 0, -1]), jnp.array([0.7, -jnp.inf, 0.2, 9.0]), {"max_return": jnp.array([5.0, 6, 7, 8])})
    # a replay that completed no episode scores -inf, and the slot takes it (JaxUED's update_batch)
    np.testing.assert_allclose(np.asarray(buf.scores), [0.2, -np.inf, -np.inf])
    np.testing.assert_allclose(np.asarray(buf.extra["max_return"]), [7.0, 6.0, -np.inf])
    assert buf.last_seen.tolist() == before.last_seen.tolist() and int(buf.clock) == int(before.clock)
    kept = update(buf, jnp.array([1]), jnp.array([0.3]))  # no extra: extras stay
    np.testing.assert_allclose(np.asarray(kept.extra["max_return"]), [7.0, 6.0, -np.inf])


def test_extras_must_be_what_the_buffer_keeps():
    buf = B.empty(level(1), 3, extra={"max_return": jnp.float32(-jnp.inf)})
    with pytest.raises(ConfigError, match=r"the buffer keeps \['max_return'\] beside each level; give extra"):
        B.insert(buf, batch(2), jnp.array([0.5]), **SETTINGS)
    with pytest.raises(ConfigError, match=r"extra names \['best'\], the buffer keeps \['max_return'\]"):
        B.update(buf, jnp.array([0]), jnp.array([0.5]), {"best": jnp.array([1.0])})
    with pytest.raises(ConfigError, match=r"extra\['max_return'\] has shape \(2,\), expected \(1,\)"):
        B.insert(buf, batch(2), jnp.array([0.5]), extra={"max_return": jnp.zeros(2)}, **SETTINGS)


def test_settings_are_traced_and_a_buffer_vmaps():
    """PBT changes temperature and staleness between calls: one program serves every value; and
    one buffer per lane is a vmap."""

    def step(buf, key, levels, scores, temperature, staleness_coef):
        buf, _ = B.insert(buf, levels, scores, temperature=temperature, staleness_coef=staleness_coef)
        buf, slots, _ = B.sample(buf, key, 2, temperature, staleness_coef)
        return buf, slots, B.weights(buf, temperature, staleness_coef)

    lanes = jax.vmap(lambda _: B.empty(level(1), 4))(jnp.arange(3))
    levels = {"length": jnp.array([[2, 3], [4, 5], [6, 7]]), "exit_reward": jnp.zeros((3, 2))}
    scores = jnp.array([[0.1, 0.9], [0.5, 0.4], [0.2, 0.3]])
    keys = jax.random.split(jax.random.key(0), 3)
    lanes_step = jax.jit(jax.vmap(step))
    out = [
        lanes_step(lanes, keys, levels, scores, jnp.full(3, t), jnp.full(3, c)) for t, c in ((1.0, 0.0), (0.1, 0.0), (1.0, 1.0))
    ]
    assert compat.jit_cache_size(lanes_step) == 1
    assert not np.allclose(out[0][2], out[1][2]) and not np.allclose(out[0][2], out[2][2])
    assert out[0][0].size.tolist() == [2, 2, 2] and out[0][1].shape == (3, 2)


def test_scores_average_each_completed_episodes_time_mean():
    """Two envs over 6 steps: env 0's episodes end at steps 1 and 4 (step 5 belongs to none);
    env 1's never ends."""
    done = jnp.array([[0, 0], [1, 0], [0, 0], [0, 0], [1, 0], [0, 0]], jnp.bool_)
    advantages = jnp.array([[1.0, 5.0], [-2.0, 5.0], [3.0, 5.0], [0.0, 5.0], [3.0, 5.0], [99.0, 5.0]])
    pvl = S.positive_value_loss(done, advantages)
    # episode means of max(A, 0): (1 + 0) / 2 and (3 + 0 + 3) / 3; their mean: 1.25
    assert float(pvl[0]) == pytest.approx(1.25) and float(pvl[1]) == -math.inf
    values = jnp.array([[0.5, 0.0], [0.25, 0.0], [0.0, 0.0], [1.0, 0.0], [0.5, 0.0], [7.0, 0.0]])
    mc = S.max_mc(done, values, jnp.array([1.0, 3.0]))
    # 1 - V: episode means (0.5 + 0.75) / 2 and (1 + 0 + 0.5) / 3; their mean: (0.625 + 0.5) / 2
    assert float(mc[0]) == pytest.approx(0.5625) and float(mc[1]) == -math.inf
    rewards = jnp.array([[1.0, 1.0], [2.0, 1.0], [-1.0, 1.0], [-1.0, 1.0], [-1.0, 1.0], [9.0, 1.0]])
    np.testing.assert_allclose(np.asarray(S.max_returns(done, rewards)), [3.0, 0.0])  # 3 and -3; none: 0
    losing = S.max_returns(jnp.array([[True]]), jnp.array([[-2.0]]))
    assert float(losing[0]) == 0.0  # never below 0, as JaxUED's
    np.testing.assert_allclose(np.asarray(S.learnability(jnp.array([0.0, 0.5, 1.0]))), [0, 0.25, 0])


def test_the_pages_example_runs():
    """docs/level-buffer.md's example, as a reader would copy it."""
    (code,) = [code for _, code in fenced_blocks(PAGE.read_text(), "python")]
    scope: dict = {}
    exec(compile(code, str(PAGE), "exec"), scope)
    buffer = scope["buffer"]
    assert int(buffer.size) == 16 and int(buffer.clock) > 16 and np.isfinite(np.asarray(buffer.scores)).all()
