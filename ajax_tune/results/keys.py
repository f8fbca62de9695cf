"""The names of every key a result holds, declared once.

Whoever writes a key into a result (the runner, the host reduction of a call, the curriculum)
and whoever checks a name against the keys a config's results will have
(`ajax_tune.expected_keys.result_keys`) take it from here, so the two cannot drift apart. Keys that
depend on the config (per seed, per held-out task, per task field, per health part) are built by
the functions below. Only names here: this module imports nothing of the project.
"""

from __future__ import annotations

from collections.abc import Iterable

#: Where a run stands after a call (`TrainLoop.progress`).
PROGRESS_KEYS = ("env_steps", "useful_env_steps", "perf/env_steps_per_s")
#: What the runner adds around a call: its own keys and the loop's progress.
RUNNER_KEYS = ("timesteps_this_iter", *PROGRESS_KEYS, "perf/call_s", "perf/compilations", "done")

#: What an offline run (`train.dataset`) adds: its progress in gradient updates (its `env_steps`
#: stay 0: it steps no env to train).
OFFLINE_KEYS = ("gradient_steps", "perf/gradient_steps_per_s")

#: What a level algorithm (`ued`) adds: env steps spent scoring levels outside training (SFL's
#: scoring episodes; 0 for the others), since the run began, the mean over lanes.
UED_PROGRESS_KEYS = ("ued/scoring_env_steps",)

#: What Ray Tune adds to every result of a class trainable that reports `timesteps_this_iter`
#: (named here so the core can check a stop condition on them without importing Ray).
TUNE_KEYS = (
    "training_iteration",
    "timesteps_total",
    "time_this_iter_s",
    "time_total_s",
    "timestamp",
    "time_since_restore",
    "timesteps_since_restore",
    "iterations_since_restore",
)

#: The call's last evaluation (`eval/return_seed<i>` per seed besides).
EVAL_KEYS = (
    "eval/timestep",
    "eval/num_evaluations",
    "eval/return_mean",
    "eval/return_std",
    "eval/return_min",
    "eval/length_mean",
    "eval/success_rate_mean",
)
EVAL_SEED = "eval/return_seed"

#: The evaluation before the run's first update (`train.eval_at_start`): in every result, NaN
#: in all but the run's first (and in every one without the option). Its own keys, never the
#: latest evaluation's, so a metric on `eval/return_mean` ranks and schedules trials as before.
START_PREFIX = "eval/start/"
START_KEYS = (
    "eval/start/return_mean",
    "eval/start/return_std",
    "eval/start/return_min",
    "eval/start/return_max",
    "eval/start/success_rate_mean",
)

#: Training episodes and steps of the call.
TRAIN_KEYS = ("timestep", "train/episode_return_mean", "train/episode_length_mean", "train/episodes", "train/useful_steps")

#: 1.0 when any part of any seed stopped being finite; per part, where it did.
NONFINITE = "train/nonfinite"
HEALTH_PREFIX = "health/"
HEALTH_SUFFIX = "_nonfinite_at"

#: The held-out set: means over tasks and seeds, and per task `eval/heldout/<i>/<name>` (a named
#: set's tasks by their names: `eval/heldout/SixteenRooms/success_rate`).
HELDOUT_PREFIX = "eval/heldout/"
HELDOUT_NAMES = ("return", "success_rate")
#: A held-out set of more tasks than this, none of them named (many generated levels), reports its
#: means and worst tenth only: a key per task would swamp every result.
MAX_HELDOUT_TASK_KEYS = 32

#: The task evaluations ran on in the call, the task of the next call, and its level. Only fields
#: of at most `MAX_REPORTED_FIELD_SIZE` values per env are reported (a scalar, a target, a
#: position): a maze's wall grid would add one key per cell to every result.
MAX_REPORTED_FIELD_SIZE = 8
TASK_PREFIX = "curriculum/task/"
NEXT_TASK_PREFIX = "curriculum/next_task/"
LEVEL = "curriculum/level"

#: A task sampler's own keys, and the histogram of the tasks a call trained on.
SAMPLER_PREFIX = "sampler/"
HISTOGRAM_PREFIX = "tasks/"


#: A population (`population` in the trial config): its size, the member the headline keys come
#: from, and per member `member/<k>/<name>` for each of `MEMBER_METRICS` (and the selection
#: metric), and each traced setting the member follows (`member/<k>/agent/lr/peak`; a
#: schedule's kind as its index in `schedules.KINDS`).
POPULATION_KEYS = ("population/size", "population/best_member")
MEMBER_PREFIX = "member/"
MEMBER_METRICS = (
    "eval/return_mean",
    "eval/return_std",
    "eval/return_min",
    "eval/length_mean",
    "eval/success_rate_mean",
    "train/episode_return_mean",
)

#: PBT inside a trial (`population.pbt`): per member `member/<k>/parent` (the member whose state
#: it took at its last exploit; -1 before its first) and `member/<k>/exploits` (how many it took);
#: the trial's exploits so far and the programs the exploit's gather compiled (the train
#: program's own stay in `perf/compilations`).
LINEAGE = ("parent", "exploits")
PBT_KEYS = ("population/exploits", "perf/exploit_compilations")

