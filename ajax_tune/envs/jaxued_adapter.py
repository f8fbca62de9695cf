"""JaxUED's underspecified envs as `Env`s, their levels as the task.

JaxUED (Coward, Beukman and Foerster, 2024; `pip install "ajax-tune[ued]"`) writes an env as an
`UnderspecifiedEnv`: `reset_to_level(key, level, params)` and `step(key, state, action, params)`,
with no level of its own. That is this project's task exactly, so the adapter makes a level's
fields the task's fields, one per env, and changing a level never recompiles:

- `jaxued/maze` (`MazeEnv`): JaxUED's `Maze`, task fields `wall_map` (bool [H, W]), `goal_pos`
  and `agent_pos` (int32 [2], x then y) and `agent_dir` (int32, 0 right, 1 down, 2 left, 3 up).
  Its size is static (`height`, `width`); so are the generator's wall count and the mutator's
  cap on edits. It also generates and mutates levels (`generate_level`, `mutate_level`, the
  contract in `ajax_tune.envs.base.Env`) and names JaxUED's eight held-out mazes
  (`named_tasks("jaxued_mazes")`).
- `jaxued/<module>:<factory>` (`UEDEnv.from_factory`): any env with that interface.

Episodes: time limits belong to `EpisodeWrapper`. The env computes a step under its own limit
(a maze's reward shrinks with time, scaled by the limit, as in JaxUED), and whether the step
ended the episode naturally comes from the same step with the limit out of reach (XLA shares
the two calls' work), so only the wrapper truncates. `info["success"]` is an episode that ended
naturally with a positive reward: for the maze, reaching the goal. Observations are one float32
vector: the maze's egocentric image (row-major, channels last; `image_shape`) and then a one-hot
of the agent's direction.

jaxued is imported only where a program is traced (or a factory runs): importing its env package
makes arrays, which starts JAX's backends, and a driver that only validates a config
(`Runner.check`) must not. Tracing (the state's shapes, for a memory check) starts them, as
building a brax env does.
"""

from __future__ import annotations

import collections
import dataclasses
import functools
import importlib.util
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune import compat
from ajax_tune.envs.base import Env, EnvState, Task, TaskField, validate_task
from ajax_tune.errors import ConfigError, TaskError
from ajax_tune.imports import did_you_mean, resolve_import

PREFIX = "jaxued/"
EXTRA = "pip install 'ajax-tune[ued]'"
NEVER = int(np.iinfo(np.int32).max)  # a time limit no episode reaches
TIME_LIMIT_FIELD = "max_steps_in_episode"

#: JaxUED's eight held-out mazes, as its maze_plr.py evaluates them (13 x 13 each)
JAXUED_MAZES = (
    "SixteenRooms",
    "SixteenRooms2",
    "Labyrinth",
    "LabyrinthFlipped",
    "Labyrinth2",
    "StandardMaze",
    "StandardMaze2",
    "StandardMaze3",
)
NAMED_SETS = {"jaxued_mazes": JAXUED_MAZES}
DIRECTIONS = {">": 0, "v": 1, "<": 2, "^": 3}


def require_jaxued(name: str) -> None:
    """One line naming the extra when jaxued is not installed (checked without importing it)."""
    if importlib.util.find_spec("jaxued") is None:
        raise ImportError(f"{name} needs jaxued, which is not installed; {EXTRA}")


def make(rest: str) -> Callable[..., Env]:
    """The factory `jaxued/<rest>` names: the maze, or a user's underspecified env by import path."""
    name = f"{PREFIX}{rest}"
    if rest == "maze":
        require_jaxued(name)
        return MazeEnv
    if ":" in rest:
        return functools.partial(UEDEnv.from_factory, rest)
    hint = did_you_mean(name, [f"{PREFIX}maze"])
    raise KeyError(f"unknown env {name!r}{hint} Known: {PREFIX}maze, or {PREFIX}<module>:<factory> (an UnderspecifiedEnv)")


