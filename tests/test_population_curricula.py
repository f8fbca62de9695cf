"""Curricula per member: in a population every member has its own curriculum (`Runner.curricula`)
over its own lanes, fed its own results and per-env statistics, as a single run of it would be.

The population: two members of PPO on the corridor that differ in their learning rate, under one
`ThresholdCurriculum` on the member's `lr` (the schedule's value, which each member's result
reports): member 0 (lr 3e-3) passes the threshold at every call and climbs the ladder, member 1
(lr 1e-3) never does. That difference is in the members' own results, so each moving alone shows
that each curriculum reads its own. A PLR sampler over `exit_reward` runs beside it, one per
member, and an env_task_fn records what it is given.
"""

import math

import jax
import numpy as np
import pytest

from ajax_tune.curriculum import Callback, CurriculumError
from ajax_tune.errors import CheckpointError, ConfigError, TaskError
from ajax_tune.expected_keys import result_keys
from ajax_tune.results import keys as K
from ajax_tune.runner import Runner
from tests.support.helpers import assert_refused_before_compiling, assert_trees_equal, corridor_config, host

LADDER = [2, 4, 6]
LRS = [3e-3, 1e-3]
SEEDS = 2
THRESHOLD = {
    "class": "ajax_tune.curriculum:ThresholdCurriculum",
    "kwargs": {"levels": {"length": LADDER}, "metric": "lr", "threshold": 2e-3},
}
SAMPLER = {"name": "plr", "kwargs": {"space": {"exit_reward": [0.0, 0.5]}, "buffer_size": 8, "seed": 3}}
HELDOUT = {"tasks": [{"length": 2}, {"length": 6, "exit_reward": 0.1}]}
CALLS = 3

SEEN: list[tuple[int, dict, object]] = []  # what record_task_fn was given: (member, result, env_ctx)
VIEWS: list[tuple[int, dict]] = []  # and what its task_settable_env said: (member, get_task())


def record_task_fn(train_results, task_settable_env, env_ctx):
    """An env_task_fn that only remembers what it is handed."""
    SEEN.append((env_ctx.member, dict(train_results), env_ctx))
    VIEWS.append((env_ctx.member, task_settable_env.get_task()))
    return None


def population_config(**sections):
    parts = {
        "callbacks": [THRESHOLD],
        "task_sampler": SAMPLER,
        "env_task_fn": "tests.test_population_curricula:record_task_fn",
        "heldout": HELDOUT,
        "population": {"members": [{"agent": {"lr": lr}} for lr in LRS]},
    }
    return corridor_config(length=LADDER[0], **{**parts, **sections})


def member_tasks(runner, member):
    """The per-env tasks of each of `member`'s lanes ([seeds, num_envs] per field), from the state."""
    lanes = runner.member_lanes(member)
    return {k: np.asarray(v)[lanes] for k, v in runner.state.env.task.items()}


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """Three calls of the population, with a checkpoint after the first."""
    SEEN.clear(), VIEWS.clear()
    runner = Runner(population_config(), trial_id="pop")
    checkpoint = tmp_path_factory.mktemp("curricula") / "ck"
    tasks = [{k: member_tasks(runner, k) for k in range(2)}]
    results, states, seen, views = [], [], [], []
    for call in range(CALLS):
        results.append(runner.train())
        seen.append(list(SEEN))
        views.append(list(VIEWS))
        SEEN.clear(), VIEWS.clear()
        states.append([c.get_state() for c in runner.curricula])
        tasks.append({k: member_tasks(runner, k) for k in range(2)})
        if call == 0:
            runner.save(checkpoint, result=results[-1])
            saved = host(runner.state)
    return dict(
        runner=runner, results=results, states=states, seen=seen, views=views, tasks=tasks, checkpoint=checkpoint, saved=saved
    )


@pytest.mark.heavy
def test_one_curriculum_per_member_each_over_its_own_lanes(run):
    runner = run["runner"]
    assert len(runner.curricula) == 2 and runner.curriculum is runner.curricula[0]
    zero, one = runner.curricula
    assert zero.callbacks[0] is not one.callbacks[0] and zero.sampler is not one.sampler
    assert zero.env_task_fn is one.env_task_fn is record_task_fn  # a function keeps no state: shared
    assert [c.control.lanes for c in runner.curricula] == [slice(0, SEEDS), slice(SEEDS, 2 * SEEDS)]
    assert [c.env_ctx.member for c in runner.curricula] == [0, 1]
    # a member's control sees its lanes of the state only
    assert jax.tree.leaves(one.control.state)[0].shape[0] == SEEDS
    assert len(Runner(corridor_config()).curricula) == 1  # a trial of one has one


