"""A level algorithm written outside the package and named by import path (`examples/ncc_levels.py`,
NCC) gets what the built-ins get: one compilation, rows that `result_keys` predicts, traced settings
changed without recompiling, bit-exact checkpoints, PBT exploits that move its state, refusals in
one line before compiling. And it does what NCC says: the adversary's step is the closed form of
projected gradient ascent on the entropy-regularised expected score, its fixed point the softmax
of the scores over the entropy coefficient, and the buffer takes candidates that score higher."""

import importlib.util
import math
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune import Runner
from ajax_tune.agents.hparams import init_hparams
from ajax_tune.expected_keys import result_keys
from ajax_tune.ued import Context, LevelTools
from tests.support.helpers import (
    assert_refused_before_compiling,
    assert_restores_bit_for_bit,
    assert_trees_equal,
    corridor_config,
    host,
)
from tests.test_examples import EXAMPLES, run_example


def _user_module(name: str):
    """A user's module, as `ued.algorithm: ncc_levels:NCC` finds it: loaded from `examples/` under
    its own name, not as `examples.ncc_levels` (some releases of other libraries install a
    top-level package `examples`, which would shadow the directory)."""
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ncc_levels = sys.modules.get("ncc_levels") or _user_module("ncc_levels")
NCC, entropy, eager_ascent, eager_project = ncc_levels.NCC, ncc_levels.entropy, ncc_levels.ascent, ncc_levels.project
ALGORITHM = "ncc_levels:NCC"
project = jax.jit(eager_project)  # one compilation per shape, not an op-by-op dispatch
ascent = jax.jit(eager_ascent, static_argnames="adaptive")
TINY = {"num_envs": 4, "unroll_length": 16, "num_minibatches": 2, "update_epochs": 1, "hidden_sizes": [16]}
UPDATES = 4  # per call


def ncc_config(**ued):
    return corridor_config(
        length=4,
        env={"name": "corridor", "kwargs": {"max_length": 12, "max_episode_steps": 16}, "task": {"length": 4}},
        agent=TINY,
        train={"timesteps_per_iteration": 4 * 16 * UPDATES, "num_seeds": 2, "eval_episodes": 2},
        ued={"algorithm": ALGORITHM, "buffer_size": 8, "scoring_episodes": 2, **ued},
    )


# -- the adversary's step against its closed forms (units, no program) ---------------------------------


def test_the_projection_is_onto_the_truncated_simplex():
    """`project` equals max(x - tau, floor) with tau found by bisection, an independent solution of
    the projection's optimality conditions, and leaves a point already on the set where it is."""
    rng = np.random.default_rng(0)
    for floor in (0.0, 1e-3, 0.05):
        for _ in range(20):
            x = rng.normal(0, 0.5, 10).astype(np.float32)
            got = np.asarray(project(jnp.asarray(x), floor))
            low, high = x.min() - 2.0, x.max()
            for _ in range(100):  # sum(max(x - tau, floor)) decreases in tau
                tau = (low + high) / 2
                low, high = (tau, high) if np.maximum(x - tau, floor).sum() > 1 else (low, tau)
            np.testing.assert_allclose(got, np.maximum(x - tau, floor), atol=1e-6)
            assert got.min() >= floor - 1e-7 and got.sum() == pytest.approx(1.0, abs=1e-5)
    inside = np.array([0.1, 0.2, 0.3, 0.4], np.float32)
    np.testing.assert_allclose(project(jnp.asarray(inside), 0.05), inside, atol=1e-6)


