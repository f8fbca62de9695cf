"""The gymnax adapter: exact parity with gymnax's own `step_env`, episodes on our terms, the
task as `EnvParams`, and PPO training on it without recompiling."""

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.support.helpers import assert_refused_before_compiling, host, import_extra
from tests.support.suites import assert_task_changes_behaviour, episode_rollout

import_extra("gymnax", extra="gymnax")

from flax import struct  # noqa: E402
from gymnax.environments import environment, spaces  # noqa: E402
from gymnax.environments.classic_control.cartpole import CartPole as GymnaxCartPole  # noqa: E402

from ajax_tune.agents import PPO, PPOConfig  # noqa: E402
from ajax_tune.envs import EpisodeWrapper, TaskError, make_env  # noqa: E402
from ajax_tune.envs.gymnax_adapter import GymnaxEnv, default_bounds  # noqa: E402
from ajax_tune.envs.suite import zero_action  # noqa: E402
from ajax_tune.loop import LoopConfig, TrainLoop  # noqa: E402
from ajax_tune.loop.summary import summarize  # noqa: E402
from ajax_tune.schedules import Schedule  # noqa: E402

STEPS = 64


def scaled_task(env, factor=1.25):
    """Every float field scaled (integer fields as they are): a task other than the default."""
    return {k: jnp.asarray(v * factor if np.issubdtype(v.dtype, np.floating) else v) for k, v in env.default_task().items()}


GYMNAX_IDS = ["CartPole-v1", "Acrobot-v1", "MountainCar-v0", "Pendulum-v1", "Breakout-MinAtar"]


