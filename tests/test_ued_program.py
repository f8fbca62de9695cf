"""Level algorithms in the compiled program: nothing recompiles as levels or settings change, the
algorithm's state is part of the training state (checkpoints, PBT exploits, population members),
bad settings are one line before compiling, and each built-in decides as it says (which rollouts
the agent learns from, which levels it plays)."""

import math
import re
import warnings

import jax
import numpy as np
import pytest

from ajax_tune import Runner
from ajax_tune.errors import ConfigError
from ajax_tune.expected_keys import result_keys
from ajax_tune.ued import LevelSettingsWarning
from tests.support.helpers import (
    assert_refused_before_compiling,
    assert_restores_bit_for_bit,
    assert_trees_equal,
    corridor_config,
    host,
)

TINY = {"num_envs": 4, "unroll_length": 16, "num_minibatches": 2, "update_epochs": 1, "hidden_sizes": [16]}
UPDATES = 4  # per call
SFL = {"candidates": 8, "keep": 4, "scoring_episodes": 2, "refresh_every": 2}


def ued_config(algorithm="robust_plr", **ued):
    buffer = {"buffer_size": 8, "minimum_fill": 0.5} if algorithm in ("plr", "robust_plr", "accel") else {}
    return corridor_config(
        length=4,
        env={"name": "corridor", "kwargs": {"max_length": 12, "max_episode_steps": 16}, "task": {"length": 4}},
        agent=TINY,
        train={"timesteps_per_iteration": 4 * 16 * UPDATES, "num_seeds": 2, "eval_episodes": 2},
        ued={"algorithm": algorithm, **buffer, **ued},
    )


def optimiser_steps(runner) -> np.ndarray:
    """Each lane's count of optimiser steps (optax's own counter in the agent's state)."""
    return np.asarray(runner.state.agent.opt_state.count)


@pytest.fixture(scope="module")
def accel():
    """ACCEL on corridors: three calls, so that replays, edits and fresh levels all happened."""
    runner = Runner(ued_config("accel"))
    results = [runner.train() for _ in range(3)]
    return runner, results


@pytest.mark.heavy
def test_levels_chosen_every_rollout_compile_nothing_and_report_the_buffer(accel):
    runner, results = accel
    assert [r["perf/compilations"] for r in results] == [1, 1, 1]
    last = results[-1]
    assert 0 < last["ued/buffer_size"] <= 8 and math.isfinite(last["ued/score_mean"])
    assert sum(r["ued/replay"] for r in results) > 0 and sum(r["ued/mutate"] for r in results) > 0
    # ACCEL edits right after each replay: as many edited rollouts as replayed ones, give or take the last
    replays = sum(r["ued/replay"] for r in results) * UPDATES
    edits = sum(r["ued/mutate"] for r in results) * UPDATES
    assert abs(replays - edits) <= 1
    assert result_keys(runner.config) == frozenset(last)
    tasks = host(runner.state.env.task)["length"]
    assert len(np.unique(tasks)) > 1  # envs play different levels


@pytest.mark.heavy
def test_the_algorithms_state_survives_a_checkpoint_bit_for_bit(accel, tmp_path):
    after, again = assert_restores_bit_for_bit(accel[0], tmp_path / "ckpt")
    assert again["ued/buffer_size"] == after["ued/buffer_size"]


def test_settings_are_traced_and_change_without_recompiling(accel):
    runner, _ = accel
    config = ued_config("accel", replay_prob=0.0, edits=3)
    assert runner.reconfigure(config) is False  # same program
    result = runner.train()
    assert result["ued/replay"] == 0.0 and result["perf/compilations"] == 1
    hp = host(runner.state.ued.hp)
    assert np.all(hp.replay_prob == 0.0) and np.all(hp.edits == 3.0)


@pytest.mark.heavy
def test_two_members_keep_buffers_of_their_own_and_an_exploit_moves_one():
    members = [{"ued": {"replay_prob": 0.9}}, {"ued": {"replay_prob": 0.2}}]
    config = ued_config("robust_plr", minimum_fill=0.25)
    runner = Runner({**config, "population": {"members": members}})
    runner.train()
    state = host(runner.state)
    np.testing.assert_allclose(state.ued.hp.replay_prob, [0.9, 0.9, 0.2, 0.2])
    lanes = lambda tree, k: jax.tree.map(lambda x: x[2 * k : 2 * k + 2], tree)  # noqa: E731
    assert not np.array_equal(lanes(state.ued.own.buffer, 0).scores, lanes(state.ued.own.buffer, 1).scores)

    pbt = {"interval": 1, "quantile": 0.5, "seed": 0, "mutations": {"ued": {"replay_prob": {"uniform": [0.1, 0.9]}}}}
    runner = Runner({**config, "population": {"members": members, "pbt": pbt}})
    result = runner.train()
    ((recipient, donor),) = [(k, int(result[f"member/{k}/parent"])) for k in range(2) if result[f"member/{k}/parent"] >= 0]
    after = host(runner.state)
    assert_trees_equal(lanes(after.ued.own.buffer, recipient), lanes(after.ued.own.buffer, donor))
    assert result[f"member/{recipient}/ued/replay_prob"] == pytest.approx(runner.members[recipient].ued.replay_prob)


