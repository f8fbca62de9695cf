"""GAE and the PPO loss against hand-computed values."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune.agents import PPOConfig
from ajax_tune.agents.distributions import Categorical
from ajax_tune.agents.hparams import init_hparams
from ajax_tune.agents.ppo.losses import gae, ppo_loss

GAMMA, LAM = 0.9, 0.8


def run_gae(reward, value, next_value, terminated, truncated):
    as_col = lambda x, dt=jnp.float32: jnp.asarray(x, dt)[:, None]
    adv, target = gae(
        as_col(reward), as_col(value), as_col(next_value), as_col(terminated, bool), as_col(truncated, bool), GAMMA, LAM
    )
    return np.asarray(adv)[:, 0], np.asarray(target)[:, 0]


def test_no_episode_end_bootstraps_from_the_last_successor():
    adv, target = run_gae([1, 1], [0, 0], [0, 2], [0, 0], [0, 0])
    # delta1 = 1 + 0.9 * 2 = 2.8; delta0 = 1; A0 = 1 + 0.72 * 2.8
    np.testing.assert_allclose(adv, [3.016, 2.8], rtol=1e-6)
    np.testing.assert_allclose(target, adv, rtol=1e-6)  # values are zero


def test_termination_cuts_the_bootstrap_and_the_trace():
    adv, target = run_gae([1, 2, 0, 0], [0.5, 1.0, 1.0, 1.0], [1.0, 3.0, 3.0, 3.0], [0, 1, 0, 0], [0, 0, 0, 0])
    # delta1 = 2 - 1.0 = 1.0 (the successor of a terminal step is worth nothing)
    # delta0 = 1 + 0.9 * 1.0 - 0.5 = 1.4; A0 = 1.4 + 0.72 * 1.0
    np.testing.assert_allclose(adv[:2], [2.12, 1.0], rtol=1e-6)
    np.testing.assert_allclose(target[:2], [2.62, 2.0], rtol=1e-6)


def test_truncation_bootstraps_but_stops_the_trace():
    adv, _ = run_gae([1, 2, 0, 0], [0.5, 1.0, 1.0, 1.0], [1.0, 3.0, 3.0, 3.0], [0, 0, 0, 0], [0, 1, 0, 0])
    # delta1 = 2 + 0.9 * 3.0 - 1.0 = 3.7; A0 = 1.4 + 0.72 * 3.7
    np.testing.assert_allclose(adv[:2], [4.064, 3.7], rtol=1e-6)


def test_post_done_steps_do_not_leak_into_real_steps():
    base = run_gae([1, 2, 0, 0], [0.5, 1.0, 1.0, 1.0], [1.0, 3.0, 3.0, 3.0], [0, 1, 0, 0], [0, 0, 0, 0])[0]
    noisy = run_gae([1, 2, 50, -7], [0.5, 1.0, 9.0, -4.0], [1.0, 3.0, 11.0, 13.0], [0, 1, 0, 0], [0, 0, 0, 0])[0]
    np.testing.assert_array_equal(base[:2], noisy[:2])


def test_loss_ignores_masked_transitions():
    dist = Categorical(2)
    policy = lambda p, obs: obs @ p["w"]
    value = lambda p, obs: obs @ p["v"]
    params = {"policy": {"w": jnp.array([[0.3, -0.2], [0.1, 0.4]])}, "value": {"v": jnp.array([0.5, -1.0])}}
    hp = init_hparams(PPOConfig(clip_eps=0.2, vf_coef=0.5, ent_coef=0.01))
    real = {
        "obs": jnp.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]),
        "action": jnp.array([0, 1, 1]),
        "log_prob": jnp.log(jnp.array([0.4, 0.6, 0.5])),
        "advantage": jnp.array([1.0, -0.5, 2.0]),
        "target": jnp.array([1.0, 0.0, 0.5]),
        "mask": jnp.ones(3),
    }
    garbage = {
        "obs": jnp.array([[9.0, -9.0]]),
        "action": jnp.array([1]),
        "log_prob": jnp.array([-5.0]),
        "advantage": jnp.array([100.0]),
        "target": jnp.array([-30.0]),
        "mask": jnp.zeros(1),
    }
    padded = jax.tree.map(lambda a, b: jnp.concatenate([a, b]), real, garbage)
    key = jax.random.PRNGKey(0)
    loss_real, m_real = ppo_loss(params, real, hp, key, policy, value, dist)
    loss_padded, m_padded = ppo_loss(params, padded, hp, key, policy, value, dist)
    assert float(loss_real) == pytest.approx(float(loss_padded), rel=1e-6)
    for k in m_real:
        assert float(m_real[k]) == pytest.approx(float(m_padded[k]), rel=1e-5, abs=1e-7)
    # and the real transitions do matter
    changed = dict(padded, advantage=padded["advantage"].at[0].set(-3.0))
    assert float(ppo_loss(params, changed, hp, key, policy, value, dist)[0]) != pytest.approx(float(loss_padded))
