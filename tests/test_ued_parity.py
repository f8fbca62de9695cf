"""The level buffer (`ajax_tune/ued/buffer.py`) and the scores (`ajax_tune/ued/scores.py`) equal
JaxUED's `LevelSampler` and `jaxued.utils` on the same inputs, and the maze's generator and
mutator give JaxUED's levels for the same keys.

Each test builds many random cases (buffers empty, partly and fully filled; tied, repeated and
-inf scores; levels drawn from a small set, so duplicates are common; random timestamps and
clocks; traced temperatures and staleness weights), runs ours and JaxUED's side by side in one
jitted, vmapped program, and asserts the results equal: slots exactly, states exactly (levels,
scores, extras, `last_seen` = JaxUED's timestamps, `clock` = its episode count, `size`), weights
to float32 tolerance. Each asserts that the cases reached what it is about (replacements,
refusals, duplicates), so a generator that stopped producing them fails instead of passing.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune.ued import buffer as B
from ajax_tune.ued import scores as S
from tests.support.helpers import host, import_extra

import_extra("jaxued", extra="ued")

from jaxued import utils as jaxued_utils  # noqa: E402
from jaxued.environments.maze import make_level_generator, make_level_mutator_minimax  # noqa: E402
from jaxued.level_sampler import LevelSampler  # noqa: E402

from ajax_tune.envs import make_env  # noqa: E402

CAPACITY, CASES, BATCH = 8, 96, 6
PLACEHOLDER = {"cells": jnp.zeros(2, jnp.int32), "flag": jnp.zeros((), jnp.bool_)}


@pytest.fixture(scope="module", autouse=True)
def jaxued_runs_on_this_jax():
    """jaxued 0.0.1 (PyPI) calls `jax.tree_map`, which jax 0.6 removed: the tests lend it one,
    for this module only (the library itself goes through `compat` and changes nothing)."""
    with pytest.MonkeyPatch.context() as patch:
        if not hasattr(jax, "tree_map"):
            patch.setattr(jax, "tree_map", jax.tree_util.tree_map, raising=False)
        yield


def sampler(temperature, staleness_coef, duplicate_check=False):
    """JaxUED's sampler with our (possibly traced) settings: it reads them as plain attributes."""
    return LevelSampler(
        CAPACITY,
        staleness_coeff=staleness_coef,
        prioritization_params={"temperature": temperature},
        duplicate_check=duplicate_check,
    )


def random_levels(rng, *batch):
    """Levels out of 18 possible ones, so repeats are common; generated on the host (so the
    jitted programs hold only what is compared)."""
    return {"cells": rng.integers(0, 3, (*batch, 2)).astype(np.int32), "flag": rng.random(batch) < 0.5}


def random_scores(rng, *batch):
    """Scores with ties (a few values) and -inf (a rollout that completed no episode)."""
    tied = rng.choice(np.array([-np.inf, 0.0, 0.5, 1.0], np.float32), batch)
    return np.where(rng.random(batch) < 0.5, tied, rng.normal(size=batch)).astype(np.float32)


def random_buffers(rng, cases, least=0) -> B.LevelBuffer:
    """`cases` buffers as use leaves them: the first `size` slots filled (half the cases full),
    the rest at their placeholders with -inf scores; every `last_seen` at most the clock."""
    size = np.where(rng.random(cases) < 0.5, CAPACITY, rng.integers(least, CAPACITY + 1, cases)).astype(np.int32)
    filled = np.arange(CAPACITY) < size[:, None]
    clock = rng.integers(0, 40, cases).astype(np.int32)
    levels = random_levels(rng, cases, CAPACITY)
    levels = {k: np.where(filled.reshape(*filled.shape, *([1] * (v.ndim - 2))), v, np.zeros_like(v)) for k, v in levels.items()}
    return B.LevelBuffer(
        levels=levels,
        scores=np.where(filled, random_scores(rng, cases, CAPACITY), -np.inf).astype(np.float32),
        extra={"max_return": np.where(filled, rng.normal(size=(cases, CAPACITY)), -np.inf).astype(np.float32)},
        last_seen=np.where(filled, rng.integers(0, clock[:, None] + 1, (cases, CAPACITY)), 0).astype(np.int32),
        size=size,
        clock=clock,
    )


