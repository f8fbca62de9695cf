"""Members drawn from a search space written in the experiment's syntax, in one place.

`population.draw: random` draws each member independently, as Tune's random search would;
`stratified` spreads the draws so that they cover the space: each number's range is cut into
`size` equal strata (in log space for a log domain), one member per stratum, the strata paired
across settings at random (a Latin hypercube); a choice's options are taken in turn. Both read a
domain's value at a point of [0, 1) the same way (`_at`), and both refuse what is not a draw with
the same line. PBT inside a trial resamples a setting with `draw_domain`.
"""

from __future__ import annotations

import copy
import dataclasses
import math
from typing import Any

import numpy as np

from ajax_tune.errors import ConfigError
from ajax_tune.imports import did_you_mean
from ajax_tune.spaces import DESCEND, Domain, map_spaces

#: How `size` members are drawn from `space`: independently, or stratified so they cover it.
DRAWS = ("random", "stratified")


def draw_members(space: Any, size: int, seed: int, how: str = "random") -> list[Any]:
    """`size` samples of `space` (parsed: `spaces.parse_spaces`), seeded by `seed`."""
    if how not in DRAWS:
        raise ConfigError(f"population.draw must be one of {list(DRAWS)}, got {how!r}{did_you_mean(str(how), DRAWS)}")
    rng = np.random.default_rng(seed)
    if how == "stratified":
        return draw_stratified(space, rng, size)
    return [draw(space, rng) for _ in range(size)]


def draw(space: Any, rng: np.random.Generator) -> Any:
    """One sample of every domain in `space`, in the order they are written."""

    def one(node, where):
        return draw_domain(node, rng, where) if isinstance(node, Domain) else DESCEND

    return map_spaces(space, one, "population.space")


def draw_domain(domain: Domain, rng: np.random.Generator, where: str) -> Any:
    """A value of `domain` as Tune would draw it (randint's upper bound excluded)."""
    _refuse_grid(domain, where)
    if domain.kind == "choice":
        return copy.deepcopy(domain.args[int(rng.integers(len(domain.args)))])
    if domain.kind == "randint":
        return int(rng.integers(domain.args[0], domain.args[1]))
    return _at(domain, rng.random())


def draw_stratified(space: Any, rng: np.random.Generator, size: int) -> list[Any]:
    """`size` samples of `space` that cover it: per domain, one value from each of `size` equal
    strata of its range, the strata given to members in a random order of their own; a choice's
    options in turn (each taken `size // len(options)` or one more times), in a random order."""
    columns: list[_Column] = []

    def column(node, where):
        if not isinstance(node, Domain):
            return DESCEND
        _refuse_grid(node, where)
        order = rng.permutation(size)
        if node.kind == "choice":
            values = [copy.deepcopy(node.args[k % len(node.args)]) for k in order]
        else:  # stratum k of [0, 1): a uniform point inside it, the strata in a random order
            values = [_at(node, u) for u in (order + rng.uniform(size=size)) / size]
        columns.append(_Column(values))
        return columns[-1]

    laid_out = map_spaces(space, column, "population.space")

    def member(i: int):
        return map_spaces(laid_out, lambda node, _: node.values[i] if isinstance(node, _Column) else DESCEND)

    return [member(i) for i in range(size)]


@dataclasses.dataclass(frozen=True)
class _Column:
    """One domain's stratified values, one per member, while the members are laid out."""

    values: list


def _at(domain: Domain, u: float) -> Any:
    """The value of a number's domain at `u` in [0, 1): along its range (its log for a log
    domain), rounded to its `q`; a randint's integer of that share of its range."""
    kind, args = domain.kind, domain.args
    if kind == "randint":
        low, high = int(args[0]), int(args[1])
        return int(min(high - 1, low + math.floor(u * (high - low))))
    low, high = float(args[0]), float(args[1])
    log = "log" in kind
    value = math.exp(math.log(low) + u * (math.log(high) - math.log(low))) if log else low + u * (high - low)
    if kind.startswith("q"):
        q = float(args[2])
        value = round(value / q) * q
    return float(value)


def _refuse_grid(domain: Domain, where: str) -> None:
    if domain.kind == "grid":
        raise ConfigError(f"{where}: {{grid: ...}} is not a draw; list the members instead (population.members)")