def test_a_plain_step_moves_probability_to_higher_scores_by_the_step_size():
    """From uniform, with no entropy, the step is y + step_size * (s - mean(s)): the projection only
    removes the gradient's mean while every level stays above the floor."""
    scores = jnp.array([0.0, 0.25, 0.1, 0.05, 0.2, 0.0, 0.15, 0.25])
    uniform = jnp.full(8, 1 / 8)
    squares = jnp.full(8, 0.1)
    for step_size in (0.1, 0.3):
        probs, same = ascent(uniform, squares, scores, step_size, 0.0, 1e-5, adaptive=False)
        np.testing.assert_allclose(probs, 1 / 8 + step_size * (scores - scores.mean()), atol=1e-6)
        np.testing.assert_array_equal(same, squares)  # the plain step accumulates nothing
    # the adaptive step divides each level's gradient by (0.1 + its squared gradient) ** 0.4
    probs, accumulated = ascent(uniform, squares, scores, 0.1, 0.0, 1e-5, adaptive=True)
    scaled = scores / (0.1 + scores**2) ** 0.4
    np.testing.assert_allclose(accumulated, 0.1 + scores**2, rtol=1e-6)
    np.testing.assert_allclose(probs, 1 / 8 + 0.1 * (scaled - scaled.mean()), atol=1e-6)


def test_entropy_keeps_the_distribution_at_the_softmax_of_the_scores():
    """The maximiser of y . s + c H(y) over the simplex is softmax(s / c): many plain steps reach it.
    Without the entropy the adversary piles everything on the best level, down to the floor elsewhere."""
    scores = jnp.array([0.0, 0.25, 0.1, 0.05, 0.2, 0.0, 0.15, 0.24])
    start = jnp.full(8, 1 / 8)

    @jax.jit
    def climb(entropy_coef):
        def step(carry, _):
            probs, squares = carry
            return ascent(probs, squares, scores, 0.05, entropy_coef, 1e-5, adaptive=False), None

        (probs, _), _ = jax.lax.scan(step, (start, jnp.full(8, 0.1)), None, length=3000)
        return probs

    for c in (0.05, 0.2):
        np.testing.assert_allclose(climb(c), jax.nn.softmax(scores / c), atol=2e-4)
    collapsed = climb(0.0)
    assert collapsed[1] == pytest.approx(1 - 7 * 1e-5, abs=1e-5) and entropy(collapsed) < 0.01
    assert entropy(climb(0.2)) > 1.9  # log(8) = 2.08 is uniform


def corridor_tools(success_by_length):
    """The corridor's generator, and an `evaluate` whose episodes succeed as the table says per
    level length (so each level's learnability is known: p (1 - p) with p the table's)."""

    def generate(key):
        return {"length": jax.random.randint(key, (), 1, 9), "exit_reward": jnp.float32(0.0)}

    table = jnp.asarray(success_by_length, jnp.float32)  # index: length; successes of 4 episodes

    def evaluate(agent_state, level, key):
        wins = jnp.arange(4) < table[level["length"]]
        return {"eval/return": wins * 1.0, "eval/length": jnp.full(4, 3.0), "eval/success": wins * 1.0}

    return LevelTools(generate=generate, evaluate=evaluate)


def test_one_update_scores_the_buffer_takes_better_candidates_and_plays_the_old_distribution():
    """`choose` on a buffer of known levels, with a known success table: lengths 1-2 always solved,
    5-8 never, 3 and 4 half the time (learnability 0.25, the highest). One update scores the
    buffer, writes the half-solved candidates over levels that scored 0, steps the adversary on
    the new scores, and plays levels drawn from the buffer and distribution as they were before."""
    settings = NCC.Settings(algorithm=ALGORITHM, buffer_size=8, candidates=8, scoring_episodes=4, step="plain", step_size=0.2)
    algorithm = NCC(settings, 4, corridor_tools([0, 4, 4, 2, 2, 0, 0, 0, 0]))
    first = np.array([1, 2, 3, 5, 6, 7, 8, 4], np.int32)
    state = algorithm.init({"length": jnp.int32(1), "exit_reward": jnp.float32(0.0)}, jax.random.key(9))
    buffer = state.buffer.replace(levels={**state.buffer.levels, "length": jnp.asarray(first)}, size=jnp.int32(8))
    state = state.replace(buffer=buffer)
    hp = init_hparams(settings)  # the traced settings, as the program holds them
    choose = jax.jit(lambda state, hp, key: algorithm.choose(state, hp, key, Context(agent_state=(), iteration=jnp.int32(0))))
    new, decision = choose(state, hp, jax.random.key(3))

    lengths = np.asarray(new.buffer.levels["length"])
    expected = np.where(np.isin(lengths, [3, 4]), 0.25, 0.0)
    np.testing.assert_allclose(new.buffer.scores, expected)
    # half-solved candidates replaced levels that scored 0, one each; nothing else was written
    changed = lengths != first
    assert 0 < changed.sum() == int(decision.memo.taken)
    assert np.all(np.isin(first[changed], [1, 2, 5, 6, 7, 8])) and np.all(expected[changed] == 0.25)
    np.testing.assert_allclose(new.probs, 1 / 8 + 0.2 * (expected - expected.mean()), atol=1e-6)
    # 8 buffer levels and 8 candidates, 4 episodes of 3 steps each, counted apart from training
    assert int(decision.scoring_steps) == (8 + 8) * 4 * 3
    # the rollout played the buffer as it was before the replacement
    np.testing.assert_array_equal(decision.levels["length"], first[np.asarray(decision.memo.slots)])
    assert decision.levels["length"].shape == (4,) and bool(decision.learn)
    # ... drawn from the distribution before the step: all on the level it favoured, though a long
    # step moves nearly all of the distribution onto the half-solved levels
    peaked = state.replace(probs=jnp.full(8, 1e-6).at[5].set(1 - 7e-6))
    stepped, decision = choose(peaked, hp.replace(step_size=jnp.float32(20.0)), jax.random.key(4))
    assert np.asarray(decision.memo.slots).tolist() == [5] * 4 and np.all(decision.levels["length"] == 7)
    assert float(stepped.probs[5]) < 0.01


