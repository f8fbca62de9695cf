"""The env suites' private APIs: brax's env names, a MuJoCo Playground env's model, and JaxUED's
maze prefabs and minimax mutator (which needs a jax it predates)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ajax_tune.compat.base import gone, private

__all__ = ["brax_env_names", "jaxued_maze_prefabs", "jaxued_minimax_mutator", "playground_env_with_model"]


def brax_env_names() -> list[str]:
    """The names `brax.envs.get_environment` knows (brax has no public listing)."""
    return sorted(private("brax.envs", "_envs", "brax"))


def playground_env_with_model(env: Any, model: Any) -> Any:
    """A shallow copy of a MuJoCo Playground env that simulates `model` (an `mjx.Model` of the
    same shapes). Its public `mjx_model` is a read-only view of the private `_mjx_model`, which
    Playground's own domain randomisation (`wrapper.DomainRandomizationVmapWrapper`) sets the same way."""
    import copy

    if not isinstance(getattr(type(env), "mjx_model", None), property) or not hasattr(env, "_mjx_model"):
        raise gone("mujoco_playground MjxEnv._mjx_model (behind its mjx_model property)", "playground")
    copied = copy.copy(env)
    copied._mjx_model = model
    return copied


def jaxued_maze_prefabs() -> dict[str, str]:
    """JaxUED's named mazes (`jaxued.environments.maze.level.prefabs`: name -> the maze as text),
    read without importing its env package, whose import makes arrays and so starts JAX's
    backends (a driver that only validates a config must not). Where jaxued's maze package is
    already imported, its own dict."""
    import importlib.util
    import pathlib
    import sys

    loaded = sys.modules.get("jaxued.environments.maze.level")
    if loaded is not None:
        return dict(loaded.prefabs)
    spec = importlib.util.find_spec("jaxued")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("jaxued is not installed")
    path = pathlib.Path(next(iter(spec.submodule_search_locations))) / "environments" / "maze" / "level.py"
    try:
        # the file alone, under a name of our own: it defines its Level class and the strings
        standalone = importlib.util.spec_from_file_location("_ajax_tune_jaxued_maze_level", path)
        module = importlib.util.module_from_spec(standalone)
        standalone.loader.exec_module(module)
        return dict(module.prefabs)
    except (OSError, AttributeError, ImportError) as exc:
        raise gone("jaxued.environments.maze.level.prefabs (read from its file)", "jaxued", exc) from None


class _JaxWithTreeMap:
    """The `jax` module as jaxued 0.0.1's own code sees it through `jaxued_minimax_mutator`: every
    attribute is jax's, plus `tree_map` (which jax removed in 0.6), as `jax.tree_util.tree_map`."""

    def __init__(self, jax_module):
        self._jax = jax_module
        self.tree_map = jax_module.tree_util.tree_map

    def __getattr__(self, name):
        return getattr(self._jax, name)


def jaxued_minimax_mutator(max_num_edits: int) -> Callable:
    """`jaxued.environments.maze.make_level_mutator_minimax(max_num_edits)`: JaxUED's port of
    minimax's maze mutator (maze_plr's), `(key, level, n) -> level`.

    jaxued 0.0.1 (PyPI) calls `jax.tree_map` inside it, which jax no longer has. Nothing
    process-wide changes here: where jax lacks it, the factory runs with a copy of its module's
    globals in which `jax` is jax plus `tree_map` (`_JaxWithTreeMap`), so the functions it
    defines see that too; jax and jaxued's modules stay as they were. jaxued's newer sources,
    which call `jax.tree_util.tree_map`, are used as they are."""
    import types

    import jax
    from jaxued.environments.maze import util

    make = util.make_level_mutator_minimax
    if hasattr(jax, "tree_map"):
        return make(max_num_edits)
    if not isinstance(make, types.FunctionType) or make.__closure__:
        raise gone("jaxued.environments.maze.util.make_level_mutator_minimax as a plain function", "jaxued")
    scope = {**make.__globals__, "jax": _JaxWithTreeMap(jax)}
    rebound = types.FunctionType(make.__code__, scope, make.__name__, make.__defaults__)
    return rebound(max_num_edits)
