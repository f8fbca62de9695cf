"""The reference of every config key, rendered from the fields' own declarations.

Each field already says whether it is static, traced or init-only, its default, its allowed
values and what it does (`ajax_tune.fields`), so the tables in `docs/agents.md` are made from
those, never written by hand, and a test keeps the file equal to what this module renders.
Regenerate with `python -m ajax_tune.doc_tables > docs/agents.md`.
"""

from __future__ import annotations

import dataclasses
import sys
import typing
from typing import Any

from ajax_tune.agents import AGENTS
from ajax_tune.agents.encoders import EncoderConfig
from ajax_tune.agents.ppo import RecurrentConfig, RecurrentPPO
from ajax_tune.config import EnvConfig, ResourcesConfig
from ajax_tune.fields import OPTIONAL, field_kind
from ajax_tune.loop import LoopConfig
from ajax_tune.population.spec import PBT, PopulationConfig, Prune, Select
from ajax_tune.schedules import Schedule
from ajax_tune.ued.registry import BUILT_IN, resolve_algorithm

KINDS = {"static": "static", "traced": "traced", "init": "init-only"}
BOUNDS = (("ge", ">="), ("gt", ">"), ("le", "<="), ("lt", "<"))
TYPES = {
    "int": "integer",
    "float": "number",
    "bool": "true or false",
    "str": "string",
    "dict": "mapping",
    "tuple[int, ...]": "list of integers",
    "tuple[float, ...]": "list of numbers",
    "list": "list of mappings",
    "Schedule": "schedule",
}

INTRO = """\
# Configuration keys

Every key of a trial config's `agent`, `train`, `env`, `resources`, `population` and `ued` sections, generated from
the fields' own declarations (`python -m ajax_tune.doc_tables > docs/agents.md`; a test keeps this
file equal to that output). The second column says what changing the key costs:

- **static**: fixes shapes or the program's structure; a new value builds (and compiles) a new program.
- **traced**: an array in the training state; Tune, PBT or `Runner.reconfigure` may change it between
  calls without recompiling.
- **init-only**: read when a run starts (a seed, a starting task); a new value means a new run.

`agent.name` picks the table (`ppo` by default, or a `module:Class` import path); the other
`agent` keys are that agent's. Likewise `ued.algorithm` picks the `ued` table: a level algorithm
of one's own (`module:Class`) declares its keys the same way (docs/write-a-level-algorithm.md)."""


def _value(value: Any) -> str:
    """A value as it would be written in a YAML config."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, Schedule):
        default = Schedule()
        fields = {
            f.name: getattr(value, f.name)
            for f in dataclasses.fields(value)
            if f.name in ("kind", "peak") or getattr(value, f.name) != getattr(default, f.name)
        }
        return _value(fields)
    if dataclasses.is_dataclass(value):  # a subsection's defaults
        return _value(dataclasses.asdict(value))
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}: {_value(v)}" for k, v in value.items()) + "}"
    return str(value)


def _allowed(config_cls: type, f: dataclasses.Field) -> str:
    meta, kind = f.metadata, TYPES.get(str(f.type).removesuffix(OPTIONAL), "")
    if not kind and _is_section(config_cls, f):
        return "mapping"
    if "choices" in meta:
        return "one of " + ", ".join(f"`{c}`" for c in meta["choices"])
    bounds = {op: meta[op] for op, _ in BOUNDS if op in meta}
    if ("ge" in bounds or "gt" in bounds) and ("le" in bounds or "lt" in bounds):
        low, high = bounds.get("ge", bounds.get("gt")), bounds.get("le", bounds.get("lt"))
        interval = ("[" if "ge" in bounds else "(") + f"{low}, {high}" + ("]" if "le" in bounds else ")")
        return f"{kind} in {interval}".strip()
    limits = " ".join(f"{word} {bounds[op]}" for op, word in BOUNDS if op in bounds)
    if limits and kind.startswith("list of"):
        return f"{kind}, each {limits}"
    return f"{kind} {limits}".strip() or "any"


def _is_section(config_cls: type, f: dataclasses.Field) -> bool:
    """Whether a field holds a subsection of its own (a config dataclass, or None)."""
    hint = typing.get_type_hints(config_cls, vars(sys.modules[config_cls.__module__])).get(f.name)
    return any(dataclasses.is_dataclass(t) for t in (typing.get_args(hint) or (hint,)))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("<", "\\<")


def table(config_cls: type) -> str:
    """A markdown table of `config_cls`'s fields: key, kind, default, allowed values, doc."""
    lines = ["| key | kind | default | allowed | what it does |", "|---|---|---|---|---|"]
    for f in dataclasses.fields(config_cls):
        default = f.default_factory() if f.default is dataclasses.MISSING else f.default  # as declared (a section may need more)
        cells = [
            f"`{f.name}`",
            KINDS[field_kind(f)],
            f"`{_value(default)}`",
            _allowed(config_cls, f),
            f.metadata.get("doc", ""),
        ]
        lines.append("| " + " | ".join(_cell(c) for c in cells) + " |")
    return "\n".join(lines)


