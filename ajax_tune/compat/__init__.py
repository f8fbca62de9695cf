"""Every private API of jax, ray, brax and the env suites that ajax_tune relies on, in one place, and every API
that differs between the versions it supports (pyproject's ranges; `versions.py` checks them).

None of the private ones is a public, documented interface; each is here because no public one
does the job. A new version of a library may move or drop any of them: `tests/test_compat.py` calls every
function below against the installed versions, so such a move fails there, loudly and by name,
rather than somewhere deep in a training run. When it does, fix the function here.

Nothing is imported at module level: the core layers use this module without importing Ray,
and the command line without importing JAX.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any


class CompatError(RuntimeError):
    """An installed library no longer has a private API ajax_tune uses."""


def _gone(what: str, library: str, error: Exception | None = None) -> CompatError:
    import importlib.metadata

    try:
        version = importlib.metadata.version(library)
    except importlib.metadata.PackageNotFoundError:
        version = "?"
    detail = f" ({type(error).__name__}: {error})" if error else ""
    return CompatError(
        f"{what} is not available in {library} {version}{detail}; ajax_tune.compat must be updated for this version"
    )


def _private(module: str, name: str, library: str) -> Any:
    """`module.name`, imported only when asked for; its absence is a `CompatError` naming it."""
    import importlib

    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise _gone(f"{module}.{name}", library, exc) from None


# -- jax -----------------------------------------------------------------------------------------


def jit_cache_size(fn: Callable) -> int:
    """How many programs a `jax.jit`-wrapped function has compiled: its cache's size.

    Counts recompilations that do not retrace (an argument with another placement or sharding),
    which counting traces misses. jax exposes it only as the private `_cache_size()`."""
    cache_size = getattr(fn, "_cache_size", None)
    if not callable(cache_size):
        raise _gone("jax.jit(...)._cache_size()", "jax")
    return int(cache_size())


_warned: set[str] = set()


def _warn_once(what: str, message: str) -> None:
    """One warning per process for an opt-in speed-up that fell back to the library's own way."""
    if what not in _warned:
        import warnings

        _warned.add(what)
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def jit_with_options(fn: Callable, options: dict[str, Any]) -> Callable:
    """`jax.jit(fn)` whose one program is compiled with XLA debug `options` (per program: nothing
    else in the process changes). `jax.jit(compiler_options=...)` is young: where it is missing,
    the program compiles with JAX's defaults instead (the same results, a slower compile), with
    one warning. The option names are XLA's own; the supported jax range is where they hold."""
    import inspect

    import jax

    if "compiler_options" not in inspect.signature(jax.jit).parameters:
        _warn_once("jit_with_options", "ajax_tune: this jax has no jit(compiler_options=...); init compiles with every pass")
        return jax.jit(fn)
    return jax.jit(fn, compiler_options=options)


def unregister_event_duration_listener(listener: Callable) -> None:
    """Stop calling a listener that `jax.monitoring.register_event_duration_secs_listener` added.
    Public from jax 0.8.1 on; before, only `jax._src.monitoring` has it, by another name."""
    import jax.monitoring

    unregister = getattr(jax.monitoring, "unregister_event_duration_listener", None)
    if unregister is None:
        unregister = _private("jax._src.monitoring", "_unregister_event_duration_listener_by_callback", "jax")
    unregister(listener)


def backends_are_initialized() -> bool:
    """Whether JAX has started its backends (after which platform and memory settings no
    longer apply). jax has no public way to ask without starting them."""
    return bool(_private("jax._src.xla_bridge", "backends_are_initialized", "jax")())


# -- brax ----------------------------------------------------------------------------------------


def brax_env_names() -> list[str]:
    """The names `brax.envs.get_environment` knows (brax has no public listing)."""
    return sorted(_private("brax.envs", "_envs", "brax"))


# -- MuJoCo Playground ---------------------------------------------------------------------------


def playground_env_with_model(env: Any, model: Any) -> Any:
    """A shallow copy of a MuJoCo Playground env that simulates `model` (an `mjx.Model` of the
    same shapes). Its public `mjx_model` is a read-only view of the private `_mjx_model`, which
    Playground's own domain randomisation (`wrapper.DomainRandomizationVmapWrapper`) sets the same way."""
    import copy

    if not isinstance(getattr(type(env), "mjx_model", None), property) or not hasattr(env, "_mjx_model"):
        raise _gone("mujoco_playground MjxEnv._mjx_model (behind its mjx_model property)", "playground")
    copied = copy.copy(env)
    copied._mjx_model = model
    return copied


