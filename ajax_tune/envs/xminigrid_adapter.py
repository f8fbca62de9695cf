"""XLand-MiniGrid (`xminigrid`) environments as `Env`s, with an XLand ruleset as the task.

- Ids are xminigrid's (`xminigrid.registered_environments()`): `XLand-MiniGrid-R1-9x9` ...
  (rooms, with a ruleset) and `MiniGrid-*` (the classic MiniGrid tasks, whose layout and goal
  are fixed: task-free).
- The task of an XLand env is its ruleset, three integer fields: `goal` (5 values, the goal's
  encoding), `rules` (`max_rules` x 7: one rule's encoding per row, empty rules as padding) and
  `init_tiles` (`max_tiles` x 2: tile and colour of each object placed at reset, empty tiles as
  padding). They are traced data: a new ruleset, even one per env, never recompiles. A ruleset
  with fewer rules or tiles than the env holds is padded with empty ones; more is refused in one
  line, as is an unknown goal, rule, tile or colour. Without a benchmark the default task is
  the simplest XLand task: a yellow ball in the room, and the goal of standing next to it.
- A benchmark (`benchmark: path`, a ruleset file in xminigrid's format: a bz2 pickle of
  `goals`, `rules`, `init_tiles`, `num_rules`) is read from that local file (nothing is
  downloaded): it sizes `max_rules` and `max_tiles`, its first ruleset is the default task, its
  rulesets are the env's set of tasks named `benchmark` (`task_sampler: {name: uniform, kwargs:
  {levels: benchmark}}`, `heldout: {named: benchmark, num_tasks: 16}`) and each one is a task by
  name (`benchmark/17`).
- Episodes: xminigrid does not reset by itself; its natural end (the goal reached, discount 0)
  is `terminated`, and the time limit (xminigrid's `max_steps`, kept equal to this env's
  `max_episode_steps`, as the reward `1 - 0.9 * steps / max_steps` reads it) belongs to the
  episode wrapper.
- Observations: the agent's egocentric view, a (view, view, 2) grid of tile and colour ids,
  flattened to float32 with `image_shape` set to that grid's shape.
"""

from __future__ import annotations

import pathlib
from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium
import jax.numpy as jnp
import numpy as np
import xminigrid
from xminigrid.benchmarks import load_benchmark_from_path
from xminigrid.core.constants import NUM_ACTIONS, NUM_COLORS, NUM_TILES, Colors, Tiles
from xminigrid.core.goals import AgentNearGoal
from xminigrid.types import RuleSet

from ajax_tune import compat
from ajax_tune.envs.base import EnvState, TaskField, check_integer, validate_task
from ajax_tune.envs.suite import SuiteEnv, time_limit, unknown_id
from ajax_tune.errors import ConfigError, TaskError

NUM_GOALS = 15  # goal kinds xminigrid's check_goal switches over (0: the empty goal)
NUM_RULES = 13  # rule kinds its check_rule switches over (0: the empty rule)
BENCHMARK = "benchmark"
FIELDS = ("goal", "rules", "init_tiles")


def default_ruleset() -> dict[str, np.ndarray]:
    """A yellow ball in the room; the goal is to stand next to it."""
    ball = np.asarray([Tiles.BALL, Colors.YELLOW], np.uint8)
    return {
        "goal": np.asarray(AgentNearGoal(tile=ball).encode()),
        "rules": np.zeros((1, 7), np.uint8),
        "init_tiles": ball[None],
    }


