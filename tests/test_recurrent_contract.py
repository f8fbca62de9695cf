"""The carry in the agent contract: a toy recurrent agent whose carry counts the steps since it
was last reset proves that the loop starts a fresh carry exactly where an env starts an episode,
in both reset modes, and that the update receives what it takes to replay the unroll."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune.agents.base import is_recurrent
from ajax_tune.policy import HostPolicy
from tests.test_loop_contract import NUM_ENVS, UNROLL, RecordingAgent, toy_loop


class CountingAgent(RecordingAgent):
    """Its carry is the number of steps acted since the carry was fresh. Deterministic, it walks
    right for its first `RIGHT` steps and left after, so only a fresh carry reaches a goal."""

    RIGHT = 2

    def init_carry(self, num_envs):
        return jnp.zeros((num_envs,), jnp.int32)

    def init(self, key):
        state = super().init(key)
        t, n = self.unroll_length, self.num_envs
        last = {**state["last"], "count": jnp.zeros((t, n), jnp.int32)}
        return {**state, "last": last, "start": jnp.zeros((n,), jnp.int32), "reset": jnp.zeros((t, n), jnp.bool_)}

    def act(self, state, obs, key, deterministic=False, *, carry):
        count = carry + 1
        if deterministic:
            return (carry < self.RIGHT).astype(jnp.int32), {"count": count}, count
        action, _ = super().act(state, obs, key)
        return action, {"count": count}, count

    def transition(self, obs, action, extras, next_state):
        return {**super().transition(obs, action, extras, next_state), "count": extras["count"]}

    def update(self, state, batch, key, clock, *, carries):
        state, metrics, signal = super().update(state, batch, key, clock)
        return {**state, "start": carries.start, "reset": carries.reset}, metrics, signal


def seed0(state, *names):
    return [
        np.asarray(state.agent[name][0]) if name != "last" else jax.tree.map(lambda x: np.asarray(x[0]), state.agent[name])
        for name in names
    ]


def replay(start, reset):
    """The counts a replay from the unroll's start carries and reset flags produces."""
    count, out = start.copy(), []
    for fresh in reset:
        count = np.where(fresh, 0, count) + 1
        out.append(count)
    return np.stack(out)


def test_the_loop_knows_a_recurrent_agent_by_its_carry():
    assert is_recurrent(CountingAgent()) and not is_recurrent(RecordingAgent())
    assert toy_loop(agent=RecordingAgent()).init().carry is None  # a feed-forward state holds no carry


@pytest.mark.parametrize("mode", ["next_step", "unroll_start"])
def test_carries_restart_exactly_where_episodes_restart(mode):
    loop = toy_loop(mode, agent=CountingAgent())
    state, _ = loop.train(loop.init(seed=3))
    # a new task for two envs ends their episodes: they restart, carries with them, at the next unroll
    state = loop.set_task(state, {"length": np.array([2, 1, 2, 3])})
    state, out = loop.train(state)
    assert loop.compilations == 1
    u, start, reset = seed0(state, "last", "start", "reset")
    valid, ended = u["valid"], u["terminated"] | u["truncated"]
    assert ended.any()
    # on every real step, the carry counted exactly the steps of the episode so far
    np.testing.assert_array_equal(u["count"][valid], u["step"][valid])
    # replaying from the unroll's start carries and reset flags gives every step's carry
    np.testing.assert_array_equal(replay(start, reset), u["count"])
    if mode == "next_step":  # fresh after every step that ended an episode
        np.testing.assert_array_equal(reset[1:], ended[:-1])
        assert valid.all()
    else:  # never mid-unroll: a finished env stands frozen, its carry unused, until the unroll ends
        assert not reset[1:].any() and not valid.all()
        assert (u["count"][~valid] > u["step"][~valid]).all()
    # the carries of the loop's state are those of the unroll's last step (the next unroll's start)
    np.testing.assert_array_equal(
        np.asarray(state.carry[0]), u["count"][-1] if mode == "unroll_start" else np.where(ended[-1], 0, u["count"][-1])
    )


def test_a_task_change_restarts_the_carries_of_the_envs_it_ends():
    one_unroll = NUM_ENVS * UNROLL
    loop = toy_loop(
        "next_step", max_episode_steps=50, agent=CountingAgent(), timesteps_per_iteration=one_unroll, eval_every=one_unroll
    )
    state, _ = loop.train(loop.set_task(loop.init(seed=4), {"length": 16}))  # 12 random steps never reach 16 cells
    assert (np.asarray(state.carry[0]) == UNROLL).all()
    state, _ = loop.train(loop.set_task(state, {"length": np.array([16, 15, 16, 15])}))
    start, reset = seed0(state, "start", "reset")
    np.testing.assert_array_equal(start, [UNROLL, 0, UNROLL, 0])
    np.testing.assert_array_equal(reset[0], [False, True, False, True])
    assert loop.compilations == 1


def test_evaluation_starts_every_episode_from_a_fresh_carry():
    loop = toy_loop("next_step", max_episode_steps=8, num_heldout=3, agent=CountingAgent())
    state = loop.set_heldout(loop.init(), {"length": np.array([1, 2, 3])})
    state, out = loop.train(state)
    result = loop.summarize(out)
    # two steps right, then left: the goal at 1 and 2 is reached, the one at 3 never
    assert [result[f"eval/heldout/{i}/success_rate"] for i in range(3)] == [1.0, 1.0, 0.0]


def test_the_host_policy_keeps_its_carry_until_reset():
    agent = CountingAgent()
    policy = HostPolicy(agent, agent.init(jax.random.PRNGKey(0)))
    obs = np.zeros(2, np.float32)
    assert [int(policy(obs)) for _ in range(4)] == [1, 1, 0, 0]
    policy.reset()
    assert int(policy(obs)) == 1
    plain = HostPolicy(RecordingAgent(), RecordingAgent().init(jax.random.PRNGKey(0)))
    plain.reset()  # nothing to reset
    assert np.asarray(plain(np.zeros((1, 2), np.float32))).tolist() == [1]
