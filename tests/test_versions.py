"""Supported versions: declared once (pyproject.toml), pinned at their floors for CI's lowest set
(.ci/lowest-constraints.txt), and an installed version outside them is one warning line each."""

import importlib.metadata
import pathlib
import tomllib
import warnings

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from ajax_tune import versions

ROOT = pathlib.Path(__file__).resolve().parent.parent
#: the packages whose upper bounds the brief for this check named; pyproject may bound more
BOUNDED = {"ray", "jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "brax"}


def pyproject_requirements() -> list[Requirement]:
    return [Requirement(line) for line in tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]]


def lowest_pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / ".ci" / "lowest-constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            requirement = Requirement(line)
            (spec,) = requirement.specifier
            assert spec.operator == "==", line
            pins[canonicalize_name(requirement.name)] = spec.version
    return pins


def test_the_installed_metadata_has_pyprojects_ranges():
    """What `import ajax_tune` checks is pyproject's ranges (a stale install fails here: reinstall)."""
    bounded_above = {
        canonicalize_name(r.name): r.specifier
        for r in pyproject_requirements()
        if any(s.operator in ("<", "<=") for s in r.specifier)
    }
    assert set(bounded_above) >= BOUNDED
    assert versions.supported_ranges() == bounded_above


def test_the_installed_versions_are_supported():
    """CI runs this in its newest and its lowest environment: each is inside every range."""
    assert versions.unsupported(versions.supported_ranges()) == []


def test_the_lowest_constraints_pin_every_floor():
    """.ci/lowest-constraints.txt pins each dependency at its declared floor, bounded ones included;
    other pins there (transitive ones) must not contradict a range."""
    pins = lowest_pins()
    for requirement in pyproject_requirements():
        name = canonicalize_name(requirement.name)
        floors = [s.version for s in requirement.specifier if s.operator == ">="]
        if floors:
            assert pins.get(name) == floors[0], f"{name}: pyproject's floor is {floors[0]}, the constraints pin {pins.get(name)}"
        if name in pins:
            assert requirement.specifier.contains(pins[name]), (name, pins[name], str(requirement.specifier))
    assert set(pins) >= BOUNDED


def test_an_unsupported_version_is_one_warning_line_naming_package_version_and_range(monkeypatch):
    installed = {"jax": "0.11.0", "ray": "2.40.0", "flax": "0.12.8"}
    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: installed.get(name) or real(name))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        lines = versions.warn_unsupported()
    assert [str(w.message) for w in caught] == lines and all(w.category is versions.UnsupportedVersionWarning for w in caught)
    assert len(lines) == 2 and all("\n" not in line for line in lines)
    jax_line, ray_line = sorted(lines)
    ranges = versions.supported_ranges()
    assert jax_line.startswith("jax 0.11.0 is installed") and f"jax{versions.describe(ranges['jax'])}" in jax_line
    assert "newer than tested" in jax_line
    assert ray_line.startswith("ray 2.40.0 is installed") and f"ray{versions.describe(ranges['ray'])}" in ray_line
    assert "older than supported" in ray_line


def test_ranges_read_lower_bound_first():
    ranges = versions.supported_ranges()
    assert versions.describe(ranges["jax"]).startswith(">=") and ",<" in versions.describe(ranges["jax"])


def test_the_first_runner_of_a_process_warns_at_its_callers_line(monkeypatch):
    """`Runner.check` (what `ajax-tune run` does before Ray starts) and `Runner(config)` check the
    installed versions once per process, and the warning names the line that called them."""
    from ajax_tune.runner import Runner

    real = importlib.metadata.version
    monkeypatch.setattr(importlib.metadata, "version", lambda name: "0.99.0" if name == "jax" else real(name))
    monkeypatch.setattr(versions, "_checked", False)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Runner.check({"env": {"name": "cartpole"}})
        Runner.check({"env": {"name": "cartpole"}})  # once per process
    (warning,) = [w for w in caught if w.category is versions.UnsupportedVersionWarning]
    assert str(warning.message).startswith("jax 0.99.0 is installed, but ajax_tune supports jax>=")
    assert warning.filename == __file__