def test_members_move_through_levels_independently(run):
    results = run["results"]
    # member 0 passes the threshold at every call, member 1 never: each reads its own result
    assert [r[K.member_key(0, K.LEVEL)] for r in results] == [1.0, 2.0, 2.0]
    assert [r[K.member_key(1, K.LEVEL)] for r in results] == [0.0, 0.0, 0.0]
    assert [s[0]["callbacks"][0]["level"] for s in run["states"]] == [1, 2, 2]
    assert [s[1]["callbacks"][0]["level"] for s in run["states"]] == [0, 0, 0]
    for r in results:
        assert r[K.member_key(0, "curriculum/next_task/length")] > r[K.member_key(1, "curriculum/next_task/length")] == 2.0
        # the headline's curriculum keys are the best member's
        best = int(r["population/best_member"])
        for name in (K.LEVEL, "curriculum/next_task/length", "curriculum/task/length", "sampler/draws"):
            assert r[name] == r[K.member_key(best, name)], name
    # the task each member's evaluations ran on in the call is its own
    assert [r[K.member_key(0, "curriculum/task/length")] for r in results] == [2.0, 4.0, 6.0]
    assert [r[K.member_key(1, "curriculum/task/length")] for r in results] == [2.0, 2.0, 2.0]


def test_each_members_env_tasks_change_only_in_its_own_lanes(run):
    tasks, runner = run["tasks"], run["runner"]
    for call, after in enumerate(tasks[1:]):
        length = LADDER[min(call + 1, len(LADDER) - 1)]
        np.testing.assert_array_equal(after[0]["length"], np.full((SEEDS, 8), length))
        np.testing.assert_array_equal(after[1]["length"], np.full((SEEDS, 8), LADDER[0]))
    # evaluations follow each member's own task, lane by lane
    np.testing.assert_array_equal(np.asarray(runner.state.eval_task["length"]), [6, 6, 2, 2])
    assert runner.get_task(member=0)["length"] == 6 and runner.get_task(member=1)["length"] == 2


def test_env_task_fn_gets_each_members_own_result_and_a_context_naming_it(run):
    single = result_keys(corridor_config(callbacks=[THRESHOLD], task_sampler=SAMPLER, heldout=HELDOUT))
    for result, seen in zip(run["results"], run["seen"]):
        assert [member for member, _, _ in seen] == [0, 1]
        for member, own, ctx in seen:
            assert ctx.member == member and ctx.trial_id == "pop" and ctx.num_seeds == SEEDS and ctx.num_envs == 8
            assert own["lr"] == pytest.approx(LRS[member])
            for name in ("eval/return_mean", "train/episode_return_mean", "curriculum/task/length"):
                assert own[name] == result[K.member_key(member, name)] or math.isnan(own[name]), name
            # what a single run of the member would report, never the population's keys
            assert not any(k.startswith((K.MEMBER_PREFIX, "population/")) for k in own)
            assert set(own) <= single and "eval/return_seed1" in own and "eval/return_seed2" not in own
    # its task_settable_env is the member's own view: the task its envs ran in that call
    for result, views in zip(run["results"], run["views"]):
        assert [member for member, _ in views] == [0, 1]
        assert [task["length"] for _, task in views] == [result[K.member_key(k, "curriculum/task/length")] for k in range(2)]
    assert [[task["length"] for _, task in views] for views in run["views"]] == [[2, 2], [4, 2], [6, 2]]


def test_a_sampler_per_member_learns_from_its_own_lanes(run):
    runner, tasks = run["runner"], run["tasks"]
    zero, one = runner.curricula
    # each member's sampler got the statistics of its own lanes: the tasks they ran in the last call
    for member, curriculum in enumerate(runner.curricula):
        stats = curriculum.env_stats
        assert (stats.num_seeds, stats.num_envs) == (SEEDS, 8)
        for name in ("length", "exit_reward"):
            np.testing.assert_array_equal(stats.per_env(stats.tasks[name]), tasks[-2][member][name])
    # the same seed (common random numbers), other statistics: separate states
    assert zero.sampler.get_state()["rng"] == one.sampler.get_state()["rng"]
    assert zero.sampler.get_state() != one.sampler.get_state()
    assert all(r[K.member_key(k, "sampler/draws")] == call + 2 for call, r in enumerate(run["results"]) for k in range(2))


