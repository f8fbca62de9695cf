"""Structured tasks: a task field may be a boolean grid or integer positions, validated (shape,
dtype, range) in one line however large, batched per env, and kept out of results when it has
more values than a result key should carry."""

import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune.envs.base import TaskField, flatten_task, validate_task
from ajax_tune.errors import TaskError
from ajax_tune.loop.frame import flat_task
from ajax_tune.loop.summary import summary_keys
from ajax_tune.results import keys as K

GRID = 6
SPEC = {
    "walls": TaskField(default=((False,) * GRID,) * GRID, low=0, high=1, dtype=np.bool_, shape=(GRID, GRID)),
    "goal": TaskField(default=(GRID - 1, GRID - 1), low=0, high=GRID - 1, dtype=np.int32, shape=(2,)),
    "heading": TaskField(default=0, low=0, high=3, dtype=np.int32),
    "speed": TaskField(default=1.0, low=0.0, high=2.0),
}


def check(task, num_envs=None):
    return validate_task("grid_env", SPEC, task, num_envs=num_envs)


def test_boolean_and_integer_fields_take_their_values_and_defaults():
    walls = np.zeros((GRID, GRID), bool)
    walls[2, 1:4] = True
    task = check({"walls": walls, "goal": [1, 4]})
    assert task["walls"].dtype == np.bool_ and task["walls"].shape == (GRID, GRID) and task["walls"].sum() == 3
    assert task["goal"].dtype == np.int32 and task["goal"].tolist() == [1, 4]
    assert task["heading"].dtype == np.int32 and task["heading"] == 0 and task["speed"] == 1.0
    # 0 and 1 (as YAML writes them), a jax array and an integral float are a wall grid too
    assert np.array_equal(check({"walls": walls.astype(int).tolist()})["walls"], walls)
    assert np.array_equal(check({"walls": jnp.asarray(walls)})["walls"], walls)
    assert np.array_equal(check({"walls": walls.astype(np.float32)})["walls"], walls)
    assert SPEC["walls"].describe() == "boolean shape (6, 6)" and SPEC["walls"].size == 36


def test_per_env_batches_of_structured_fields():
    walls = np.zeros((3, GRID, GRID), bool)
    walls[1, 0, 0] = True
    task = check({"walls": walls, "goal": [[0, 1], [2, 3], [4, 5]], "heading": [0, 1, 3]}, num_envs=3)
    assert task["walls"].shape == (3, GRID, GRID) and task["walls"][1, 0, 0]
    assert task["goal"].shape == (3, 2) and task["heading"].tolist() == [0, 1, 3]
    assert task["speed"].shape == ()  # a field given once stays unbatched


@pytest.mark.parametrize(
    "task, message",
    [
        ({"walls": np.zeros((GRID, GRID + 1), bool)}, "expected shape (6, 6) or (4, 6, 6), got shape (6, 7)"),
        ({"walls": np.full((GRID, GRID), 2)}, "expected boolean shape (6, 6), got an array of shape (6, 6) with 36 such"),
        ({"walls": np.full((GRID, GRID), 0.5)}, "expected a boolean, got an array of shape (6, 6) with 36 such value(s)"),
        ({"walls": np.full((GRID, GRID), "x")}, "got an array of shape (6, 6) of type <U1"),
        ({"goal": [1, GRID]}, "expected integer shape (2,) in [0, 5], got [1, 6]"),
        ({"goal": [1.5, 2]}, "expected an integer, got [1.5, 2]"),
        ({"goal": [True, False]}, "got a boolean [True, False]"),
        ({"heading": 4}, "expected integer scalar in [0, 3], got 4"),
    ],
)
def test_bad_structured_tasks_are_one_line_naming_the_field(task, message):
    with pytest.raises(TaskError) as info:
        check(task, num_envs=4)
    text = str(info.value)
    assert message in text and "\n" not in text and text.startswith("grid_env: task field")


def test_a_large_field_names_its_first_offending_element():
    walls = np.zeros((4, GRID, GRID), int)
    walls[2, 3, 1] = 7
    with pytest.raises(TaskError) as info:
        check({"walls": walls}, num_envs=4)
    assert str(info.value).endswith("got an array of shape (4, 6, 6) with 1 such value(s), the first 7 at index [2, 3, 1]")
    goals = np.zeros((4, 2), int)
    goals[3, 1] = -1  # a per-env batch, however small, says which env
    with pytest.raises(TaskError, match=r"shape \(4, 2\) with 1 such value\(s\), the first -1 at index \[3, 1\]$"):
        check({"goal": goals}, num_envs=4)


def test_results_report_fields_of_at_most_eight_values():
    shapes = {name: field.shape for name, field in SPEC.items()} | {"eight": (2, 4), "nine": (9,)}
    names = K.task_field_keys(shapes)
    assert names == ["goal_0", "goal_1", "heading", "speed", *(f"eight_{i}" for i in range(8))]
    # the program's rows (per lane: a leading axis) hold exactly the predicted names
    batched = {name: jnp.zeros((3, *shape)) for name, shape in shapes.items()}
    assert list(flat_task(batched)) == names
    keys = summary_keys(1, 0, shapes, [], [])
    assert {f"{K.TASK_PREFIX}{name}" for name in names} == {k for k in keys if k.startswith(K.TASK_PREFIX)}
    host = {name: np.zeros(shape) for name, shape in shapes.items()}
    assert list(flatten_task(host, max_size=K.MAX_REPORTED_FIELD_SIZE)) == names
    assert len(flatten_task(host)) == len(names) + GRID * GRID + 9  # without a limit, every value
