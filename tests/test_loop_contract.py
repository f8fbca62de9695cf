"""The loop is agent-neutral: a toy agent with its own transitions and metrics runs through it,
and the loop keeps its promises about episodes, resets, useful steps, per-env statistics,
finiteness and held-out evaluation whatever the agent is."""

import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune.agents.hparams import all_finite
from ajax_tune.envs import EpisodeWrapper, make_env
from ajax_tune.fields import static, traced, validate
from ajax_tune.loop import LoopConfig, TrainLoop
from ajax_tune.samplers.stats import EnvStats
from ajax_tune.schedules import Schedule
from tests.support.helpers import corridor_loop

NUM_ENVS, UNROLL = 4, 12


@dataclasses.dataclass(frozen=True)
class ToyConfig:
    num_envs: int = static(NUM_ENVS)
    unroll_length: int = static(UNROLL)
    scale: float = traced(1.0)

    def __post_init__(self):
        validate(self, "agent")


class RecordingAgent:
    """Random actions (always "right" when deterministic); keeps the last unroll it was handed,
    reports metrics no other agent has, and a per-env signal equal to the env's index."""

    reset_modes = ("next_step", "unroll_start")
    latest_metrics = ("toy/timestep",)

    def __init__(self, config=ToyConfig()):
        self.config = config
        self.num_envs, self.unroll_length = config.num_envs, config.unroll_length

    def _batch(self, obs, step):
        t, n = self.unroll_length, self.num_envs
        flag = jnp.zeros((t, n), jnp.bool_)
        return {
            "obs": jnp.zeros((t, n, *obs)),
            "action": jnp.zeros((t, n), jnp.int32),
            "next_obs": jnp.zeros((t, n, *obs)),
            "terminated": flag,
            "truncated": flag,
            "valid": flag,
            "step": jnp.zeros((t, n), jnp.int32),
        }

    def init(self, key):
        return {
            "last": self._batch((2,), None),
            "params": jnp.ones(3),
            "updates": jnp.zeros((), jnp.float32),
            "scale": jnp.asarray(self.config.scale, jnp.float32),
        }

    def act(self, state, obs, key, deterministic=False):
        if deterministic:
            return jnp.ones(obs.shape[0], jnp.int32), {}
        return jax.random.randint(key, (obs.shape[0],), 0, 2), {}

    def transition(self, obs, action, extras, next_state):
        return {
            "obs": obs,
            "action": action,
            "next_obs": next_state.obs,
            "terminated": next_state.terminated,
            "truncated": next_state.truncated,
            "valid": ~next_state.episode.post_done,
            "step": next_state.episode.step,
        }

    def update(self, state, batch, key, clock):
        params = state["params"] * state["scale"]
        state = {**state, "last": batch, "params": params, "updates": state["updates"] + 1}
        metrics = {"toy/updates": state["updates"], "toy/timestep": clock.timestep}
        return state, metrics, jnp.arange(self.num_envs, dtype=jnp.float32)

    def health(self, state, metrics):
        return {"params": all_finite(state["params"])}

    def with_hparams(self, state, config):
        return {**state, "scale": jnp.asarray(config.scale, jnp.float32)}


def toy_loop(reset_mode="next_step", max_episode_steps=6, num_heldout=0, agent=None, **train):
    env = EpisodeWrapper(make_env("corridor", max_length=16, default_length=2), max_episode_steps=max_episode_steps)
    config = LoopConfig(
        **{
            "total_timesteps": 10_000,
            "timesteps_per_iteration": 3 * NUM_ENVS * UNROLL,
            "eval_every": 3 * NUM_ENVS * UNROLL,
            "eval_episodes": 2,
            "num_seeds": 2,
            "reset_mode": reset_mode,
            **train,
        }
    )
    return TrainLoop(env, agent or RecordingAgent(), config, num_heldout=num_heldout)


def last_unroll(state):
    return jax.tree.map(lambda x: np.asarray(x[0]), state.agent["last"])  # seed 0: [T, N, ...]


def corridor_successor(obs, action):
    """The corridor's dynamics on observations (position / 16, length / 16), door closed."""
    position, length = np.rint(obs[..., 0] * 16), np.rint(obs[..., 1] * 16)
    position = np.clip(position + 2 * action - 1, 0, length)
    return np.stack([position, length], axis=-1) / 16


