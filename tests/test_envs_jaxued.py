"""JaxUED's envs through `envs/jaxued_adapter.py`: the maze steps exactly as JaxUED's own, its
level is the task (validated in one line, per env, without recompiling), levels are generated
and mutated as JaxUED does, JaxUED's held-out mazes are a named set, and any underspecified env
runs by import path."""

import importlib.util
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from tests.support.helpers import assert_refused_before_compiling, host, import_extra
from tests.support.suites import assert_task_changes_behaviour, episode_rollout

import_extra("jaxued", extra="ued")

from gymnasium.utils.env_checker import check_env  # noqa: E402
from jaxued.environments.maze import Level, Maze, make_level_generator, make_level_mutator_minimax  # noqa: E402
from jaxued.environments.maze.env import EnvParams  # noqa: E402
from jaxued.environments.maze.level import prefabs  # noqa: E402

from ajax_tune import compat  # noqa: E402
from ajax_tune.envs import EpisodeWrapper, TaskError, make_env  # noqa: E402
from ajax_tune.envs.base import task_to_jax  # noqa: E402
from ajax_tune.envs.gymnasium_adapter import as_gymnasium  # noqa: E402
from ajax_tune.envs.jaxued_adapter import JAXUED_MAZES, parse_maze, shortest_path  # noqa: E402
from ajax_tune.errors import ConfigError  # noqa: E402
from ajax_tune.expected_keys import result_keys  # noqa: E402
from ajax_tune.runner import Runner  # noqa: E402

SMALL = dict(height=7, width=7, n_walls=6, max_episode_steps=12)
CORRIDOR = """
>..G...
.#.....
...#...
.......
.##....
.......
......#
"""


def maze_config(**sections):
    kwargs = {**SMALL, **sections.pop("kwargs", {})}
    return {
        "env": {"name": "jaxued/maze", "kwargs": kwargs, **sections.pop("env", {})},
        "agent": {
            "name": "ppo",
            "num_envs": 4,
            "unroll_length": 8,
            "num_minibatches": 2,
            "update_epochs": 1,
            "hidden_sizes": [32],
            **sections.pop("agent", {}),
        },
        "train": {"timesteps_per_iteration": 64, "eval_episodes": 2, **sections.pop("train", {})},
        **sections,
    }


# -- the env ------------------------------------------------------------------------------


def jaxued_run(level, actions, limit):
    """JaxUED's own Maze (maze_plr's settings) from `level` through `actions`."""
    maze, params = Maze(SMALL["height"], SMALL["width"], 5, normalize_obs=True), EnvParams(max_steps_in_episode=limit)
    key = jax.random.PRNGKey(0)
    obs, state = maze.reset_to_level(key, level, params)
    out = [(obs, 0.0, False)]
    for a in actions:
        obs, state, reward, done, _ = maze.step(key, state, jnp.int32(a), params)
        out.append((obs, float(reward), bool(done)))
    return out


def ours_run(task, actions, limit):
    env = EpisodeWrapper(make_env("jaxued/maze", **{**SMALL, "max_episode_steps": limit}))
    step = jax.jit(env.step)
    state = jax.jit(env.reset)(jax.random.PRNGKey(0), task_to_jax(task))
    out = [state]
    for a in actions:
        state = step(state, jnp.int32(a), jax.random.PRNGKey(0))
        out.append(state)
    return out


def assert_same_observation(ours, theirs):
    image, direction = np.asarray(ours.obs[:75]), np.asarray(ours.obs[75:])
    np.testing.assert_array_equal(image, np.asarray(theirs.image, np.float32).reshape(-1))
    np.testing.assert_array_equal(direction, np.eye(4, dtype=np.float32)[int(theirs.agent_dir)])


