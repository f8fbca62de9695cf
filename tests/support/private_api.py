"""Find every use of another library's private API in a package's source: what
`tests/test_compat.py` requires to go through `ajax_tune/compat/` alone.

A use is any of:
- an import of a module path with a private part (`jax._src...`, `ray._private...`), or of a
  module that is not one of the library's public ones (`PUBLIC`);
- an import of a private name (`from x import _y`);
- a module named at run time: `importlib.import_module`, `__import__`, `importlib.util.find_spec`
  or `sys.modules[...]` / `sys.modules.get(...)` given such a path, or a path into a library that
  is built at run time (`import_module(f"ray.{x}")`: nothing here can tell it is public);
- an attribute read or written by a private name (`obj._name`, also through `getattr`, `setattr`,
  `hasattr`, `delattr` or `operator.attrgetter`) that the package does not define itself, on
  anything but `self` or `cls` (the package's own private names are its own business). A name
  given as a string is followed where the source fixes it: a literal, a module-level constant, a
  loop over a constant tuple, concatenations and f-strings (`getattr(obj, "_" + name)` and
  `getattr(obj, f"_{name}")` are private whatever `name` is);
- a class of the package that defines or uses (`self._x`) a private attribute of a library class
  it derives from: overriding `WandbLoggerCallback._start_logging_actor`, setting a `Searcher`'s
  `_metric`, defining the `_progress_metrics` Tune reads off a trainable. The library's classes are
  imported to see what they hold (their own `self._x` too), and a private name a class defines
  counts where the library's package (`ray.tune`, `ray.air`, ...) reads it by name with `getattr`.

A name that reaches the code as data (a parameter, a field of a user's config) cannot be judged
from the source: `getattr(obj, name)` with such a name is not a use. The package's one resolver of
user-given names (`imports.py`) reaches what the user named, by design.
"""

from __future__ import annotations

import ast
import functools
import importlib
import inspect
import pathlib
import re

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
    "jaxued",
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
#: The one door: files and folders of the package that may use private APIs.
DOOR = ("compat.py", "compat")
#: Calls whose argument names a module, and those whose (second) argument names an attribute.
MODULE_CALLS = {"import_module", "__import__", "find_spec"}
ATTRIBUTE_CALLS = {"getattr", "setattr", "hasattr", "delattr"}


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


def own_names(walked) -> set[str]:
    """Every private name the package defines: functions, classes, attributes it assigns
    (`walked`: each file's nodes, as `ast.walk` lists them)."""
    names = set()
    for nodes in walked:
        for node in nodes:
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


# -- names built at run time -------------------------------------------------------------------------


def _constants(tree: ast.Module, nodes: list[ast.AST]) -> dict[str, list[str]]:
    """What the source fixes a name to: module-level strings and collections of strings, and loop
    variables over such collections (anywhere in the file: a name reused by two loops gets both)."""

    def strings(node) -> list[str] | None:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return [node.value]
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
        ):
            return [e.value for e in node.elts]
        if isinstance(node, ast.Name) and node.id in fixed:
            return fixed[node.id]
        return None

    fixed: dict[str, list[str]] = {}
    for node in tree.body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            values = strings(node.value)
            for target in targets:
                if isinstance(target, ast.Name) and values is not None:
                    fixed[target.id] = values
    for node in nodes:
        loops = [node] if isinstance(node, (ast.For, ast.AsyncFor)) else getattr(node, "generators", [])
        for loop in loops:
            values = strings(loop.iter)
            if isinstance(loop.target, ast.Name) and values is not None:
                fixed[loop.target.id] = sorted({*fixed.get(loop.target.id, []), *values})
    return fixed


def _texts(node: ast.AST, fixed: dict[str, list[str]]) -> list[tuple[str, bool]]:
    """The strings `node` may be, as (text, complete): complete where the source fixes all of it,
    else its known beginning ("" where nothing of it is known)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [(node.value, True)]
    if isinstance(node, ast.Name) and node.id in fixed:
        return [(value, True) for value in fixed[node.id]]
    if isinstance(node, ast.JoinedStr):
        head = ""
        for part in node.values:
            if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
                return [(head, False)]
            head += part.value
        return [(head, True)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        out = []
        for left, complete in _texts(node.left, fixed):
            if not complete:
                out.append((left, False))
                continue
            out += [(left + right, done) for right, done in _texts(node.right, fixed)]
        return out
    return [("", False)]


def _call_name(func: ast.AST) -> str | None:
    if isinstance(func, ast.Name):
        return func.id
    if isinstance(func, ast.Attribute):
        return func.attr
    return None


def _is_sys_modules(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute) and node.attr == "modules" and isinstance(node.value, ast.Name) and node.value.id == "sys"
    )


def _module_uses(call: str, arg: ast.AST, fixed) -> list[str]:
    found = []
    for text, complete in _texts(arg, fixed):
        if complete and _private_module(text):
            found.append(f"{call}({text!r})")
        elif not complete and "." in text and _library(text) is not None:
            found.append(f"{call}({text!r}...) built at run time")
    return found


def _attribute_uses(call: str, arg: ast.AST, fixed, ours: set[str]) -> list[str]:
    found = []
    for text, complete in _texts(arg, fixed):
        name = text.rsplit(".", 1)[-1] if call == "attrgetter" else text
        if complete and _is_private(name) and name not in ours and name not in PUBLIC_UNDERSCORED:
            found.append(f"{call}(..., {text!r})")
        elif not complete and name.startswith("_") and not name.startswith("__"):
            found.append(f"{call}(..., {text!r}...) built at run time")
    return found


# -- classes derived from a library's ----------------------------------------------------------------


def _imported(nodes: list[ast.AST]) -> dict[str, str]:
    """Each name the file binds by importing it: alias -> the dotted path it stands for."""
    names = {}
    for node in nodes:
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                names[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        elif isinstance(node, ast.Import):
            for alias in node.names:
                names[alias.asname or alias.name.split(".")[0]] = alias.name if alias.asname else alias.name.split(".")[0]
    return names


def _dotted(node: ast.AST, imported: dict[str, str]) -> str | None:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in imported:
        return None
    return ".".join([imported[node.id], *reversed(parts)])


def _resolve(path: str):
    """The object a dotted path names, importing the longest module prefix it starts with."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            target = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            target = getattr(target, part)
        return target
    raise ImportError(path)