def test_next_step_reset_keeps_every_transition_inside_one_episode():
    loop = toy_loop("next_step")
    state, out = loop.train(loop.init(seed=1))
    u = last_unroll(state)
    ended = u["terminated"] | u["truncated"]
    assert u["terminated"].any() and u["truncated"].any()  # both kinds of ending happened
    # every stored successor is the true one, the real final observation included
    np.testing.assert_allclose(u["next_obs"], corridor_successor(u["obs"], u["action"]), atol=1e-6)
    # within an episode the next step starts where the last one ended; after an end, a new
    # episode starts on the very next step (no idle env, nothing masked)
    continues = ~ended[:-1]
    np.testing.assert_array_equal(u["obs"][1:][continues], u["next_obs"][:-1][continues])
    assert (u["obs"][1:][ended[:-1]][:, 0] == 0).all()
    assert (u["step"][1:][ended[:-1]] == 1).all()
    assert u["valid"].all()
    assert (u["step"][u["truncated"]] == 6).all()
    stepped = NUM_ENVS * UNROLL
    np.testing.assert_array_equal(out.rows["train/useful_steps"], stepped)
    assert int(state.useful_steps[0]) == 3 * stepped == loop.timestep(state)


def test_unroll_start_mode_freezes_finished_envs_and_counts_only_useful_steps():
    loop = toy_loop("unroll_start")
    state, out = loop.train(loop.init(seed=1))
    u = last_unroll(state)
    assert not u["valid"].all()  # envs that finished early stood idle, masked, until the unroll ended
    ended = u["terminated"] | u["truncated"]
    for env in range(NUM_ENVS):  # after its episode ended, an env only produced post-done steps
        end = np.flatnonzero(ended[:, env])
        if len(end):
            assert not u["valid"][end[0] + 1 :, env].any()
    assert out.rows["train/useful_steps"][0, -1] == u["valid"].sum()
    np.testing.assert_array_equal(out.stats.steps.sum(axis=1), np.asarray(state.useful_steps))
    assert int(state.useful_steps[0]) < loop.timestep(state)


def test_per_env_statistics_and_agent_metrics_reach_the_result():
    loop = toy_loop("next_step")
    state = loop.set_task(loop.init(seed=2), {"length": np.array([1, 2, 3, 16])}, eval_task={"length": 2})
    state, out = loop.train(state)
    out = jax.device_get(out)
    stats = EnvStats.from_call(out.stats)
    assert (stats.num_seeds, stats.num_envs) == (2, NUM_ENVS) and out.stats.episodes.shape == (2, NUM_ENVS)
    np.testing.assert_array_equal(out.stats.episodes.sum(axis=1), out.rows["train/episodes"].sum(axis=1))
    np.testing.assert_array_equal(stats.per_env(stats.tasks["length"]), [[1, 2, 3, 16]] * 2)
    np.testing.assert_array_equal(stats.per_env(stats.learning_signal), [np.arange(NUM_ENVS)] * 2)
    # a 1-cell corridor is won often by a random walk, a 16-cell one within 6 steps never
    success = stats.per_env(stats.success_sum)
    assert success[:, 0].min() > 0 and (success[:, 3] == 0).all()
    np.testing.assert_array_equal(stats.return_sum, stats.success_sum)  # reward 1 per success

    result = loop.summarize(out)
    assert result["toy/updates"] == pytest.approx(2.0)  # mean of 1, 2, 3
    assert result["toy/timestep"] == 2 * NUM_ENVS * UNROLL  # a "latest" metric: its last value
    assert "lr" not in result and not any(k.startswith(("loss/", "per_env/")) for k in result)
    assert result["train/useful_steps"] == 3 * NUM_ENVS * UNROLL
    assert result["train/nonfinite"] == 0.0 and result["health/params_nonfinite_at"] == -1.0


def test_nonfinite_state_is_flagged_with_the_timestep_it_started():
    loop = toy_loop("next_step")
    state = loop.set_hparams(loop.init(), ToyConfig(scale=1e30))  # params: 1e30, 1e60 = inf, ...
    state, out = loop.train(state)
    result = loop.summarize(out)
    assert result["train/nonfinite"] == 1.0
    assert result["health/params_nonfinite_at"] == 2 * NUM_ENVS * UNROLL
    assert loop.compilations == 1