# -- jaxued --------------------------------------------------------------------------------------


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
        raise _gone("jaxued.environments.maze.level.prefabs (read from its file)", "jaxued", exc) from None


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
        raise _gone("jaxued.environments.maze.util.make_level_mutator_minimax as a plain function", "jaxued")
    scope = {**make.__globals__, "jax": _JaxWithTreeMap(jax)}
    rebound = types.FunctionType(make.__code__, scope, make.__name__, make.__defaults__)
    return rebound(max_num_edits)


# -- pandas --------------------------------------------------------------------------------------


def read_csv_exactly(path: Any, **kwargs: Any) -> Any:
    """`pandas.read_csv` with every float read back as the number that was written. pandas 3
    does so by default (and deprecates `float_precision`); pandas 2's default parser may be one
    bit off (0.30000000000000004 reads as 0.3) unless asked for `float_precision="round_trip"`."""
    import pandas as pd

    if int(pd.__version__.split(".")[0]) < 3:
        kwargs.setdefault("float_precision", "round_trip")
    return pd.read_csv(path, **kwargs)


# -- ray: Tune's output ---------------------------------------------------------------------------

# Tune reads this class attribute of a trainable (RLlib's Algorithm sets it) as the keys of the
# box it prints when a trial ends, and tests `key in <it>` for each key of the result.
TUNE_RESULT_KEYS_ATTR = "_progress_metrics"


def tune_result_keys(trainable: type) -> Any:
    """The result keys Tune's output shows for `trainable` (None: all of them)."""
    return _private("ray.tune.progress_reporter", "_detect_progress_metrics", "ray")(trainable)


# -- ray: W&B logging ----------------------------------------------------------------------------
#
# `EnvStepWandbCallback` changes how Ray's W&B callback logs (env steps as the x-axis, rows never
# dropped after a PBT rewind). Ray offers no hook for that, so it subclasses the logging actor and
# overrides the callback's actor start; these functions are every point where it touches them.


def wandb_logging_actor() -> type:
    """Ray's W&B logging actor class (`_WandbLoggingActor`): it runs `wandb.init` and logs each
    queued result with `self._wandb`, which a subclass may replace after `__init__`."""
    return _private("ray.air.integrations.wandb", "_WandbLoggingActor", "ray")


def wandb_actor_module(actor: Any) -> Any:
    """The `wandb` module a logging actor calls (its `_wandb`)."""
    if not hasattr(actor, "_wandb"):
        raise _gone("the W&B logging actor's `_wandb`", "ray")
    return actor._wandb  # noqa: SLF001


def set_wandb_actor_module(actor: Any, module: Any) -> None:
    """Make a logging actor call `module` instead of `wandb`."""
    wandb_actor_module(actor)  # checks the attribute is still there
    actor._wandb = module  # noqa: SLF001


def wandb_clean_config(value: Any) -> Any:
    """A config value made loggable the way Ray's callback does it (`_clean_log`)."""
    return _private("ray.air.integrations.wandb", "_clean_log", "ray")(value)


def wandb_callback_has_actor(callback: Any, trial: Any) -> bool:
    """Whether a `WandbLoggerCallback` has started a logging actor for `trial`."""
    futures = getattr(callback, "_trial_logging_futures", None)
    if not isinstance(futures, dict):
        raise _gone("WandbLoggerCallback._trial_logging_futures", "ray")
    return trial in futures


def wandb_queue_item(kind: str) -> Any:
    """The marker of a `RESULT`, `CHECKPOINT` or `END` item on a logging actor's queue
    (`_QueueItem`); what the callback puts there, e.g. for driving an actor in a test."""
    try:
        from ray.air.integrations import wandb as ray_wandb

        return ray_wandb._QueueItem[kind]  # noqa: SLF001
    except (ImportError, AttributeError, KeyError) as exc:
        raise _gone(f"ray.air.integrations.wandb._QueueItem.{kind}", "ray", exc) from None


#: the `WandbLoggerCallback` class attribute naming its logging actor class, and the method that
#: starts an actor for a trial, `(self, trial, exclude_results, **init_kwargs)`; a subclass sets
#: and overrides them by these names.
WANDB_ACTOR_CLASS_ATTR = "_logger_actor_cls"
WANDB_START_ACTOR_METHOD = "_start_logging_actor"


