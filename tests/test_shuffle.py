"""Minibatch permutations drawn with one-operand sorts (`agents/shuffle.py`)."""

from __future__ import annotations

import itertools

import jax
import numpy as np
import pytest

from ajax_tune.agents import shuffle


@pytest.mark.parametrize("n", [1, 2, 3, 7, 512, 2048, 2049, 70_000])
def test_every_draw_is_a_permutation(n):
    perms = jax.vmap(lambda k: shuffle.permutation(k, n))(jax.random.split(jax.random.key(n), 3))
    assert perms.dtype == np.int32
    for perm in np.asarray(perms):
        np.testing.assert_array_equal(np.sort(perm), np.arange(n))
    if n >= 512:  # small n repeat permutations by chance
        assert len({tuple(p) for p in np.asarray(perms)}) == 3, "three keys drew the same permutation"


def test_the_same_key_draws_the_same_permutation_jitted_or_not():
    key = jax.random.key(3)
    np.testing.assert_array_equal(shuffle.permutation(key, 300), jax.jit(shuffle.permutation, static_argnums=1)(key, 300))


def test_all_orders_of_four_are_equally_likely():
    draws = 48_000
    perms = np.asarray(jax.vmap(lambda k: shuffle.permutation(k, 4))(jax.random.split(jax.random.key(0), draws)))
    index = {p: i for i, p in enumerate(itertools.permutations(range(4)))}
    counts = np.bincount([index[tuple(p)] for p in perms], minlength=24)
    expected = draws / 24
    chi2 = float(np.sum((counts - expected) ** 2 / expected))
    assert chi2 < 49.7, f"chi-square {chi2:.1f} over 23 degrees of freedom (p < 0.001 above 49.7): {counts}"


@pytest.mark.heavy
def test_positions_are_uniform_where_two_sort_rounds_are_needed():
    # 2,048 elements leave 21 random bits per word: two rounds. Where element 0 and element
    # 2,047 land, over 16 bins each, must be uniform (a tie-break by index would pull them apart).
    n, draws = 2048, 4000
    assert shuffle.rounds_for(n) == 2
    perms = np.asarray(jax.vmap(lambda k: shuffle.permutation(k, n))(jax.random.split(jax.random.key(1), draws)))
    for element in (0, n - 1):
        where = np.argmax(perms == element, axis=1)
        counts = np.bincount(where * 16 // n, minlength=16)
        chi2 = float(np.sum((counts - draws / 16) ** 2 / (draws / 16)))
        assert chi2 < 37.7, f"element {element}: chi-square {chi2:.1f} over 15 degrees of freedom (p < 0.001 above 37.7)"


def test_rounds_keep_the_chance_of_a_pair_tied_in_all_of_them_small():
    for n in (2, 100, 2048, 65_536, 1 << 20, 1 << 24):
        index_bits = (n - 1).bit_length()
        rounds = shuffle.rounds_for(n)
        expected_tied_pairs = n * n / 2 * 2.0 ** (-(32 - index_bits) * rounds)
        assert expected_tied_pairs < 2.0**-shuffle.TIE_BITS, (n, rounds)
        assert rounds == 1 or n * n / 2 * 2.0 ** (-(32 - index_bits) * (rounds - 1)) >= 2.0**-shuffle.TIE_BITS
    assert [shuffle.rounds_for(n) for n in (16, 2048, 65_536)] == [1, 2, 4]
    assert shuffle.rounds_for(1) == 1


def test_too_many_elements_for_a_packed_word_fall_back_to_jax(monkeypatch):
    monkeypatch.setattr(shuffle, "MAX_INDEX_BITS", 3)
    key = jax.random.key(5)
    np.testing.assert_array_equal(shuffle.permutation(key, 100), jax.random.permutation(key, 100))


def test_ppo_shuffles_only_where_there_are_minibatches_to_shuffle():
    """PPO's epochs draw a permutation of the batch each where it is cut into minibatches; with one
    minibatch every step takes every item, so the order is the rollout's (a shuffle would only
    reorder the sums), and the loss keys are drawn as before."""
    import gymnasium

    from ajax_tune.agents import PPOConfig, make_agent

    space = gymnasium.spaces.Box(-1.0, 1.0, (3,), np.float32)
    actions = gymnasium.spaces.Discrete(2)
    orders = {}
    for minibatches in (1, 4):
        agent = make_agent("ppo", PPOConfig(num_envs=8, num_minibatches=minibatches, update_epochs=3), space, actions)
        perms, keys = agent._shuffles(jax.random.key(0), 64)
        assert perms.shape == (3, 64) and keys.shape[:2] == (3, minibatches)
        assert all(sorted(np.asarray(p).tolist()) == list(range(64)) for p in perms)
        orders[minibatches] = np.asarray(perms)
    np.testing.assert_array_equal(orders[1], np.tile(np.arange(64), (3, 1)))
    assert not np.array_equal(orders[4][0], np.arange(64)) and not np.array_equal(orders[4][0], orders[4][1])
