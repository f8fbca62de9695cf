"""Level algorithms deciding every rollout inside the compiled program (`ajax_tune/ued/`): the
buffer's rules, the scores, and the program's guarantees (nothing recompiles as levels change,
the buffer is part of the state: checkpoints, PBT exploits and population members)."""

import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune import Runner
from ajax_tune.errors import ConfigError
from ajax_tune.results.predict import result_keys
from ajax_tune.ued import buffer as B
from ajax_tune.ued import scores as S
from ajax_tune.ued.config import UEDConfig
from tests.support.helpers import assert_refused_before_compiling, assert_trees_equal, corridor_config, host

HP = UEDConfig()  # its traced settings, as the buffer functions read them
TINY = {"num_envs": 4, "unroll_length": 16, "num_minibatches": 2, "update_epochs": 1, "hidden_sizes": [16]}


def ued_config(algorithm="robust_plr", **ued):
    return corridor_config(
        length=4,
        env={"name": "corridor", "kwargs": {"max_length": 12, "max_episode_steps": 16}, "task": {"length": 4}},
        agent=TINY,
        train={"timesteps_per_iteration": 4 * 16 * 4, "num_seeds": 2, "eval_episodes": 2},
        ued={"algorithm": algorithm, "buffer_size": 8, "minimum_fill": 0.5, **ued},
    )


def level(length: int) -> dict:
    return {"length": jnp.int32(length), "exit_reward": jnp.float32(0.0)}


def batch(*lengths) -> dict:
    return {"length": jnp.array(lengths, jnp.int32), "exit_reward": jnp.zeros(len(lengths), jnp.float32)}


# -- the buffer and the scores -----------------------------------------------------------------


def test_a_buffer_fills_free_slots_then_replaces_the_least_weighted_only_when_beaten():
    buf = B.empty(level(1), 3)
    buf, slots = B.insert(buf, batch(2, 3, 4), jnp.array([0.5, -jnp.inf, 0.2]), jnp.zeros(3), HP, duplicate_check=False)
    assert slots.tolist() == [0, -1, 1]  # a level that completed no episode is never written
    assert int(buf.size) == 2 and buf.levels["length"][:2].tolist() == [2, 4]
    buf, _ = B.insert(buf, batch(5), jnp.array([0.1]), jnp.zeros(1), HP, duplicate_check=False)
    assert int(buf.size) == 3
    # full: a new level takes the slot of least replay weight (the lowest score here: fresh
    # staleness counts too) only when it scores higher than that slot
    buf, slots = B.insert(buf, batch(6, 7), jnp.array([0.05, 0.9]), jnp.zeros(2), HP, duplicate_check=False)
    assert slots.tolist() == [-1, 2] and sorted(buf.levels["length"].tolist()) == [2, 4, 7]


def test_a_level_already_in_the_buffer_updates_its_own_entry():
    buf = B.empty(level(1), 4)
    buf, _ = B.insert(buf, batch(2, 3), jnp.array([0.5, 0.4]), jnp.zeros(2), HP, duplicate_check=True)
    buf, slots = B.insert(buf, batch(3), jnp.array([0.1]), jnp.zeros(1), HP, duplicate_check=True)
    assert slots.tolist() == [1] and int(buf.size) == 2 and float(buf.scores[1]) == pytest.approx(0.1)
    assert int(B.find(buf, level(9))) == -1


def test_replay_weights_mix_rank_and_staleness():
    buf = B.empty(level(1), 4)
    buf, _ = B.insert(buf, batch(2, 3, 4), jnp.array([0.3, 0.9, 0.1]), jnp.zeros(3), HP, duplicate_check=False)
    by_rank = np.asarray(B.weights(buf, 1.0, 0.0))
    expected = np.array([1 / 2, 1, 1 / 3, 0.0])
    np.testing.assert_allclose(by_rank, expected / expected.sum(), rtol=1e-6)
    by_staleness = np.asarray(B.weights(buf, 1.0, 1.0))  # written at clock 1, 2, 3; now 3
    np.testing.assert_allclose(by_staleness, [2 / 3, 1 / 3, 0, 0], rtol=1e-6)
    buf, slots, levels = B.sample(buf, jax.random.key(0), 64, 0.3, 0.0)
    assert set(np.asarray(slots).tolist()) <= {0, 1, 2} and np.mean(np.asarray(slots) == 1) > 0.6  # the top one mostly
    assert int(buf.clock) == 3 + 64 and levels["length"].shape == (64,)