class UEDEnv(Env):
    """An env with JaxUED's `UnderspecifiedEnv` interface, its level's fields as the task.

    `env` is the underspecified env, `level` a level of it (the default task; its fields give the
    task's names, shapes and dtypes). A field listed in `static_fields` keeps the default level's
    value and is no task field. Bounds: booleans are booleans, other fields range over their
    dtype unless `task_bounds` narrows them (`{field: [low, high]}`). `observe` maps the env's
    observation to a flat vector (default: every leaf flattened, in order). `image_shape`,
    `generate_level` and `mutate_level` are the optional parts of the `Env` contract. A level
    whose fields are not all arrays or numbers is refused when the env is built.
    """

    info_keys = ("success",)

    def __init__(
        self,
        env: Any,
        level: Any,
        *,
        name: str = "jaxued/env",
        params: Any = None,
        max_episode_steps: int | None = None,
        task_bounds: Mapping[str, Sequence[float]] | None = None,
        static_fields: Sequence[str] = (),
        observe: Callable | None = None,
        image_shape: tuple[int, int, int] | None = None,
        generate_level: Callable | None = None,
        mutate_level: Callable | None = None,
    ):
        self.name = name
        self._env, self._level_type = env, type(level)
        params = env.default_params if params is None else params
        limit = getattr(params, TIME_LIMIT_FIELD, None)
        if max_episode_steps is None and limit is None:
            raise ConfigError(f"{name}: its params have no {TIME_LIMIT_FIELD}; give env.kwargs.max_episode_steps")
        self.max_episode_steps = int(max_episode_steps or limit)
        self._timed = limit is not None
        self._params = params.replace(**{TIME_LIMIT_FIELD: self.max_episode_steps}) if self._timed else params
        fields = [f.name for f in dataclasses.fields(level)]
        unknown = sorted(set(static_fields) - set(fields))
        if unknown:
            raise ConfigError(f"{name}: static_fields {unknown} are not fields of its level ({', '.join(fields)})")
        # fields flax keeps out of the pytree (`struct.field(pytree_node=False)`) are static too
        static = {f.name for f in dataclasses.fields(level) if f.metadata.get("pytree_node", True) is False}
        self._static = {f: getattr(level, f) for f in fields if f in static or f in static_fields}
        self._static_leaves = tuple(f for f in static_fields if f not in static)  # pytree leaves, held fixed
        self._dtypes = {}  # the level's own dtype of each task field
        defaults = {}
        for field in fields:
            if field in self._static:
                continue
            value = getattr(level, field)
            try:
                arr = np.asarray(value)
            except Exception:  # a nested pytree or an object
                arr = np.asarray(None)
            if arr.dtype.kind not in "biuf":
                raise ConfigError(f"{name}: level field {field!r} is not an array or a number ({type(value).__name__})")
            self._dtypes[field], defaults[field] = jax.dtypes.canonicalize_dtype(arr.dtype), arr
        self.task_spec = _spec_from_level(name, defaults, task_bounds or {})
        self._observe = observe or _flat_leaves
        self.image_shape = None if image_shape is None else tuple(int(n) for n in image_shape)
        if generate_level is not None:
            self.generate_level = lambda key: self.task_of(generate_level(key))
        if mutate_level is not None:
            self.mutate_level = lambda key, task, num_edits: self.task_of(mutate_level(key, self.level_of(task), num_edits))
        self.action_space = _action_space(env.action_space(self._params), name)
        obs = jax.eval_shape(lambda: self.observe(env.reset_env_to_level(jax.random.PRNGKey(0), level, self._params)[0]))
        self.observation_space = gymnasium.spaces.Box(-np.inf, np.inf, obs.shape, np.float32)

    @classmethod
    def from_factory(cls, path: str, max_episode_steps: int | None = None, task_bounds=None, **kwargs) -> UEDEnv:
        """`jaxued/<module>:<factory>`: `factory(**kwargs)` returns `(env, level)`, or a mapping
        with `env` and `level` and any of `params`, `static_fields`, `observe`, `image_shape`,
        `generate_level`, `mutate_level` (this class's arguments)."""
        name = f"{PREFIX}{path}"
        factory = resolve_import(path, "env.name")
        if not callable(factory):
            raise ConfigError(f"env.name {name!r} must name a callable that returns (env, level), got {factory!r}")
        made = factory(**kwargs)
        if isinstance(made, Mapping):
            parts = dict(made)
        elif isinstance(made, tuple) and len(made) == 2:
            parts = {"env": made[0], "level": made[1]}
        else:
            raise ConfigError(f"env.name {name!r} must return (env, level) or a mapping with env and level, got {made!r}")
        allowed = ("env", "level", "params", "static_fields", "observe", "image_shape", "generate_level", "mutate_level")
        if not {"env", "level"} <= set(parts) or set(parts) - set(allowed):
            raise ConfigError(f"env.name {name!r} returned keys {sorted(parts)}; expected env, level and any of {allowed[2:]}")
        for method in ("reset_env_to_level", "step_env", "action_space"):
            if not callable(getattr(parts["env"], method, None)):
                raise ConfigError(f"env.name {name!r}: its env has no {method}(); it must be a JaxUED UnderspecifiedEnv")
        env, level = parts.pop("env"), parts.pop("level")
        return cls(env, level, name=name, max_episode_steps=max_episode_steps, task_bounds=task_bounds, **parts)

    # -- levels and tasks ----------------------------------------------------------------

    @property
    def ued_env(self) -> Any:
        """The underspecified env itself."""
        return self._env

    @property
    def params(self) -> Any:
        """Its params, with this env's time limit (`max_episode_steps`)."""
        return self._params

    def level_of(self, task: Task) -> Any:
        """The env's level for an (unbatched) task, in the level's own dtypes."""
        fields = {k: jnp.asarray(task[k]).astype(self._dtypes[k]) for k in self._dtypes}
        static = {
            k: _strong(v) if k in self._static_leaves and isinstance(v, (int, float, bool)) else v
            for k, v in self._static.items()
        }
        return self._level_type(**fields, **static)

    def task_of(self, level: Any) -> Task:
        """The task a level (unbatched) stands for, in the task's dtypes."""
        return {k: jnp.asarray(getattr(level, k)).astype(spec.dtype) for k, spec in self.task_spec.items()}

    def observe(self, obs: Any) -> jax.Array:
        return self._observe(obs)

    # -- stepping ------------------------------------------------------------------------

    def reset(self, key, task) -> EnvState:
        obs, physics = self.ued_env.reset_env_to_level(key, self.level_of(task), self.params)
        info = {"success": jnp.zeros((), jnp.float32)}
        return EnvState.create(obs=self.observe(obs), task=task, physics=_strongly_typed(physics), info=info)

    def step(self, state, action, key) -> EnvState:
        action = self._action(action)
        obs, physics, reward, done, _ = self.ued_env.step_env(key, state.physics, action, self.params)
        if self._timed:  # the natural end: the same step with the time limit out of reach
            never = self.params.replace(**{TIME_LIMIT_FIELD: NEVER})
            done = self.ued_env.step_env(key, state.physics, action, never)[3]
        reward = jnp.asarray(reward, jnp.float32).reshape(())
        terminated = jnp.asarray(done, jnp.bool_).reshape(())
        physics = jax.tree.map(lambda new, old: jnp.asarray(new).astype(old.dtype), physics, state.physics)
        return state.replace(
            obs=self.observe(obs),
            reward=reward,
            terminated=terminated,
            physics=physics,
            info={"success": (terminated & (reward > 0)).astype(jnp.float32)},
        )

    def _action(self, action):
        if isinstance(self.action_space, gymnasium.spaces.Discrete):
            return jnp.asarray(action, jnp.int32)
        return jnp.asarray(action, jnp.float32).reshape(self.action_space.shape)


