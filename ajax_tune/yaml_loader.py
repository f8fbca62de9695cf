"""YAML as people write numbers in it.

PyYAML follows YAML 1.1, where a float needs a decimal point and a signed exponent: `3e-4`,
`1e6` and `1.0e6` are strings there, so `lr: 3e-4` would reach the config as text. YAML 1.2 and
Python read all three as numbers; so does this loader, in experiment files and in `--set` and
`--task` values alike. Everything else is PyYAML's safe loader unchanged.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

# A decimal point, an exponent (sign optional), or both; YAML 1.1's own forms (.inf, .nan,
# 1_000.5, 1.0e+6) keep resolving through the resolvers SafeLoader already has.
_FLOAT = re.compile(
    r"""^[-+]?(?:
      [0-9][0-9_]*\.[0-9_]*(?:[eE][-+]?[0-9]+)?
    | \.[0-9][0-9_]*(?:[eE][-+]?[0-9]+)?
    | [0-9][0-9_]*[eE][-+]?[0-9]+
)$""",
    re.VERBOSE,
)


class NumberLoader(yaml.SafeLoader):
    """SafeLoader that also reads `3e-4`, `1e6` and `1.0e6` as floats, and refuses a mapping that
    names a key twice (PyYAML keeps the last one silently: a second `mode: min` would win)."""

    def construct_mapping(self, node, deep=False):
        seen = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.setdefault(key, key_node)
            except TypeError:  # an unhashable key: PyYAML's own error follows
                continue
            if first is not key_node:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"key {key!r} is written twice (lines {first.start_mark.line + 1} and {key_node.start_mark.line + 1}); "
                    "keep one",
                    key_node.start_mark,
                )
        return super().construct_mapping(node, deep=deep)


NumberLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))


def load(text: str) -> Any:
    return yaml.load(text, Loader=NumberLoader)  # noqa: S506 (a SafeLoader subclass)