def theirs(buffer: B.LevelBuffer) -> dict:
    return {
        "levels": buffer.levels,
        "scores": buffer.scores,
        "timestamps": buffer.last_seen,
        "size": buffer.size,
        "episode_count": buffer.clock,
        "levels_extra": buffer.extra,
    }


def ours(sampler: dict) -> B.LevelBuffer:
    return B.LevelBuffer(
        levels=sampler["levels"],
        scores=sampler["scores"],
        extra=sampler["levels_extra"],
        last_seen=sampler["timestamps"],
        size=jnp.asarray(sampler["size"], jnp.int32),
        clock=jnp.asarray(sampler["episode_count"], jnp.int32),
    )


def settings(rng, cases):
    """Temperatures from 0.1 to 2 and staleness weights from 0 to 1, exactly 0 and 1 included."""
    temperature = rng.uniform(0.1, 2.0, cases).astype(np.float32)
    ends = rng.integers(0, 4, cases)  # a quarter each: 0, 1, else uniform
    return temperature, np.where(ends == 0, 0.0, np.where(ends == 1, 1.0, rng.random(cases))).astype(np.float32)


def assert_states_equal(mine: B.LevelBuffer, reference: dict):
    mine, reference = host(mine), host(ours(reference))
    for name in ("scores", "last_seen", "size", "clock"):
        np.testing.assert_array_equal(getattr(mine, name), getattr(reference, name), err_msg=name)
    for name in ("levels", "extra"):
        for a, b in zip(jax.tree.leaves(getattr(mine, name)), jax.tree.leaves(getattr(reference, name)), strict=True):
            np.testing.assert_array_equal(a, b, err_msg=name)


# -- the buffer ---------------------------------------------------------------------------------


def test_replay_weights_and_readiness_equal_jaxueds():
    rng = np.random.default_rng(0)
    buffers = random_buffers(rng, CASES)
    # fill ratios on and between the buffer's steps (k / CAPACITY), 0 and 1 among them
    minimum_fill = (rng.integers(0, 2 * CAPACITY + 1, CASES) / (2 * CAPACITY)).astype(np.float32)

    @jax.jit
    @jax.vmap
    def both(buffer, temperature, coef, minimum_fill):
        sampled = theirs(buffer)
        replay_always = LevelSampler(CAPACITY, replay_prob=1.0, minimum_fill_ratio=minimum_fill)
        return (
            (B.weights(buffer, temperature, coef), sampler(temperature, coef).level_weights(sampled)),
            (B.ready(buffer, minimum_fill), replay_always.sample_replay_decision(sampled, jax.random.key(0))),
        )

    (w, w_ref), (ready, ready_ref) = host(both(buffers, *settings(rng, CASES), minimum_fill))
    used = buffers.size > 0  # JaxUED's weights of an empty buffer are NaN (0/0), ours 0: nothing to draw either way
    np.testing.assert_allclose(w[used], w_ref[used], rtol=1e-6, atol=1e-7)
    assert np.all(w[~used] == 0) and np.all(np.isnan(w_ref[~used]))
    np.testing.assert_array_equal(ready, ready_ref)
    assert (~used).any() and (buffers.size == CAPACITY).any() and (used & (buffers.size < CAPACITY)).any()
    assert ready.any() and (~ready).any()


