"""The TrainLoop contract: split-run equivalence, donation, no recompilation, cadence."""

import dataclasses
import hashlib
import os
import pathlib
import subprocess
import sys

import jax
import numpy as np
import pytest

from ajax_tune import compat
from ajax_tune.agents import PPOConfig
from ajax_tune.errors import ConfigError
from ajax_tune.schedules import Schedule
from tests.support.helpers import assert_trees_equal, corridor_loop, host

UNROLL = 8 * 16  # env steps per update in corridor_loop
ROOT = pathlib.Path(__file__).resolve().parent.parent
LR = Schedule(kind="warmup_cosine", peak=1e-3, warmup_fraction=0.2, end_fraction=0.1)


def per_update(out):
    """The per-update parts of a call's output (rows and health), keyed apart."""
    return {**out.rows, **{f"health:{k}": v for k, v in out.health.items()}}


def concat_rows(outs):
    """Per-update rows and health of consecutive calls, as one call would have written them."""
    return {k: np.concatenate([np.asarray(per_update(o)[k]) for o in outs], axis=1) for k in per_update(outs[0])}


def assert_per_env_sums_add_up(outs, one_call):
    for name in ("episodes", "return_sum", "steps", "signal_count"):
        np.testing.assert_allclose(
            sum(np.asarray(getattr(o.stats, name)) for o in outs), getattr(one_call.stats, name), rtol=1e-6
        )
    np.testing.assert_array_equal(outs[-1].stats.task["length"], one_call.stats.task["length"])


@pytest.mark.optimised
def test_split_runs_are_bit_identical(tmp_path):
    """1 call of 4T == 4 calls of T == 4 calls of T with save/restore into fresh loops, in the
    fully optimised build that users run (the claim is theirs)."""
    assert not jax.config.read("jax_disable_most_optimizations")
    agent = {"lr": LR}
    long_loop = corridor_loop(agent, timesteps_per_iteration=4 * 2 * UNROLL, eval_every=3 * UNROLL)
    state, rows = long_loop.train(long_loop.init(seed=3))
    one_call = host((state, rows))

    short = corridor_loop(agent, timesteps_per_iteration=2 * UNROLL, eval_every=3 * UNROLL)
    state = short.init(seed=3)
    split_rows = []
    for _ in range(4):
        state, rows = short.train(state)
        split_rows.append(host(rows))
    assert_trees_equal(state, one_call[0])
    assert_trees_equal(concat_rows(split_rows), per_update(one_call[1]))
    assert_per_env_sums_add_up(split_rows, one_call[1])

    restored_rows = []
    for i in range(4):
        loop = corridor_loop(agent, timesteps_per_iteration=2 * UNROLL, eval_every=3 * UNROLL)
        if i == 0:
            state = loop.init(seed=3)
        else:
            state, meta = loop.restore(tmp_path / f"ckpt{i - 1}")
            assert meta["extra"] == {"call": i - 1} and meta["timestep"] == i * 2 * UNROLL
        state, rows = loop.train(state)
        assert loop.compilations == 1  # a restored state fits the compiled program exactly
        restored_rows.append(host(rows))
        loop.save(tmp_path / f"ckpt{i}", state, extra={"call": i})
    assert_trees_equal(state, one_call[0])
    assert_trees_equal(concat_rows(restored_rows), per_update(one_call[1]))

    # evaluation cadence is absolute: every 3 updates of the whole run, whatever the split
    eval_steps = one_call[1].rows["eval/timestep"][0]
    assert eval_steps[eval_steps >= 0].tolist() == [3 * UNROLL, 6 * UNROLL]


def digest_of_three_calls() -> str:
    """A hash of the agent after three calls of the corridor loop, in this process's build (the
    split-run test's short loop: in the suite, its program is in the cache already)."""
    loop = corridor_loop({"lr": LR}, timesteps_per_iteration=2 * UNROLL, eval_every=3 * UNROLL)
    state = loop.init(seed=3)
    for _ in range(3):
        state, _ = loop.train(state)
    digest = hashlib.sha1()
    for leaf in jax.tree.leaves(host(state.agent)):
        digest.update(leaf.tobytes())
    return digest.hexdigest()


