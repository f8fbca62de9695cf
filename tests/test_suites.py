"""What holds for every env suite: a suite missing is one line naming its extra, before anything
compiles; docs/envs.md has a line per suite. (Each suite's own checks: tests/test_suite_*.py.)"""

import pathlib
import sys

import pytest

from ajax_tune.envs.registry import SUITES
from tests.support.suites import refused, tiny

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOP_MODULE = {
    "xminigrid/": "xminigrid",
    "craftax/": "craftax",
    "navix/": "navix",
    "kinetix/": "kinetix",
    "playground/": "mujoco_playground",
    "jumanji/": "jumanji",
}


@pytest.mark.parametrize("prefix", list(SUITES))
def test_a_missing_suite_is_one_line_naming_its_extra(prefix, monkeypatch):
    top = TOP_MODULE[prefix]
    for name in [m for m in sys.modules if m == top or m.startswith(f"{top}.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, top, None)  # `import xminigrid` fails, as where it is not installed
    monkeypatch.delitem(sys.modules, SUITES[prefix][0], raising=False)
    extra = prefix[:-1]
    refused(
        tiny({"name": f"{prefix}Some-Id"}),
        rf"^env.name: {prefix}Some-Id needs the {extra} suite .*pip install 'ajax-tune\[{extra}\]'",
    )


def test_docs_envs_has_a_line_per_suite():
    text = (ROOT / "docs" / "envs.md").read_text()
    for prefix in SUITES:
        assert f"| `{prefix}<" in text, prefix