def test_the_maze_steps_exactly_as_jaxueds():
    # to the goal: a turn, a turn back, three steps forward (the third bumps into the goal)
    actions = [1, 0, 2, 2, 2]
    theirs = jaxued_run(Level.from_str(CORRIDOR), actions, limit=12)
    ours = ours_run(parse_maze(CORRIDOR), actions, limit=12)
    for state, (obs, reward, done) in zip(ours, theirs):
        assert_same_observation(state, obs)
        assert float(state.reward) == reward and bool(state.terminated) == done and not bool(state.truncated)
    assert reward == pytest.approx(1 - 0.9 * 5 / 12) and float(ours[-1].info["success"]) == 1.0
    # a generated level, random actions: the time limit ends it; JaxUED says done, we say truncated
    level = make_level_generator(SMALL["height"], SMALL["width"], SMALL["n_walls"])(jax.random.PRNGKey(3))
    task = {k: np.asarray(getattr(level, k), bool if k == "wall_map" else np.int32) for k in parse_maze(CORRIDOR)}
    actions = np.random.default_rng(0).choice([0, 1, 3, 5], size=6).tolist()  # turns and no-ops: never the goal
    theirs, ours = jaxued_run(level, actions, limit=6), ours_run(task, actions, limit=6)
    for state, (obs, reward, _) in zip(ours, theirs):
        assert_same_observation(state, obs)
        assert float(state.reward) == reward == 0.0 and not bool(state.terminated)
    assert theirs[-1][2] and bool(ours[-1].truncated) and float(ours[-1].info["success"]) == 0.0


def test_a_new_level_changes_how_the_maze_steps():
    """The corridor level against the empty default, the same keys and moves (turn, turn back,
    three forward): the walls show in the view from the first step, and only in the corridor does
    the agent reach its goal (a natural end, paid, not truncated)."""
    env = make_env("jaxued/maze", **SMALL)
    (_, empty), (_, corridor) = assert_task_changes_behaviour(
        episode_rollout(env), {}, parse_maze(CORRIDOR), jnp.asarray([1, 0, 2, 2, 2])
    )
    assert not np.array_equal(empty.obs[0], corridor.obs[0])
    assert corridor.terminated[-1] and corridor.reward[-1] > 0 and not corridor.truncated.any()
    assert not empty.terminated.any() and (empty.reward == 0).all()


def test_spaces_default_task_and_gymnasium_export():
    env = make_env("jaxued/maze", **SMALL)
    assert env.action_space.n == 7 and env.observation_space.shape == (5 * 5 * 3 + 4,) and env.image_shape == (5, 5, 3)
    task = env.default_task()
    assert not task["wall_map"].any() and task["agent_pos"].tolist() == [0, 0] and task["goal_pos"].tolist() == [6, 6]
    gym_env = as_gymnasium(env, task=parse_maze(CORRIDOR), seed=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(gym_env, skip_render_check=True)
    assert not [str(w.message) for w in caught]


@pytest.mark.parametrize(
    "task, message",
    [
        ({"agent_pos": [1, 1], "wall_map": np.eye(7, dtype=bool)}, "the task puts the agent on a wall (x=1, y=1"),
        ({"goal_pos": [0, 0]}, "the task puts the agent on the goal (x=0, y=0"),
        ({"goal_pos": [7, 0]}, "task field 'goal_pos' expected integer shape (2,) in [0, 6], got [7, 0]"),
        ({"agent_dir": 4}, "task field 'agent_dir' expected integer scalar in [0, 3], got 4"),
        ({"wall_map": np.zeros((6, 7), bool)}, "expected shape (7, 7) or (4, 7, 7), got shape (6, 7)"),
        ({"agent_pos": [[0, 0], [0, 1], [6, 6], [1, 0]]}, "env 2's task puts the agent on the goal (x=6, y=6"),
    ],
)
def test_bad_levels_are_one_line(task, message):
    env = make_env("jaxued/maze", **SMALL)
    with pytest.raises(TaskError) as info:
        env.validate_task(task, num_envs=4)
    assert message in str(info.value) and "\n" not in str(info.value) and str(info.value).startswith("jaxued/maze: ")


def test_a_rectangular_maze_checks_each_axis():
    env = make_env("jaxued/maze", height=5, width=9, n_walls=2)
    assert env.validate_task({"goal_pos": [8, 4]})["goal_pos"].tolist() == [8, 4]
    with pytest.raises(TaskError, match=r"the task puts the goal outside the maze \(x=3, y=6; the maze is 9 wide, 5 high\)$"):
        env.validate_task({"goal_pos": [3, 6]})


def test_bad_configs_are_refused_before_compiling():
    with pytest.raises(TaskError, match="^jaxued/maze: the task puts the agent on the goal"):  # as any env's bad env.task
        Runner.check(maze_config(env={"task": {"goal_pos": [0, 0]}}))
    assert_refused_before_compiling(maze_config(kwargs={"agent_view_size": 4}), "agent_view_size must be odd")
    assert_refused_before_compiling(maze_config(env={"name": "jaxued/maz"}), "did you mean 'jaxued/maze'?")
    assert_refused_before_compiling(maze_config(heldout={"named": "jaxued_mazes"}), "which does not fit this 7 x 7 maze")
    assert_refused_before_compiling(
        maze_config(heldout={"named": "jaxued_maze"}), "heldout: jaxued/maze: no named task set 'jaxued_maze'; did you mean"
    )
    cartpole_conv = {"env": {"name": "cartpole"}, "agent": {"name": "ppo", "encoder": {"kind": "conv"}}}
    assert_refused_before_compiling(cartpole_conv, "agent.encoder: conv reads an image, and env 'cartpole' declares none")
    too_deep = maze_config(agent={"encoder": {"kind": "conv", "channels": [4, 4, 4], "kernel": 3}})
    assert_refused_before_compiling(too_deep, "shrink the 5 x 5 image of env 'jaxued/maze' to nothing")


def test_a_missing_jaxued_is_one_line_naming_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "jaxued" else real(name, *a))
    with pytest.raises(ConfigError) as info:
        Runner.check(maze_config())
    assert (
        str(info.value) == "env.name: jaxued/maze needs the jaxued suite (jaxued is not installed); pip install 'ajax-tune[ued]'"
    )