@pytest.mark.optimised
def test_the_suites_fully_optimised_build_is_the_one_users_run():
    """The suite compiles with few passes and a flag that halves compile time (tests/conftest.py);
    a fully optimised compile must drop both, or the bit-identity claims here would be checked in
    a build no user runs. The same three calls in a fresh process on JAX's defaults (no XLA_FLAGS,
    every pass) must train the same bits: they differ when the flag leaks."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_DISABLE_MOST_OPTIMIZATIONS")}
    env["PYTHONPATH"] = str(ROOT)  # the repository, for `tests.test_loop`
    script = "from tests.test_loop import digest_of_three_calls; print(digest_of_three_calls())"
    users = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True, cwd=ROOT)
    assert digest_of_three_calls() == users.stdout.strip()


@pytest.mark.heavy
def test_the_start_evaluation_runs_once_per_run_and_changes_no_training(tmp_path):
    """With `eval_at_start` the run's first call evaluates before its first update, and a restored
    run never again (the iteration is absolute). Its key is folded out of each seed's stream, not
    drawn from it, so training with the option on is bit-identical to training without it, with
    or without a save and restore between the calls."""
    kw = dict(timesteps_per_iteration=2 * UNROLL, eval_every=3 * UNROLL)
    off = corridor_loop({"lr": LR}, **kw)
    state_off, outs_off = off.init(seed=3), []
    for _ in range(2):
        state_off, out = off.train(state_off)
        outs_off.append(host(out))

    on = corridor_loop({"lr": LR}, eval_at_start=True, **kw)
    state, first = on.train(on.init(seed=3))
    on.save(tmp_path / "ck", state)
    restored = corridor_loop({"lr": LR}, eval_at_start=True, **kw)
    state, _ = restored.restore(tmp_path / "ck")
    state, second = restored.train(state)
    first, second = host(first), host(second)
    assert_trees_equal(state, state_off)
    assert_trees_equal(concat_rows([first, second]), concat_rows(outs_off))
    assert on.compilations == restored.compilations == 1

    assert {np.shape(v) for v in first.start.values()} == {(2,)}  # one value per seed
    # evaluated (not NaN), and as the corridor scores it: a seed's deterministic episodes from the same start
    # are alike, returning 1 exactly when they reach the end, else running to the 24-step limit
    start = {k: np.asarray(v) for k, v in first.start.items()}
    np.testing.assert_array_equal(start["eval/return"], start["eval/success"])
    assert set(start["eval/return"].tolist()) <= {0.0, 1.0} and (start["eval/length"][start["eval/return"] == 0] == 24).all()
    for out in (second, *outs_off):  # a restored run, and a run without the option: none
        assert all(np.isnan(v).all() for v in out.start.values())


@pytest.mark.heavy
def test_no_recompilation_when_task_and_hyperparameters_change(tmp_path):
    loop = corridor_loop({"lr": LR})
    state = loop.init()
    seen = []
    changes = [
        lambda s: s,
        lambda s: loop.set_task(s, {"length": 7}),
        lambda s: loop.set_hparams(
            s, dataclasses.replace(loop.agent.config, ent_coef=0.1, lr=Schedule(kind="constant", peak=5e-4))
        ),
        lambda s: loop.set_task(s, {"length": np.arange(1, 9)}, eval_task={"length": 9}),
        lambda s: loop.set_hparams(s, dataclasses.replace(loop.agent.config, ent_coef=0.1, lr=Schedule(kind="step", peak=2e-3))),
    ]
    for change in changes:
        state = change(state)
        state, rows = loop.train(state)
        seen.append(host(rows))
    assert loop.compilations == 1
    assert compat.jit_cache_size(loop.compiled.call) == 1
    tasks = [r.rows["task/length"][0, -1] for r in seen]
    assert tasks == [4, 7, 7, 9, 9]
    assert float(seen[2].rows["lr"][0, 0]) == pytest.approx(5e-4)
    assert float(seen[4].rows["lr"][0, 0]) == pytest.approx(2e-3)
    assert float(np.asarray(state.agent.hp.ent_coef)[0]) == pytest.approx(0.1)
    assert np.asarray(state.env.task["length"])[0].tolist() == list(range(1, 9))
    # a state restored from disk (committed to the device, unlike a fresh one) fits the same program
    loop.save(tmp_path / "ck", state)
    state, _ = loop.restore(tmp_path / "ck")
    state, _ = loop.train(state)
    assert loop.compilations == 1


def test_state_is_donated():
    loop = corridor_loop()
    state = loop.init()
    leaves = jax.tree.leaves(state)
    new_state, _ = loop.train(state)
    assert all(leaf.is_deleted() for leaf in leaves)
    assert not any(leaf.is_deleted() for leaf in jax.tree.leaves(new_state))


def test_rows_have_fixed_shape_and_mark_missing_evaluations():
    loop = corridor_loop(timesteps_per_iteration=3 * UNROLL, eval_every=2 * UNROLL)
    state = loop.init()
    state, first = loop.train(state)
    state, second = loop.train(state)
    for out in (first, second):
        assert {np.shape(v) for v in per_update(out).values()} == {(2, 3)}
        assert {np.shape(v) for v in jax.tree.leaves(out.stats)} == {(2, 8)}
    steps = np.concatenate([first.rows["eval/timestep"][0], second.rows["eval/timestep"][0]]).tolist()
    assert steps == [-1, 2 * UNROLL, -1, 4 * UNROLL, -1, 6 * UNROLL]
    ret = np.concatenate([first.rows["eval/return"][0], second.rows["eval/return"][0]])
    assert np.isnan(ret[[0, 2, 4]]).all() and not np.isnan(ret[[1, 3, 5]]).any()


def test_budget_must_be_whole_unrolls():
    with pytest.raises(ConfigError, match=r"whole number of unrolls.*= 128 env steps; nearest: 256 or 384$"):
        corridor_loop(timesteps_per_iteration=300)
    with pytest.raises(ConfigError, match=r"\(100\) must be a whole number.*= 128 env steps; the least is one unroll, 128$"):
        corridor_loop(timesteps_per_iteration=100)


def test_minibatches_must_divide_the_batch():
    with pytest.raises(ConfigError, match="num_minibatches"):
        PPOConfig(num_envs=3, unroll_length=5, num_minibatches=4)


def test_seeds_are_independent():
    loop = corridor_loop()
    state, rows = loop.train(loop.init())
    params = host(state.agent.params)
    first = jax.tree.leaves(params)[0]
    assert not np.array_equal(first[0], first[1])


@pytest.mark.heavy
def test_init_compiles_with_few_passes_and_training_with_the_builds_own(monkeypatch):
    """`init` runs once per state, so its program is built with ONCE_COMPILER_OPTIONS (few XLA
    passes, no fusion emitters) in every build, and the training program with the build's own
    settings: the options each compile asked XLA for are recorded on the way in."""
    from jax._src import compiler

    from ajax_tune.loop.compiled import ONCE_COMPILER_OPTIONS

    asked = []
    get_options = compiler.get_compile_options

    def recording(*args, **kwargs):
        options = get_options(*args, **kwargs)
        asked.append(dict(options.env_option_overrides))
        return options

    monkeypatch.setattr(compiler, "get_compile_options", recording)
    loop = corridor_loop({"hidden_sizes": (8,)}, num_seeds=3)  # a shape no other test builds: both compile here
    state = loop.init(seed=0)  # (the seeds' key splits compile too, with no options of their own)
    assert [options for options in asked if options] == [ONCE_COMPILER_OPTIONS]
    before = len(asked)
    loop.train(state)
    assert len(asked) > before and not any(set(ONCE_COMPILER_OPTIONS) & set(options) for options in asked[before:])


def test_init_has_no_batched_lapack_calls():
    """Vmapping the orthogonal initialiser over seeds makes XLA call LAPACK's QR batched, which
    can deadlock the CPU runtime's two worker threads (seen here in about half of the runs that
    re-initialised after a train call). The loop initialises seeds in turn instead."""
    loop = corridor_loop({"hidden_sizes": (64, 64)})
    keys = jax.random.split(jax.random.PRNGKey(0), 2)
    task = {k: jax.numpy.asarray(v) for k, v in loop.env.validate_task({}).items()}
    hlo = loop.compiled.init.lower(keys, task).as_text()
    lapack = [line for line in hlo.splitlines() if "custom_call @lapack" in line]
    assert lapack  # the orthogonal initialiser is there ...
    assert all('num_batch_dims = "0"' in line for line in lapack)  # ... and never batched
    state = loop.init(seed=0)
    kernels = np.asarray(state.agent.params["policy"]["params"]["Dense_1"]["kernel"])
    assert kernels.shape == (2, 64, 64) and not np.array_equal(kernels[0], kernels[1])


def test_one_lane_keeps_its_decisions_as_branches_and_computes_what_a_vmap_does():
    """A vmapped `lax.cond` on a per-lane predicate computes both branches (a select); a single
    lane runs unbatched, so a skipped branch (robust PLR's update on a scoring-only rollout) is
    not computed. Both give the same values."""
    import jax.numpy as jnp

    from ajax_tune.loop.program import over_lanes

    def step(x, learn):
        return jax.lax.cond(learn, lambda: jnp.sin(x) * 2.0, lambda: x), {"carry": None, "n": x.sum()}

    def primitives(f, *args):
        return {eqn.primitive.name for eqn in jax.make_jaxpr(f)(*args).jaxpr.eqns}

    x = jnp.arange(6.0).reshape(2, 3)
    learn = jnp.array([True, False])
    assert "cond" in primitives(over_lanes(step, 1), x[:1], learn[:1])
    assert "cond" not in primitives(over_lanes(step, 2), x, learn)  # both branches, then a select
    both = over_lanes(step, 2)(x, learn)
    for lane in range(2):
        one = over_lanes(step, 1)(x[lane : lane + 1], learn[lane : lane + 1])
        np.testing.assert_array_equal(one[0][0], both[0][lane])
        assert one[1]["carry"] is None and one[1]["n"].shape == (1,)
        np.testing.assert_array_equal(one[1]["n"][0], both[1]["n"][lane])
