"""A population: members of one trial that share every static setting, trained as lanes of one
compiled program (lanes = members x seeds, members-major: lane = member * num_seeds + seed).

The trial config's `population` section lists its members, each an override of the trial config
(`{members: [{agent: {lr: {peak: 1e-3}}}, {agent: {ent_coef: 0.0}}]}`), or asks for `size` seeded
draws from a search space written in the experiment's syntax (`{size: 8, space: {agent: {lr:
{peak: {loguniform: [1e-4, 3e-3]}}}}, seed: 0}`). A member may change traced settings (the
agent's, `train.total_timesteps`) and `train.seed`; anything else is the population's, and a
member that changes it is refused by name before anything is built. Each member's seeds are the
seeds a single run of its config would use, so a member trains as that run would.

Results carry every member's metrics and settings under `member/<k>/...`; the trial's headline
keys are those of the best member by `select` (or the mean over members, `headline: mean`).

Curricula run per member: the trial's env_task_fn, callbacks and task sampler are built once for
each member, and each sees only its member's results and envs (`Runner.curricula`); what each
reports goes under `member/<k>/` as well (`member_results`), with the member's held-out means.

This module knows configs only through the values it is given: `config.py` parses the section
with it, `runner.py` reduces a call's output with it.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import jax
import numpy as np

from ajax_tune import keys as K
from ajax_tune.errors import ConfigError
from ajax_tune.fields import check_keys, field_kind
from ajax_tune.schedules import KINDS, Schedule
from ajax_tune.spaces import DESCEND, Domain, map_spaces, parse_spaces

SECTION_KEYS = ("members", "size", "space", "seed", "select", "headline")
SELECT_MODES = ("max", "min")
HEADLINES = ("best", "mean")
#: Sections of the trial config a member may write in its override, and the one setting of
#: them that is neither traced nor static but may still differ: each member's own seed.
MEMBER_SECTIONS = ("agent", "train")
PER_MEMBER_INIT = ("train.seed",)
CURRICULUM_PARTS = ("env_task_fn", "callbacks", "task_sampler")


@dataclasses.dataclass(frozen=True)
class Population:
    """The parsed section: each member's override (draws resolved) and its config."""

    overrides: tuple[dict, ...]
    members: tuple[Any, ...]  # one trial Config per member, without a population
    metric: str = "eval/return_mean"
    mode: str = "max"
    headline: str = "best"

    @property
    def size(self) -> int:
        return len(self.members)

    def to_dict(self) -> dict:
        """What `parse` reads back to the same members (draws written out as members)."""
        return {
            "members": copy.deepcopy(list(self.overrides)),
            "select": {"metric": self.metric, "mode": self.mode},
            "headline": self.headline,
        }

    @classmethod
    def parse(cls, section: Any, base, make_member: Callable[[dict, str], Any], curriculum: Mapping[str, Any]) -> Population:
        """`base` is the trial config without the population; `make_member(override, where)`
        builds a member's config from it; `curriculum` holds the trial's curriculum parts (each
        member runs its own copy of them, built with the run)."""
        if not isinstance(section, Mapping):
            raise ConfigError(f"population must be a mapping with keys {list(SECTION_KEYS)}, got {section!r}")
        check_keys(section, SECTION_KEYS, "population.")
        overrides = _overrides(section)
        if not overrides:
            raise ConfigError("population must have at least one member, got 0 (population.size or population.members)")
        members = []
        for i, override in enumerate(overrides):
            where = f"population.members[{i}]"
            member = make_member(override, where)
            check_member(base, member, where)
            members.append(member)
        select = section.get("select") or {}
        if not isinstance(select, Mapping):
            raise ConfigError(f"population.select must be a mapping {{metric: ..., mode: max|min}}, got {select!r}")
        check_keys(select, ("metric", "mode"), "population.select.")
        metric, mode = select.get("metric", "eval/return_mean"), select.get("mode", "max")
        if not isinstance(metric, str) or not metric:
            raise ConfigError(f"population.select.metric must be a result key, got {metric!r}")
        if mode not in SELECT_MODES:
            raise ConfigError(f"population.select.mode must be one of {list(SELECT_MODES)}, got {mode!r}")
        headline = section.get("headline", "best")
        if headline not in HEADLINES:
            raise ConfigError(f"population.headline must be one of {list(HEADLINES)}, got {headline!r}")
        return cls(tuple(overrides), tuple(members), metric, mode, headline)