@pytest.mark.parametrize("duplicate_check", [False, True])
def test_inserting_a_batch_equals_jaxueds(duplicate_check):
    """The slot each new level takes (the next free one, else the least weighted), whether it
    replaces that slot's level (only with a higher score), duplicates (with the check: the entry
    is updated, whatever its score), the clock and the timestamps."""
    rng = np.random.default_rng(1 + duplicate_check)
    before = random_buffers(rng, CASES)
    levels = random_levels(rng, CASES, BATCH)
    # a third of the new levels are copies of stored ones
    copy = (rng.random((CASES, BATCH)) < 0.3) & (before.size[:, None] > 0)
    which = rng.integers(0, np.maximum(before.size, 1)[:, None], (CASES, BATCH))
    for name, new in levels.items():
        stored = np.take_along_axis(before.levels[name], which.reshape(*which.shape, *([1] * (new.ndim - 2))), axis=1)
        levels[name] = np.where(copy.reshape(*copy.shape, *([1] * (new.ndim - 2))), stored, new)
    scores = random_scores(rng, CASES, BATCH)
    extra = {"max_return": scores + 1.0}

    @jax.jit
    @jax.vmap
    def both(buffer, levels, scores, extra, temperature, coef):
        mine = B.insert(
            buffer, levels, scores, temperature=temperature, staleness_coef=coef, duplicate_check=duplicate_check, extra=extra
        )
        return mine, sampler(temperature, coef, duplicate_check).insert_batch(theirs(buffer), levels, scores, extra)

    (mine, slots), (reference, slots_ref) = both(before, levels, scores, extra, *settings(rng, CASES))
    np.testing.assert_array_equal(host(slots), host(slots_ref))
    assert_states_equal(mine, reference)
    # the cases reached every rule: free slots filled, full buffers replacing and refusing
    slots, full = host(slots), before.size == CAPACITY
    assert (slots[~full] >= 0).any() and (slots[full] >= 0).any() and (slots[full] == -1).any()
    if duplicate_check:  # some levels went to slots they already held: more writes than new slots
        assert ((slots >= 0).sum(axis=1) > host(mine.size) - before.size).any()


def test_replay_draws_equal_jaxueds_one_after_another():
    """Same key, same slots: each draw from the weights the previous draws' staleness left,
    with JaxUED's key for draw i (`split(key, count)[i]`)."""
    count, rng = 16, np.random.default_rng(3)
    buffers = random_buffers(rng, CASES, least=1)  # something to draw

    @jax.jit
    @jax.vmap
    def both(buffer, key, temperature, coef):
        mine = B.sample(buffer, key, count, temperature, coef)
        return mine, sampler(temperature, coef).sample_replay_levels(theirs(buffer), key, count)

    keys = jax.random.split(jax.random.key(3), CASES)
    (mine, slots, levels), (reference, (slots_ref, levels_ref)) = both(buffers, keys, *settings(rng, CASES))
    np.testing.assert_array_equal(host(slots), host(slots_ref))
    assert_states_equal(mine, reference)
    for a, b in zip(jax.tree.leaves(host(levels)), jax.tree.leaves(host(levels_ref)), strict=True):
        np.testing.assert_array_equal(a, b)
    assert np.mean([len(set(row)) < count for row in host(slots)]) > 0.5  # slots repeat: draws with replacement


def test_updating_replayed_slots_equals_jaxueds():
    """New scores and extras for replayed slots, repeated slots and -inf scores included (the
    last entry of a repeated slot counts; -inf is written)."""
    rng = np.random.default_rng(4)
    buffers = random_buffers(rng, CASES, least=1)
    slots = rng.integers(0, buffers.size[:, None], (CASES, BATCH)).astype(np.int32)
    scores = random_scores(rng, CASES, BATCH)

    @jax.jit
    @jax.vmap
    def both(buffer, slots, scores):
        extra = {"max_return": -scores}
        return B.update(buffer, slots, scores, extra), LevelSampler(CAPACITY).update_batch(theirs(buffer), slots, scores, extra)

    mine, reference = both(buffers, slots, scores)
    assert_states_equal(mine, reference)
    assert np.mean([len(set(row)) < BATCH for row in slots]) > 0.5 and np.isneginf(scores).any()


def test_finding_a_level_equals_jaxueds():
    rng = np.random.default_rng(5)
    buffers, levels = random_buffers(rng, CASES), random_levels(rng, CASES)

    @jax.jit
    @jax.vmap
    def both(buffer, level):
        return B.find(buffer, level), LevelSampler(CAPACITY).find(theirs(buffer), level)

    found, found_ref = host(both(buffers, levels))
    np.testing.assert_array_equal(found, found_ref)
    assert (found >= 0).any() and (found == -1).any()