@pytest.mark.parametrize("gymnax_id", GYMNAX_IDS)
@pytest.mark.heavy
def test_steps_exactly_as_gymnax_step_env(gymnax_id):
    """From the same state, key, action and params, our step is gymnax's `step_env`, bit for
    bit, at every state of a 64-step trajectory (which runs past terminations, unreset)."""
    env = make_env(f"gymnax/{gymnax_id}")
    gymnax_env = env.gymnax_env
    task = scaled_task(env)
    params = env.params_for(task)
    discrete = isinstance(env.action_space, gymnasium.spaces.Discrete)

    @jax.jit
    def run(key):
        k_reset, k_act, k_step = jax.random.split(key, 3)
        if discrete:
            actions = jax.random.randint(k_act, (STEPS,), 0, env.action_space.n)
        else:
            actions = jax.random.uniform(k_act, (STEPS, *env.action_space.shape), minval=-1.0, maxval=1.0)
        first = env.reset(k_reset, task)
        reference_first = gymnax_env.reset_env(k_reset, params)

        def step(state, xs):
            action, key = xs
            ours = env.step(state, action, key)
            return ours, (ours, gymnax_env.step_env(key, state.physics, action, params))

        _, (ours, reference) = jax.lax.scan(step, first, (actions, jax.random.split(k_step, STEPS)))
        return first, reference_first, ours, reference

    first, (obs0, physics0), ours, (obs, physics, reward, done, _) = host(run(jax.random.PRNGKey(0)))
    np.testing.assert_array_equal(first.obs, obs0.astype(np.float32).reshape(-1))
    for a, b in zip(jax.tree.leaves(first.physics), jax.tree.leaves(physics0)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(ours.obs, obs.astype(np.float32).reshape(STEPS, -1))
    np.testing.assert_array_equal(ours.reward, reward)
    np.testing.assert_array_equal(ours.terminated, done)
    assert jax.tree.structure(ours.physics) == jax.tree.structure(physics)
    for a, b in zip(jax.tree.leaves(ours.physics), jax.tree.leaves(physics)):
        np.testing.assert_array_equal(a, b)
    assert ours.obs.shape == (STEPS, *env.observation_space.shape) and ours.obs.dtype == np.float32
    if gymnax_id == "CartPole-v1":
        assert ours.terminated.any()  # random actions drop the pole: terminations were compared too
    if env.task_spec:  # and the task reached the dynamics: the default task steps differently
        default = {k: jnp.asarray(v) for k, v in env.default_task().items()}
        one_step = jax.jit(
            lambda task: (
                env.step(env.reset(jax.random.PRNGKey(1), task), zero_action(env.action_space), jax.random.PRNGKey(2)).physics
            )
        )
        assert not all(
            np.array_equal(a, b) for a, b in zip(jax.tree.leaves(host(one_step(task))), jax.tree.leaves(host(one_step(default))))
        )


def rollout(env, action_fn, steps, task=None):
    wrapped = EpisodeWrapper(env)
    task = task or {k: jnp.asarray(v) for k, v in env.default_task().items()}

    @jax.jit
    def run(key):
        def step(state, t):
            state = wrapped.step(state, action_fn(t), jax.random.fold_in(key, t))
            return state, state

        return jax.lax.scan(step, wrapped.reset(key, task), jnp.arange(steps))[1]

    return host(run(jax.random.PRNGKey(3)))


def test_termination_and_truncation_are_told_apart():
    # the time limit is gymnax's max_steps_in_episode, owned by the episode wrapper, not a task field
    assert make_env("gymnax/CartPole-v1").max_episode_steps == 500
    assert "max_steps_in_episode" not in make_env("gymnax/CartPole-v1").task_spec

    # pushing one way drops the pole: a natural end, well before the limit
    env = make_env("gymnax/CartPole-v1", max_episode_steps=20)
    pushed = rollout(env, lambda t: jnp.int32(1), 20)
    end = int(np.argmax(pushed.episode.done))
    assert 0 < end < 19 and pushed.terminated[end] and not pushed.truncated.any()

    # balancing (alternate pushes) survives 20 steps: truncated at the limit, not terminated
    balanced = rollout(env, lambda t: (t % 2).astype(jnp.int32), 20)
    assert balanced.truncated[19] and not balanced.terminated.any() and balanced.episode.done.sum() == 1
    # and no reset happened there: the final observation is the true successor (gymnax's own
    # `step` would have returned a fresh episode's observation)
    physics = jax.tree.map(lambda x: x[18], balanced.physics)
    reference = jax.jit(env.gymnax_env.step_env)(
        jax.random.fold_in(jax.random.PRNGKey(3), 19),
        physics,
        jnp.int32(1),
        env.params_for(jax.tree.map(lambda x: x[18], balanced.task)),
    )
    np.testing.assert_array_equal(balanced.obs[19], np.asarray(reference[0]))


def test_a_new_task_changes_how_the_env_steps():
    """Twice the gravity and half the pole: the same keys and pushes give another trajectory (the
    pole falls sooner), in the same program; `test_steps_exactly_as_gymnax_step_env` shows that
    trajectory is gymnax's own under those params."""
    env = make_env("gymnax/CartPole-v1")
    (_, default), (_, heavy) = assert_task_changes_behaviour(
        episode_rollout(env), {}, {"gravity": 19.6, "length": 0.25}, jnp.ones(12, jnp.int32)
    )
    assert np.flatnonzero(heavy.terminated).tolist() == [5] and np.flatnonzero(default.terminated).tolist() == [8]


class LegacyCartPole(GymnaxCartPole):
    """CartPole as gymnax 0.x wrote it: the time limit folded into `step_env`'s `done`."""

    def step_env(self, key, state, action, params):
        obs, state, reward, done, info = super().step_env(key, state, action, params)
        return obs, state, reward, done | (state.time >= params.max_steps_in_episode), info


def test_a_time_limit_folded_into_done_is_taken_out():
    env = GymnaxEnv(LegacyCartPole(), max_episode_steps=20)
    assert env.name == "gymnax/CartPole-v1"
    env.folds_time_limit = False  # taken at its word, the folded limit reads as a termination
    assert rollout(env, lambda t: (t % 2).astype(jnp.int32), 20).terminated[19]
    env.folds_time_limit = True  # as for gymnax < 1.0
    balanced = rollout(env, lambda t: (t % 2).astype(jnp.int32), 20)
    assert balanced.truncated[19] and not balanced.terminated.any()
    pushed = rollout(env, lambda t: jnp.int32(1), 20)  # a natural end is still one
    assert pushed.terminated.any() and not pushed.truncated.any()


def test_env_params_are_the_task():
    env = make_env("gymnax/CartPole-v1")
    spec = env.task_spec
    assert {"gravity", "length", "masspole", "force_mag", "tau"} <= set(spec)
    gravity = spec["gravity"]
    assert gravity.default == pytest.approx(9.8) and (gravity.low, gravity.high) == pytest.approx((0.98, 98.0))
    np.testing.assert_allclose(env.default_task()["length"], 0.5)
    with pytest.raises(TaskError, match=r"task field 'gravity' expected float scalar in \[0.98, 98\]"):
        env.validate_task({"gravity": 0.0})
    with pytest.raises(TaskError, match="unknown task field"):
        env.validate_task({"max_steps_in_episode": 10})
    # bounds may be widened per field
    weightless = make_env("gymnax/CartPole-v1", task_bounds={"gravity": [0.0, 20.0]})
    assert weightless.validate_task({"gravity": 0.0})["gravity"] == 0.0
    with pytest.raises(ValueError, match="did you mean 'gravity'"):
        make_env("gymnax/CartPole-v1", task_bounds={"gravty": [0.0, 20.0]})
    with pytest.raises(ValueError, match=r"task_bounds\['gravity'\] is \[0, 5\], which leaves out its default 9.8"):
        make_env("gymnax/CartPole-v1", task_bounds={"gravity": [0.0, 5.0]})

    # a small array field, with the widest range of its elements; integers rounded inwards
    acrobot = make_env("gymnax/Acrobot-v1").task_spec["available_torque"]
    assert acrobot.shape == (3,) and (acrobot.low, acrobot.high) == (-10.0, 10.0)
    assert default_bounds(np.asarray(5)) == (1.0, 50.0) and default_bounds(np.asarray(-2.0)) == (-20.0, -0.2)
    assert default_bounds(np.asarray(0.0)) == (-1.0, 1.0)
    # integer fields of a MinAtar game are task fields too; its boolean switch is not
    asterix = make_env("gymnax/Asterix-MinAtar")
    assert asterix.task_spec["ramp_interval"].is_integer and "ramping" not in asterix.task_spec
    assert asterix.observation_space.shape == (10 * 10 * 4,)


@struct.dataclass
class BinsParams(environment.EnvParams):
    bins: int = 3  # a shape: cannot be traced
    scale: float = 2.0  # a value: can
    max_steps_in_episode: int = 10


@struct.dataclass
class BinsState(environment.EnvState):
    counts: jax.Array
    time: int


class Bins(environment.Environment):
    """Counts actions in `bins` bins; the observation is the counts times `scale`."""

    @property
    def default_params(self):
        return BinsParams()

    def reset_env(self, key, params):
        state = BinsState(counts=jnp.zeros(params.bins), time=0)
        return state.counts, state

    def step_env(self, key, state, action, params):
        counts = state.counts.at[action].add(params.scale)
        state = BinsState(counts=counts, time=state.time + 1)
        return counts, state, jnp.float32(1.0), jnp.array(False), {}

    def action_space(self, params=None):
        return spaces.Discrete(3)

    def observation_space(self, params):
        return spaces.Box(0.0, 100.0, (params.bins,))


def test_fields_used_as_constants_stay_out_of_the_task():
    env = GymnaxEnv(Bins())
    assert list(env.task_spec) == ["scale"]
    assert env.observation_space.shape == (3,) and env.max_episode_steps == 10
    state = env.step(env.reset(jax.random.PRNGKey(0), {"scale": jnp.float32(0.5)}), jnp.int32(1), jax.random.PRNGKey(1))
    np.testing.assert_array_equal(state.obs, [0.0, 0.5, 0.0])


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"max_episode_steps": 1.5}, "^gymnax/CartPole-v1: max_episode_steps must be an integer >= 1, got 1.5"),
        (
            {"task_bounds": {"gravty": [0, 20]}},
            "task_bounds names \\['gravty'\\], which are not task fields; did you mean 'gravity'",
        ),
    ],
)
def test_bad_kwargs_are_one_line_before_compiling(kwargs, message):
    assert_refused_before_compiling({"env": {"name": "gymnax/CartPole-v1", "kwargs": kwargs}}, message)