def test_results_hold_the_declared_keys_and_nothing_recompiles(run):
    results, runner = run["results"], run["runner"]
    declared = result_keys(population_config())
    for result in results:
        assert set(result) == declared
        assert result["perf/compilations"] == 1
    assert {K.member_key(1, K.LEVEL), "member/1/sampler/draws", "member/0/tasks/exit_reward/mean"} <= declared
    assert runner.loop.compilations == 1


def test_each_member_reports_its_own_held_out_evaluation(run):
    for result in run["results"]:
        best = int(result["population/best_member"])
        for name in ("eval/heldout/return_mean", "eval/heldout/success_rate_mean"):
            values = [result[K.member_key(k, name)] for k in range(2)]
            assert all(math.isfinite(v) for v in values) and result[name] == values[best], name
    # the env_task_fn of member k saw member k's held-out means, as a single run of it would
    for result, seen in zip(run["results"], run["seen"]):
        for member, own, _ in seen:
            assert own["eval/heldout/return_mean"] == result[K.member_key(member, "eval/heldout/return_mean")]
            assert "eval/heldout/1/return" in own


def test_save_restore_continues_every_members_curriculum_exactly(run):
    runner, saved = run["runner"], run["saved"]
    runner.restore(run["checkpoint"])
    assert_trees_equal(runner.state, saved)
    assert [c.get_state() for c in runner.curricula] == run["states"][0]
    SEEN.clear()
    again = [runner.train() for _ in range(CALLS - 1)]
    assert [c.get_state() for c in runner.curricula] == run["states"][-1]
    for a, b in zip(again, run["results"][1:]):
        assert {k: v for k, v in a.items() if not k.startswith("perf/")} == pytest.approx(
            {k: v for k, v in b.items() if not k.startswith("perf/")}, nan_ok=True
        )
    assert {k: member_tasks(runner, k)["length"].tolist() for k in range(2)} == {
        k: run["tasks"][-1][k]["length"].tolist() for k in range(2)
    }
    assert again[-1]["perf/compilations"] == 1

    # a state that does not fit a member's curriculum is refused whole
    with pytest.raises(CheckpointError, match=r"holds the state of 0 callback\(s\); this config has 1"):
        runner.curricula[0].set_state({"callbacks": [], "sampler": None})


def test_a_curriculum_state_moves_from_member_to_member(run):
    """What in-trial PBT does with curricula: a recipient takes a copy of the donor's state."""
    runner = run["runner"]
    donor, recipient = runner.curricula
    recipient.set_state(donor.get_state())
    assert recipient.get_state() == donor.get_state() and recipient.callbacks[0].level == donor.callbacks[0].level
    recipient.reseed(7)
    assert recipient.sampler.get_state()["rng"] != donor.sampler.get_state()["rng"]


class Unpicklable(Callback):
    def __init__(self):
        self.handle = (x for x in ())  # a generator cannot be copied

    def on_train_result(self, control, result): ...


class UncopyableTaskFn:
    def __init__(self):
        self.handle = (x for x in ())

    def __call__(self, train_results, task_settable_env, env_ctx): ...


@pytest.mark.parametrize(
    "sections, message",
    [
        (
            {"callbacks": [{**THRESHOLD, "kwargs": {**THRESHOLD["kwargs"], "metric": "member/1/eval/return_mean"}}]},
            r"^callbacks\[0\] \(ThresholdCurriculum\) \(each member's curriculum sees its own member's keys\): "
            r"metric 'member/1/eval/return_mean' is not in any result",
        ),
        (
            {"callbacks": [{**THRESHOLD, "kwargs": {**THRESHOLD["kwargs"], "metric": "population/best_member"}}]},
            r"metric 'population/best_member' is not in any result",
        ),
        ({"callbacks": [Unpicklable()]}, r"^callbacks\[0\] \(Unpicklable\): each member of a population gets its own copy"),
        (
            {"env_task_fn": UncopyableTaskFn()},
            r"^env_task_fn \(UncopyableTaskFn\): each member of a population gets its own copy",
        ),
    ],
)
def test_what_cannot_work_per_member_is_one_line_before_compiling(sections, message):
    """A curriculum's metric is checked where every metric is (`Runner.check`, before any trial
    starts) against what each member's curriculum is given: its own member's keys."""
    config = corridor_config(population={"members": [{}, {"agent": {"lr": 1e-3}}]}, **sections)
    with pytest.raises(ConfigError, match=message) as info:
        Runner.check(config)
    assert "\n" not in str(info.value)
    if "env_task_fn" in sections or isinstance(sections["callbacks"][0], Unpicklable):
        assert_refused_before_compiling(config, message)  # where a trial starts, too


