"""Search spaces as YAML writes them: one-key mappings such as `{loguniform: [1e-4, 3e-3]}`.

`{loguniform: [lo, hi]}`, `{uniform: [lo, hi]}`, `{quniform: [lo, hi, q]}`,
`{qloguniform: [lo, hi, q]}`, `{randint: [lo, hi]}`, `{choice: [a, b, ...]}` and
`{grid: [a, b, ...]}`, anywhere in a trial config or a scheduler's options. Parsed into
`Domain`s (checked where they are written), they become Tune's domains only when a Tuner is
built, and give a representative sample for validating the trial config before Ray starts.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ajax_tune.errors import ConfigError

DOMAINS = {
    "uniform": 2,
    "loguniform": 2,
    "quniform": 3,
    "qloguniform": 3,
    "randint": 2,
    "choice": None,
    "grid": None,
}


@dataclasses.dataclass(frozen=True)
class Domain:
    """A search space as written in YAML, turned into a Tune domain on demand."""

    kind: str
    args: tuple

    def to_tune(self):
        from ray import tune

        if self.kind == "grid":
            return tune.grid_search(list(self.args))
        if self.kind == "choice":
            return tune.choice(list(self.args))
        return getattr(tune, self.kind)(*self.args)

    def sample(self) -> Any:
        """A representative value (for validating the trial config before Ray starts)."""
        if self.kind in ("grid", "choice"):
            return self.args[0]
        if self.kind == "randint":
            return int(self.args[0])
        low, high = self.args[0], self.args[1]
        if self.kind.startswith("q"):
            return float(low)  # on the grid of q by construction
        return float((low * high) ** 0.5 if "log" in self.kind else (low + high) / 2)


DESCEND = object()  # from a `map_spaces` function: not a replacement, go on into the node


def map_spaces(value: Any, fn: Callable[[Any, str], Any], where: str = "trial") -> Any:
    """Nested mappings and lists rebuilt, each node first offered to `fn(node, where)`: what it
    returns replaces the node, except `DESCEND`, which goes on into a mapping's or list's items.
    The one walk over a search space: parsing it, turning it into Tune's domains, sampling it."""
    out = fn(value, where)
    if out is not DESCEND:
        return out
    if isinstance(value, Mapping):
        return {k: map_spaces(v, fn, f"{where}.{k}") for k, v in value.items()}
    if isinstance(value, list):
        return [map_spaces(v, fn, f"{where}[{i}]") for i, v in enumerate(value)]
    return value


def _on_domains(leaf: Callable[[Domain], Any]) -> Callable[[Any, str], Any]:
    return lambda node, _: leaf(node) if isinstance(node, Domain) else DESCEND


def parse_spaces(value: Any, where: str = "trial") -> Any:
    """Replace one-key search-space mappings in nested config values by `Domain`s."""

    def parse(node, here):
        if isinstance(node, Mapping) and len(node) == 1:
            ((key, args),) = node.items()
            if key in DOMAINS:
                return _domain(key, args, here)
        return DESCEND

    return map_spaces(value, parse, where)


def _domain(kind: str, args: Any, where: str) -> Domain:
    arity = DOMAINS[kind]
    if not isinstance(args, list) or not args:
        raise ConfigError(f"{where}: {{{kind}: ...}} takes a non-empty list, got {args!r}")
    if arity is not None:
        if len(args) != arity or not all(isinstance(a, (int, float)) and not isinstance(a, bool) for a in args):
            raise ConfigError(f"{where}: {{{kind}: ...}} takes {arity} numbers, got {args!r}")
        if args[0] >= args[1]:
            raise ConfigError(f"{where}: {{{kind}: [low, high]}} needs low < high, got {args!r}")
        if "log" in kind and args[0] <= 0:
            raise ConfigError(f"{where}: {{{kind}: ...}} needs a positive lower bound, got {args!r}")
    return Domain(kind, tuple(args))


def to_tune(value: Any) -> Any:
    return map_spaces(value, _on_domains(Domain.to_tune))


def sample(value: Any) -> Any:
    return map_spaces(value, _on_domains(lambda d: copy.deepcopy(d.sample())))


def domains(value: Any) -> list[Domain]:
    found: list[Domain] = []
    map_spaces(value, _on_domains(found.append))
    return found


def has_grid(value: Any) -> bool:
    return any(d.kind == "grid" for d in domains(value))