def test_a_plr_loop_keeps_the_buffer_as_jaxueds_step_after_step():
    """maze_plr's use of the sampler, 30 rollouts of 4 levels: replay (once the buffer is half
    full) and rescore, or offer fresh levels; the buffers and the slots stay equal all along."""
    steps, envs, cases, rng = 30, 4, 16, np.random.default_rng(6)
    inputs = {
        "levels": random_levels(rng, cases, steps, envs),
        "scores": random_scores(rng, cases, steps, envs),
        "decide": rng.random((cases, steps)).astype(np.float32),
        "key": jax.random.split(jax.random.key(6), (cases, steps)),
    }

    def step(carry, now):
        mine, reference, temperature, coef = carry
        extra = {"max_return": now["scores"] * 2.0}
        ref_sampler = LevelSampler(
            CAPACITY, staleness_coeff=coef, prioritization_params={"temperature": temperature}, duplicate_check=True
        )

        def on_replay(mine, reference):
            mine, slots, _ = B.sample(mine, now["key"], envs, temperature, coef)
            reference, (slots_ref, _) = ref_sampler.sample_replay_levels(reference, now["key"], envs)
            mine = B.update(mine, slots, now["scores"], extra)
            return mine, ref_sampler.update_batch(reference, slots_ref, now["scores"], extra), slots, slots_ref

        def on_new(mine, reference):
            mine, slots = B.insert(mine, now["levels"], now["scores"], temperature=temperature, staleness_coef=coef, extra=extra)
            reference, slots_ref = ref_sampler.insert_batch(reference, now["levels"], now["scores"], extra)
            return mine, reference, slots, slots_ref

        replay = B.ready(mine, 0.5) & (now["decide"] < 0.7)
        mine, reference, slots, slots_ref = jax.lax.cond(replay, on_replay, on_new, mine, reference)
        return (mine, reference, temperature, coef), (ours(reference), mine, slots, slots_ref, replay)

    @jax.jit
    @jax.vmap
    def run(inputs, temperature, coef):
        start = B.empty(PLACEHOLDER, CAPACITY, extra={"max_return": jnp.float32(-jnp.inf)})
        return jax.lax.scan(step, (start, theirs(start), temperature, coef), inputs)[1]

    reference, mine, slots, slots_ref, replayed = run(inputs, *settings(rng, cases))
    np.testing.assert_array_equal(host(slots), host(slots_ref))
    assert_states_equal(mine, theirs(reference))
    replayed = host(replayed)
    assert replayed.any() and (~replayed).any() and (host(mine.size)[:, -1] == CAPACITY).all()


# -- the scores ---------------------------------------------------------------------------------


def test_scores_equal_jaxueds():
    """Positive value loss, MaxMC and the best returns, over rollouts with no episode, episodes
    ending at the first or the last step, many short ones and one long one; negative rewards too
    (JaxUED's best return never falls below 0)."""
    steps, envs, rng = 24, 256, np.random.default_rng(7)

    @jax.jit
    def both(done, values, advantages, rewards, best):
        return (
            (S.positive_value_loss(done, advantages), jaxued_utils.positive_value_loss(done, advantages)),
            (S.max_mc(done, values, best), jaxued_utils.max_mc(done, values, best)),
            (S.max_returns(done, rewards), jaxued_utils.compute_max_returns(done, rewards)),
        )

    for _ in range(3):
        rate = rng.choice([0.0, 0.03, 0.1, 0.4, 1.0], envs)
        done = rng.random((steps, envs)) < rate
        done[:, :4] = False  # no episode; one ending at the last step; one at the first; all one step long
        done[-1, 1], done[0, 2], done[:, 3] = True, True, True
        values, advantages, rewards = (rng.normal(size=(steps, envs)).astype(np.float32) for _ in range(3))
        best = rng.normal(size=envs).astype(np.float32)
        best[::17] = -np.inf  # a level with no best return yet
        pairs = list(host(both(done, values, advantages, rewards - 0.2, best)))
        # JaxUED's MaxMC against a -inf best return can be NaN (it restarts the running sum, -inf,
        # by multiplying it by 0); ours is -inf there, as where no episode completed
        unknown = np.isneginf(best)
        assert np.all(np.isneginf(pairs[1][0][unknown])) and np.all(~np.isfinite(pairs[1][1][unknown]))
        pairs[1] = (pairs[1][0][~unknown], pairs[1][1][~unknown])
        for mine, reference in pairs:
            np.testing.assert_allclose(mine, reference, rtol=1e-5, atol=1e-6)
        none = ~done.any(axis=0)
        assert np.all(np.isneginf(pairs[0][0][none])) and np.all(pairs[2][0][none] == 0)


