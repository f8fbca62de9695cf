"""A population: members of one trial that share every static setting, trained as lanes of one
compiled program (lanes = members x seeds, members-major: lane = member * num_seeds + seed).

The trial config's `population` section lists its members, each an override of the trial config
(`{members: [{agent: {lr: {peak: 1e-3}}}, {agent: {ent_coef: 0.0}}]}`), or asks for `size` seeded
draws from a search space written in the experiment's syntax (`{size: 8, space: {agent: {lr:
{peak: {loguniform: [1e-4, 3e-3]}}}}, seed: 0}`); `draw: stratified` spreads those draws so that they
cover the space (each number's range cut into `size` equal strata, in log space for a log
domain, one member per stratum, the strata paired across settings at random: a Latin
hypercube; a choice's options taken in turn). A member may change traced settings (the
agent's, `train.total_timesteps`) and `train.seed`; anything else is the population's, and a
member that changes it is refused by name before anything is built. Each member's seeds are the
seeds a single run of its config would use, so a member trains as that run would.

Results carry every member's metrics and settings under `member/<k>/...`; the trial's headline
keys are those of the best member by `select` (or the mean over members, `headline: mean`).

A `pbt` subsection runs population-based training inside the trial: every `interval` calls the
worst members take a copy of a better member's whole state and explored traced settings
(`population_pbt.py`; parsed here, as `PBT`). A `prune` subsection stops the worst members
instead, successive halving inside the trial, so that the survivors train on the lanes' time
(`population/prune.py`; parsed here, as `Prune`).

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

import numpy as np

from ajax_tune.errors import ConfigError
from ajax_tune.fields import check_keys, field_kind
from ajax_tune.imports import did_you_mean
from ajax_tune.schedules import KINDS, Schedule
from ajax_tune.spaces import DESCEND, Domain, map_spaces, parse_spaces

SECTION_KEYS = ("members", "size", "space", "seed", "draw", "select", "headline", "pbt", "prune")
#: How `size` members are drawn from `space`: independently, or stratified so they cover it.
DRAWS = ("random", "stratified")
PBT_KEYS = ("interval", "quantile", "mutations", "resample_probability", "perturbation_factors", "seed")
PRUNE_KEYS = ("grace_period", "reduction_factor", "min_members")
#: Distributions a number may be resampled from (and perturbed within); `choice` is a list.
NUMBER_DOMAINS = ("uniform", "loguniform", "quniform", "qloguniform", "randint")
SELECT_MODES = ("max", "min")
HEADLINES = ("best", "mean")
#: Sections of the trial config a member may write in its override, and the one setting of
#: them that is neither traced nor static but may still differ: each member's own seed.
MEMBER_SECTIONS = ("agent", "train", "ued")
PER_MEMBER_INIT = ("train.seed",)
#: Sections whose traced settings PBT inside a trial may explore.
MUTABLE_SECTIONS = ("agent", "ued")
CURRICULUM_PARTS = ("env_task_fn", "callbacks", "task_sampler")


@dataclasses.dataclass(frozen=True)
class Population:
    """The parsed section: each member's override (draws resolved) and its config."""

    overrides: tuple[dict, ...]
    members: tuple[Any, ...]  # one trial Config per member, without a population
    metric: str = "eval/return_mean"
    mode: str = "max"
    headline: str = "best"
    pbt: PBT | None = None
    prune: Prune | None = None

    @property
    def size(self) -> int:
        return len(self.members)

    def restricted(self, members: Sequence[int]) -> Population:
        """The same population holding only `members` (indices into this one, in their order)."""
        return dataclasses.replace(
            self, overrides=tuple(self.overrides[k] for k in members), members=tuple(self.members[k] for k in members)
        )

    def to_dict(self) -> dict:
        """What `parse` reads back to the same members (draws written out as members)."""
        out = {
            "members": copy.deepcopy(list(self.overrides)),
            "select": {"metric": self.metric, "mode": self.mode},
            "headline": self.headline,
        }
        if self.pbt is not None:
            out["pbt"] = copy.deepcopy(self.pbt.section)
        if self.prune is not None:
            out["prune"] = self.prune.to_dict()
        return out

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
        pbt = None if section.get("pbt") is None else PBT.parse(section["pbt"], base, make_member, len(members))
        prune = None if section.get("prune") is None else Prune.parse(section["prune"], len(members))
        if pbt is not None and prune is not None:
            raise ConfigError(
                "population: give pbt or prune, not both (pbt keeps every lane busy with copies of the better "
                "members; prune stops the worse members so that the rest train faster)"
            )
        return cls(tuple(overrides), tuple(members), metric, mode, headline, pbt, prune)


