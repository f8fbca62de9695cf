"""The Curriculum object on its own: over any task control (here one kept in numpy, no loop,
nothing compiled), in the order the runner has always run its parts, with its divergence rule,
its error wrapping and its checkpointed state."""

import numpy as np
import pytest

from ajax_tune.curriculum import Callback, Curriculum, CurriculumError
from ajax_tune.curriculum.task_control import EnvContext
from ajax_tune.envs import make_env
from ajax_tune.errors import CheckpointError, TaskError

NUM_ENVS = 4


class ListControl:
    """The task-control protocol over a task kept on the host: what a population member's
    control will be to its curriculum."""

    def __init__(self, log):
        self.env, self.log = make_env("corridor", max_length=32), log
        self.levels, self.sampler, self.state, self.iteration, self.trial_id = None, None, None, 1, "t"
        self.eval_task = self.env.validate_task({})
        self.task = {k: np.stack([v] * NUM_ENVS) for k, v in self.eval_task.items()}
        self.listeners = []

    num_envs = NUM_ENVS

    @property
    def task_spec(self):
        return self.env.task_spec

    def validate_task(self, task, num_envs=None, current=None):
        return self.env.validate_task(task, num_envs=num_envs, current=current)

    def get_task(self, per_env=False):
        return dict(self.task) if per_env else {k: v.item() for k, v in self.eval_task.items()}

    def set_task(self, task, eval_task=None):
        old = self.get_task()
        for name, value in self.env.validate_task(task, num_envs=NUM_ENVS, current=self.eval_task).items():
            self.task[name] = np.broadcast_to(value, (NUM_ENVS,)).copy()
        self.eval_task = (
            {k: v[0] for k, v in self.task.items()}
            if eval_task is None
            else self.env.validate_task(eval_task, current=self.eval_task)
        )
        self.log.append(f"set {self.task['length'][0]}")
        if old != self.get_task():  # as TaskControl: a change of the task evaluations run on
            for listener in self.listeners:
                listener(old, self.get_task())

    def on_task_change(self, listener):
        self.listeners.append(listener)


class Sampler:
    def __init__(self, log):
        self.log, self.draws = log, 0

    def update(self, stats):
        self.log.append("sampler.update")

    def sample(self, num_envs):
        self.log.append("sampler.sample")
        self.draws += 1
        return {"length": np.full(num_envs, 10 + self.draws)}

    def metrics(self):
        return {"sampler/draws": float(self.draws)}

    def get_state(self):
        return {"draws": self.draws}

    def set_state(self, state):
        self.draws = state["draws"]

    def reseed(self, salt):
        self.log.append(f"sampler.reseed {salt}")


class Logged(Callback):
    def __init__(self, name, log):
        self.name, self.log, self.count = name, log, 0

    def on_setup(self, control):
        self.log.append(f"{self.name}.setup")

    def on_train_result(self, control, result):
        self.count += 1
        self.log.append(f"{self.name}.train")

    def on_task_change(self, control, old_task, new_task):
        self.log.append(f"{self.name}.task {old_task['length']}->{new_task['length']}")

    def get_state(self):
        return {"count": self.count}

    def set_state(self, state):
        self.count = state["count"]

    def metrics(self):
        return {f"{self.name}/count": float(self.count)}


def curriculum(log, env_task_fn=None, sampler=True, callbacks=("a",)):
    control = ListControl(log)
    ctx = EnvContext(env_config={"name": "corridor"}, num_envs=NUM_ENVS, num_seeds=1, trial_id="t", worker_index=0, member=0)
    return Curriculum(
        control,
        ctx,
        env_task_fn=env_task_fn,
        callbacks=[Logged(n, log) for n in callbacks],
        sampler=Sampler(log) if sampler else None,
    )


def test_after_call_runs_the_parts_in_order_and_adds_their_keys():
    log = []

    def grow(result, env, ctx):
        log.append(f"env_task_fn (member {ctx.member}, task {env.get_task()['length']})")
        return {"length": 20}

    c = curriculum(log, env_task_fn=grow, callbacks=("a", "b"))
    c.setup()
    assert log == ["sampler.sample", "set 11", "a.setup", "b.setup"]  # evaluations stay on the starting task (8)
    log.clear()
    result = {"env_steps": 512}
    c.after_call(result, stats=None)
    assert log == [
        "sampler.update",
        "env_task_fn (member 0, task 8)",
        "set 20",
        "a.task 8->20",
        "b.task 8->20",
        "a.train",
        "b.train",
        "sampler.sample",
        "set 12",
    ]
    # evaluations stay on the task they ran on when the sampler moves the envs on
    assert c.control.get_task()["length"] == 20 and c.control.task["length"].tolist() == [12] * NUM_ENVS
    assert result == {
        "env_steps": 512,
        "sampler/draws": 2.0,
        "a/count": 1.0,
        "b/count": 1.0,
        "curriculum/next_task/length": 20.0,
        "curriculum/next_task/exit_reward": 0.0,
    }
    assert c.metrics() == {k: v for k, v in result.items() if k != "env_steps"}


def test_a_diverged_call_moves_nothing_but_still_reports():
    log = []
    c = curriculum(log, env_task_fn=lambda *a: pytest.fail("env_task_fn ran on a diverged call"))
    result = {"env_steps": 512}
    c.after_call(result, stats=None, diverged=True)
    assert log == [] and result["sampler/draws"] == 0.0 and result["a/count"] == 0.0


def test_failures_name_the_part_and_the_iteration():
    c = curriculum([], env_task_fn=lambda *a: {"length": 1000}, sampler=False)
    with pytest.raises(
        TaskError,
        match=r"env_task_fn tests.test_curriculum:.*<lambda> returned a task that does not fit "
        r"after iteration 1 \(trained to env_steps 512;",
    ):
        c.after_call({"env_steps": 512}, stats=None)
    failing = curriculum([], env_task_fn=lambda *a: 1 / 0, sampler=False)
    with pytest.raises(CurriculumError, match="raised ZeroDivisionError") as info:
        failing.after_call({"env_steps": 512}, stats=None)
    assert info.value.result == {"env_steps": 512}  # the trained iteration's result, kept for the caller


def test_state_round_trips_and_refuses_what_does_not_fit():
    log = []
    c = curriculum(log)
    c.after_call({"env_steps": 1}, stats=None)
    saved = c.get_state()
    assert saved == {"callbacks": [{"count": 1}], "sampler": {"draws": 1}}
    other = curriculum(log)
    other.set_state(saved, "ck")
    other.reseed(7)
    assert other.get_state() == saved and log[-1] == "sampler.reseed 7"
    with pytest.raises(CheckpointError, match="ck holds the state of 1 callback"):
        curriculum(log, callbacks=("a", "b")).set_state(saved, "ck")
    with pytest.raises(CheckpointError, match="ck holds a task sampler's state; this config has none"):
        curriculum(log, sampler=False).set_state(saved, "ck")