class XMiniGridEnv(SuiteEnv):
    """`xminigrid.make(env_id)`, its ruleset (XLand) as the task.

    The dynamic state is xminigrid's `TimeStep`, whole, in `EnvState.physics`.
    """

    def __init__(
        self,
        env_id: str,
        max_episode_steps: int | None = None,
        benchmark: str | None = None,
        max_rules: int | None = None,
        max_tiles: int | None = None,
        view_size: int | None = None,
    ):
        known = xminigrid.registered_environments()
        if env_id not in known:
            raise unknown_id("xminigrid", env_id, known)
        self.name = f"xminigrid/{env_id}"
        self.xland = env_id.startswith("XLand-")
        for what, value, least in (("max_rules", max_rules, 1), ("max_tiles", max_tiles, 1), ("view_size", view_size, 3)):
            if value is not None:
                check_integer(self.name, what, value, least)
        if view_size is not None and view_size % 2 == 0:
            raise ConfigError(f"{self.name}: view_size must be odd (the agent sees as far to each side), got {view_size}")
        overrides = {} if view_size is None else {"view_size": int(view_size)}
        self.xminigrid_env, params = xminigrid.make(env_id, **overrides)
        # its reward reads the limit (1 - 0.9 * steps / max_steps): the params carry the wrapper's
        self.max_episode_steps, self.params = time_limit(self.name, params, "max_steps", max_episode_steps, keep=True)
        if not self.xland and (benchmark or max_rules or max_tiles):
            raise ConfigError(
                f"{self.name} is a MiniGrid env with a fixed goal: benchmark, max_rules and max_tiles are for XLand envs"
            )

        self.benchmark = None if benchmark is None else read_benchmark(benchmark, self.name)
        default = default_ruleset() if self.benchmark is None else {k: v[0] for k, v in self.benchmark.items()}
        rules = max(default["rules"].shape[0], int(max_rules or 0))
        tiles = max(default["init_tiles"].shape[0], int(max_tiles or 0))
        source = "the default ruleset's" if self.benchmark is None else "the benchmark's"
        for what, given, needed in (("max_rules", max_rules, rules), ("max_tiles", max_tiles, tiles)):
            if given is not None and int(given) < needed:
                raise ConfigError(f"{self.name}: {what}={given} is fewer than {source} {needed}")
        inside = (int(params.height) - 2) * (int(params.width) - 2)  # within the outer wall; inner walls take more
        if self.xland and tiles + 1 > inside:
            raise ConfigError(
                f"{self.name}: {tiles} tiles and the agent do not fit its {params.height} x {params.width} grid, which has "
                f"at most {inside} free cells (max_tiles, or the benchmark's rulesets)"
            )
        self.task_spec = {}
        if self.xland:
            default = pad_ruleset(default, rules, tiles)
            self.task_spec = {
                "goal": TaskField(tuple(default["goal"].tolist()), 0, 255, np.int32, (5,), "the goal's encoding"),
                "rules": TaskField(
                    tuple(map(tuple, default["rules"].tolist())), 0, 255, np.int32, (rules, 7), "one rule's encoding per row"
                ),
                "init_tiles": TaskField(
                    tuple(map(tuple, default["init_tiles"].tolist())),
                    0,
                    255,
                    np.int32,
                    (tiles, 2),
                    "tile and colour of each object placed at reset",
                ),
            }

        view = int(self.params.view_size)
        self.image_shape = (view, view, 2)
        high = np.broadcast_to(np.asarray([NUM_TILES - 1, NUM_COLORS - 1], np.float32), self.image_shape).reshape(-1)
        self.observation_space = gymnasium.spaces.Box(np.zeros_like(high), high, high.shape, np.float32)
        self.action_space = gymnasium.spaces.Discrete(int(NUM_ACTIONS))

    # -- the task ------------------------------------------------------------------------

    def validate_task(self, task, num_envs=None, current=None) -> dict[str, np.ndarray]:
        if isinstance(task, str):
            return self.named_task(task)
        if isinstance(task, Mapping) and self.xland:
            task = dict(task)
            for name, rows in (
                ("rules", self.task_spec["rules"].shape[0]),
                ("init_tiles", self.task_spec["init_tiles"].shape[0]),
            ):
                if name in task:
                    task[name] = _pad_rows(self.name, name, task[name], rows)
        checked = validate_task(self.name, self.task_spec, task, num_envs=num_envs, current=current)
        if self.xland:
            _check_ruleset(self.name, checked)
        return checked

    def task_names(self) -> Sequence[str]:
        return [] if self.benchmark is None else [f"{BENCHMARK}/{i}" for i in range(len(self.benchmark["goal"]))]

    def named_task(self, name: str) -> dict[str, np.ndarray]:
        prefix, _, index = name.partition("/")
        if self.benchmark is None or prefix != BENCHMARK or not index.isdigit():
            if self.benchmark is None:
                raise TaskError(f"{self.name} knows tasks by name only from a benchmark (env.kwargs.benchmark), got {name!r}")
            raise TaskError(f"{self.name} names a benchmark's rulesets 'benchmark/<index>', got {name!r}")
        i, count = int(index), len(self.benchmark["goal"])
        if i >= count:
            raise TaskError(f"{self.name}: the benchmark holds rulesets 0..{count - 1}, got {name!r}")
        return self.validate_task({k: v[i] for k, v in self.benchmark.items()})

    def named_task_sets(self) -> tuple[str, ...]:
        return () if self.benchmark is None else (BENCHMARK,)

    def named_tasks(self, name: str) -> tuple[tuple[str, ...], dict[str, np.ndarray]]:
        if name != BENCHMARK or self.benchmark is None:
            return super().named_tasks(name)
        padded = pad_ruleset(self.benchmark, self.task_spec["rules"].shape[0], self.task_spec["init_tiles"].shape[0])
        return tuple(self.task_names()), {k: padded[k].astype(np.int32) for k in FIELDS}

    def params_for(self, task):
        """xminigrid's params for a task (an unbatched one)."""
        if not self.xland:
            return self.params
        ruleset = RuleSet(
            goal=jnp.asarray(task["goal"], jnp.uint8),
            rules=jnp.asarray(task["rules"], jnp.uint8),
            init_tiles=jnp.asarray(task["init_tiles"], jnp.uint8),
        )
        return self.params.replace(ruleset=ruleset)

    # -- stepping ------------------------------------------------------------------------

    def reset(self, key, task) -> EnvState:
        timestep = self.xminigrid_env.reset(self.params_for(task), key)
        return self.first(timestep.observation, task, timestep)

    def step(self, state, action, key) -> EnvState:
        timestep = self.xminigrid_env.step(self.params_for(state.task), state.physics, self.action(action))
        return self.stepped(state, timestep.observation, timestep.reward, (timestep.discount == 0) & timestep.last(), timestep)