class CountingTaskFn:
    """An env_task_fn that keeps state between calls."""

    def __init__(self):
        self.calls = 0

    def __call__(self, train_results, task_settable_env, env_ctx):
        self.calls += 1


def test_a_callback_instance_is_copied_for_each_member_and_a_function_shared():
    callback, task_fn = Callback(), CountingTaskFn()
    runner = Runner(corridor_config(callbacks=[callback], env_task_fn=task_fn, population={"size": 2}))
    zero, one = runner.curricula
    assert zero.callbacks[0] is callback and one.callbacks[0] is not callback
    runner.best_member = 1  # as a call that found member 1 best leaves it
    assert runner.curriculum is one and runner.get_task() == one.control.get_task()
    runner.best_member = 0
    assert zero.env_task_fn is task_fn and isinstance(one.env_task_fn, CountingTaskFn) and one.env_task_fn is not task_fn
    with pytest.raises(ConfigError, match=r"member must be in \[0, 1\]"):
        runner.set_task({"length": 3}, member=2)
    runner.set_task({"length": 3}, member=1)
    assert runner.get_task(member=1)["length"] == 3 and runner.get_task(member=0)["length"] == 4
    runner.set_task({"length": 5})  # without a member: every member's envs
    assert [runner.get_task(member=k)["length"] for k in range(2)] == [5, 5]


def test_members_move_apart_by_what_they_learn(run):
    """The same, by evaluation: under a `ThresholdCurriculum` on `eval/success_rate_mean`, the
    member that learns (lr 3e-3) climbs the ladder and the one that cannot (lr 0: its policy
    never changes, and with `train.seed: 1` one of its two seeds walks the wrong way) stays at
    the first level. Both start from the same parameters (one `train.seed`), so what parts them
    is what member 0 learned. The population keeps its compiled program (`reconfigure`)."""
    runner = run["runner"]
    by_success = {**THRESHOLD, "kwargs": {**THRESHOLD["kwargs"], "metric": "eval/success_rate_mean", "threshold": 0.9}}
    config = population_config(
        callbacks=[by_success], train={"seed": 1}, population={"members": [{"agent": {"lr": 3e-3}}, {"agent": {"lr": 0.0}}]}
    )
    assert runner.reconfigure(config) is False
    params = runner.state.agent.params
    assert_trees_equal(*(jax.tree.map(lambda x, k=k: x[runner.member_lanes(k)], params) for k in range(2)))
    results = [runner.train() for _ in range(CALLS)]
    assert [r[K.member_key(1, "eval/success_rate_mean")] for r in results] == [0.5] * CALLS  # below the threshold
    assert [r[K.member_key(1, K.LEVEL)] for r in results] == [0.0] * CALLS
    assert all(r[K.member_key(0, "eval/success_rate_mean")] >= 0.9 for r in results)
    assert [r[K.member_key(0, K.LEVEL)] for r in results] == [1.0, 2.0, 2.0]
    assert [r["perf/compilations"] for r in results] == [1] * CALLS


def test_a_members_failing_curriculum_names_the_member_and_keeps_the_trials_result(run):
    runner = run["runner"]

    def fails_for_member_one(train_results, task_settable_env, env_ctx):
        if env_ctx.member == 1:
            raise ValueError("no")

    runner.curricula[1].env_task_fn = fails_for_member_one
    with pytest.raises(
        CurriculumError, match=r"^population member 1: env_task_fn .*fails_for_member_one raised ValueError: no"
    ) as info:
        runner.train()
    assert info.value.result["population/size"] == 2.0  # the trial's result, not the member's
    runner.curricula[1].env_task_fn = lambda result, env, ctx: {"length": 1000}
    with pytest.raises(TaskError, match=r"^population member 1: env_task_fn .* returned a task that does not fit"):
        runner.train()
