"""Ray Tune's private APIs outside recovery and W&B: the keys of its result box, its variant
generation, a class trainable's counters and storage, the local machine's CPUs as Ray counts
them, and a result grid's ranking defaults."""

from __future__ import annotations

from typing import Any

from ajax_tune.compat.base import gone, private

__all__ = [
    "TUNE_RESULT_KEYS_ATTR",
    "generate_variants",
    "grid_sizes",
    "is_tune_domain",
    "local_ray_cpus",
    "original_working_dir",
    "result_grid_defaults",
    "set_searcher_objective",
    "set_trainable_progress",
    "set_tune_result_keys",
    "skip_used_checkpoint_dirs",
    "trial_storage_dir",
    "tune_result_keys",
]

# -- Tune's output ---------------------------------------------------------------------------------

#: Tune reads this class attribute of a trainable (RLlib's Algorithm sets it) as the keys of the
#: box it prints when a trial ends, and tests `key in <it>` for each key of the result.
TUNE_RESULT_KEYS_ATTR = "_progress_metrics"


def tune_result_keys(trainable: type) -> Any:
    """The result keys Tune's output shows for `trainable` (None: all of them)."""
    return private("ray.tune.progress_reporter", "_detect_progress_metrics", "ray")(trainable)


def set_tune_result_keys(trainable: type, keys: Any) -> None:
    """Make Tune's output show `keys` (a collection Tune asks `key in keys`; None: every key)
    for the trials of the class `trainable`."""
    setattr(trainable, TUNE_RESULT_KEYS_ATTR, keys)


# -- Tune's variant generation (random and grid search as a Searcher, tune/searchers.py) -------------


def grid_sizes(space: dict) -> list[int]:
    """The size of each `grid_search` in a Tune param_space (`variant_generator.parse_spec_vars`)."""
    import copy

    _, _, grid = private("ray.tune.search.variant_generator", "parse_spec_vars", "ray")(copy.deepcopy(dict(space)))
    return [len(domain.categories) for _, domain in grid]


def is_tune_domain(value: Any) -> bool:
    """Whether `value` is one of Tune's search-space domains (`tune.uniform(...)` and kin: a
    `ray.tune.search.sample.Domain`)."""
    return isinstance(value, private("ray.tune.search.sample", "Domain", "ray"))


def generate_variants(space: dict, constant_grid_search: bool, random_state: Any) -> list[dict]:
    """One pass of Tune's own variant generation over `space`: every grid point once, random
    domains drawn with `random_state`; each variant as Tune's flat {path tuple: value}."""
    import copy

    generate = private("ray.tune.search.variant_generator", "generate_variants", "ray")
    return [
        resolved
        for resolved, _ in generate(copy.deepcopy(space), constant_grid_search=constant_grid_search, random_state=random_state)
    ]


def set_searcher_objective(searcher: Any, metric: str | None, mode: str | None) -> None:
    """Set the metric and mode a `Searcher` reports (its `metric` and `mode` properties), from
    its `set_search_properties`: the base class reads them from `_metric` and `_mode`, which its
    constructor sets and nothing public changes afterwards."""
    for attr in ("_metric", "_mode"):
        if not hasattr(searcher, attr):
            raise gone(f"Searcher.{attr}", "ray")
    searcher._metric, searcher._mode = metric, mode  # noqa: SLF001


# -- the trainable, the local machine, results -----------------------------------------------------

#: A class Trainable's counters (private attributes) by the result key that reports each.
TRAINABLE_COUNTERS = {"training_iteration": "_iteration", "timesteps_total": "_timesteps_total", "time_total_s": "_time_total"}


def set_trainable_progress(trainable: Any, result: dict) -> None:
    """Move a class Trainable's counters to those of `result`, as Ray's own `restore` does from a
    checkpoint's metrics (keys missing from `result` leave a counter as it is): for a trial that
    restores another checkpoint than the one Tune chose."""
    for key, attr in TRAINABLE_COUNTERS.items():
        if not hasattr(trainable, attr):
            raise gone(f"Trainable.{attr}", "ray")
        if key in result:
            setattr(trainable, attr, result[key])


def local_ray_cpus() -> float:
    """The CPUs a local Ray started here would offer (cgroup limits included): Ray's
    `ray._private.utils.get_num_cpus`."""
    return float(private("ray._private.utils", "get_num_cpus", "ray")())


def result_grid_defaults(results: Any) -> tuple[str | None, str | None]:
    """The metric and mode a `ResultGrid` ranks by when none is given (those of the Tuner that
    made it), from its `_experiment_analysis`: a restored Tuner's results know them, its caller
    may not."""
    analysis = getattr(results, "_experiment_analysis", None)
    if analysis is None or not hasattr(analysis, "default_metric"):
        raise gone("ResultGrid._experiment_analysis.default_metric", "ray")
    return analysis.default_metric, analysis.default_mode


# -- a class trainable's storage --------------------------------------------------------------------
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
        raise gone("the trainable's StorageContext.trial_fs_path", "ray", exc) from None


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
        raise gone("StorageContext.current_checkpoint_index", "ray")
    if used and storage.current_checkpoint_index < max(used):
        storage.current_checkpoint_index = max(used)


def original_working_dir() -> str:
    """Where the run started: Ray Tune moves each trial process into its own directory and names
    the one it came from in `TUNE_ORIG_WORKING_DIR`; outside Tune, the working directory."""
    import os

    return os.environ.get("TUNE_ORIG_WORKING_DIR") or os.getcwd()
