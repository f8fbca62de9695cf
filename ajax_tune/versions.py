"""The versions of its libraries that ajax_tune supports, and a warning when one installed is not.

The ranges are declared once, in pyproject.toml's dependencies, and read back here from the
installed package's metadata: every dependency with an upper bound (jax, jaxlib, ray, flax, optax,
orbax-checkpoint, brax) is checked. CI tests the lowest set (`.ci/lowest-constraints.txt`) and the
newest; the upper bound is the next release line after the newest tested.

pip keeps to these ranges, but an environment can still leave them: a later install that upgrades
jax for another package, `--no-deps`, a conda channel. The first `Runner` a process builds or
checks (`Runner(config)`, `Runner.check(config)`: what `ajax-tune run` does before Ray starts, and
every trial's actor) then warns, one line per package, naming the installed version and the
supported range. Not `import ajax_tune`: the check imports `importlib.metadata` and `packaging`
and reads eight packages' metadata, which would make `import ajax_tune.cli` (about 0.01 s, no
jax) some ten times slower, while a Runner has already imported jax (a second or more).
It warns rather than refusing: a slightly newer jax than the newest tested usually works, and an
older one breaks only the parts that use what changed, which `ajax_tune.compat` names when it
happens. Reading the metadata imports none of these libraries.

To silence it: `warnings.filterwarnings("ignore", category=UserWarning, message=".*ajax_tune supports")`.
"""

from __future__ import annotations

import importlib.metadata
import warnings

DISTRIBUTION = "ajax-tune"


class UnsupportedVersionWarning(UserWarning):
    """An installed library's version is outside the range ajax_tune supports."""


def supported_ranges(distribution: str = DISTRIBUTION) -> dict:
    """`{package: SpecifierSet}` for each dependency that pyproject bounds above (extras left out),
    from the installed package's metadata. Raises `PackageNotFoundError` when it is not installed."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    ranges = {}
    for line in importlib.metadata.requires(distribution) or []:
        requirement = Requirement(line)
        if requirement.marker is not None and not requirement.marker.evaluate({"extra": ""}):
            continue  # an optional extra's
        if any(spec.operator in ("<", "<=") for spec in requirement.specifier):
            ranges[canonicalize_name(requirement.name)] = requirement.specifier
    return ranges


def describe(specifier) -> str:
    """A range as pyproject writes it, lower bound first: `>=0.6.2,<0.11`."""
    return ",".join(sorted((str(s) for s in specifier), key=lambda s: (not s.startswith(">"), s)))


def unsupported(ranges: dict) -> list[str]:
    """One line for each package of `ranges` installed at a version outside its range."""
    lines = []
    for name, specifier in ranges.items():
        try:
            installed = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            continue  # not installed: importing it fails by its own name
        failed = {s.operator for s in specifier if not s.contains(installed, prereleases=True)}
        if not failed:
            continue
        if failed & {">=", ">"}:
            consequence = "older than supported: parts of ajax_tune may fail"
        elif failed & {"<", "<="}:
            consequence = "newer than tested: it may work"
        else:
            consequence = "a version ajax_tune excludes"
        lines.append(f"{name} {installed} is installed, but ajax_tune supports {name}{describe(specifier)} ({consequence})")
    return lines


_checked = False


def check_once(stacklevel: int = 2) -> list[str]:
    """`warn_unsupported`, the first time a process calls it (later calls: nothing, `[]`)."""
    global _checked
    if _checked:
        return []
    _checked = True
    return warn_unsupported(stacklevel + 1)


def warn_unsupported(stacklevel: int = 2) -> list[str]:
    """Warn (`UnsupportedVersionWarning`) once per package installed outside its supported range;
    returns the lines. Nothing to check when ajax_tune itself is not installed (a bare source tree)."""
    try:
        ranges = supported_ranges()
    except importlib.metadata.PackageNotFoundError:
        return []
    lines = unsupported(ranges)
    for line in lines:
        warnings.warn(line, UnsupportedVersionWarning, stacklevel=stacklevel + 1)
    return lines