# -- levels: the generator, the mutator, the named mazes ----------------------------------


def test_the_generator_is_jaxueds_and_pure():
    env = make_env("jaxued/maze", **SMALL)
    keys = jax.random.split(jax.random.PRNGKey(7), 16)
    levels = host(jax.jit(jax.vmap(env.generate_level))(keys))
    assert {k: (v.dtype, v.shape) for k, v in levels.items()} == {
        k: (np.dtype(f.dtype), (16, *f.shape)) for k, f in env.task_spec.items()
    }
    again = host(jax.jit(jax.vmap(env.generate_level))(keys))
    assert all(np.array_equal(levels[k], again[k]) for k in levels)
    env.validate_task(levels, num_envs=16)  # every generated level is a valid task
    theirs = make_level_generator(SMALL["height"], SMALL["width"], SMALL["n_walls"])(keys[5])
    for name in env.task_spec:
        np.testing.assert_array_equal(levels[name][5], np.asarray(getattr(theirs, name)))


@pytest.mark.heavy
def test_the_mutator_edits_at_most_num_edits_and_a_traced_count_compiles_once(monkeypatch):
    env = make_env("jaxued/maze", **SMALL)
    parent = task_to_jax(parse_maze(CORRIDOR))
    mutate = jax.jit(env.mutate_level)
    key = jax.random.PRNGKey(11)
    children = {n: host(mutate(key, parent, jnp.int32(n))) for n in (0, 1, 5)}
    assert compat.jit_cache_size(mutate) == 1  # the number of edits is data
    assert all(np.array_equal(children[0][k], np.asarray(parent[k])) for k in parent)  # 0 edits: the same level
    for n, child in children.items():
        flipped = int((child["wall_map"] != np.asarray(parent["wall_map"])).sum())
        moved = int(not np.array_equal(child["goal_pos"], np.asarray(parent["goal_pos"])))
        assert flipped <= n + moved and np.array_equal(child["agent_pos"], np.asarray(parent["agent_pos"]))
        env.validate_task(child)  # still a valid level: the agent and the goal on free cells
    assert not all(np.array_equal(children[5][k], np.asarray(parent[k])) for k in parent)
    # JaxUED's minimax mutator itself, as maze_plr calls it with 5 edits (jaxued 0.0.1 calls
    # jax.tree_map: the test gives jax one, for the test only)
    monkeypatch.setattr(jax, "tree_map", jax.tree_util.tree_map, raising=False)
    theirs = make_level_mutator_minimax(env.max_edits)(key, jaxued_level(env, parent), 5)
    for name in parent:
        np.testing.assert_array_equal(children[5][name], np.asarray(getattr(theirs, name)))
    # pure: a batch, vmapped, gives each level what it gives alone
    batch = jax.tree.map(lambda x: jnp.stack([x, x]), parent)
    pair = host(jax.jit(jax.vmap(env.mutate_level, in_axes=(0, 0, None)))(jnp.stack([key, key]), batch, 5))
    assert all(np.array_equal(pair[k][1], children[5][k]) for k in pair)