def read_benchmark(path: str | pathlib.Path, name: str) -> dict[str, np.ndarray]:
    """A ruleset benchmark from a local file (relative paths from where the run started)."""
    path = pathlib.Path(path).expanduser()
    if not path.is_absolute():
        path = pathlib.Path(compat.original_working_dir()) / path
    if not path.is_file():
        raise ConfigError(f"{name}: benchmark file {str(path)!r} does not exist (a ruleset file in xminigrid's format)")
    try:
        bench = load_benchmark_from_path(path)
    except Exception as exc:  # a file that is not a bz2 pickle of the expected arrays
        raise ConfigError(f"{name}: {str(path)!r} is not an xminigrid ruleset file ({type(exc).__name__}: {exc})") from None
    return {"goal": np.asarray(bench.goals), "rules": np.asarray(bench.rules), "init_tiles": np.asarray(bench.init_tiles)}


def pad_ruleset(ruleset: Mapping[str, np.ndarray], rules: int, tiles: int) -> dict[str, np.ndarray]:
    """Rules and tiles padded (along their second-to-last axis) with empty ones to `rules` and `tiles` rows."""
    out = dict(ruleset)
    for name, rows in (("rules", rules), ("init_tiles", tiles)):
        if name not in ruleset:
            continue
        value = np.asarray(ruleset[name])
        missing = rows - value.shape[-2]
        if missing > 0:
            pad = [(0, 0)] * value.ndim
            pad[-2] = (0, missing)
            out[name] = np.pad(value, pad)
    return out


def _pad_rows(env: str, name: str, value: Any, rows: int) -> Any:
    try:
        arr = np.asarray(value)
    except Exception:  # ragged: left for validation to refuse
        return value
    if arr.ndim < 2 or arr.dtype.kind not in "iuf":
        return value
    if arr.shape[-2] > rows:
        what = {"rules": "max_rules", "init_tiles": "max_tiles"}[name]
        raise TaskError(f"{env}: task field {name!r} has {arr.shape[-2]} rows; this env holds at most {rows} (env.kwargs.{what})")
    return pad_ruleset({name: arr}, rows if name == "rules" else 0, rows if name == "init_tiles" else 0)[name]


def _check_ruleset(env: str, task: Mapping[str, np.ndarray]) -> None:
    checks = (
        ("goal", np.asarray(task["goal"])[..., 0], NUM_GOALS, "goal kinds"),
        ("rules", np.asarray(task["rules"])[..., 0], NUM_RULES, "rule kinds"),
        ("init_tiles", np.asarray(task["init_tiles"])[..., 0], NUM_TILES, "tiles"),
        ("init_tiles", np.asarray(task["init_tiles"])[..., 1], NUM_COLORS, "colours"),
    )
    for field, ids, count, what in checks:
        if np.any(ids >= count):
            raise TaskError(
                f"{env}: task field {field!r} names an unknown {what[:-1]} ({int(ids.max())}); xminigrid has {count} {what}"
            )