# -- in the program, by import path ----------------------------------------------------------------


@pytest.fixture(scope="module")
def ncc():
    runner = Runner(ncc_config())
    results = [runner.train() for _ in range(3)]
    return runner, results


@pytest.mark.heavy
def test_it_trains_by_import_path_with_one_compilation_and_predicted_rows(ncc):
    runner, results = ncc
    assert [r["perf/compilations"] for r in results] == [1, 1, 1]
    last = results[-1]
    assert result_keys(runner.config) == frozenset(last)
    assert set(NCC.row_keys) <= set(last)
    # the latest rows say what the adversary holds after the call (the mean over its two seeds)
    own = host(runner.state.ued.own)
    probs, scores = own.probs, own.buffer.scores
    held = {
        "ued/adversary_entropy": -(probs * np.log(np.maximum(probs, 1e-30))).sum(-1),
        "ued/adversary_max_prob": probs.max(-1),
        "ued/adversary_score": (probs * scores).sum(-1),
        "ued/score_mean": scores.mean(-1),
    }
    for key, per_seed in held.items():
        assert last[key] == pytest.approx(float(per_seed.mean()), rel=1e-4, abs=1e-6), key
    assert last["ued/adversary_entropy"] < math.log(8) - 1e-3  # it has moved off uniform
    # 4 updates a call, each scoring 8 buffer levels and 4 candidates twice, 1 to 16 steps an episode
    scoring = [r["ued/scoring_env_steps"] for r in results]
    assert 4 * 12 * 2 <= scoring[0] <= 4 * 12 * 2 * 16 and scoring[0] < scoring[1] < scoring[2]
    assert last["ued/agent_updates"] == UPDATES and last["env_steps"] == 3 * 4 * 16 * UPDATES
    state = host(runner.state.ued.own)
    np.testing.assert_allclose(state.probs.sum(axis=-1), [1.0, 1.0], atol=1e-5)
    assert state.buffer.size.tolist() == [8, 8]
    assert not np.array_equal(state.probs[0], state.probs[1])  # each seed's adversary is its own


@pytest.mark.heavy
def test_its_traced_settings_change_without_recompiling(ncc):
    runner, _ = ncc
    assert runner.reconfigure(ncc_config(step_size=0.5, entropy_coef=0.2, min_prob=0.01)) is False
    result = runner.train()
    assert result["perf/compilations"] == 1
    hp = host(runner.state.ued.hp)
    assert np.all(hp.step_size == 0.5) and np.all(hp.entropy_coef == np.float32(0.2)) and np.all(hp.min_prob == np.float32(0.01))
    assert host(runner.state.ued.own).probs.min() >= np.float32(0.01) - 1e-7  # the new floor holds


