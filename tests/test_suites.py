"""What holds for every env suite: a suite missing is one line naming its extra, before anything
compiles; docs/envs.md has a line per suite. (Each suite's own checks: tests/test_suite_*.py.)"""

import pathlib
import re
import sys

import pytest

from ajax_tune.envs.registry import SUITES
from tests.support.suites import refused, tiny

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("prefix", list(SUITES))
def test_a_missing_suite_is_one_line_naming_its_extra(prefix, monkeypatch):
    suite = SUITES[prefix]
    top = suite.requires
    for name in [m for m in sys.modules if m == top or m.startswith(f"{top}.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, top, None)  # `import xminigrid` fails, as where it is not installed
    monkeypatch.delitem(sys.modules, suite.adapter.partition(":")[0], raising=False)
    name = f"{prefix}Some-Id" if prefix != "jaxued/" else "jaxued/maze"
    refused(
        tiny({"name": name}),
        rf"^env.name: {name} needs the {prefix[:-1]} suite \({top} is not installed\); {re.escape(suite.install)}$",
    )


def test_a_suite_whose_own_imports_fail_is_one_line_naming_its_extra(monkeypatch):
    """Installed, but a module the adapter needs is missing (kinetix's dependencies are an extra
    of their own): the same line, with the import's own error."""
    import jumanji  # noqa: F401  (installed: the suite is found)

    monkeypatch.delitem(sys.modules, "ajax_tune.envs.jumanji_adapter", raising=False)
    monkeypatch.setitem(sys.modules, "jumanji.specs", None)
    refused(
        tiny({"name": "jumanji/Snake-v1"}),
        r"^env.name: jumanji/Snake-v1 needs the jumanji suite \(.*jumanji.specs.*\); pip install 'ajax-tune\[jumanji\]'$",
    )


def test_docs_envs_has_a_line_per_suite():
    text = (ROOT / "docs" / "envs.md").read_text()
    for prefix in SUITES:
        assert f"| `{prefix}" in text, prefix