def jaxued_level(env, task):
    return Level(
        wall_map=jnp.asarray(task["wall_map"]),
        goal_pos=jnp.asarray(task["goal_pos"], jnp.uint32),
        agent_pos=jnp.asarray(task["agent_pos"], jnp.uint32),
        agent_dir=jnp.asarray(task["agent_dir"], jnp.uint8),
        width=jnp.int32(env.width),
        height=jnp.int32(env.height),
    )


def test_jaxueds_named_mazes_are_a_task_set():
    env = make_env("jaxued/maze")
    names, batch = env.named_tasks("jaxued_mazes")
    assert names == JAXUED_MAZES and env.named_task_sets() == ("jaxued_mazes",)
    assert batch["wall_map"].shape == (8, 13, 13) and batch["agent_dir"].shape == (8,)
    for i, name in enumerate(names):  # our own reading of the text is JaxUED's
        theirs = Level.from_str(prefabs[name])
        for field in env.task_spec:
            np.testing.assert_array_equal(batch[field][i], np.asarray(getattr(theirs, field)))
    big = make_env("jaxued/maze", height=15, width=14)
    _, padded = big.named_tasks("jaxued_mazes")
    assert padded["wall_map"][:, 13:, :].all() and padded["wall_map"][:, :, 13:].all()
    np.testing.assert_array_equal(padded["wall_map"][:, :13, :13], batch["wall_map"])


# -- training on levels ---------------------------------------------------------------------


@pytest.fixture(scope="module")
def runner():
    """PPO with the conv encoder on a 13 x 13 maze, JaxUED's eight mazes held out."""
    config = maze_config(
        kwargs={"height": 13, "width": 13, "n_walls": 20, "max_episode_steps": 16},
        agent={"encoder": {"kind": "conv", "channels": [8], "kernel": 3}},
        train={"eval_episodes": 1},
        heldout={"named": "jaxued_mazes"},
    )
    return Runner(config)


@pytest.mark.heavy
def test_ppo_with_the_conv_encoder_trains_and_reports_each_named_maze(runner):
    runner.train()
    second = runner.train()
    assert second["env_steps"] == 128 and second["perf/compilations"] == 1
    assert np.isfinite(second["loss/policy"]) and np.isfinite(second["eval/return_mean"])
    per_maze = [second[f"eval/heldout/{name}/success_rate"] for name in JAXUED_MAZES]
    assert set(per_maze) <= {0.0, 1.0}  # one seed, one episode per maze: solved or not
    assert second["eval/heldout/success_rate_mean"] == pytest.approx(np.mean(per_maze))
    assert {f"eval/heldout/{name}/return" for name in JAXUED_MAZES} <= set(second)
    assert "curriculum/task/goal_pos_1" in second and not any(k.startswith("curriculum/task/wall_map") for k in second)
    params = runner.state.agent.params["policy"]["params"]
    assert params["encoder"]["Conv_0"]["kernel"].shape == (1, 3, 3, 3, 8)  # [lanes, kh, kw, in, out]


def test_a_level_per_env_changes_data_not_the_program(runner):
    env = runner.env
    levels = host(jax.vmap(env.generate_level)(jax.random.split(jax.random.PRNGKey(2), 4)))
    runner.set_task(levels)
    tasks = runner.get_task(per_env=True)
    assert all(np.array_equal(tasks[k], levels[k]) for k in levels)
    result = runner.train()
    assert result["perf/compilations"] == 1
    # a new level for one field only keeps the others, and stays one program
    runner.set_task({"agent_dir": 3})
    assert runner.get_task(per_env=True)["agent_dir"].tolist() == [3] * 4
    assert runner.train()["perf/compilations"] == 1


def test_a_maze_task_survives_save_and_restore(runner, tmp_path):
    level = parse_maze(prefabs["Labyrinth"])
    runner.set_task(level)
    runner.save(tmp_path / "ckpt")
    runner.set_task(host(runner.env.generate_level(jax.random.PRNGKey(0))))
    runner.restore(tmp_path / "ckpt")
    restored = runner.get_task(per_env=True)
    assert all(np.array_equal(restored[k], np.broadcast_to(level[k], restored[k].shape)) for k in level)
    assert runner.train()["perf/compilations"] == 1


# -- any underspecified env, by import path -------------------------------------------------


TOY = "jaxued/tests.support.ued_toy:make_line"