# -- ray: resuming an experiment (recovery.py) ---------------------------------------------------
#
# `recovery.point_trials_at_newest` rewrites Tune's experiment snapshot so that trials resume from
# checkpoints the snapshot did not know. Tune has no public API for any of it: these functions are
# every private name it uses (the trial's checkpoint manager and the snapshot's file and encoding).


def newest_experiment_state(directory: str) -> str:
    """The path of the newest `experiment_state-*.json` snapshot in an experiment directory."""
    return _private("ray.tune.execution.experiment_state", "_find_newest_experiment_checkpoint", "ray")(directory)


def load_experiment_state(text: str) -> dict:
    """A snapshot's contents, decoded as Tune wrote them (cloudpickled values inside JSON).

    A newer Ray's `TuneFunctionDecoder` refuses the cloudpickled values unless asked, and Tune
    reads its own snapshots with the private `_loads_with_cloudpickle`; an older Ray (2.54 and
    before) has no such function, and its decoder expands them."""
    import json

    from ray.tune.utils import serialization

    loads = getattr(serialization, "_loads_with_cloudpickle", None)
    if loads is not None:
        return loads(text)
    decoder = _private("ray.tune.utils.serialization", "TuneFunctionDecoder", "ray")
    return json.loads(text, cls=decoder)


def experiment_trials(state: dict) -> list:
    """The trials of a decoded snapshot as Tune's `Trial` objects, with their run metadata
    (checkpoint manager, last result), ready to be changed and written back."""
    trial_class = _private("ray.tune.experiment.trial", "Trial", "ray")
    trials = []
    for trial_json, metadata_json in state["trial_data"]:
        trial = trial_class.from_json_state(trial_json, stub=True)
        trial.restore_run_metadata(metadata_json)
        trial.stub = False  # stub only spared loading the trainable; the rewritten state is a real trial
        trials.append(trial)
    return trials


def trial_finished(trial: Any) -> bool:
    """Whether a `Trial` of a snapshot has terminated."""
    return trial.status == _private("ray.tune.experiment.trial", "Trial", "ray").TERMINATED


def encode_experiment_state(state: dict, trials: list) -> str:
    """A snapshot with `trials` written back, encoded as Tune writes it."""
    encoder = _private("ray.tune.utils.serialization", "TuneFunctionEncoder", "ray")
    return json.dumps({**state, "trial_data": [trial.get_json_state() for trial in trials]}, cls=encoder)


def training_result(checkpoint: Any, metrics: dict) -> Any:
    """What a trial's checkpoint manager registers: a checkpoint with the result it was saved at."""
    return _private("ray.train._internal.session", "_TrainingResult", "ray")(checkpoint=checkpoint, metrics=metrics)


def checkpoint_results(manager: Any) -> list:
    """The checkpoints a trial's checkpoint manager has registered, oldest first (`_checkpoint_results`)."""
    results = getattr(manager, "_checkpoint_results", None)
    if not isinstance(results, list):
        raise _gone("the checkpoint manager's `_checkpoint_results`", "ray")
    return results


def set_checkpoint_results(manager: Any, results: list) -> None:
    """Replace what a checkpoint manager has registered."""
    checkpoint_results(manager)  # checks the attribute is still there
    manager._checkpoint_results = list(results)  # noqa: SLF001


def set_latest_checkpoint_result(manager: Any, result: Any) -> None:
    """Make `result` the checkpoint a trial resumes from (`_latest_checkpoint_result`; None: none)."""
    if not hasattr(manager, "_latest_checkpoint_result"):
        raise _gone("the checkpoint manager's `_latest_checkpoint_result`", "ray")
    manager._latest_checkpoint_result = result  # noqa: SLF001


# -- ray: Tune's variant generation (random and grid search as a Searcher, tune/searchers.py) -------


def grid_sizes(space: dict) -> list[int]:
    """The size of each `grid_search` in a Tune param_space (`variant_generator.parse_spec_vars`)."""
    import copy

    _, _, grid = _private("ray.tune.search.variant_generator", "parse_spec_vars", "ray")(copy.deepcopy(dict(space)))
    return [len(domain.categories) for _, domain in grid]