def test_rescoring_a_replayed_slot_keeps_its_best_return_and_ignores_an_empty_rollout():
    buf = B.empty(level(1), 2)
    buf, _ = B.insert(buf, batch(2, 3), jnp.array([0.5, 0.4]), jnp.array([1.0, 2.0]), HP, duplicate_check=False)
    buf = B.rescore(buf, jnp.array([0, 1]), jnp.array([0.7, -jnp.inf]), jnp.array([0.5, 3.0]))
    np.testing.assert_allclose(np.asarray(buf.scores), [0.7, 0.4])
    np.testing.assert_allclose(np.asarray(buf.max_returns), [1.0, 3.0])


def test_scores():
    valid = jnp.array([[1, 1], [1, 1], [1, 0]], jnp.float32)  # [T, N]: env 1's last step was masked
    advantages = jnp.array([[1.0, -1.0], [-2.0, 3.0], [2.0, 9.0]])
    pvl = S.positive_value_loss(advantages, valid, jnp.array([True, False]))
    assert float(pvl[0]) == pytest.approx(1.0) and float(pvl[1]) == -math.inf
    values = jnp.array([[0.5, 0.0], [0.25, 0.0], [0.0, 0.0]])
    mc = S.max_mc(values, valid, jnp.array([1.0, -jnp.inf]))
    assert float(mc[0]) == pytest.approx(1.0 - 0.25) and float(mc[1]) == -math.inf
    np.testing.assert_allclose(np.asarray(S.learnability(jnp.array([0.0, 0.5, 1.0]))), [0, 0.25, 0])


# -- in the program ------------------------------------------------------------------------------


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
    replays = sum(r["ued/replay"] for r in results) * 4
    edits = sum(r["ued/mutate"] for r in results) * 4
    assert abs(replays - edits) <= 1
    assert result_keys(runner.config) == frozenset(last)
    tasks = host(runner.state.env.task)["length"]
    assert len(np.unique(tasks)) > 1  # envs play different levels


@pytest.mark.heavy
def test_the_buffer_survives_a_checkpoint_bit_for_bit(accel, tmp_path):
    runner, _ = accel
    runner.save(tmp_path / "ckpt")
    saved = host(runner.state)
    after = runner.train()
    restored = Runner(runner.config)
    restored.restore(tmp_path / "ckpt")
    assert_trees_equal(host(restored.state.levels), saved.levels)
    again = restored.train()
    assert_trees_equal(host(restored.state), host(runner.state))
    assert again["ued/buffer_size"] == after["ued/buffer_size"] and again["perf/compilations"] == 1


def test_settings_are_traced_and_change_without_recompiling(accel):
    runner, _ = accel
    config = ued_config("accel", replay_prob=0.0, edits=3)
    assert runner.reconfigure(config) is False  # same program
    result = runner.train()
    assert result["ued/replay"] == 0.0 and result["perf/compilations"] == 1
    hp = host(runner.state.levels.hp)
    assert np.all(hp.replay_prob == 0.0) and np.all(hp.edits == 3.0)


@pytest.mark.heavy
def test_two_members_keep_buffers_of_their_own_and_an_exploit_moves_one():
    members = [{"ued": {"replay_prob": 0.9}}, {"ued": {"replay_prob": 0.2}}]
    config = ued_config("robust_plr", minimum_fill=0.25)
    runner = Runner({**config, "population": {"members": members}})
    runner.train()
    state = host(runner.state)
    np.testing.assert_allclose(state.levels.hp.replay_prob, [0.9, 0.9, 0.2, 0.2])
    lanes = lambda tree, k: jax.tree.map(lambda x: x[2 * k : 2 * k + 2], tree)  # noqa: E731
    assert not np.array_equal(lanes(state.levels.buffer, 0).scores, lanes(state.levels.buffer, 1).scores)

    pbt = {"interval": 1, "quantile": 0.5, "seed": 0, "mutations": {"ued": {"replay_prob": {"uniform": [0.1, 0.9]}}}}
    runner = Runner({**config, "population": {"members": members, "pbt": pbt}})
    result = runner.train()
    ((recipient, donor),) = [(k, int(result[f"member/{k}/parent"])) for k in range(2) if result[f"member/{k}/parent"] >= 0]
    after = host(runner.state)
    assert_trees_equal(lanes(after.levels.buffer, recipient), lanes(after.levels.buffer, donor))
    assert result[f"member/{recipient}/ued/replay_prob"] == pytest.approx(runner.members[recipient].ued.replay_prob)