def test_an_underspecified_env_by_import_path():
    env = make_env(TOY, length=3, max_episode_steps=10, task_bounds={"length": [1, 8], "start": [0, 8]})
    assert sorted(env.task_spec) == ["length", "slip", "start"]  # `name` is a static field
    assert env.task_spec["slip"].low == -np.inf and env.max_episode_steps == 10
    assert env.observation_space.shape == (2,) and env.action_space.n == 2
    wrapped = EpisodeWrapper(env)
    state = wrapped.reset(jax.random.PRNGKey(0), task_to_jax(env.validate_task({"start": 1})))
    for _ in range(2):
        state = wrapped.step(state, jnp.int32(1), jax.random.PRNGKey(1))
    assert float(state.reward) == 1.0 and bool(state.terminated) and float(state.info["success"]) == 1.0
    with pytest.raises(TaskError, match="task field 'length' expected integer scalar in"):
        env.validate_task({"length": 9})
    mapped = make_env("jaxued/tests.support.ued_toy:make_line_with_generator")
    assert mapped.observation_space.shape == (1,) and mapped.max_episode_steps == 20  # its params' limit
    assert set(mapped.generate_level(jax.random.PRNGKey(0))) == {"length", "slip", "start"}
    with pytest.raises(ConfigError, match=r"task_bounds\['length'\] is \[8, 1\], which leaves out its default 3$"):
        make_env(TOY, length=3, task_bounds={"length": [8, 1]})
    with pytest.raises(ConfigError, match=r"task_bounds\['start'\] must be \[low, high\], got \[0, 1, 2\]$"):
        make_env(TOY, task_bounds={"start": [0, 1, 2]})
    with pytest.raises(ConfigError, match="must return \\(env, level\\)"):
        make_env("jaxued/tests.support.helpers:host", tree=1)


def test_an_underspecified_env_trains_by_import_path():
    config = {
        "env": {"name": TOY, "kwargs": {"length": 3}, "task": {"start": 1}},
        "agent": {"name": "ppo", "num_envs": 4, "unroll_length": 8, "num_minibatches": 1, "hidden_sizes": [8]},
        "train": {"timesteps_per_iteration": 32, "eval_episodes": 1},
    }
    result = Runner(config).train()
    assert result["env_steps"] == 32 and result["curriculum/task/start"] == 1.0
    # reaching the end pays 1 and is the line's success: the two agree episode by episode
    assert result["eval/success_rate_mean"] == pytest.approx(result["eval/return_mean"])


def test_the_maze_results_hold_the_predicted_keys(runner):
    assert result_keys(runner.config) == frozenset(runner.train())


@pytest.mark.learning
def test_ppo_with_the_conv_encoder_learns_to_reach_goals_in_empty_mazes():
    """16 empty 5 x 5 mazes, each with its own start and goal, for 32k env steps (seconds once
    compiled): the deterministic policy then reaches the goal in most of 8 other such mazes."""
    kwargs = {"height": 5, "width": 5, "n_walls": 0, "max_episode_steps": 30}
    env = make_env("jaxued/maze", **kwargs)
    generate = jax.jit(jax.vmap(env.generate_level))
    train_levels = host(generate(jax.random.split(jax.random.PRNGKey(0), 16)))
    heldout = host(generate(jax.random.split(jax.random.PRNGKey(1), 8)))
    config = {
        "env": {"name": "jaxued/maze", "kwargs": kwargs},
        "agent": {
            "name": "ppo",
            "num_envs": 16,
            "unroll_length": 32,
            "hidden_sizes": [64],
            "activation": "relu",
            "lr": {"kind": "constant", "peak": 1e-3},
            "encoder": {"kind": "conv", "channels": [16], "kernel": 3},
        },
        "train": {"timesteps_per_iteration": 16_384, "eval_episodes": 1, "eval_at_start": True},
        "heldout": {"tasks": [{k: v[i].tolist() for k, v in heldout.items()} for i in range(8)]},
    }
    runner = Runner(config)
    runner.set_task(train_levels)
    first, second = runner.train(), runner.train()
    assert first["eval/start/heldout/success_rate_mean"] <= 0.5
    assert second["eval/heldout/success_rate_mean"] >= 0.75, second["eval/heldout/success_rate_mean"]