def test_unknown_gymnax_env_suggests_the_nearest():
    with pytest.raises(KeyError, match="did you mean 'gymnax/CartPole-v1'"):
        make_env("gymnax/CartPole-v2")


@pytest.mark.slow  # trains to a threshold in the suite's cheap build: at this size the full
# build's compile costs more than its faster run saves (cold, 2 busy cores: the test took 7 s there against 20 s fully optimised)
def test_ppo_learns_gymnax_cartpole_and_a_task_change_does_not_recompile():
    env = make_env("gymnax/CartPole-v1")
    agent = PPO(
        PPOConfig(
            num_envs=8,
            unroll_length=64,
            num_minibatches=2,
            update_epochs=4,
            hidden_sizes=(32, 32),
            lr=Schedule(kind="constant", peak=3e-3),
            ent_coef=0.0,
        ),
        env.observation_space,
        env.action_space,
    )
    loop = TrainLoop(
        env, agent, LoopConfig(total_timesteps=100_000, timesteps_per_iteration=8 * 64 * 8, num_seeds=2, eval_episodes=4)
    )
    state = loop.init(seed=0)
    returns = []
    for _ in range(5):
        state, rows = loop.train(state)
        returns.append(summarize(rows)["train/episode_return_mean"])
    assert returns[-1] > 2 * returns[0], returns  # random play lasts ~20 steps; it learned to balance
    state = loop.set_task(state, {"length": 0.25, "gravity": 12.0})
    state, rows = loop.train(state)
    state = loop.set_task(state, {"length": np.linspace(0.2, 1.0, 8)}, eval_task={"length": 0.5})
    state, rows = loop.train(state)
    assert loop.compilations == 1
    assert summarize(rows)["curriculum/task/length"] == pytest.approx(0.5)
    np.testing.assert_allclose(np.asarray(state.env.task["length"])[0], np.linspace(0.2, 1.0, 8), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(state.env.task["gravity"]), 12.0)


