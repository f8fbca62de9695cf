"""The agent layer's declarations hold: each built-in agent's `metric_keys` are exactly what its
update reports, traced settings are a typed struct (a misspelt name fails while tracing), a new
config's settings keep the state's shapes and dtypes, and docs/agents.md is what the fields'
own declarations render."""

import dataclasses
import pathlib
import pickle

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune import doc_tables
from ajax_tune.agents import AGENTS, DQNConfig, PPOConfig, SACConfig, TD3Config
from ajax_tune.agents.base import Clock
from ajax_tune.agents.hparams import init_hparams, replace_hparams
from ajax_tune.envs import EpisodeWrapper, make_env
from ajax_tune.envs.wrappers import VecEnv
from ajax_tune.fields import field_kind
from ajax_tune.schedules import Schedule

ENVS = {
    "ppo": "cartpole",
    "sac": "pendulum",
    "dqn": "cartpole",
    "td3": "pendulum",
    "td3bc": "pendulum",
    "iql": "pendulum",
    "bc": "cartpole",
}
SMALL = {
    "ppo": dict(num_envs=2, unroll_length=8, num_minibatches=2, hidden_sizes=(8,)),
    "sac": dict(num_envs=2, unroll_length=4, batch_size=8, capacity=64, hidden_sizes=(8,)),
    "dqn": dict(num_envs=2, unroll_length=4, utd_ratio=0.5, batch_size=8, capacity=64, hidden_sizes=(8,)),
    "td3": dict(num_envs=2, unroll_length=4, batch_size=8, capacity=64, hidden_sizes=(8,)),
    "td3bc": dict(batch_size=8, hidden_sizes=(8,)),
    "iql": dict(batch_size=8, hidden_sizes=(8,)),
    "bc": dict(batch_size=8, hidden_sizes=(8,)),
}
DOC = pathlib.Path(__file__).resolve().parent.parent / "docs" / "agents.md"


def build(name):
    agent_cls, config_cls = AGENTS[name]
    env = EpisodeWrapper(make_env(ENVS[name]))
    return agent_cls(config_cls(**SMALL[name]), env.observation_space, env.action_space), env


def traced_update(agent, env, timestep):
    """The shapes of one update's outputs, traced (never compiled) from a real unroll's shapes."""
    venv = VecEnv(env, agent.num_envs)
    task = {k: jnp.float32(v.default) for k, v in env.task_spec.items()}

    def one_update(key):
        state = agent.init(key)
        env_state = venv.reset(key, task)
        action, extras = agent.act(state, env_state.obs, key)
        step = agent.transition(env_state.obs, action, extras, venv.step(env_state, action, key))
        batch = jax.tree.map(lambda x: jnp.broadcast_to(x, (agent.unroll_length, *x.shape)), step)
        return agent.update(state, batch, key, Clock(timestep=jnp.float32(timestep), horizon=jnp.float32(10_000)))

    return jax.eval_shape(one_update, jax.random.PRNGKey(0))


def traced_offline_update(agent, env):
    """The shapes of one offline agent's `learn_offline` outputs on a dataset of 16 rows."""
    from ajax_tune.agents.offpolicy import ReplayTransition

    action = jax.ShapeDtypeStruct((16, *env.action_space.shape), jnp.float32 if agent.continuous else jnp.int32)
    obs = jax.ShapeDtypeStruct((16, *env.observation_space.shape), jnp.float32)
    data = ReplayTransition(
        obs=obs,
        action=action,
        reward=jax.ShapeDtypeStruct((16,), jnp.float32),
        terminated=jax.ShapeDtypeStruct((16,), jnp.bool_),
        next_obs=obs,
    )
    clock = Clock(timestep=jnp.float32(0), horizon=jnp.float32(10_000))
    return jax.eval_shape(
        lambda key, data: agent.learn_offline(agent.init(key), data, key, clock, 2), jax.random.PRNGKey(0), data
    )


@pytest.mark.parametrize("name", sorted(AGENTS))
def test_metric_keys_are_exactly_what_an_update_reports(name):
    agent, env = build(name)
    assert len(set(agent.metric_keys)) == len(agent.metric_keys)
    if getattr(agent, "offline", False):  # it learns from a dataset: no unroll, no per-env signal
        _, metrics = traced_offline_update(agent, env)
        assert sorted(metrics) == sorted(agent.metric_keys) and all(m.shape == () for m in metrics.values()), name
        return
    for timestep in (0, 5_000):  # off-policy agents: before and after learning starts
        _, metrics, signal = traced_update(agent, env, timestep)
        assert sorted(metrics) == sorted(agent.metric_keys), name
        assert all(m.shape == () for m in metrics.values()) and signal.shape == (agent.num_envs,)
    assert set(agent.latest_metrics) <= set(agent.metric_keys)


def test_a_misspelt_traced_setting_fails_while_tracing():
    agent, env = build("ppo")
    state = agent.init(jax.random.PRNGKey(0))
    assert float(jax.jit(lambda s: s.hp.gamma)(state)) == pytest.approx(0.99)
    with pytest.raises(AttributeError, match=r"PPOHparams has no traced setting 'gama'; did you mean 'gamma'\?"):
        jax.eval_shape(lambda s: s.hp.gama, state)
    with pytest.raises(AttributeError):  # a private name gets the plain error (libraries probe for those)
        state.hp._fields  # noqa: B018


@pytest.mark.parametrize("config_cls", [PPOConfig, SACConfig, DQNConfig, TD3Config])
def test_the_struct_holds_exactly_the_traced_fields_and_pickles(config_cls):
    hp = init_hparams(config_cls())
    traced = [f.name for f in dataclasses.fields(config_cls) if field_kind(f) == "traced"]
    assert [f.name for f in dataclasses.fields(hp)] == traced
    again = pickle.loads(pickle.dumps(jax.device_get(hp)))
    assert type(again) is type(hp)
    assert jax.tree.structure(again) == jax.tree.structure(hp)


def test_new_settings_keep_every_shape_and_dtype():
    seeds = 3
    old = jax.tree.map(lambda x: jnp.broadcast_to(x, (seeds, *x.shape)), init_hparams(DQNConfig()))
    new = replace_hparams(old, DQNConfig(tau=0.25, lr=Schedule(kind="cosine", peak=5e-4)))
    for a, b in zip(jax.tree.leaves(old), jax.tree.leaves(new)):
        assert (a.shape, a.dtype) == (b.shape, b.dtype)
    assert np.asarray(new.tau).tolist() == [0.25] * seeds
    assert new.lr.kind.dtype == jnp.int32 and np.asarray(new.lr.kind).tolist() == [2] * seeds  # cosine
    assert np.asarray(new.gamma).tolist() == pytest.approx([0.99] * seeds)  # the rest as the config says
    with pytest.raises(ValueError):  # another agent's settings do not fit this state
        replace_hparams(old, PPOConfig())


def test_docs_agents_md_is_what_the_fields_render():
    """Regenerate with `python -m ajax_tune.doc_tables > docs/agents.md`."""
    assert DOC.read_text() == doc_tables.render()


@pytest.mark.parametrize("config_cls", [PPOConfig, SACConfig, DQNConfig, TD3Config])
def test_every_agent_key_says_what_it_does(config_cls):
    assert [f.name for f in dataclasses.fields(config_cls) if not f.metadata.get("doc")] == []