@dataclasses.dataclass(frozen=True)
class Mutation:
    """One traced setting PBT explores: `path` names it in the trial config (`("agent", "lr",
    "peak")` for a schedule's part); `choices` (a list: a step to a neighbour, or a resample) or
    `domain` (a number: perturbed by a factor and kept inside the domain's bounds, or resampled)."""

    path: tuple[str, ...]
    choices: tuple | None = None
    domain: Domain | None = None

    @property
    def name(self) -> str:
        return ".".join(self.path)


@dataclasses.dataclass(frozen=True)
class PBT:
    """`population.pbt`: population-based training between the members of one trial.

    `interval` counts calls of `train()` (a call is `train.timesteps_per_iteration` env steps
    per seed): after every `interval`-th call, the bottom `quantile` of members (by `select`)
    take the state of a member of the top `quantile` and explore its traced settings."""

    section: dict  # as written, for `to_dict`
    mutations: tuple[Mutation, ...]
    interval: int = 1
    quantile: float = 0.25
    resample_probability: float = 0.25
    perturbation_factors: tuple[float, ...] = (0.8, 1.2)
    seed: int = 0

    @classmethod
    def parse(cls, section: Any, base, make_member: Callable[[dict, str], Any], size: int) -> PBT:
        where = "population.pbt"
        if not isinstance(section, Mapping):
            raise ConfigError(f"{where} must be a mapping with keys {list(PBT_KEYS)}, got {section!r}")
        check_keys(section, PBT_KEYS, f"{where}.")
        if size < 2:
            raise ConfigError(f"{where} needs a population of at least 2 members to exploit, got {size}")
        interval, seed = section.get("interval", 1), section.get("seed", 0)
        if isinstance(interval, bool) or not isinstance(interval, int) or interval < 1:
            raise ConfigError(f"{where}.interval must be a whole number of calls >= 1, got {interval!r}")
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ConfigError(f"{where}.seed must be an integer >= 0, got {seed!r}")
        quantile = section.get("quantile", 0.25)
        if not _is_number(quantile) or not 0.0 < quantile <= 0.5:
            raise ConfigError(f"{where}.quantile must be a number in (0, 0.5], got {quantile!r}")
        resample = section.get("resample_probability", 0.25)
        if not _is_number(resample) or not 0.0 <= resample <= 1.0:
            raise ConfigError(f"{where}.resample_probability must be a number in [0, 1], got {resample!r}")
        factors = section.get("perturbation_factors", [0.8, 1.2])
        if not isinstance(factors, (list, tuple)) or not factors or not all(_is_number(f) and f > 0 for f in factors):
            raise ConfigError(f"{where}.perturbation_factors must be a non-empty list of positive numbers, got {factors!r}")
        mutations = section.get("mutations")
        if not isinstance(mutations, Mapping) or not mutations:
            raise ConfigError(
                f"{where}.mutations must name at least one traced setting, shaped like the trial config "
                f"({{agent: {{lr: {{peak: {{loguniform: [1e-4, 1e-2]}}}}}}}}), got {mutations!r}"
            )
        parsed = _mutations(parse_spaces(copy.deepcopy(dict(mutations)), f"{where}.mutations"), base, make_member)
        return cls(
            copy.deepcopy(dict(section)),
            tuple(parsed),
            interval,
            float(quantile),
            float(resample),
            tuple(float(f) for f in factors),
            seed,
        )