# -- what each algorithm learns from -------------------------------------------------------------


@pytest.mark.heavy
@pytest.mark.parametrize("algorithm", ["robust_plr", "accel"])
def test_robust_algorithms_take_no_gradient_step_on_a_fresh_or_edited_level(algorithm):
    """Robust PLR and ACCEL learn from replayed levels only: with replay off, a whole call of fresh
    levels fills the buffer and leaves the parameters and the optimiser's step count as they were."""
    runner = Runner(ued_config(algorithm, replay_prob=0.0))
    before = host(runner.state.agent.params)
    result = runner.train()
    assert result["ued/replay"] == 0.0 and result["ued/agent_updates"] == 0.0
    assert result["ued/buffer_size"] > 0  # the fresh levels were scored all the same
    assert_trees_equal(host(runner.state.agent.params), before)
    assert optimiser_steps(runner).tolist() == [0, 0]
    assert math.isnan(result["loss/policy"])  # a rollout the agent only scored reports no loss


@pytest.mark.heavy
def test_accel_learns_from_its_replays_and_not_from_the_edits_that_follow_them():
    """With replay always on once the buffer holds two levels, ACCEL alternates replay and edit;
    the optimiser steps are the replays' exactly (update_epochs x num_minibatches each)."""
    runner = Runner(ued_config("accel", replay_prob=1.0, minimum_fill=0.25))
    results = [runner.train() for _ in range(3)]
    replays = sum(r["ued/replay"] for r in results) * UPDATES
    edits = sum(r["ued/mutate"] for r in results) * UPDATES
    learned = sum(r["ued/agent_updates"] for r in results)
    assert replays >= 4 and edits >= 4 and learned == replays
    assert optimiser_steps(runner).tolist() == [replays * TINY["num_minibatches"] * TINY["update_epochs"]] * 2


@pytest.mark.heavy
def test_plr_learns_from_fresh_and_replayed_levels_alike():
    runner = Runner(ued_config("plr", replay_prob=0.5, minimum_fill=0.25))
    results = [runner.train() for _ in range(3)]
    assert 0.0 < sum(r["ued/replay"] for r in results) < 3.0  # both kinds happened
    assert [r["ued/agent_updates"] for r in results] == [UPDATES] * 3
    assert optimiser_steps(runner).tolist() == [3 * UPDATES * TINY["num_minibatches"]] * 2


@pytest.mark.heavy
def test_dr_plays_new_levels_every_rollout():
    """One update per call: the levels each call's rollout played differ from the last call's in
    every one of eight calls, and the agent learns from each."""
    config = ued_config("dr")
    config["train"]["timesteps_per_iteration"] = 4 * 16
    config["agent"] = {**TINY, "num_envs": 4}
    runner = Runner(config)
    played = []
    for _ in range(8):
        result = runner.train()
        assert result["ued/agent_updates"] == 1.0
        played.append(host(runner.state.env.task)["length"].copy())  # [seeds, envs]
    for before, after in zip(played, played[1:]):
        assert not np.array_equal(before, after)
    assert len(np.unique(np.stack(played))) > 6  # drawn over the generator's 12 lengths, not a few
    assert optimiser_steps(runner).tolist() == [8 * TINY["num_minibatches"]] * 2  # a gradient step from every rollout


@pytest.mark.heavy
def test_dr_and_sfl_train_without_recompiling_and_sfl_counts_its_scoring_apart():
    dr = Runner(ued_config("dr"))
    results = [dr.train() for _ in range(2)]
    assert [r["perf/compilations"] for r in results] == [1, 1]
    assert [r["ued/scoring_env_steps"] for r in results] == [0.0, 0.0]
    assert not any(k.startswith("ued/buffer") for k in results[-1])  # DR keeps no buffer

    sfl = Runner(ued_config("sfl", **SFL))
    results = [sfl.train() for _ in range(2)]
    assert [r["perf/compilations"] for r in results] == [1, 1]
    assert results[-1]["ued/buffer_size"] == 4
    scoring = [r["ued/scoring_env_steps"] for r in results]
    # 8 updates, a refresh every 2: 4 refreshes of 8 levels x 2 episodes of 1 to 16 steps,
    # counted apart from the env steps the agent trains on
    assert 4 * 8 * 2 <= scoring[-1] <= 4 * 8 * 2 * 16 and 0 < scoring[0] < scoring[-1]
    assert results[-1]["env_steps"] == 2 * 4 * 16 * UPDATES


