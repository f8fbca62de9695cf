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


@pytest.mark.heavy  # compiles an unroll and two estimates per case
@pytest.mark.parametrize("recurrent", [False, True])
@pytest.mark.parametrize("mode", ["next_step", "unroll_start"])
def test_successor_values_from_the_next_step_equal_those_computed_for_every_step(recurrent, mode):
    """Knowing the time limit, PPO computes a successor's value afresh only where a time limit cut
    the episode (and at the unroll's end) and takes the next step's value elsewhere: on real
    unrolls of cartpole cut every 7 steps, with episodes carried over between unrolls, the values
    and advantages equal those computed for every step, feed-forward and recurrent; and the
    recurrent form's values and carries, recorded while acting, equal the unroll replayed."""
    from ajax_tune.agents import make_agent
    from ajax_tune.agents.base import Carries, Clock, reset_carry
    from ajax_tune.config import Config
    from ajax_tune.envs import EpisodeWrapper, make_env
    from ajax_tune.envs.wrappers import VecEnv
    from ajax_tune.loop.rollout import make_collect

    limit, unroll, envs = 7, 24, 4
    agent_section = {"num_envs": envs, "unroll_length": unroll, "hidden_sizes": [8]}
    if recurrent:
        agent_section["recurrent"] = {"cell": "gru", "size": 8}
    config = Config.from_dict({"env": {"name": "cartpole"}, "agent": agent_section}).agent
    env = EpisodeWrapper(make_env("cartpole"), limit)
    agent = make_agent("ppo", config, env.observation_space, env.action_space)
    venv = VecEnv(env, envs)
    collect = jax.jit(make_collect(agent, venv, mode), static_argnums=())
    k = jax.random.split(jax.random.key(0), 8)
    state = agent.init(k[0])
    env_state = venv.reset(k[1], {k_: jnp.asarray(v) for k_, v in env.validate_task({}).items()})
    carry = agent.init_carry(envs) if recurrent else None

    def estimates(batch, carries, episode_limit):
        clock = Clock(jnp.float32(0), jnp.float32(1), episode_limit)
        extra = {"carries": carries} if recurrent else {}
        return jax.jit(lambda s: agent.value_estimates(s, batch, clock, **extra))(state)

    def replayed(batch, carries, episode_limit):
        """The recurrent form's estimates with the unroll replayed rather than read from what
        the rollout recorded while acting."""
        clock = Clock(jnp.float32(0), jnp.float32(1), episode_limit)
        obs, next_obs = batch.obs, lambda: batch.next_obs  # noqa: E731 (no normaliser)
        run = lambda s: agent._estimates(s.params, s.hp, batch, batch.reward, obs, next_obs, clock, carries)[:2]  # noqa: E731
        return jax.jit(run)(state)

    cut = 0
    for i in range(3):
        fresh = env_state.episode.done if recurrent else None
        if recurrent:
            carry = reset_carry(agent, carry, fresh)
        env_state = venv.reset_done(env_state, k[2 + i])
        start = carry
        env_state, carry, resets, batch, _ = collect(state, env_state, carry, fresh, k[5 + i])
        carries = Carries(start=start, reset=resets) if recurrent else None
        cut += int(jnp.sum(batch.truncated & ~batch.terminated))
        (value, adv), (value_all, adv_all) = estimates(batch, carries, limit), estimates(batch, carries, 0)
        np.testing.assert_allclose(np.asarray(value), np.asarray(value_all), rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(np.asarray(adv), np.asarray(adv_all), rtol=1e-5, atol=1e-5)
        if recurrent:  # the values and carries recorded while acting are the replay's
            value_replayed, adv_replayed = replayed(batch, carries, limit)
            np.testing.assert_allclose(np.asarray(value), np.asarray(value_replayed), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(np.asarray(adv), np.asarray(adv_replayed), rtol=1e-5, atol=1e-5)
    assert cut >= 4  # the unrolls held steps a time limit cut