@dataclasses.dataclass(frozen=True)
class Prune:
    """`population.prune`: successive halving between the members of one trial.

    Rung i ends after `grace_period * (1 + f + ... + f**i)` calls (f the `reduction_factor`), so
    that each rung trains about as many env steps in all as the first: at the end of a rung the
    best `ceil(size / f)` members by `select` go on (never fewer than `min_members`) and the
    others stop; the program is rebuilt for the survivors' lanes, one compilation per size."""

    grace_period: int = 1
    reduction_factor: int = 2
    min_members: int = 1

    @classmethod
    def parse(cls, section: Any, size: int) -> Prune:
        where = "population.prune"
        if not isinstance(section, Mapping):
            raise ConfigError(f"{where} must be a mapping with keys {list(PRUNE_KEYS)}, got {section!r}")
        check_keys(section, PRUNE_KEYS, f"{where}.")
        values = {name: section.get(name, getattr(cls, name)) for name in PRUNE_KEYS}
        least = {"grace_period": 1, "reduction_factor": 2, "min_members": 1}
        what = {"grace_period": " of calls", "reduction_factor": "", "min_members": " of members"}
        for name, value in values.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < least[name]:
                raise ConfigError(f"{where}.{name} must be a whole number{what[name]} >= {least[name]}, got {value!r}")
        if values["min_members"] >= size:
            raise ConfigError(
                f"{where}.min_members must be below the population's size ({size}) or nothing is ever stopped, "
                f"got {values['min_members']}"
            )
        return cls(**values)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def rung_end(self, rung: int) -> int:
        """The call that ends rung `rung` (0: the first)."""
        f = self.reduction_factor
        return self.grace_period * (f ** (rung + 1) - 1) // (f - 1)

    def keep(self, size: int) -> int:
        """How many of `size` members go on past a rung."""
        return min(size, max(self.min_members, math.ceil(size / self.reduction_factor)))


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _mutations(tree: Mapping, base, make_member) -> list[Mutation]:
    """Each leaf of `population.pbt.mutations` (a list or a distribution) as a `Mutation`,
    checked against the trial config: a traced setting of the agent, every value it may take valid."""
    found: list[Mutation] = []

    def walk(node, path):
        if isinstance(node, (Domain, list)):
            found.append(_mutation(path, node, base, make_member))
        elif isinstance(node, Mapping) and node:
            for key, value in node.items():
                walk(value, (*path, str(key)))
        else:
            raise ConfigError(
                f"population.pbt.mutations.{'.'.join(path)} must be a list of values or a distribution "
                f"({{uniform: [lo, hi]}}, {{loguniform: [lo, hi]}}, ...), got {node!r}"
            )

    walk(tree, ())
    return found


def _mutation(path: tuple[str, ...], node, base, make_member) -> Mutation:
    where = "population.pbt.mutations." + ".".join(path)
    section = path[0]
    if section not in MUTABLE_SECTIONS or len(path) < 2 or getattr(base, section) is None:
        raise ConfigError(
            f"{where}: PBT inside a trial mutates traced settings of the agent (agent.<name>) or of the trial's "
            f"level algorithm (ued.<name>) only"
        )
    traced = [f.name for f in dataclasses.fields(getattr(base, section)) if field_kind(f) == "traced"]
    names = {f.name: f for f in dataclasses.fields(getattr(base, section))}
    field = path[1]
    if field not in names:
        raise ConfigError(
            f"{where}: {section} has no setting {field!r}{did_you_mean(field, traced)} (traced: {', '.join(traced)})"
        )
    if field_kind(names[field]) != "traced":
        raise ConfigError(
            f"{where}: {section}.{field} is not traced (changing it would recompile); PBT inside a trial mutates "
            f"traced settings: {', '.join(traced)}"
        )
    current = getattr(getattr(base, section), field)
    parts = [f.name for f in dataclasses.fields(Schedule)] if isinstance(current, Schedule) else []
    if parts and (len(path) != 3 or path[2] not in parts):
        raise ConfigError(
            f"{where}: {section}.{field} is a schedule; mutate its parts, one of {section}.{field}.{{{', '.join(parts)}}}"
        )
    if not parts and len(path) != 2:
        raise ConfigError(f"{where}: {section}.{field} is a number, it has no part {'.'.join(path[2:])!r}")
    if isinstance(node, Domain) and node.kind == "grid":
        raise ConfigError(f"{where}: {{grid: ...}} is not something to explore; give a list or a distribution")
    choices = tuple(node) if isinstance(node, list) else (node.args if node.kind == "choice" else None)
    categorical = parts and path[2] == "kind"
    if choices is not None:
        if not choices:
            raise ConfigError(f"{where} must list at least one value, got []")
        candidates = choices
    elif categorical:
        raise ConfigError(
            f"{where}: a schedule's kind is explored from a list of kinds ({list(KINDS)}), got {{{node.kind}: ...}}"
        )
    else:
        low, high = node.args[0], node.args[1]
        candidates = (low, high - 1) if node.kind == "randint" else (low, high)
    for value in candidates:
        if categorical and value not in KINDS:
            raise ConfigError(f"{where}: {value!r} is not a schedule kind; kinds: {list(KINDS)}")
        if not categorical and not _is_number(value):
            raise ConfigError(f"{where}: {section}.{'.'.join(path[1:])} is a number, got {value!r}")
        make_member(setting_override(base, path, value), where)
    return Mutation(path, choices=choices, domain=None if choices is not None else node)


def setting_value(member, path: tuple[str, ...]) -> Any:
    """The value of the traced setting at `path` in a member's config."""
    value = getattr(getattr(member, path[0]), path[1])
    return getattr(value, path[2]) if len(path) == 3 else value