def is_tune_domain(value: Any) -> bool:
    """Whether `value` is one of Tune's search-space domains (`tune.uniform(...)` and kin: a
    `ray.tune.search.sample.Domain`)."""
    return isinstance(value, _private("ray.tune.search.sample", "Domain", "ray"))


def generate_variants(space: dict, constant_grid_search: bool, random_state: Any) -> list[dict]:
    """One pass of Tune's own variant generation over `space`: every grid point once, random
    domains drawn with `random_state`; each variant as Tune's flat {path tuple: value}."""
    import copy

    generate = _private("ray.tune.search.variant_generator", "generate_variants", "ray")
    return [
        resolved
        for resolved, _ in generate(copy.deepcopy(space), constant_grid_search=constant_grid_search, random_state=random_state)
    ]


# -- ray: the trainable, the local machine, results ----------------------------------------------

#: A class Trainable's counters (private attributes) by the result key that reports each.
TRAINABLE_COUNTERS = {"training_iteration": "_iteration", "timesteps_total": "_timesteps_total", "time_total_s": "_time_total"}


def set_trainable_progress(trainable: Any, result: dict) -> None:
    """Move a class Trainable's counters to those of `result`, as Ray's own `restore` does from a
    checkpoint's metrics (keys missing from `result` leave a counter as it is): for a trial that
    restores another checkpoint than the one Tune chose."""
    for key, attr in TRAINABLE_COUNTERS.items():
        if not hasattr(trainable, attr):
            raise _gone(f"Trainable.{attr}", "ray")
        if key in result:
            setattr(trainable, attr, result[key])


def local_ray_cpus() -> float:
    """The CPUs a local Ray started here would offer (cgroup limits included): Ray's
    `ray._private.utils.get_num_cpus`."""
    return float(_private("ray._private.utils", "get_num_cpus", "ray")())


def result_grid_defaults(results: Any) -> tuple[str | None, str | None]:
    """The metric and mode a `ResultGrid` ranks by when none is given (those of the Tuner that
    made it), from its `_experiment_analysis`: a restored Tuner's results know them, its caller
    may not."""
    analysis = getattr(results, "_experiment_analysis", None)
    if analysis is None or not hasattr(analysis, "default_metric"):
        raise _gone("ResultGrid._experiment_analysis.default_metric", "ray")
    return analysis.default_metric, analysis.default_mode


# -- ray: a class trainable's storage ------------------------------------------------------------
# A trainable's `_storage` (a StorageContext) names its trial directory on the storage path and
# the index of the checkpoint directory its next save goes to (`current_checkpoint_index`, plus
# one, which Tune adds after `save_checkpoint` returns).


def trial_storage_dir(trainable: Any) -> str | None:
    """The trial's directory on a local storage path; None outside Tune or on remote storage."""
    storage = getattr(trainable, "_storage", None)
    if storage is None:
        return None
    try:
        if storage.storage_filesystem.type_name != "local":
            return None
        return storage.trial_fs_path
    except AttributeError as exc:
        raise _gone("the trainable's StorageContext.trial_fs_path", "ray", exc) from None


def skip_used_checkpoint_dirs(trainable: Any) -> None:
    """Make the next save go to a `checkpoint_<index>` directory that does not exist yet.

    The driver counts the saves it registered and hands that count to the trial's next actor; a
    save it never registered (one of the two a synchronous PBT boundary can take) leaves it one
    short, and Tune would write the trial's next checkpoint over that save's directory, which
    PBT may have handed to an exploiting trial."""
    directory = trial_storage_dir(trainable)
    if directory is None:
        return
    import pathlib

    used = [int(p.name.split("_")[-1]) for p in pathlib.Path(directory).glob("checkpoint_*") if p.name[11:].isdigit()]
    storage = trainable._storage  # noqa: SLF001
    if not hasattr(storage, "current_checkpoint_index"):
        raise _gone("StorageContext.current_checkpoint_index", "ray")
    if used and storage.current_checkpoint_index < max(used):
        storage.current_checkpoint_index = max(used)


def original_working_dir() -> str:
    """Where the run started: Ray Tune moves each trial process into its own directory and names
    the one it came from in `TUNE_ORIG_WORKING_DIR`; outside Tune, the working directory."""
    import os

    return os.environ.get("TUNE_ORIG_WORKING_DIR") or os.getcwd()