@pytest.mark.parametrize("algorithm", ["dr", "sfl"])
@pytest.mark.heavy
def test_dr_and_sfl_train_without_recompiling(algorithm):
    runner = Runner(ued_config(algorithm, sfl_levels=8, sfl_keep=4, sfl_rollouts=2, sfl_every=2))
    results = [runner.train() for _ in range(2)]
    assert [r["perf/compilations"] for r in results] == [1, 1]
    scoring = [r["ued/scoring_env_steps"] for r in results]
    if algorithm == "sfl":
        assert results[-1]["ued/buffer_size"] == 4 and results[-1]["ued/replay"] == 1.0
        # 8 updates, a refresh every 2: 4 refreshes of 8 levels x 2 episodes of 1 to 16 steps,
        # counted apart from the env steps the agent trains on
        assert 4 * 8 * 2 <= scoring[-1] <= 4 * 8 * 2 * 16 and 0 < scoring[0] < scoring[-1]
        assert results[-1]["env_steps"] == 2 * 4 * 16 * 4
    else:
        assert results[-1]["ued/buffer_size"] == 0 and results[-1]["ued/replay"] == 0.0
        assert scoring == [0.0, 0.0]


@pytest.mark.parametrize("algorithm", ["dr", "sfl"])
@pytest.mark.heavy
def test_dr_and_sfl_run_with_an_agent_that_has_no_value_estimates(algorithm):
    """Only a level buffer scores levels by the agent's values: DR and SFL run with DQN."""
    config = ued_config(algorithm, sfl_levels=8, sfl_keep=4, sfl_rollouts=2, sfl_every=2)
    config["agent"] = {"name": "dqn", "num_envs": 4, "unroll_length": 16, "learning_starts": 64}
    result = Runner(config).train()
    assert result["perf/compilations"] == 1 and result["env_steps"] == 4 * 16 * 4
    assert result["ued/buffer_size"] == (4 if algorithm == "sfl" else 0)


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
        ({"algorithm": "sfl", "sfl_keep": 99, "sfl_levels": 16}, "corridor", "ued.sfl_keep (99) must be <= ued.sfl_levels (16)"),
    ],
)
def test_bad_level_settings_are_one_line_before_compiling(ued, env, message):
    config = ued_config(**ued)
    if env != "corridor":
        config["env"] = {"name": env}
    assert_refused_before_compiling(config, re.escape(message))


def test_a_level_algorithm_needs_an_agent_that_estimates_values():
    config = ued_config()
    config["agent"] = {"name": "dqn", "num_envs": 4}
    with pytest.raises(ConfigError, match="has no value_estimates"):
        Runner.check(config)


@pytest.mark.heavy
def test_a_single_lane_keeps_its_per_rollout_decision_as_branches():
    """Robust PLR decides per lane and rollout whether to update. One lane's program keeps that
    decision as conditionals (`stablehlo.case`), so a scoring-only rollout skips the update; with
    two lanes the decision is vmapped, and a vmapped conditional becomes selects that compute
    every branch. Measured: one lane 12 cases and 108 selects, two lanes 1 and 290 (one lane run
    through the vmap as well: 9 and 290)."""

    def ops(seeds: int) -> tuple[int, int]:
        config = ued_config("robust_plr")
        config["train"]["num_seeds"] = seeds
        runner = Runner(config)
        text = runner.loop.compiled.call.lower(runner.state).as_text()
        return text.count("stablehlo.case"), text.count("stablehlo.select")

    (one_cases, one_selects), (two_cases, two_selects) = ops(1), ops(2)
    assert one_cases > two_cases and one_selects < two_selects / 2, (one_cases, one_selects, two_cases, two_selects)