def sections() -> list[tuple[str, str, type]]:
    """(heading, one line of context, config class) for every table, agents first."""
    out = [(f"`agent` with `name: {name}`", _summary(agent), config) for name, (agent, config) in AGENTS.items()]
    out.insert(1, ("`agent.recurrent` (with `name: ppo`)", _summary(RecurrentPPO), RecurrentConfig))
    out.insert(2, ("`agent.encoder` (with `name: ppo` or `dqn`)", _summary(EncoderConfig), EncoderConfig))
    out += [
        ("`train`", "The run: its budget per call, horizon, evaluation and seeds.", LoopConfig),
        ("`env`", "Which env, its constructor's arguments, and the task training starts on.", EnvConfig),
        ("`resources`", "What Tune reserves for each trial.", ResourcesConfig),
        (
            "`population`",
            "Members of one trial that share every static setting, trained as lanes of one program "
            "(docs/populations.md): listed as overrides of the trial config, or drawn from a space.",
            PopulationConfig,
        ),
        ("`population.select`", "How members are ranked, by a key of each member's own result.", Select),
        ("`population.pbt`", _doc(PBT), PBT),
        ("`population.prune`", _doc(Prune), Prune),
    ]
    for name in BUILT_IN:  # a level algorithm's settings are its own (docs/curricula.md, levels)
        algorithm = resolve_algorithm(name)
        out.append((f"`ued` with `algorithm: {name}`", _doc(algorithm), algorithm.Settings))
    return out


def _summary(agent_cls: type) -> str:
    """The first paragraph of the agent's module docstring, on one line."""
    return _doc(sys.modules[agent_cls.__module__])


def _doc(documented: Any) -> str:
    """The first paragraph of a module's or class's docstring, on one line."""
    return " ".join((documented.__doc__ or "").strip().split("\n\n")[0].split())


def render() -> str:
    parts = [INTRO]
    for heading, context, config_cls in sections():
        parts.append(f"## {heading}\n\n" + (f"{context}\n\n" if context else "") + table(config_cls))
    parts.append(
        "## Learning-rate schedules\n\nA traced field of kind `schedule` takes a number (a constant rate) "
        "or a mapping of these fields:\n\n" + _schedule_doc()
    )
    return "\n\n".join(parts) + "\n"


def _schedule_doc() -> str:
    lines = ["| field | default |", "|---|---|"]
    lines += [f"| `{f.name}` | `{_value(f.default)}` |" for f in dataclasses.fields(Schedule)]
    kinds: list[str] = []  # the docstring's bullet list, one line per item
    for line in Schedule.__doc__.splitlines():
        line = line.strip()
        if line.startswith("- "):
            kinds.append(line)
        elif line and kinds and not kinds[-1].endswith("."):
            kinds[-1] += " " + line
    return "\n".join(lines) + "\n\nKinds:\n\n" + "\n".join(kinds)


if __name__ == "__main__":
    print(render(), end="")
