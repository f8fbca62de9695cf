"""Find every use of another library's private API in a package's source: what
`tests/test_compat.py` requires to go through `ajax_tune/compat.py` alone.

A use is any of:
- an import of a module path with a private part (`jax._src...`, `ray._private...`), or of a
  module that is not one of the library's public ones (`PUBLIC`);
- an import of a private name (`from x import _y`);
- an attribute read or written by a private name (`obj._name`, also through `getattr`, `setattr`,
  `hasattr` with a literal name) that the package does not define itself, on anything but `self`
  or `cls` (the package's own private names are its own business).
"""

from __future__ import annotations

import ast
import pathlib

LIBRARIES = (
    "ray",
    "jax",
    "jaxlib",
    "brax",
    "optax",
    "flax",
    "orbax",
    "gymnax",
    "flashbax",
    "wandb",
    "gymnasium",
    "mujoco",
    "chex",
    # the env suites (ajax_tune/envs/*_adapter.py)
    "xminigrid",
    "craftax",
    "navix",
    "kinetix",
    "jax2d",
    "mujoco_playground",
    "jumanji",
)
#: The modules of Ray that are its documented API; any other `ray.*` module is internal.
PUBLIC = {
    "ray": (
        "ray",
        "ray.tune",
        "ray.tune.schedulers",
        "ray.tune.search",
        "ray.tune.search.optuna",
        "ray.tune.search.hyperopt",
        "ray.tune.stopper",
        "ray.train",
        "ray.air.integrations.wandb",
        "ray.air.integrations",
    ),
}
#: Module trees that hold a library's internals without an underscore in their name.
INTERNAL = ("jax.interpreters", "jax.core", "jaxlib.xla_extension")
#: Underscored names that are public API: namedtuple's methods, and `os._exit`.
PUBLIC_UNDERSCORED = {"_replace", "_asdict", "_fields", "_make", "_exit"}


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _library(module: str) -> str | None:
    top = module.split(".")[0]
    return top if top in LIBRARIES else None


def _private_module(module: str) -> bool:
    library = _library(module)
    if library is None:
        return False
    if any(_is_private(part) for part in module.split(".")):
        return True
    if module.startswith(INTERNAL):
        return True
    public = PUBLIC.get(library)
    return public is not None and module not in public


def own_names(files) -> set[str]:
    """Every private name the package defines: functions, classes, attributes it assigns."""
    names = set()
    for path in files:
        for node in ast.walk(ast.parse(pathlib.Path(path).read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name):
                if node.value.id in ("self", "cls"):
                    names.add(node.attr)
            elif isinstance(node, ast.arg):
                names.add(node.arg)
    return {n for n in names if _is_private(n)}


def private_uses(package: pathlib.Path, exclude: tuple[str, ...] = ("compat.py",)) -> list[str]:
    files = sorted(p for p in package.rglob("*.py") if p.name not in exclude)
    ours = own_names(package.rglob("*.py"))
    found = []
    for path in files:
        where = path.relative_to(package.parent)
        for node in ast.walk(ast.parse(path.read_text())):
            line = f"{where}:{getattr(node, 'lineno', 0)}"
            if isinstance(node, ast.Import):
                found += [f"{line} import {a.name}" for a in node.names if _private_module(a.name)]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0 and _library(node.module):
                if _private_module(node.module):
                    found.append(f"{line} from {node.module} import ...")
                found += [f"{line} from {node.module} import {a.name}" for a in node.names if _is_private(a.name)]
            elif isinstance(node, ast.Attribute) and _is_private(node.attr):
                base = node.value
                if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                    continue
                if node.attr in ours or node.attr in PUBLIC_UNDERSCORED:
                    continue
                found.append(f"{line} .{node.attr}")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in ("getattr", "setattr", "hasattr", "delattr")
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
                and _is_private(node.args[1].value)
                and node.args[1].value not in ours
            ):
                found.append(f"{line} {node.func.id}(..., {node.args[1].value!r})")
    return found


if __name__ == "__main__":
    import sys

    uses = private_uses(pathlib.Path(sys.argv[1]), exclude=tuple(sys.argv[2:]) or ("compat.py",))
    print("\n".join(uses))
    print(len(uses), "uses")