# -- the maze's levels --------------------------------------------------------------------------


@pytest.mark.parametrize("size", [dict(height=13, width=13, n_walls=25), dict(height=7, width=9, n_walls=6)])
def test_the_mazes_generator_gives_jaxueds_levels_as_the_issue_describes_them(size):
    """maze_plr's 13 x 13 with 25 walls, and a small rectangular one: for the same keys, the same
    walls, positions and direction; at most `n_walls` walls (drawn with replacement), the agent
    and the goal on distinct free cells."""
    env = make_env("jaxued/maze", **size)
    keys = jax.random.split(jax.random.key(8), 128)
    reference = make_level_generator(size["height"], size["width"], size["n_walls"])
    mine, theirs_ = host(jax.jit(jax.vmap(lambda k: (env.generate_level(k), reference(k))))(keys))
    for name in env.task_spec:
        np.testing.assert_array_equal(mine[name], np.asarray(getattr(theirs_, name)).astype(mine[name].dtype), err_msg=name)
    walls = mine["wall_map"].reshape(len(keys), -1).sum(axis=1)
    assert walls.max() <= size["n_walls"] and walls.min() >= 1 and (walls < size["n_walls"]).any()  # repeats happen
    rows = np.arange(len(keys))
    agent, goal = mine["agent_pos"], mine["goal_pos"]
    assert not np.any(np.all(agent == goal, axis=1))
    assert not mine["wall_map"][rows, agent[:, 1], agent[:, 0]].any() and not mine["wall_map"][rows, goal[:, 1], goal[:, 0]].any()
    assert set(np.unique(mine["agent_dir"])) == {0, 1, 2, 3}


def test_the_mazes_mutator_gives_jaxueds_levels_and_edits_at_most_num_edits():
    """The minimax mutator maze_plr uses, for the same keys and levels: the same children. Each
    edit flips one wall (never under the agent or the goal), moves the goal, or nothing: walls
    changed plus a moved goal never exceed `num_edits`, the agent never moves, and the goal stays
    on a free cell apart from the agent."""
    env = make_env("jaxued/maze", height=13, width=13, n_walls=25, max_edits=8)
    cases = 96
    level_keys, edit_keys = jax.random.split(jax.random.key(9), (2, cases))
    edits = np.random.default_rng(9).choice(np.array([0, 1, 2, 5, 8], np.int32), cases)
    reference = make_level_mutator_minimax(env.max_edits)

    def both(level_key, key, n):
        parent = env.generate_level(level_key)
        return parent, env.mutate_level(key, parent, n), reference(key, env.level_of(parent), n)

    parent, child, theirs_ = host(jax.jit(jax.vmap(both))(level_keys, edit_keys, edits))
    for name in env.task_spec:
        np.testing.assert_array_equal(child[name], np.asarray(getattr(theirs_, name)).astype(child[name].dtype), err_msg=name)
    changed = (child["wall_map"] != parent["wall_map"]).reshape(cases, -1).sum(axis=1)
    moved = np.any(child["goal_pos"] != parent["goal_pos"], axis=1)
    assert np.all(changed + moved <= edits) and (changed[edits == 0] == 0).all() and not moved[edits == 0].any()
    assert (changed > 1).any() and moved.any()
    np.testing.assert_array_equal(child["agent_pos"], parent["agent_pos"])
    np.testing.assert_array_equal(child["agent_dir"], parent["agent_dir"])
    rows, goal = np.arange(cases), child["goal_pos"]
    assert not child["wall_map"][rows, goal[:, 1], goal[:, 0]].any() and not np.all(goal == child["agent_pos"], axis=1).any()
