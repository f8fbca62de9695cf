"""The `population` section of a trial config: members that share every static setting, trained
as lanes of one compiled program (lanes = members x seeds, members-major).

Members are listed as overrides of the trial config (`{members: [{agent: {lr: {peak: 1e-3}}},
{agent: {ent_coef: 0.0}}]}`) or drawn from a search space in the experiment's syntax (`{size: 8,
space: {...}, seed: 0}`, `population/draws.py`). A member may change traced settings and
`train.seed`; a member that changes anything else is refused by name before anything is built,
and its seeds are those a single run of its config would use.

The keys are declared on the fields every section uses (`ajax_tune.fields`), so `validate` checks
them and the generated reference lists them (docs/agents.md). `Population` is the section resolved
against the trial config: each member's override and config, PBT's mutations checked against the
settings they name. Nothing here builds or trains (`pbt.py`, `prune.py` and `results.py` do).
"""

from __future__ import annotations

import copy
import dataclasses
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ajax_tune.errors import ConfigError
from ajax_tune.fields import config_section, field_kind, init_only, parse_section, static, validate
from ajax_tune.imports import did_you_mean
from ajax_tune.population.draws import DRAWS, draw_members
from ajax_tune.schedules import KINDS, Schedule
from ajax_tune.spaces import Domain, parse_spaces

SELECT_MODES = ("max", "min")
HEADLINES = ("best", "mean")
#: Sections of the trial config a member may write in its override, and the one setting of
#: them that is neither traced nor static but may still differ: each member's own seed.
MEMBER_SECTIONS = ("agent", "train", "ued")
PER_MEMBER_INIT = ("train.seed",)
#: Sections whose traced settings PBT inside a trial may explore.
MUTABLE_SECTIONS = ("agent", "ued")
#: What a member is drawn with instead of being listed.
DRAW_KEYS = ("size", "space", "seed", "draw")


@config_section("population.select")
class Select:
    metric: str = init_only("eval/return_mean", doc="the result key members are ranked by (checked against a member's keys)")
    mode: str = init_only("max", choices=SELECT_MODES, doc="whether a larger or a smaller metric is better")


@dataclasses.dataclass(frozen=True)
class PBT:
    """Population-based training between the members of one trial: after every `interval`-th call
    of `train()`, the bottom `quantile` of members (by `select`) take the state of a member of the
    top `quantile` and explore its traced settings (`population/pbt.py`)."""

    mutations: dict = init_only(
        {},
        doc="the traced settings to explore (at least one), shaped like the trial config: a distribution "
        "({agent: {lr: {peak: {loguniform: [1e-4, 1e-2]}}}}) or a list of values",
    )
    interval: int = init_only(1, ge=1, doc="calls of train() between exploits")
    quantile: float = init_only(0.25, gt=0.0, le=0.5, doc="the share of members replaced (the bottom) and copied (the top)")
    resample_probability: float = init_only(
        0.25, ge=0.0, le=1.0, doc="the chance a setting is drawn again from its distribution or list instead of perturbed"
    )
    perturbation_factors: tuple[float, ...] = init_only(
        (0.8, 1.2), gt=0.0, doc="a perturbed number is multiplied by one of these (then kept inside its distribution's bounds)"
    )
    seed: int = init_only(0, ge=0, doc="seeds who exploits whom and how settings are explored")

    def __post_init__(self):
        validate(self, "population.pbt")
        if not self.perturbation_factors:
            raise ConfigError("population.pbt.perturbation_factors must be a non-empty list of positive numbers, got []")
        if not self.mutations:
            raise ConfigError(
                "population.pbt.mutations must name at least one traced setting, shaped like the trial config "
                "({agent: {lr: {peak: {loguniform: [1e-4, 1e-2]}}}}), got {}"
            )


@config_section("population.prune")
class Prune:
    """Successive halving between the members of one trial (`population/prune.py`).

    Rung i ends after `grace_period * (1 + f + ... + f**i)` calls (f the `reduction_factor`), so
    that each rung trains about as many env steps in all as the first: at the end of a rung the
    best `ceil(size / f)` members by `select` go on (never fewer than `min_members`) and the
    others stop; the program is rebuilt for the survivors' lanes, one compilation per size."""

    grace_period: int = init_only(1, ge=1, doc="calls of the first rung, before any member stops")
    reduction_factor: int = init_only(
        2, ge=2, doc="each rung keeps the best 1/reduction_factor of the members and lasts reduction_factor times as long"
    )
    min_members: int = init_only(1, ge=1, doc="the fewest members that go on (below the population's size)")

    def rung_end(self, rung: int) -> int:
        """The call that ends rung `rung` (0: the first)."""
        f = self.reduction_factor
        return self.grace_period * (f ** (rung + 1) - 1) // (f - 1)

    def keep(self, size: int) -> int:
        """How many of `size` members go on past a rung."""
        return min(size, max(self.min_members, math.ceil(size / self.reduction_factor)))