@pytest.mark.heavy
def test_a_generated_heldout_set_reports_its_means_and_worst_tenth():
    """Many levels from the maze's own generator as the held-out set: the same levels in every
    trial (from `seed`), reported as means and the worst tenth, not a key per level."""
    config = maze_config(heldout={"generated": True, "num_tasks": 40, "seed": 3})
    runner = Runner(config)
    again = Runner(config)
    for field, levels in runner.heldout.items():
        assert levels.shape[0] == 40
        np.testing.assert_array_equal(levels, again.heldout[field])
    assert len({levels.tobytes() for levels in runner.heldout["wall_map"]}) > 30  # levels, not copies
    result = runner.train()
    per_task = [key for key in result if key.startswith("eval/heldout/") and key.split("/")[2].isdigit()]
    assert per_task == []
    assert set(result) == set(result_keys(config))
    # the means over the 40 levels and their worst tenth, from the call's own per-level rows
    _, out = runner.loop.train(runner.state)
    rates = np.asarray(out.rows["eval/heldout/success"])[:, -1]  # [seeds, levels], the call's last evaluation
    summary = runner.loop.summarize(out)
    assert summary["eval/heldout/success_rate_mean"] == pytest.approx(rates.mean())
    assert summary["eval/heldout/success_rate_worst10"] == pytest.approx(np.sort(rates.mean(axis=0))[:4].mean())
    assert_refused_before_compiling(
        {"env": {"name": "cartpole"}, "heldout": {"generated": True, "num_tasks": 4}},
        "heldout.generated needs an env that generates levels",
    )


def test_shortest_path_counts_moves_and_finds_walled_in_goals():
    corridor = parse_maze("#####\n>...G\n#####")
    assert shortest_path(corridor) == 4
    walled = parse_maze(">.#G\n..#.\n..#.")
    assert shortest_path(walled) is None
    detour = parse_maze(">.#G\n..#.\n....")
    assert shortest_path(detour) == 7  # down two, across three, up two


@pytest.mark.heavy
def test_robust_plr_replays_unsolvable_mazes_far_less_often_than_dr_trains_on_them():
    """What the field's level algorithms rest on, at a budget a test affords: where many random
    levels cannot be solved, DR spends that share of its rollouts on them, and a regret-scored
    buffer does not. On 7 x 7 mazes with 25 walls about 40% of generated levels have no path to
    the goal. After 8 rollouts per seed robust PLR's replay distribution (rank by MaxMC score
    and staleness, as the program samples it) puts at most half that share on them, in each of
    2 seeds; measured 0.15 and 0.16 against 0.44. Whether that turns into better held-out
    mazes than DR's takes more steps than a test has: `docs/benchmarks.md` (level algorithms)
    measures it."""
    from ajax_tune.ued import buffer as B

    env = make_env("jaxued/maze", height=7, width=7, n_walls=25, max_episode_steps=64)
    drawn = host(jax.vmap(env.generate_level)(jax.random.split(jax.random.key(7), 500)))
    unsolvable_share = np.mean([shortest_path({k: v[i] for k, v in drawn.items()}) is None for i in range(500)])
    assert 0.3 < unsolvable_share < 0.5
    config = {
        "env": {"name": "jaxued/maze", "kwargs": {"height": 7, "width": 7, "n_walls": 25, "max_episode_steps": 64}},
        "agent": {
            "num_envs": 32,
            "unroll_length": 64,
            "hidden_sizes": [64],
            "activation": "relu",
            "encoder": {"kind": "conv", "channels": [16], "kernel": 3},
            "lr": 5e-4,
        },
        "train": {"total_timesteps": 16_384, "timesteps_per_iteration": 16_384, "num_seeds": 2, "eval_episodes": 1},
        "ued": {"algorithm": "robust_plr", "buffer_size": 256, "minimum_fill": 0.25},
    }
    runner = Runner(config)
    result = runner.train()
    assert result["ued/replay"] > 0.25  # replay under way: the distribution below is what trains
    hp, buffer = runner.state.ued.hp, runner.state.ued.own.buffer
    weights = host(jax.vmap(B.weights)(buffer, hp.temperature, hp.staleness_coef))
    buffer = host(buffer)
    for lane in range(2):
        size = int(buffer.size[lane])
        unsolvable = np.array([shortest_path({k: v[lane, i] for k, v in buffer.levels.items()}) is None for i in range(size)])
        assert unsolvable.any()  # the buffer holds some: the replay weight, not the intake, keeps them out
        on_unsolvable = weights[lane, :size][unsolvable].sum()
        assert on_unsolvable < 0.5 * unsolvable_share, (lane, on_unsolvable, unsolvable_share)
