"""The keys a config's results will hold, known before anything compiles, and the check of a
metric named against them.

A curriculum, `tune.metric`, a stop condition or a checkpoint score may name a result key; a
name that no result has would make a trial wait for ever, or fail inside it after compiling.
`result_keys(config)` lists every key `Runner.train` reports for `config` (the same keys every
iteration) from the vocabulary in `ajax_tune.results.keys` and the start of the trial's run
(`build.build_run`): no row is faked and nothing compiles. The agent's own metrics come from its
`metric_keys` where it declares them; otherwise its update is traced once (`jax.eval_shape`, no
compilation) to learn them.
`check_metric(metric, keys, who)` refuses a name outside them, suggesting the nearest key.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection, Mapping

import jax
import jax.numpy as jnp

from ajax_tune.build import RunStart, build_loop, build_run
from ajax_tune.config import Config
from ajax_tune.errors import ConfigError
from ajax_tune.loop import TrainLoop
from ajax_tune.loop.summary import LOOP_ROWS, summary_keys
from ajax_tune.loop.ued import AGENT_UPDATES
from ajax_tune.population.results import population_keys
from ajax_tune.results import keys as K
from ajax_tune.ued import row_keys as ued_row_keys


def result_keys(config: Mapping | Config, *, tune: bool = False) -> frozenset[str]:
    """Every key `Runner.train` reports for `config`; with `tune`, also those Ray Tune adds to
    each result of a trial (`training_iteration`, `time_total_s`, ...)."""
    cfg = Config.from_dict(config)
    env, loop = build_loop(cfg)
    keys = keys_of(cfg, loop, build_run(cfg, env))
    return keys | frozenset(K.TUNE_KEYS) if tune else keys


def keys_of(cfg: Config, loop: TrainLoop, start: RunStart) -> frozenset[str]:
    """The result keys of a run that starts from `start` (with a population, the headline keys,
    which are one member's, and the population's own)."""
    keys = member_keys_of(cfg, loop, start)
    if cfg.population is not None:
        keys |= frozenset(population_keys(cfg.population))
        own = member_own_keys(loop, start)
        keys |= frozenset(K.member_key(k, name) for k in range(cfg.num_members) for name in own)
    return keys


def member_keys_of(cfg: Config, loop: TrainLoop, start: RunStart) -> frozenset[str]:
    """The keys of one member's result: those of a single run of its config."""
    metrics, health = agent_keys(loop)
    metrics = [*metrics, *((*ued_row_keys(cfg.ued)[0], AGENT_UPDATES) if cfg.ued is not None else ())]
    shapes = {k: tuple(v.shape) for k, v in start.start_task.items()}
    keys = {
        *K.RUNNER_KEYS,
        *loop.progress_keys(),
        *summary_keys(cfg.train.num_seeds, loop.heldout_names or loop.num_heldout, shapes, metrics, health, loop.heldout_cvar),
        *curriculum_keys(start),
    }
    return frozenset(keys)


def member_own_keys(loop: TrainLoop, start: RunStart) -> frozenset[str]:
    """What each member of a population reports under `member/<k>/` besides
    `population.member_metrics`: its curriculum's keys and its held-out means."""
    return curriculum_keys(start) | frozenset(K.heldout_mean_keys(loop.num_heldout, loop.heldout_cvar))


def curriculum_keys(start: RunStart) -> frozenset[str]:
    """The keys one member's curriculum reports (with a population, under `member/<k>/` too;
    every member's is built from the same specs): the task the call ran and the next one, the
    level, the sampler's keys, the histogram of tasks, the callbacks' own metrics."""
    parts = start.members[0]
    fields = K.task_field_keys({k: tuple(v.shape) for k, v in start.start_task.items()})
    keys = {*K.prefixed(K.TASK_PREFIX, fields), *K.prefixed(K.NEXT_TASK_PREFIX, fields)}
    if start.levels is not None:
        keys.add(K.LEVEL)
    if parts.sampler is not None:
        keys |= set(parts.sampler.metrics())
    if start.histogram is not None:
        keys |= set(start.histogram.keys())
    for cb in parts.callbacks:
        method = getattr(cb, "metrics", None)
        if callable(method):
            keys |= set(method())
    return frozenset(keys)


def agent_keys(loop: TrainLoop) -> tuple[list[str], list[str]]:
    """The agent's metric names and the parts its health reports, traced but never compiled."""
    agent = loop.agent
    declared = getattr(agent, "metric_keys", None)
    if declared is None:  # learn them from one traced call
        _, out = jax.eval_shape(loop.call, loop.abstract_state())
        return sorted(k for k in out.rows if not k.startswith(LOOP_ROWS)), sorted(out.health)
    one_seed = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape[1:], x.dtype), loop.abstract_state().agent)
    metrics = {k: jax.ShapeDtypeStruct((), jnp.float32) for k in declared}
    return list(declared), sorted(jax.eval_shape(agent.health, one_seed, metrics))


def check_metric(metric: str, keys: Collection[str], who: str) -> None:
    """Refuse a metric that no result has: one line naming who asked for it, the nearest key
    and the main keys results report."""
    if metric in keys:
        return
    close = difflib.get_close_matches(metric, sorted(keys), n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    evals = ", ".join(sorted(k for k in keys if k.startswith("eval/") and "seed" not in k and "/heldout/" not in k))
    raise ConfigError(
        f"{who}: metric {metric!r} is not in any result; {hint}results report {evals}, "
        f"loss/*, train/*, curriculum/*, lr, env_steps"
    )