@pytest.mark.heavy
def test_ppo_divergence_is_flagged():
    loop = corridor_loop({"lr": Schedule(kind="constant", peak=1e30)})
    state, out = loop.train(loop.init())
    result = loop.summarize(out)
    assert result["train/nonfinite"] == 1.0
    assert 0 < result["health/params_nonfinite_at"] <= loop.timestep(state)
    healthy = corridor_loop()
    _, out = healthy.train(healthy.init())
    assert healthy.summarize(out)["train/nonfinite"] == 0.0


def test_heldout_tasks_are_evaluated_each_on_its_own():
    loop = toy_loop("next_step", max_episode_steps=8, num_heldout=3)
    state = loop.set_heldout(loop.init(), {"length": np.array([1, 7, 16])})
    state, out = loop.train(state)
    assert out.rows["eval/heldout/success"].shape == (2, 3, 3)
    result = loop.summarize(out)
    # "always right" reaches 1 and 7 cells within 8 steps, never 16
    assert [result[f"eval/heldout/{i}/success_rate"] for i in range(3)] == [1.0, 1.0, 0.0]
    assert result["eval/heldout/success_rate_mean"] == pytest.approx(2 / 3)
    # the worst tenth of three tasks is one: the one never reached
    assert result["eval/heldout/success_rate_worst10"] == 0.0
    assert result["eval/heldout/return_worst10"] == result["eval/heldout/2/return"]
    assert result["eval/heldout/0/return"] == 1.0
    assert np.isnan(out.rows["eval/heldout/return"][:, :2]).all()  # no evaluation before the call's last update
    with pytest.raises(Exception, match="expected integer scalar in \\[1, 16\\]"):
        loop.set_heldout(state, {"length": np.array([1, 7, 17])})


class RightOnceUpdated(RecordingAgent):
    """Deterministic: "left" (never reaching the door) until its first update, "right" after."""

    def act(self, state, obs, key, deterministic=False):
        if deterministic:
            return jnp.where(state["updates"] > 0, 1, 0) * jnp.ones(obs.shape[0], jnp.int32), {}
        return super().act(state, obs, key)


def test_the_start_evaluation_sees_the_agent_before_its_first_update():
    loop = toy_loop("next_step", max_episode_steps=8, num_heldout=2, agent=RightOnceUpdated(), eval_at_start=True)
    state = loop.set_heldout(loop.init(), {"length": np.array([1, 7])})
    state, first = loop.train(state)
    _, second = loop.train(state)
    assert first.start["eval/return"].shape == (2,) and first.start["eval/heldout/success"].shape == (2, 2)
    result = loop.summarize(first)
    assert result["eval/start/return_mean"] == result["eval/start/success_rate_mean"] == 0.0  # it went left
    assert result["eval/start/heldout/success_rate_mean"] == 0.0
    assert result["eval/return_mean"] == result["eval/success_rate_mean"] == 1.0  # updated, it goes right
    assert result["eval/heldout/success_rate_mean"] == 1.0
    assert result["eval/start/return_min"] == result["eval/start/return_max"] == result["eval/start/return_std"] == 0.0
    later = loop.summarize(second)
    assert all(np.isnan(later[k]) for k in later if k.startswith("eval/start/"))
    assert set(later) == set(result)  # the same keys every call
    assert loop.compilations == 1


def test_agent_that_needs_next_step_resets_is_refused_unroll_start():
    agent = RecordingAgent()
    agent.reset_modes = ("next_step",)
    with pytest.raises(Exception, match="reset_mode 'unroll_start' does not suit agent RecordingAgent"):
        TrainLoop(make_env("corridor"), agent, LoopConfig(timesteps_per_iteration=NUM_ENVS * UNROLL, reset_mode="unroll_start"))


def test_the_worst_tenth_of_heldout_tasks_is_averaged_over_seeds_first():
    from ajax_tune.loop.summary import worst_share

    # 2 seeds x 20 tasks: task i succeeds i/20 of the time on seed 0 and never on seed 1 for i < 3
    per_task = np.tile(np.linspace(0.0, 1.0, 20), (2, 1))
    per_task[1, :3] = 0.0
    per_task[0, 5] = np.nan  # a task a seed did not report is averaged over the other
    worst = np.sort(np.nanmean(per_task, axis=0))[:2]
    assert worst_share(per_task) == pytest.approx(worst.mean())
    assert worst_share(per_task[:, :5]) == pytest.approx(0.0)  # 5 tasks: the worst one
    assert np.isnan(worst_share(np.full((2, 4), np.nan)))