@dataclasses.dataclass(frozen=True)
class PopulationConfig:
    """The `population` section as written (`Population.parse` resolves it)."""

    members: list | None = static(
        None, doc="each member's override of the trial config (its traced settings and train.seed); or size"
    )
    size: int | None = static(None, ge=1, doc="how many members to draw from space (instead of listing members)")
    space: dict = init_only({}, doc="the search space members are drawn from, in the experiment's syntax (with size)")
    seed: int = init_only(0, ge=0, doc="seeds the draws (with size)")
    draw: str = init_only("random", choices=DRAWS, doc="independent draws, or stratified ones that cover the space (with size)")
    select: Select = init_only(
        Select(), doc="how members are ranked: the best is the trial's headline (`population.select` below)"
    )
    headline: str = init_only(
        "best", choices=HEADLINES, doc="the trial's headline keys: the best member's, or each key's mean over members"
    )
    pbt: PBT | None = init_only(None, doc="PBT between the members (`population.pbt` below)")
    prune: Prune | None = init_only(None, doc="successive halving between the members (`population.prune` below)")

    def __post_init__(self):
        if self.space is None:  # written empty in YAML
            object.__setattr__(self, "space", {})
        subsections = {"select": (Select, self.select or {}), "pbt": (PBT, self.pbt), "prune": (Prune, self.prune)}
        for name, (cls, value) in subsections.items():
            if value is not None:
                object.__setattr__(self, name, parse_section(cls, value, f"population.{name}"))
        validate(self, "population")
        if self.members is not None and not isinstance(self.members, (list, tuple)):
            raise ConfigError(f"population.members must be a list of overrides of the trial config, got {self.members!r}")
        for i, override in enumerate(self.members or ()):
            if not isinstance(override, Mapping):
                raise ConfigError(
                    f"population.members[{i}] must be a mapping (an override of the trial config), got {override!r}"
                )
        if self.pbt is not None and self.prune is not None:
            raise ConfigError(
                "population: give pbt or prune, not both (pbt keeps every lane busy with copies of the better "
                "members; prune stops the worse members so that the rest train faster)"
            )

    def overrides(self) -> list[dict]:
        """Each member's override: the listed ones, or `size` draws of `space`."""
        if self.members is not None:
            return [copy.deepcopy(dict(m)) for m in self.members]
        if self.size is None:
            raise ConfigError("population needs members (a list of overrides) or size (with an optional space and seed)")
        space = parse_spaces(copy.deepcopy(self.space), "population.space")
        return draw_members(space, self.size, self.seed, self.draw)


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
class Population:
    """The section resolved against the trial config: each member's override (draws resolved)
    and config, and PBT's mutations."""

    section: PopulationConfig  # as written, its draws written out as members
    members: tuple[Any, ...]  # one trial Config per member, without a population
    mutations: tuple[Mutation, ...] = ()

    overrides = property(lambda self: tuple(self.section.members))
    size = property(lambda self: len(self.members))
    metric = property(lambda self: self.section.select.metric)
    mode = property(lambda self: self.section.select.mode)
    headline = property(lambda self: self.section.headline)
    pbt = property(lambda self: self.section.pbt)
    prune = property(lambda self: self.section.prune)

    @classmethod
    def parse(cls, section: Any, base, make_member: Callable[[dict, str], Any]) -> Population:
        """`base` is the trial config without the population; `make_member(override, where)`
        builds a member's config from it."""
        if isinstance(section, Mapping) and "members" in section:
            drawn = [key for key in DRAW_KEYS if key in section]
            if drawn:
                raise ConfigError(
                    f"population: give members or size (with space, seed and draw), not both; got members and {drawn}"
                )
        written = parse_section(PopulationConfig, section, "population")
        overrides = written.overrides()
        if not overrides:
            raise ConfigError("population must have at least one member, got 0 (population.size or population.members)")
        members = []
        for i, override in enumerate(overrides):
            where = f"population.members[{i}]"
            member = make_member(override, where)
            check_member(base, member, where)
            members.append(member)
        mutations: list[Mutation] = []
        if written.pbt is not None:
            if len(members) < 2:
                raise ConfigError(f"population.pbt needs a population of at least 2 members to exploit, got {len(members)}")
            mutations = _mutations(
                parse_spaces(copy.deepcopy(written.pbt.mutations), "population.pbt.mutations"), base, make_member
            )
        if written.prune is not None and written.prune.min_members >= len(members):
            raise ConfigError(
                f"population.prune.min_members must be below the population's size ({len(members)}) or nothing is ever "
                f"stopped, got {written.prune.min_members}"
            )
        drawn_as = {key: getattr(PopulationConfig(), key) for key in DRAW_KEYS}  # the draws' keys at their defaults
        listed = dataclasses.replace(written, members=overrides, **drawn_as)
        return cls(listed, tuple(members), tuple(mutations))

    def restricted(self, members: Sequence[int]) -> Population:
        """The same population holding only `members` (indices into this one, in their order)."""
        section = dataclasses.replace(self.section, members=[self.overrides[k] for k in members])
        return dataclasses.replace(self, section=section, members=tuple(self.members[k] for k in members))

    def to_dict(self) -> dict:
        """What `parse` reads back to the same members (draws written out as members)."""
        out = {"members": copy.deepcopy(list(self.overrides)), "select": dataclasses.asdict(self.section.select)}
        out["headline"] = self.headline
        if self.pbt is not None:
            out["pbt"] = {**dataclasses.asdict(self.pbt), "perturbation_factors": list(self.pbt.perturbation_factors)}
        if self.prune is not None:
            out["prune"] = dataclasses.asdict(self.prune)
        return out


def _mutations(tree: Mapping, base, make_member) -> list[Mutation]:
    """Each leaf of `population.pbt.mutations` (a list or a distribution) as a `Mutation`,
    checked against the trial config: a traced setting, every value it may take valid."""
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
        if not categorical and not (isinstance(value, (int, float)) and not isinstance(value, bool)):
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
    """The traced settings a member follows as floats under `<section>/<field>` (a schedule's
    parts under `<section>/<field>/<part>`, its kind as an index of `schedules.KINDS`)."""
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