class MazeEnv(UEDEnv):
    """`jaxued/maze`: JaxUED's `Maze` (maze_plr's settings: observations divided by 10, a reward
    that shrinks with time), generated by `make_level_generator(height, width, n_walls)` and
    mutated by its minimax mutator (at most `max_edits` edits per call).

    Everything a config check needs (spaces, the task's fields, the default task, the named
    mazes) is known without jaxued's env; the env itself is made when a program is traced."""

    def __init__(
        self,
        height: int = 13,
        width: int = 13,
        n_walls: int = 25,
        agent_view_size: int = 5,
        max_episode_steps: int = 250,
        max_edits: int = 100,
        penalize_time: bool = True,
    ):
        require_jaxued(f"{PREFIX}maze")
        for what, value, least in (("height", height, 2), ("width", width, 2), ("n_walls", n_walls, 0)):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ConfigError(f"{PREFIX}maze: {what} must be an integer >= {least}, got {value!r}")
        for what, value in (
            ("agent_view_size", agent_view_size),
            ("max_episode_steps", max_episode_steps),
            ("max_edits", max_edits),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{PREFIX}maze: {what} must be an integer >= 1, got {value!r}")
        if agent_view_size % 2 == 0 or agent_view_size < 3:
            raise ConfigError(
                f"{PREFIX}maze: agent_view_size must be odd and >= 3 (the agent sees as far to each side), got {agent_view_size}"
            )
        self.name = f"{PREFIX}maze"
        self.height, self.width, self.n_walls = height, width, n_walls
        self.agent_view_size, self.max_edits, self.penalize_time = agent_view_size, max_edits, bool(penalize_time)
        self.max_episode_steps = max_episode_steps
        self._timed = True
        self._static = {"width": width, "height": height}
        self._static_leaves = ("width", "height")  # JaxUED's Level keeps its size as Python ints, leaves of its pytree
        self._dtypes = {"wall_map": np.dtype(np.bool_), "goal_pos": np.dtype(np.uint32), "agent_pos": np.dtype(np.uint32)}
        self._dtypes["agent_dir"] = np.dtype(np.uint8)
        self._observe = self._observe_maze
        self.image_shape = (agent_view_size, agent_view_size, 3)
        corner = max(height, width) - 1
        self.task_spec = {
            "wall_map": TaskField(((False,) * width,) * height, 0, 1, np.bool_, (height, width), "walls, row y then column x"),
            "goal_pos": TaskField((width - 1, height - 1), 0, corner, np.int32, (2,), "the goal's cell, x then y"),
            "agent_pos": TaskField((0, 0), 0, corner, np.int32, (2,), "the agent's starting cell, x then y"),
            "agent_dir": TaskField(0, 0, 3, np.int32, (), "the agent's starting direction: 0 right, 1 down, 2 left, 3 up"),
        }
        self.action_space = gymnasium.spaces.Discrete(7)  # JaxUED's: turn left, turn right, forward, 4 no-ops
        size = int(np.prod(self.image_shape)) + 4
        self.observation_space = gymnasium.spaces.Box(0.0, 1.0, (size,), np.float32)

    @functools.cached_property
    def _env(self):
        Maze = maze_package().Maze  # noqa: N806

        return Maze(self.height, self.width, self.agent_view_size, normalize_obs=True, penalize_time=self.penalize_time)

    @functools.cached_property
    def _params(self):
        return maze_package().env.EnvParams(max_steps_in_episode=self.max_episode_steps)

    @property
    def _level_type(self):
        return maze_package().Level

    @staticmethod
    def _observe_maze(obs) -> jax.Array:
        image = jnp.asarray(obs.image, jnp.float32).reshape(-1)
        return jnp.concatenate([image, jax.nn.one_hot(obs.agent_dir, 4, dtype=jnp.float32)])

    # -- levels: the generator, the mutator, the named sets ------------------------------

    def generate_level(self, key: jax.Array) -> Task:
        """A random level: `n_walls` wall cells drawn with replacement, the agent (facing a random
        way) and the goal on distinct free cells (JaxUED's `make_level_generator`; no check that
        the goal can be reached)."""
        generate = maze_package().make_level_generator(self.height, self.width, self.n_walls)
        return self.task_of(generate(key))

    def mutate_level(self, key: jax.Array, task: Task, num_edits) -> Task:
        """`task` after `num_edits` edits, each flipping a wall (never under the agent or the
        goal), moving the goal, or nothing, a third each (JaxUED's minimax mutator, as maze_plr
        uses it). `num_edits` may be traced: edits past it, up to `max_edits`, are no-ops."""
        maze_package()
        mutate = compat.jaxued_minimax_mutator(self.max_edits)
        return self.task_of(mutate(key, self.level_of(task), jnp.asarray(num_edits, jnp.int32)))

    def named_task_sets(self) -> tuple[str, ...]:
        return tuple(NAMED_SETS)

    def named_tasks(self, name: str) -> tuple[tuple[str, ...], dict[str, np.ndarray]]:
        """JaxUED's held-out mazes (`jaxued_mazes`: its eight 13 x 13 mazes), as task batches. A
        bigger maze holds them in its top-left corner, walled off as JaxUED pads them."""
        if name not in NAMED_SETS:
            raise ConfigError(
                f"{self.name}: no named task set {name!r}{did_you_mean(name, NAMED_SETS)} Known: {', '.join(NAMED_SETS)}"
            )
        prefabs = compat.jaxued_maze_prefabs()
        levels = [parse_maze(prefabs[level]) for level in NAMED_SETS[name]]
        for level_name, level in zip(NAMED_SETS[name], levels):
            h, w = level["wall_map"].shape
            if h > self.height or w > self.width:
                raise ConfigError(
                    f"{self.name}: the named set {name!r} holds {level_name}, {h} x {w}, which does not fit this "
                    f"{self.height} x {self.width} maze; use height and width >= {h}, {w}"
                )
            padded = np.ones((self.height, self.width), bool)
            padded[:h, :w] = level["wall_map"]
            level["wall_map"] = padded
        batch = {k: np.stack([level[k] for level in levels]) for k in self.task_spec}
        return NAMED_SETS[name], self.validate_task(batch, num_envs=len(levels))

    def validate_task(self, task, num_envs=None, current=None) -> dict[str, np.ndarray]:
        """The fields' own checks, then the level's: positions inside the maze, the agent and the
        goal on distinct free cells (per env, naming the first that fails)."""
        out = validate_task(self.name, self.task_spec, task, num_envs=num_envs, current=current)
        envs = 1 if num_envs is None else num_envs

        def per_env(name):  # [envs, *shape], whether the field was given once or per env
            value, shape = out[name], self.task_spec[name].shape
            return np.broadcast_to(value, (envs, *shape)) if value.shape == shape else value

        walls, goal, agent = per_env("wall_map"), per_env("goal_pos"), per_env("agent_pos")
        rows = np.arange(envs)
        cell = lambda pos: (rows, np.minimum(pos[:, 1], self.height - 1), np.minimum(pos[:, 0], self.width - 1))  # noqa: E731
        problems = [
            ((agent[:, 0] >= self.width) | (agent[:, 1] >= self.height), "puts the agent outside the maze", agent),
            ((goal[:, 0] >= self.width) | (goal[:, 1] >= self.height), "puts the goal outside the maze", goal),
            (np.all(agent == goal, axis=1), "puts the agent on the goal", agent),
            (walls[cell(agent)], "puts the agent on a wall", agent),
            (walls[cell(goal)], "puts the goal on a wall", goal),
        ]
        for bad, what, pos in problems:
            if np.any(bad):
                i = int(np.argmax(bad))
                batched = any(v.shape != self.task_spec[k].shape for k, v in out.items())
                where = f"env {i}'s task" if batched else "the task"
                size = f"{self.width} wide, {self.height} high"
                raise TaskError(f"{self.name}: {where} {what} (x={int(pos[i, 0])}, y={int(pos[i, 1])}; the maze is {size})")
        return out


def maze_package():
    """`jaxued.environments.maze`, imported where it is first needed, often while a program is
    traced: its modules make arrays as they are imported, which must be concrete values, not
    values of the trace (they would leak out of it)."""
    with jax.ensure_compile_time_eval():
        from jaxued.environments import maze

    return maze


def parse_maze(text: str) -> dict[str, np.ndarray]:
    """A maze written as text, one row per line: `#` a wall, `.` free, `G` the goal, and the
    agent by the way it faces (`>` right, `v` down, `<` left, `^` up); as task fields."""
    rows = text.strip().split("\n")
    if len({len(row) for row in rows}) != 1:
        raise ValueError("every row of a maze must have the same length")
    walls = np.array([[c == "#" for c in row] for row in rows], bool)
    found = {"G": [], "agent": []}
    for y, row in enumerate(rows):
        for x, c in enumerate(row):
            if c == "G":
                found["G"].append((x, y, 0))
            elif c in DIRECTIONS:
                found["agent"].append((x, y, DIRECTIONS[c]))
            elif c not in "#.":
                raise ValueError(f"unexpected character {c!r} at x={x}, y={y}")
    if len(found["G"]) != 1 or len(found["agent"]) != 1:
        raise ValueError(f"a maze needs one goal and one agent, found {len(found['G'])} and {len(found['agent'])}")
    (gx, gy, _), (ax, ay, direction) = found["G"][0], found["agent"][0]
    return {
        "wall_map": walls,
        "goal_pos": np.array([gx, gy], np.int32),
        "agent_pos": np.array([ax, ay], np.int32),
        "agent_dir": np.array(direction, np.int32),
    }


def shortest_path(level) -> int | None:
    """The fewest moves from a maze level's start cell to its goal (turns not counted), by
    breadth-first search over its wall grid; None where no path exists (JaxUED's generator
    places walls without checking). Runs on the host, for one level's task fields (`wall_map`
    rows by y, positions as x, y): to describe a set of levels, not inside a program."""
    walls = np.asarray(level["wall_map"], bool)
    h, w = walls.shape
    start, goal = tuple(int(v) for v in np.asarray(level["agent_pos"])), tuple(int(v) for v in np.asarray(level["goal_pos"]))
    if start == goal:
        return 0
    seen, queue = {start: 0}, collections.deque([start])
    while queue:
        x, y = queue.popleft()
        for nx, ny in ((x + 1, y), (x - 1, y), (x, y + 1), (x, y - 1)):
            if 0 <= nx < w and 0 <= ny < h and (nx, ny) not in seen and not walls[ny, nx]:
                if (nx, ny) == goal:
                    return seen[(x, y)] + 1
                seen[(nx, ny)] = seen[(x, y)] + 1
                queue.append((nx, ny))
    return None


def _spec_from_level(
    name: str, defaults: Mapping[str, np.ndarray], bounds: Mapping[str, Sequence[float]]
) -> dict[str, TaskField]:
    unknown = sorted(set(bounds) - set(defaults))
    if unknown:
        raise ConfigError(f"{name}: task_bounds names {unknown}, which are not task fields{did_you_mean(unknown[0], defaults)}")
    spec = {}
    for field, default in defaults.items():
        if default.dtype.kind == "b":
            dtype, low, high = np.bool_, 0.0, 1.0
        elif default.dtype.kind in "iu":
            info = np.iinfo(np.int32)
            dtype, low, high = (
                np.int32,
                float(max(np.iinfo(default.dtype).min, info.min)),
                float(min(np.iinfo(default.dtype).max, info.max)),
            )
        else:
            dtype, low, high = np.float32, -np.inf, np.inf
        if field in bounds:
            low, high = (float(b) for b in bounds[field])
        value = default.item() if default.ndim == 0 else default.tolist()
        spec[field] = TaskField(_as_tuple(value), low, high, dtype, default.shape, f"the level's {field}")
    return spec


def _as_tuple(value):
    return tuple(_as_tuple(v) for v in value) if isinstance(value, list) else value


def _strong(value: int | float | bool) -> jax.Array:
    """A Python number as a strongly typed array: a level's static size (JaxUED keeps it as a
    Python int) would otherwise be weakly typed, and a scan over levels would retrace."""
    return jnp.asarray(value, jnp.result_type(type(value)))


def _flat_leaves(obs) -> jax.Array:
    return jnp.concatenate([jnp.asarray(leaf, jnp.float32).reshape(-1) for leaf in jax.tree.leaves(obs)])


def _strongly_typed(tree: Any) -> Any:
    # underspecified envs' states hold Python scalars (a reset's `time=0`): every leaf becomes a
    # strongly typed array, so a state has one type before and after a step, as scans need.
    return jax.tree.map(lambda x: jnp.asarray(x, jnp.asarray(x).dtype), tree)


def _action_space(space, name: str) -> gymnasium.spaces.Space:
    n = getattr(space, "n", None)
    if n is not None:
        return gymnasium.spaces.Discrete(int(n))
    shape = tuple(getattr(space, "shape", ()) or ())
    if len(shape) == 1:
        low = np.broadcast_to(np.asarray(space.low, np.float32), shape)
        high = np.broadcast_to(np.asarray(space.high, np.float32), shape)
        return gymnasium.spaces.Box(low, high, shape, np.float32)
    raise TypeError(f"{name}: only Discrete and 1-D Box action spaces are supported, got {space!r}")