@pytest.mark.heavy
def test_its_state_survives_a_checkpoint_bit_for_bit(ncc, tmp_path):
    after, again = assert_restores_bit_for_bit(ncc[0], tmp_path / "ckpt")
    assert again["ued/adversary_entropy"] == after["ued/adversary_entropy"]


@pytest.mark.heavy
def test_a_pbt_exploit_inside_a_trial_moves_the_adversary_to_the_recipient():
    members = [{"ued": {"step_size": 0.5}}, {"ued": {"step_size": 0.02}}]
    pbt = {"interval": 1, "quantile": 0.5, "seed": 0, "mutations": {"ued": {"step_size": {"loguniform": [0.01, 1.0]}}}}
    runner = Runner({**ncc_config(), "population": {"members": members, "pbt": pbt}})
    result = runner.train()
    ((recipient, donor),) = [(k, int(result[f"member/{k}/parent"])) for k in range(2) if result[f"member/{k}/parent"] >= 0]
    own = host(runner.state.ued.own)
    lanes = lambda tree, k: jax.tree.map(lambda x: x[2 * k : 2 * k + 2], tree)  # noqa: E731
    assert_trees_equal(lanes(own, recipient), lanes(own, donor))
    assert not np.allclose(lanes(own, donor).probs, 1 / 8)  # what moved had learned something
    explored = runner.members[recipient].ued.step_size
    assert result[f"member/{recipient}/ued/step_size"] == pytest.approx(explored)
    np.testing.assert_allclose(host(runner.state.ued.hp).step_size[2 * recipient : 2 * recipient + 2], explored, rtol=1e-6)


# -- refusals, before compiling ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "ued, message",
    [
        ({"step_size": 0.0}, "ued.step_size must be > 0.0, got 0.0"),
        ({"entropy_coef": -0.1}, "ued.entropy_coef must be >= 0.0, got -0.1"),
        ({"min_prob": 0.2}, "ued.min_prob (0.2) x ued.buffer_size (8) must be below 1"),
        ({"step": "adam"}, "ued.step must be one of ['adaptive', 'plain'], got 'adam'"),
        ({"candidates": -1}, "ued.candidates must be >= 0, got -1"),
        (
            {"step_sise": 0.1},
            "ued.step_sise is not a setting of ued.algorithm 'ncc_levels:NCC'; did you mean ued.'step_size'?",
        ),
        ({"algorithm": "ncc_levels:NCCSettings"}, "must name a level algorithm"),
        ({"algorithm": "ncc_levels:NCX"}, "'ncc_levels' has no attribute 'NCX'; did you mean 'NCC'?"),
    ],
)
def test_bad_settings_are_one_line_before_compiling(ued, message):
    assert_refused_before_compiling(ncc_config(**ued), re.escape(message))


def test_it_needs_an_env_that_reports_success():
    config = ncc_config(generator="tests.support.ued_levels:corridor_level")
    config["env"] = {"name": "cartpole"}
    assert_refused_before_compiling(config, re.escape("ued.algorithm 'ncc_levels:NCC' ranks levels by their success"))


# -- the example under Tune ---------------------------------------------------------------------------


def test_the_example_trains_under_tune_with_pbt_by_import_path(ray_session, tmp_path):
    """`python examples/ncc_levels.py --smoke`: two trials name the algorithm `ncc_levels:NCC` (the
    workers import it from the example's directory), PBT perturbs its traced settings, and no
    trial compiles twice."""
    result = run_example("ncc_levels.py", tmp_path, ray_session.get_runtime_context().gcs_address)
    assert result["algorithm"] == "ncc_levels:NCC" and result["trials"] == 2
    assert result["iterations"] == [4, 4] and result["compilations"] == [1, 1]
    assert all(0.0 < h <= math.log(32) + 1e-6 for h in result["adversary_entropy"])
    assert all(s > 0 for s in result["scoring_env_steps"])
    # the trials started from 0.05 or 0.2; the exploited one explored from there (x 0.8, x 1.2 or resampled)
    assert any(s not in (0.05, 0.2) for s in result["step_sizes"])