#: Successive halving inside a trial (`population.prune`): per member `member/<k>/origin` (its
#: index in the population as configured: members are renumbered after each rung) and the rungs
#: the population has passed (each one stopped its worse members).
ORIGIN = ("origin",)
PRUNE_KEYS = ("population/rungs",)


# In a population each member's curriculum reports, under `member/<k>/`, what it would report
# in a single run of the member: the task its envs ran (`curriculum/task/*`) and the next one
# (`curriculum/next_task/*`), its level (with levels), its sampler's keys (`sampler/*`), the
# histogram of its envs' tasks (`tasks/*`) and its callbacks' own metrics; and with a held-out
# set, its means over it (`eval/heldout/return_mean`, ...). The headline's are the best member's
# (`results.member_own_keys` lists them for a config).


def member_key(member: int, name: str) -> str:
    return f"{MEMBER_PREFIX}{member}/{name}"


def member_keys(member: int, metrics: Iterable[str], settings: Iterable[str]) -> list[str]:
    return [member_key(member, name) for name in (*metrics, *settings)]


def seed_keys(num_seeds: int) -> list[str]:
    return [f"{EVAL_SEED}{i}" for i in range(num_seeds)]


def health_key(part: str) -> str:
    return f"{HEALTH_PREFIX}{part}{HEALTH_SUFFIX}"


def health_part(key: str) -> str | None:
    """The part a health key names, or None for another key."""
    if key.startswith(HEALTH_PREFIX) and key.endswith(HEALTH_SUFFIX):
        return key[len(HEALTH_PREFIX) : -len(HEALTH_SUFFIX)]
    return None


def heldout_labels(tasks: int | Iterable[str]) -> tuple[str, ...]:
    """How results name each held-out task: by index, or by the names given."""
    return tuple(str(i) for i in range(tasks)) if isinstance(tasks, int) else tuple(tasks)


def heldout_keys(tasks: int | Iterable[str]) -> list[str]:
    labels = heldout_labels(tasks)
    return heldout_mean_keys(len(labels)) + [f"{HELDOUT_PREFIX}{label}/{name}" for label in labels for name in HELDOUT_NAMES]


#: The held-out set's robustness: the mean over its worst tenth of tasks (at least one), each task
#: first averaged over seeds (`eval/heldout/success_rate_worst10`): over many generated levels, the
#: figure a search for a robust agent optimises.
WORST_SUFFIX = "_worst10"
WORST_SHARE = 0.1


#: The held-out set's CVaR (`heldout.cvar`): the mean over its worst share of tasks, chosen on one
#: set of episodes and scored on an independent second one (SFL's protocol), per seed then averaged.
CVAR_SUFFIX = "_cvar"


def cvar_suffix(share: float) -> str:
    """`_cvar10` for a share of 0.1 (`heldout.cvar` is a whole percentage)."""
    return f"{CVAR_SUFFIX}{round(100 * share)}"


def heldout_mean_keys(num_tasks: int, cvar: float | None = None) -> list[str]:
    """The held-out set's means over tasks and seeds, over its worst tenth of tasks and, with
    `heldout.cvar`, its CVaR (in a population, each member's too)."""
    if not num_tasks:
        return []
    suffixes = ("_mean", WORST_SUFFIX, *(() if cvar is None else (cvar_suffix(cvar),)))
    return [f"{HELDOUT_PREFIX}{name}{suffix}" for suffix in suffixes for name in HELDOUT_NAMES]


def start_heldout_keys(num_tasks: int) -> list[str]:
    """The held-out set's means at the start (no per-task keys)."""
    return [f"{START_PREFIX}heldout/{name}_mean" for name in HELDOUT_NAMES] if num_tasks else []


def start_key(key: str) -> str | None:
    """The start evaluation's counterpart of an evaluation key (`eval/return_mean` ->
    `eval/start/return_mean`), or None for a key that is no evaluation's."""
    if not key.startswith("eval/") or key.startswith(START_PREFIX):
        return None
    return START_PREFIX + key[len("eval/") :]


def field_size(shape: Iterable[int]) -> int:
    size = 1
    for n in shape:
        size *= n
    return size


def is_reported_field(shape: Iterable[int]) -> bool:
    """Whether a task field of this (per-env) shape appears in results."""
    return field_size(shape) <= MAX_REPORTED_FIELD_SIZE


def task_field_keys(shapes: dict[str, tuple[int, ...]]) -> list[str]:
    """A task's reported fields as result keys (without prefix): a scalar field by its name, an
    array field one key per element (`target_0`, `target_1`, ...); a field of more than
    `MAX_REPORTED_FIELD_SIZE` values has none."""
    names = []
    for name, shape in shapes.items():
        if is_reported_field(shape):
            names += [name] if not shape else [f"{name}_{i}" for i in range(field_size(shape))]
    return names


def prefixed(prefix: str, names: Iterable[str]) -> list[str]:
    return [f"{prefix}{name}" for name in names]