def test_ppo_trains_gymnax_cartpole_through_tune(ray_session, tmp_path):
    from ray import tune

    from ajax_tune import AjaxTrainable
    from ajax_tune.tune.output import trial_dirname

    config = {
        "env": {"name": "gymnax/CartPole-v1", "task": {"length": 0.6}},
        "agent": {
            "num_envs": 8,
            "unroll_length": 64,
            "num_minibatches": 2,
            "update_epochs": 4,
            "hidden_sizes": [32, 32],
            "lr": 3e-3,
            "ent_coef": 0.0,
        },
        "train": {"total_timesteps": 100_000, "timesteps_per_iteration": 8 * 64 * 2, "num_seeds": 2, "eval_episodes": 4},
    }
    results = tune.Tuner(
        AjaxTrainable,
        param_space=config,
        tune_config=tune.TuneConfig(trial_dirname_creator=trial_dirname),
        run_config=tune.RunConfig(storage_path=str(tmp_path), name="gymnax", stop={"training_iteration": 2}, verbose=0),
    ).fit()
    assert results.num_errors == 0, [r.error for r in results if r.error]
    rows = results[0].metrics_dataframe.sort_values("training_iteration")
    # (that PPO learns gymnax's cartpole is the test above, in this process; here: it runs in a worker)
    assert rows["env_steps"].tolist() == [1_024, 2_048] and (rows["train/nonfinite"] == 0).all()
    assert rows["eval/return_mean"].notna().all() and rows["train/episode_return_mean"].notna().all()
    assert rows["curriculum/task/length"].tolist() == pytest.approx([0.6] * 2)
    assert rows["perf/compilations"].max() == 1