def _overrides(section: Mapping) -> list[dict]:
    """Each member's override: the listed ones, or `size` draws of `space` seeded by `seed`."""
    if "members" in section:
        extra = sorted({"size", "space", "seed"} & set(section))
        if extra:
            raise ConfigError(f"population: give members or size (with space and seed), not both; got members and {extra}")
        members = section["members"]
        if not isinstance(members, (list, tuple)):
            raise ConfigError(f"population.members must be a list of overrides of the trial config, got {members!r}")
        for i, override in enumerate(members):
            if not isinstance(override, Mapping):
                raise ConfigError(
                    f"population.members[{i}] must be a mapping (an override of the trial config), got {override!r}"
                )
        return [copy.deepcopy(dict(m)) for m in members]
    if "size" not in section:
        raise ConfigError("population needs members (a list of overrides) or size (with an optional space and seed)")
    size, seed = section["size"], section.get("seed", 0)
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise ConfigError(f"population.size must be a whole number of members, got {size!r}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ConfigError(f"population.seed must be an integer >= 0, got {seed!r}")
    space = section.get("space") or {}
    if not isinstance(space, Mapping):
        raise ConfigError(f"population.space must be a mapping shaped like the trial config, got {space!r}")
    space = parse_spaces(copy.deepcopy(dict(space)), "population.space")
    rng = np.random.default_rng(seed)
    return [draw(space, rng) for _ in range(size)]


def draw(space: Any, rng: np.random.Generator) -> Any:
    """One sample of every domain in `space`, in the order they are written."""

    def one(node, where):
        return draw_domain(node, rng, where) if isinstance(node, Domain) else DESCEND

    return map_spaces(space, one, "population.space")


def draw_domain(domain: Domain, rng: np.random.Generator, where: str) -> Any:
    """A value of `domain` as Tune would draw it (randint's upper bound excluded)."""
    kind, args = domain.kind, domain.args
    if kind == "grid":
        raise ConfigError(f"{where}: {{grid: ...}} is not a draw; list the members instead (population.members)")
    if kind == "choice":
        return copy.deepcopy(args[int(rng.integers(len(args)))])
    if kind == "randint":
        return int(rng.integers(args[0], args[1]))
    low, high = float(args[0]), float(args[1])
    log = "log" in kind
    value = math.exp(rng.uniform(math.log(low), math.log(high))) if log else float(rng.uniform(low, high))
    if kind.startswith("q"):
        q = float(args[2])
        value = round(value / q) * q
    return float(value)


def merge(base: Mapping, override: Mapping) -> dict:
    """`base` with `override` written over it, mappings merged key by key."""
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def check_member(base, member, where: str) -> None:
    """Refuse a member that differs from the population in anything but traced settings and its
    seed, naming the first such setting."""
    if member.agent_name != base.agent_name:
        raise ConfigError(
            f"{where} changes agent.name ({base.agent_name!r} -> {member.agent_name!r}), a static setting: "
            f"members share every static setting and differ only in traced ones"
        )
    for section in MEMBER_SECTIONS:
        ours, theirs = getattr(base, section), getattr(member, section)
        for f in dataclasses.fields(ours):
            name = f"{section}.{f.name}"
            old, new = getattr(ours, f.name), getattr(theirs, f.name)
            if old == new or field_kind(f) == "traced" or name in PER_MEMBER_INIT:
                continue
            what = "a static setting" if field_kind(f) == "static" else "a setting read once per trial"
            raise ConfigError(
                f"{where} changes {name} ({old!r} -> {new!r}), {what}: members share every static setting "
                f"and differ only in traced ones (and train.seed)"
            )


def setting_values(member) -> dict[str, float]:
    """The traced settings a member follows, as plain floats under `agent/<field>` (a schedule
    as `agent/<field>/<part>`, its kind as an index of `schedules.KINDS`) and
    `train/total_timesteps`."""
    out = {}
    for section in MEMBER_SECTIONS:
        config = getattr(member, section)
        for f in dataclasses.fields(config):
            if field_kind(f) != "traced":
                continue
            value = getattr(config, f.name)
            if isinstance(value, Schedule):
                for part in dataclasses.fields(value):
                    v = getattr(value, part.name)
                    out[f"{section}/{f.name}/{part.name}"] = float(KINDS.index(v) if part.name == "kind" else v)
            elif isinstance(value, (int, float)) and not isinstance(value, bool):
                out[f"{section}/{f.name}"] = float(value)
    return out


def member_metrics(metric: str) -> tuple[str, ...]:
    """The metrics each member reports under `member/<k>/`: the declared ones and the one
    members are selected by."""
    return K.MEMBER_METRICS if metric in K.MEMBER_METRICS else (*K.MEMBER_METRICS, metric)


def population_keys(population: Population) -> list[str]:
    """Every key a population adds to a result."""
    metrics = member_metrics(population.metric)
    out = list(K.POPULATION_KEYS)
    for k, member in enumerate(population.members):
        out += K.member_keys(k, metrics, setting_values(member))
    return out


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


def reduce(population: Population, results: Sequence[Mapping[str, float]]) -> tuple[dict[str, float], int]:
    """The trial's result from each member's, and the best member: the headline keys (the best
    member's, or each key's mean over members), the population's keys and every member's."""
    best = best_member(results, population.metric, population.mode)
    if population.headline == "best":
        result = dict(results[best])
    else:
        result = {key: _nanmean([r[key] for r in results]) for key in results[0]}
    result[K.POPULATION_KEYS[0]] = float(population.size)
    result[K.POPULATION_KEYS[1]] = float(best)
    metrics = member_metrics(population.metric)
    for k, (member, member_result) in enumerate(zip(population.members, results, strict=True)):
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
