"""A population's results: a call's output split by member, each member's result reduced into
the trial's, under the keys `results.keys` declares (`member/<k>/...`, the population's own).

The trial's headline keys are those of the best member by `select` (or each key's mean over
members, `headline: mean`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import numpy as np

from ajax_tune.population.spec import Population, setting_values
from ajax_tune.results import keys as K


def member_metrics(metric: str) -> tuple[str, ...]:
    """The metrics each member reports under `member/<k>/`: the declared ones and the one
    members are selected by."""
    return K.MEMBER_METRICS if metric in K.MEMBER_METRICS else (*K.MEMBER_METRICS, metric)


def population_keys(population: Population) -> list[str]:
    """Every key a population adds to a result."""
    metrics = member_metrics(population.metric)
    out = list(K.POPULATION_KEYS)
    lineage = K.LINEAGE if population.pbt is not None else K.ORIGIN if population.prune is not None else ()
    for k, member in enumerate(population.members):
        out += K.member_keys(k, (*metrics, *lineage), setting_values(member))
    out += K.PBT_KEYS if population.pbt is not None else ()
    return out + list(K.PRUNE_KEYS if population.prune is not None else ())


def split(out: Any, num_members: int) -> list[Any]:
    """A call's output (leading axis lanes, on the host) as one output per member."""
    return [
        jax.tree.map(lambda x, m=m: np.asarray(x).reshape(num_members, -1, *np.shape(x)[1:])[m], out) for m in range(num_members)
    ]


def best_member(results: Sequence[Mapping[str, float]], metric: str, mode: str) -> int:
    """The member whose `metric` is best (NaN counts as worst; member 0 when none has one)."""
    values = np.array([float(r.get(metric, math.nan)) for r in results], np.float64)
    if np.all(np.isnan(values)):
        return 0
    return int(np.nanargmax(values) if mode == "max" else np.nanargmin(values))


def reduce(
    population: Population, results: Sequence[Mapping[str, float]], members: Sequence[Any] | None = None
) -> tuple[dict[str, float], int]:
    """The trial's result from each member's, and the best member: the headline keys (the best
    member's, or each key's mean over members), the population's keys and every member's
    (its settings those of `members`, by default the population's own: PBT explores them)."""
    best = best_member(results, population.metric, population.mode)
    if population.headline == "best":
        result = dict(results[best])
    else:
        result = {key: _nanmean([r[key] for r in results]) for key in results[0]}
    result[K.POPULATION_KEYS[0]] = float(population.size)
    result[K.POPULATION_KEYS[1]] = float(best)
    metrics = member_metrics(population.metric)
    for k, (member, member_result) in enumerate(zip(members or population.members, results, strict=True)):
        for name in metrics:
            result[K.member_key(k, name)] = float(member_result.get(name, math.nan))
        for name, value in setting_values(member).items():
            result[K.member_key(k, name)] = value
    return result, best


def member_results(
    population: Population, result: dict[str, float], results: Sequence[Mapping[str, float]], names: Sequence[str], best: int
) -> None:
    """Keys of each member's own result that depend on the run (`names`: its curriculum's, its
    held-out means) into the trial's `result`, in place: under `member/<k>/<name>`, and as the
    headline (the best member's, or the mean over members with `headline: mean`)."""
    for name in names:
        values = [float(r.get(name, math.nan)) for r in results]
        for k, value in enumerate(values):
            result[K.member_key(k, name)] = value
        result[name] = values[best] if population.headline == "best" else _nanmean(values)


def _nanmean(values) -> float:
    x = np.asarray(values, np.float64)
    return float(np.mean(x[~np.isnan(x)])) if np.any(~np.isnan(x)) else math.nan