def setting_override(member, path: tuple[str, ...], value: Any, override: Mapping | None = None) -> dict:
    """`override` (a member's) with the setting at `path` set to `value`: a schedule's part is
    written with the rest of that member's schedule, so the other parts stay what they were."""
    out = copy.deepcopy(dict(override or {}))
    section = dict(out.get(path[0], {}))
    if len(path) == 3:
        current = section.get(path[1])  # a part written earlier into this override wins over the member's
        own = dataclasses.asdict(getattr(getattr(member, path[0]), path[1]))
        section[path[1]] = {**own, **(current if isinstance(current, Mapping) else {}), path[2]: value}
    else:
        section[path[1]] = value
    out[path[0]] = section
    return out


def _overrides(section: Mapping) -> list[dict]:
    """Each member's override: the listed ones, or `size` draws of `space` seeded by `seed`."""
    if "members" in section:
        extra = sorted({"size", "space", "seed", "draw"} & set(section))
        if extra:
            raise ConfigError(f"population: give members or size (with space, seed and draw), not both; got members and {extra}")
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
    how = section.get("draw", "random")
    if how not in DRAWS:
        raise ConfigError(f"population.draw must be one of {list(DRAWS)}, got {how!r}{did_you_mean(str(how), DRAWS)}")
    space = parse_spaces(copy.deepcopy(dict(space)), "population.space")
    rng = np.random.default_rng(seed)
    if how == "stratified":
        return draw_stratified(space, rng, size)
    return [draw(space, rng) for _ in range(size)]


def draw(space: Any, rng: np.random.Generator) -> Any:
    """One sample of every domain in `space`, in the order they are written."""

    def one(node, where):
        return draw_domain(node, rng, where) if isinstance(node, Domain) else DESCEND

    return map_spaces(space, one, "population.space")


def draw_stratified(space: Any, rng: np.random.Generator, size: int) -> list[Any]:
    """`size` samples of `space` that cover it: per domain, one value from each of `size` equal
    strata of its range (log range for a log domain), the strata given to members in a random
    order of their own (a Latin hypercube over the domains); a choice's options in turn (each
    taken `size // len(options)` or one more times), in a random order."""
    columns: list[_Column] = []

    def column(node, where):
        if not isinstance(node, Domain):
            return DESCEND
        columns.append(_Column(_stratified_column(node, rng, size, where)))
        return columns[-1]

    laid_out = map_spaces(space, column, "population.space")

    def member(i: int):
        return map_spaces(laid_out, lambda node, _: node.values[i] if isinstance(node, _Column) else DESCEND)

    return [member(i) for i in range(size)]


@dataclasses.dataclass(frozen=True)
class _Column:
    """One domain's stratified values, one per member, while the members are laid out."""

    values: list


def _stratified_column(domain: Domain, rng: np.random.Generator, size: int, where: str) -> list:
    kind, args = domain.kind, domain.args
    if kind == "grid":
        raise ConfigError(f"{where}: {{grid: ...}} is not a draw; list the members instead (population.members)")
    order = rng.permutation(size)
    if kind == "choice":
        return [copy.deepcopy(args[k % len(args)]) for k in order]
    # stratum k of [0, 1): a uniform point inside it, the strata in a random order
    u = (order + rng.uniform(size=size)) / size
    if kind == "randint":
        low, high = int(args[0]), int(args[1])
        return [int(min(high - 1, low + math.floor(x * (high - low)))) for x in u]
    low, high = float(args[0]), float(args[1])
    if "log" in kind:
        values = [math.exp(math.log(low) + x * (math.log(high) - math.log(low))) for x in u]
    else:
        values = [low + x * (high - low) for x in u]
    if kind.startswith("q"):
        q = float(args[2])
        values = [round(v / q) * q for v in values]
    return [float(v) for v in values]


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


def member_setting(section: str, field: dataclasses.Field) -> bool:
    """Whether members of one population may differ in `section.<field>`: its traced settings
    and each member's seed. Everything else is static (a member that differs needs another
    program) or read once per trial. The one rule `check_member` and the searchers that pack
    suggestions into populations (`tune/searchers.py`) both apply."""
    return field_kind(field) == "traced" or f"{section}.{field.name}" in PER_MEMBER_INIT


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
        if ours is None:  # a section the trial does not have (ued)
            continue
        for f in dataclasses.fields(ours):
            name = f"{section}.{f.name}"
            old, new = getattr(ours, f.name), getattr(theirs, f.name)
            if old == new or member_setting(section, f):
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
        if config is None:
            continue
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
