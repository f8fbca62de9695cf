"""Robustness as SFL measures it (`heldout.cvar`): the worst share of held-out tasks is chosen by one
set of episodes and scored on an independent second set, so that the selection does not bias the
figure; today's worst tenth, which selects and scores on the same episodes, is reported beside it."""

import math
import re

import jax
import numpy as np
import pytest

from ajax_tune import Runner
from ajax_tune.build import build_loop
from ajax_tune.config import Config
from ajax_tune.expected_keys import result_keys
from ajax_tune.loop.summary import RESCORED, cvar
from tests.support.helpers import assert_refused_before_compiling, corridor_config


def test_the_worst_are_chosen_on_one_set_of_episodes_and_scored_on_the_other():
    select = np.array([[0.0, 0.5, 1.0, 0.2, 0.9, 0.4, 0.6, 0.8, 0.7, 0.3]])  # one seed, 10 tasks
    score = np.array([[1.0, 0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]])
    # the worst tenth by the first set is task 0, which the second set scores 1.0; the same
    # episodes would have scored it 0.0 (the selection's bias: the worst of one draw are partly unlucky)
    assert cvar(select, score, 0.1) == 1.0 and cvar(select, select, 0.1) == 0.0
    assert cvar(select, score, 0.2) == pytest.approx((1.0 + 0.5) / 2)  # tasks 0 and 3
    # per seed, then the mean over seeds: each seed's own worst tasks
    two = np.array([[0.0, 1.0], [1.0, 0.0]])
    assert cvar(two, np.array([[0.3, 0.9], [0.9, 0.5]]), 0.5) == pytest.approx((0.3 + 0.5) / 2)
    # a task either set did not score is left out; nothing scored is NaN
    assert cvar(np.array([[np.nan, 0.2, 0.4]]), np.array([[0.0, 0.6, 0.1]]), 0.3) == pytest.approx(0.6)
    assert math.isnan(cvar(np.full((2, 3), np.nan), np.zeros((2, 3)), 0.1))


def cvar_config(**heldout):
    return corridor_config(
        env={"name": "corridor", "kwargs": {"max_length": 12, "max_episode_steps": 16}, "task": {"length": 4}},
        agent={"num_envs": 4, "unroll_length": 16, "num_minibatches": 2, "update_epochs": 1, "hidden_sizes": [16]},
        train={"timesteps_per_iteration": 4 * 16 * 2, "num_seeds": 2, "eval_episodes": 4, "eval_policy": "sampled"},
        heldout={"generated": True, "num_tasks": 20, "seed": 0, **heldout},
    )


@pytest.mark.heavy
def test_a_held_out_set_with_cvar_is_played_twice_and_reports_its_cvar_beside_the_worst_tenth():
    runner = Runner(cvar_config(cvar=0.1))
    result = runner.train()
    for name in ("return", "success_rate"):
        assert f"eval/heldout/{name}_cvar10" in result and f"eval/heldout/{name}_worst10" in result
    assert result_keys(runner.config) == frozenset(result)
    # the second set of episodes is its own: the sampling policy's episodes differ from the first's
    state, out = runner.loop.train(runner.state)
    rows = {k: np.asarray(v)[:, -1] for k, v in out.rows.items() if k.startswith("eval/heldout/")}  # the call's last evaluation
    first, second = rows["eval/heldout/return"], rows[RESCORED["eval/heldout/return"]]
    assert first.shape == second.shape == (2, 20) and not np.array_equal(first, second)
    summary = runner.loop.summarize(out)
    assert summary["eval/heldout/return_cvar10"] == pytest.approx(cvar(first, second, 0.1))
    assert summary["eval/heldout/success_rate_cvar10"] == pytest.approx(
        cvar(rows["eval/heldout/success"], rows[RESCORED["eval/heldout/success"]], 0.1)
    )
    assert runner.loop.compilations == 1

    plain = Runner(cvar_config()).train()  # without cvar: the set is played once and no key is added
    assert not any("cvar" in k for k in plain) and "eval/heldout/success_rate_worst10" in plain


@pytest.mark.parametrize(
    "cvar_share, message",
    [
        (0.0, "heldout.cvar must be a share of the tasks in whole percent, 0.01 to 0.99 (such as 0.1), got 0.0"),
        (1.0, "heldout.cvar must be a share"),
        (0.105, "heldout.cvar must be a share"),
        ("10%", "heldout.cvar must be a share"),
    ],
)
def test_a_cvar_that_is_no_share_of_the_tasks_is_refused_in_one_line(cvar_share, message):
    assert_refused_before_compiling(cvar_config(cvar=cvar_share), re.escape(message))


def count_loops(jaxpr) -> int:
    """`while` loops in a jaxpr and every jaxpr inside it: an evaluation is one (its episodes)."""
    total = 0
    for eqn in jaxpr.eqns:
        total += eqn.primitive.name == "while"
        for value in eqn.params.values():
            for inner in value if isinstance(value, (list, tuple)) else [value]:
                inner = getattr(inner, "jaxpr", inner)
                if hasattr(inner, "eqns"):
                    total += count_loops(inner)
    return total


def test_the_held_out_set_adds_no_evaluation_loop_to_the_program():
    """The evaluation on the trial's task, on every held-out task and, with `cvar`, on the set
    again run as one evaluation: the program holds one copy of the env's step for them all
    (XLA compiles each copy anew: with a copy for each kind, Kinetix's training program with two
    held-out levels took 15.6 s to compile in the suite's cheap build, against 10.3 s with one)."""

    def loops(config):
        _, loop = build_loop(Config.from_dict(config))  # traced, not compiled
        return count_loops(jax.make_jaxpr(loop.call)(loop.abstract_state()).jaxpr)

    plain = corridor_config(train={"timesteps_per_iteration": 8 * 16, "eval_episodes": 4})
    heldout = {**plain, "heldout": {"generated": True, "num_tasks": 5, "seed": 0}}
    with_cvar = {**plain, "heldout": {"generated": True, "num_tasks": 20, "seed": 0, "cvar": 0.1}}
    assert loops(plain) == loops(heldout) == loops(with_cvar)


def pick(tree, *index):
    return jax.tree.map(lambda x: x[index], tree)


@pytest.mark.heavy
def test_one_evaluation_of_every_task_scores_as_separate_evaluations_would():
    """Each task keeps the key it would have alone (the held-out tasks one, the second set another),
    and a done env stays as it ended while the others run on: each figure is its task's own
    evaluation's, bit for bit."""
    runner = Runner(cvar_config(cvar=0.1))
    frame = runner.loop.program.init.__self__  # the CallFrame whose methods the program's functions are
    state = runner.state
    keys = jax.random.split(jax.random.PRNGKey(5), 2)
    together = jax.device_get(jax.jit(frame.evaluate_all)(state.agent, state.eval_task, state.heldout, keys))

    evaluate = jax.jit(frame.evaluate)
    for lane in range(2):
        agent = pick(state.agent, lane)
        alone = jax.device_get(evaluate(agent, pick(state.eval_task, lane), keys[lane]))
        for row, value in alone.items():
            np.testing.assert_array_equal(together[row][lane], value)
        for salt, rows in ((1, lambda name: name), (2, RESCORED.__getitem__)):
            key = jax.random.fold_in(keys[lane], salt)
            for task in range(20):
                one = jax.device_get(evaluate(agent, pick(state.heldout, lane, task), key))
                for row in ("eval/return", "eval/success"):
                    name = rows(f"eval/heldout/{row.split('/')[-1]}")
                    np.testing.assert_array_equal(together[name][lane, task], one[row])
