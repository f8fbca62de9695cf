"""Task samplers driving a Runner, without Ray: per-env tasks change every call as data (one
compilation), the sampler learns from the call's per-env statistics, its state travels in
checkpoints, held-out tasks are evaluated, and bad settings stop the runner before compiling."""

import json
import math

import numpy as np
import pytest

from ajax_tune.checkpoint import METADATA_FILE
from ajax_tune.errors import ConfigError
from ajax_tune.heldout import HeldOut
from ajax_tune.loop import TrainLoop
from ajax_tune.runner import Runner
from ajax_tune.samplers import make_sampler
from ajax_tune.tune.experiment import Experiment
from tests.support.helpers import corridor_config, tiny_off_policy_config

SPACE = {"length": [4, 32]}
HELDOUT = {"space": SPACE, "num_tasks": 3, "seed": 0}
CALLS = 3


def plr_config(**kwargs):
    sampler = {"name": "plr", "kwargs": {"space": SPACE, "buffer_size": 8, "seed": 3, **kwargs}}
    return corridor_config(task_sampler=sampler, heldout=HELDOUT)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Three calls of PLR on the corridor, with a checkpoint before the last one."""
    runner = Runner(plr_config(), trial_id="a")
    first_tasks = runner.get_task(per_env=True)["length"].copy()
    checkpoint = tmp_path_factory.mktemp("samplers") / "ck"
    given, results, states = [], [], []
    for call in range(CALLS):
        if call == CALLS - 1:
            runner.save(checkpoint)
        given.append(runner.get_task(per_env=True)["length"].copy())
        results.append(runner.train())
        states.append(runner.curriculum.sampler.get_state())
    return dict(runner=runner, first_tasks=first_tasks, given=given, results=results, states=states, checkpoint=checkpoint)


@pytest.mark.heavy
def test_per_env_tasks_change_every_call_without_recompiling(run):
    runner, given, results = run["runner"], run["given"], run["results"]
    # the first tasks are the sampler's first draw, made before the first call
    twin = make_sampler(plr_config()["task_sampler"]).bind(runner.env, base={"length": 4})
    np.testing.assert_array_equal(run["first_tasks"], twin.sample(runner.loop.venv.num_envs)["length"])
    assert len({tuple(g) for g in given}) == CALLS  # new per-env tasks every call
    assert runner.loop.compilations == 1
    assert runner.get_task()["length"] == 4  # evaluations stay on the task they ran on
    for call, (tasks, result) in enumerate(zip(given, results)):
        assert set(result) == set(results[0])  # stable keys
        assert result["sampler/draws"] == call + 2  # one draw at the start, one after every call
        assert result["perf/compilations"] == 1
        assert all(isinstance(v, (int, float, bool)) for v in result.values())
        # the histogram counts the tasks the call trained on
        shares = [result[f"tasks/length/bin{i}"] for i in range(16)]
        assert sum(shares) == pytest.approx(1.0) and result["tasks/length/mean"] == pytest.approx(tasks.mean())
        for i in range(3):  # 2 seeds x 4 episodes per task: a success rate in eighths
            rate = result[f"eval/heldout/{i}/success_rate"] * 8
            assert rate == pytest.approx(round(rate)), result[f"eval/heldout/{i}/success_rate"]
        assert result["eval/heldout/success_rate_mean"] == pytest.approx(
            np.mean([result[f"eval/heldout/{i}/success_rate"] for i in range(3)])
        )
    # every seed ran the tasks set before the last call, and the sampler learned from them
    stats = runner.curriculum.env_stats
    np.testing.assert_array_equal(stats.per_env(stats.tasks["length"]), np.broadcast_to(given[-1], (2, 8)))
    assert np.all(np.isfinite(stats.learning_signal))
    buffered = run["states"][0]["buffer"]["length"]
    assert buffered and set(buffered) <= set(given[0].tolist())  # call 1's levels, scored
    expected = HeldOut.parse(HELDOUT).batch(runner.env, base={"length": 4})["length"]
    np.testing.assert_array_equal(np.asarray(runner.state.heldout["length"]), np.broadcast_to(expected, (2, 3)))


@pytest.mark.heavy
def test_sampler_state_continues_from_its_own_checkpoint(run):
    saved = json.loads((run["checkpoint"] / METADATA_FILE).read_text())["extra"]["curricula"][0]["sampler"]
    assert saved == run["states"][CALLS - 2]
    again = Runner(plr_config(), trial_id="a")
    again.restore(run["checkpoint"])
    assert again.curriculum.sampler.get_state() == saved
    np.testing.assert_array_equal(again.get_task(per_env=True)["length"], run["given"][-1])
    result = again.train()
    assert again.curriculum.sampler.get_state() == run["states"][-1]  # same updates, same draws
    for key, value in run["results"][-1].items():
        if key.startswith(("sampler/", "tasks/", "eval/")):
            assert result[key] == value or (math.isnan(value) and math.isnan(result[key])), key


def test_another_trial_continues_the_sampler_with_its_own_draws(run):
    saved = run["states"][CALLS - 2]
    other = Runner(plr_config(), trial_id="b")
    other.restore(run["checkpoint"])
    state = other.curriculum.sampler.get_state()
    assert state["rng"] != saved["rng"]  # its own random stream ...
    assert {k: v for k, v in state.items() if k != "rng"} == {k: v for k, v in saved.items() if k != "rng"}  # ... same levels
    other.train()  # on the tasks the checkpoint's envs held
    stats = other.curriculum.env_stats
    np.testing.assert_array_equal(stats.per_env(stats.tasks["length"])[0], run["given"][-1])
    assert other.curriculum.sampler.draws == run["runner"].curriculum.sampler.draws
    assert not np.array_equal(other.get_task(per_env=True)["length"], run["runner"].get_task(per_env=True)["length"])


def test_the_heldout_count_is_static_and_its_tasks_are_data():
    runner = Runner(corridor_config(heldout=HELDOUT))
    assert runner.reconfigure(corridor_config(heldout={**HELDOUT, "seed": 5})) is False
    np.testing.assert_array_equal(
        np.asarray(runner.state.heldout["length"])[0], HeldOut.parse({**HELDOUT, "seed": 5}).batch(runner.env)["length"]
    )
    assert runner.reconfigure(corridor_config(heldout={**HELDOUT, "num_tasks": 4})) is True
    assert runner.loop.num_heldout == 4


@pytest.mark.parametrize(
    "extra, message",
    [
        (
            {"task_sampler": {"name": "plr", "kwargs": {"space": SPACE, "temperature": -1}}},
            "task_sampler (PrioritizedTaskReplay): temperature must be in (0, inf), got -1",
        ),
        (
            {"task_sampler": {"name": "uniform", "kwargs": {"space": {"length": [4, 64]}}}},
            "task_sampler (Uniform).space.length: [4.0, 64.0] is outside corridor's 'length'",
        ),
        (
            {
                "env": {"name": "pendulum", "kwargs": {}, "task": {}},
                "task_sampler": {"name": "learning_progress", "kwargs": {"space": {"gravity": [5, 15]}}},
            },
            "metric 'success' needs an env that reports success, and pendulum does not",
        ),
        ({"heldout": {"space": SPACE, "num_tasks": 0}}, "heldout.num_tasks must be an integer >= 1"),
    ],
)
def test_bad_sampler_settings_stop_the_runner_before_compiling(monkeypatch, extra, message):
    monkeypatch.setattr(TrainLoop, "init", lambda *a, **k: pytest.fail("the loop started before the config was checked"))
    with pytest.raises(ConfigError) as info:
        Runner(corridor_config(**extra))
    assert message in str(info.value) and "\n" not in str(info.value)


def test_a_bad_sampler_setting_in_a_search_space_stops_the_experiment_before_ray_starts():
    trial = corridor_config(task_sampler={"name": "plr", "kwargs": {"space": SPACE, "temperature": {"grid": [0.0, 1.0]}}})
    with pytest.raises(ConfigError) as info:
        Experiment.from_dict({"name": "plr_search", "trial": trial, "stop": {"training_iteration": 2}})
    assert "task_sampler (PrioritizedTaskReplay): temperature must be in (0, inf), got 0.0" in str(info.value)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    "agent, env, space",
    [
        ("sac", {"name": "point_reach", "kwargs": {"max_episode_steps": 5}}, {"distance": [0.5, 2.0]}),
        ("dqn", {"name": "corridor", "kwargs": {"max_length": 8, "max_episode_steps": 12}}, {"length": [2, 8]}),
    ],
)
@pytest.mark.heavy
def test_off_policy_agents_score_plr_levels_by_their_td_errors(agent, env, space):
    """SAC and DQN report each env's mean absolute TD error on its fresh transitions as the
    learning signal; PLR scores the levels those envs ran by it."""
    sampler = {"name": "plr", "kwargs": {"space": space, "buffer_size": 4, "seed": 1}}
    runner = Runner(tiny_off_policy_config(agent, env=env, task_sampler=sampler))
    runner.train()  # learning starts inside this call (tiny config: at 32 or 16 of its 32 steps)
    stats = runner.curriculum.env_stats
    signal = stats.per_env(stats.learning_signal)[0]
    assert np.all(np.isfinite(signal)) and np.all(signal > 0)
    plr = runner.curriculum.sampler
    field = next(iter(space))
    ran = stats.per_env(stats.tasks[field])[0]
    expected = [signal[ran == level].mean() for level in plr.buffer[field]]  # envs that drew one level share it
    assert plr.filled == len(np.unique(ran))
    np.testing.assert_allclose(plr.scores, expected, rtol=1e-6)
    runner.train()  # the buffer is not full (min_fill 4), so every env draws a level from the space again
    stats = runner.curriculum.env_stats
    levels = np.unique(np.concatenate([ran, stats.per_env(stats.tasks[field])[0]]))
    assert runner.loop.compilations == 1 and plr.filled == min(4, len(levels))


@pytest.mark.heavy
def test_the_program_computes_an_off_policy_signal_only_where_a_sampler_reads_it():
    """Only PLR reads the agent's learning signal (SAC's TD errors on the fresh unroll: one more
    actor and two more twin-critic passes per update). Under a sampler that does not read it the
    training program leaves that work out (tracing drops what nothing reads) and the signal is
    NaN; training is the same to float tolerance (the two programs are compiled apart, and XLA
    may round a fused sum differently). `learning_signal: always` keeps it under any sampler."""
    import jax

    from ajax_tune.build import build_loop
    from ajax_tune.config import Config
    from ajax_tune.samplers.stats import EnvStats

    env, space = {"name": "point_reach", "kwargs": {"max_episode_steps": 5}}, {"distance": [0.5, 2.0]}
    uniform = tiny_off_policy_config("sac", env=env, task_sampler={"name": "uniform", "kwargs": {"space": space}})
    always = tiny_off_policy_config("sac", env=env, task_sampler=uniform["task_sampler"], train={"learning_signal": "always"})
    runs = {}
    for name, config in (("uniform", uniform), ("always", always)):
        _, loop = build_loop(Config.from_dict(config))
        state = loop.init(seed=0)
        instructions = loop.compiled.call.lower(jax.device_put(state, loop.device)).compile().as_text().count(" = ")
        state, out = loop.train(state)
        runs[name] = (loop, instructions, jax.device_get(state), EnvStats.from_call(jax.device_get(out.stats)))
    (off, off_size, off_state, off_stats), (on, on_size, on_state, on_stats) = runs["uniform"], runs["always"]
    assert not off.learning_signal and on.learning_signal
    assert off_size < on_size  # the signal's passes are not in the program
    assert np.all(np.isnan(off_stats.learning_signal)) and np.all(on_stats.learning_signal > 0)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6), off_state, on_state)


@pytest.mark.heavy
def test_ppo_keeps_its_free_signal_and_a_search_over_samplers_keeps_one_program():
    """PPO's signal (its mean positive advantage) costs nothing, so its program is the same under
    every sampler. For an off-policy agent, switching to PLR is a static change (a new program),
    unless the run asked for the signal always, as a search over samplers that include PLR does
    for every trial: its reused actors then keep one program."""
    space = {"distance": [0.5, 2.0]}
    env = {"name": "point_reach", "kwargs": {"max_episode_steps": 5}}
    uniform = {"name": "uniform", "kwargs": {"space": space}}
    plr = {"name": "plr", "kwargs": {"space": space, "buffer_size": 4}}
    assert not make_sampler(uniform).reads_learning_signal and make_sampler(plr).reads_learning_signal

    ppo = Runner(corridor_config(task_sampler={"name": "uniform", "kwargs": {"space": {"length": [2, 8]}}}))
    assert ppo.loop.learning_signal

    sac = Runner(tiny_off_policy_config("sac", env=env, task_sampler=uniform))
    assert not sac.loop.learning_signal
    assert sac.reconfigure(tiny_off_policy_config("sac", env=env, task_sampler=plr)) is True and sac.loop.learning_signal

    trial = tiny_off_policy_config("sac", env=env, task_sampler={"grid": [uniform, plr]})
    experiment = Experiment.from_dict({"name": "samplers", "trial": trial, "stop": {"training_iteration": 1}})
    assert experiment.param_space()["train"]["learning_signal"] == "always"
    kept = Runner({**trial, "task_sampler": uniform, "train": {**trial["train"], "learning_signal": "always"}})
    assert kept.loop.learning_signal
    assert kept.reconfigure({**trial, "task_sampler": plr, "train": {**trial["train"], "learning_signal": "always"}}) is False
    kept.train()
    assert kept.loop.compilations == 1
    alone = Experiment.from_dict({"name": "one", "trial": {**trial, "task_sampler": uniform}, "stop": {"training_iteration": 1}})
    assert "learning_signal" not in alone.param_space()["train"]


@pytest.mark.heavy
def test_alp_gmm_state_travels_with_checkpoints(tmp_path):
    """ALP-GMM's history and mixture are restored exactly by its own trial and kept, under a
    random stream of its own, by another; the tasks it moves to never recompile."""
    sampler = {
        "name": "alp_gmm",
        "kwargs": {"space": {"distance": [0.2, 3.0], "radius": [0.05, 0.5]}, "fit_window": 16, "bootstrap": 16, "seed": 2},
    }
    config = corridor_config(
        env={"name": "point_reach", "kwargs": {"max_episode_steps": 10}, "task": {}}, task_sampler=sampler, heldout=None
    )
    config["agent"] = {**config["agent"], "num_envs": 8}
    runner = Runner(config, trial_id="a")
    for _ in range(2):
        runner.train()
    assert runner.curriculum.sampler.mixture is not None  # 16 tasks known after two calls of 8 envs
    runner.save(tmp_path / "ck")
    saved = runner.curriculum.sampler.get_state()
    result = runner.train()
    again = Runner(config, trial_id="a")
    again.restore(tmp_path / "ck")
    assert again.curriculum.sampler.get_state() == saved
    assert again.train()["sampler/alp_mean"] == result["sampler/alp_mean"]
    assert again.curriculum.sampler.get_state() == runner.curriculum.sampler.get_state()
    other = Runner(config, trial_id="b")
    other.restore(tmp_path / "ck")
    state = other.curriculum.sampler.get_state()
    assert state["rng"] != saved["rng"] and state["mixture"] == saved["mixture"] and state["points"] == saved["points"]
    assert runner.loop.compilations == 1 and result["perf/compilations"] == 1