@pytest.mark.parametrize("algorithm", ["dr", "sfl"])
@pytest.mark.heavy
def test_dr_and_sfl_run_with_an_agent_that_has_no_value_estimates(algorithm):
    """Only a level buffer scores levels by the agent's values: DR and SFL run with DQN."""
    config = ued_config(algorithm, **(SFL if algorithm == "sfl" else {}))
    config["agent"] = {"name": "dqn", "num_envs": 4, "unroll_length": 16, "learning_starts": 64}
    result = Runner(config).train()
    assert result["perf/compilations"] == 1 and result["env_steps"] == 4 * 16 * UPDATES
    assert ("ued/buffer_size" in result) == (algorithm == "sfl")


# -- refusals and warnings, before compiling -------------------------------------------------------


@pytest.mark.parametrize(
    "ued, env, message",
    [
        ({"replay_prob": 1.5}, "corridor", "ued.replay_prob must be <= 1.0, got 1.5"),
        ({"buffer_size": 2}, "corridor", "ued.buffer_size (2) is smaller than a batch of levels (agent.num_envs = 4)"),
        ({"algorithm": "accel"}, "cartpole", "ued needs a level generator and env 'cartpole' has none"),
        (
            {"algorithm": "plr", "generator": "tests.support.ued_levels:corridor_level"},
            "cartpole",
            "ued.generator: its levels do not fit env 'cartpole'",
        ),
        ({"algorithm": "accel", "mutator": "tests.support.ued_levels:no_such"}, "corridor", "ued.mutator"),
        ({"algorithm": "magic"}, "corridor", "ued.algorithm must be one of"),
        ({"algorithm": "sfl", "keep": 99, "candidates": 16}, "corridor", "ued.keep (99) must be <= ued.candidates (16)"),
        ({"algorithm": "accel", "edits": 0}, "corridor", "ued.edits must be >= 1, got 0"),
        ({"algorithm": "accel", "edits": 13}, "corridor", "ued.edits (13) is more than the env's mutator applies per call (12"),
        ({"algorithm": "dr", "edits": 5}, "corridor", "ued.edits is not a setting of ued.algorithm 'dr'"),
        ({"algorithm": "sfl", "buffer_size": 64}, "corridor", "ued.buffer_size is not a setting of ued.algorithm 'sfl'"),
        ({"algorithm": "tests.support.ued_levels:corridor_level"}, "corridor", "must name a level algorithm"),
    ],
)
def test_bad_level_settings_are_one_line_before_compiling(ued, env, message):
    config = ued_config(**ued)
    if env != "corridor":
        config["env"] = {"name": env}
    assert_refused_before_compiling(config, re.escape(message))


def test_a_level_algorithm_that_scores_by_values_needs_an_agent_that_estimates_them():
    config = ued_config()
    config["agent"] = {"name": "dqn", "num_envs": 4}
    with pytest.raises(ConfigError, match="has no value_estimates"):
        Runner.check(config)


def test_settings_under_which_the_buffer_cannot_fill_warn_before_compiling():
    """Episodes longer than a rollout leave most levels unscored; a run too short to offer
    minimum_fill x buffer_size levels never replays. Both are warnings, from the check alone."""
    config = ued_config("accel", buffer_size=4000)
    config["env"]["kwargs"]["max_episode_steps"] = 40  # > unroll_length 16
    config["train"]["total_timesteps"] = 4 * 16 * 100  # 100 updates x 4 envs = 400 levels < 2000
    with pytest.warns(LevelSettingsWarning) as caught:
        Runner.check(config)
    messages = [str(w.message) for w in caught]
    assert any("episodes last up to 40 steps and a rollout is agent.unroll_length = 16" in m for m in messages)
    assert any("at most 400 levels" in m and "never replays" in m for m in messages)
    with warnings.catch_warnings():
        warnings.simplefilter("error", LevelSettingsWarning)
        Runner.check(ued_config("accel"))  # episodes of 16 steps in rollouts of 16; the buffer fills


@pytest.mark.heavy
def test_a_single_lane_keeps_its_per_rollout_decision_as_branches():
    """Robust PLR decides per lane and rollout whether to update. One lane's program keeps that
    decision as conditionals (`stablehlo.case`), so a scoring-only rollout skips the update; with
    two lanes the decision is vmapped, and a vmapped conditional becomes selects that compute
    every branch."""

    def ops(seeds: int) -> tuple[int, int]:
        config = ued_config("robust_plr")
        config["train"]["num_seeds"] = seeds
        runner = Runner(config)
        text = runner.loop.compiled.call.lower(runner.state).as_text()
        return text.count("stablehlo.case"), text.count("stablehlo.select")

    (one_cases, one_selects), (two_cases, two_selects) = ops(1), ops(2)
    assert one_cases > two_cases and one_selects < two_selects / 2, (one_cases, one_selects, two_cases, two_selects)