@functools.cache
def library_private_names(cls: type) -> frozenset[str]:
    """The private attributes a library class and its library ancestors hold: what `dir` shows,
    and what their methods set or read on `self` (instance attributes of the base)."""
    names = {n for n in dir(cls) if _is_private(n)}
    for klass in cls.__mro__:
        if _library(getattr(klass, "__module__", "") or "") is None:
            continue
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        names |= {n for n in re.findall(r"\bself\.(_\w+)", source) if _is_private(n)}
    return frozenset(names)


@functools.cache
def _library_source(module: str) -> str:
    """The source of the package a library class comes from (its module's first two levels,
    `ray.tune`, `ray.air`): where the library reads what it reads off its classes by name, as
    Tune reads `getattr(trainable, "_progress_metrics", None)` in another module."""
    top = importlib.import_module(".".join(module.split(".")[:2]))
    roots = getattr(top, "__path__", None) or [pathlib.Path(top.__file__).parent]
    return "\n".join(p.read_text(errors="replace") for root in roots for p in sorted(pathlib.Path(root).rglob("*.py")))


def _named_by_library(cls: type, name: str) -> bool:
    """Whether the library reads `name` off objects by a literal name (`getattr(x, "_name", ...)`)."""
    pattern = rf"""(getattr|hasattr)\([^()]*?["']{re.escape(name)}["']"""
    return re.search(pattern, _library_source(cls.__module__)) is not None


def _class_uses(node: ast.ClassDef, imported: dict[str, str]) -> list[tuple[int, str]]:
    """Private attributes of a library base class that the class defines or uses on `self`."""
    bases = []
    for base in node.bases:
        path = _dotted(base, imported)
        if path is None or _library(path) is None:
            continue  # the package's own classes, builtins, and bases made by a call (compat's)
        try:
            bases.append((path, _resolve(path)))
        except (ImportError, AttributeError):
            return [(node.lineno, f"class {node.name}({path}): base not importable here, so not checked")]
    found = []
    for path, base in bases:
        if not isinstance(base, type):
            continue
        theirs = library_private_names(base)
        for item in node.body:
            defined = []
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                defined = [item.name]
            elif isinstance(item, (ast.Assign, ast.AnnAssign)):
                targets = item.targets if isinstance(item, ast.Assign) else [item.target]
                defined = [t.id for t in targets if isinstance(t, ast.Name)]
            found += [
                (item.lineno, f"class {node.name} overrides {path}.{name}")
                for name in defined
                if _is_private(name) and (name in theirs or _named_by_library(base, name))
            ]
        for sub in ast.walk(node):
            if (
                isinstance(sub, ast.Attribute)
                and isinstance(sub.value, ast.Name)
                and sub.value.id == "self"
                and sub.attr in theirs
            ):
                found.append((sub.lineno, f"self.{sub.attr} of {path}"))
    return found


# -- the scan -------------------------------------------------------------------------------------


def _in_door(path: pathlib.Path, package: pathlib.Path, door: tuple[str, ...]) -> bool:
    return path.relative_to(package).parts[0] in door


def private_uses(package: pathlib.Path, door: tuple[str, ...] = DOOR) -> list[str]:
    trees = {path: ast.parse(path.read_text()) for path in sorted(package.rglob("*.py"))}
    walked = {path: list(ast.walk(tree)) for path, tree in trees.items()}
    ours = own_names(walked.values())
    found = []
    for path, tree in trees.items():
        if _in_door(path, package, door):
            continue
        where = path.relative_to(package.parent)
        nodes = walked[path]
        fixed, imported = _constants(tree, nodes), _imported(nodes)
        for node in nodes:
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
            elif isinstance(node, ast.Subscript) and _is_sys_modules(node.value):
                found += [f"{line} {use}" for use in _module_uses("sys.modules", node.slice, fixed)]
            elif isinstance(node, ast.Call) and node.args:
                call = _call_name(node.func)
                if isinstance(node.func, ast.Attribute) and node.func.attr == "get" and _is_sys_modules(node.func.value):
                    found += [f"{line} {use}" for use in _module_uses("sys.modules.get", node.args[0], fixed)]
                elif call in MODULE_CALLS:
                    found += [f"{line} {use}" for use in _module_uses(call, node.args[0], fixed)]
                elif call in ATTRIBUTE_CALLS and len(node.args) >= 2:
                    found += [f"{line} {use}" for use in _attribute_uses(call, node.args[1], fixed, ours)]
                elif call == "attrgetter":
                    for arg in node.args:
                        found += [f"{line} {use}" for use in _attribute_uses(call, arg, fixed, ours)]
            if isinstance(node, ast.ClassDef):
                found += [f"{where}:{lineno} {use}" for lineno, use in _class_uses(node, imported)]
    return found


if __name__ == "__main__":
    import sys

    uses = private_uses(pathlib.Path(sys.argv[1]))
    print("\n".join(uses))
    print(len(uses), "uses")
