"""Layers: imports point down DESIGN.md's layers (`LAYERS`), the core (`ajax_tune.runner` and
everything below it) runs without Ray, a curriculum never needs the runner, and no module imports
one that imports it back.

The static checks read every `import` statement of the package, including those deferred inside
functions (a circle hidden behind a late import is still a circle); imports made only for
annotations (`if TYPE_CHECKING:`) are left out.
"""

import ast
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import ajax_tune

PROBE = textwrap.dedent("""
    import json, sys
    import ajax_tune.curriculum, ajax_tune.curriculum.task_control
    curriculum_needs_runner = "ajax_tune.runner" in sys.modules
    from ajax_tune.runner import Runner
    import ajax_tune.expected_keys
    Runner.check({"env": {"name": "cartpole"}, "callbacks": [{"class": "ajax_tune.curriculum:ThresholdCurriculum",
                                                                 "kwargs": {"levels": {"pole_length": [0.5, 0.6]}}}],
                  "task_sampler": {"name": "uniform", "kwargs": {"space": {"pole_length": [0.4, 0.6]}}}})
    core = sorted(m for m in sys.modules if m == "ray" or m.startswith("ray."))
    import ajax_tune.tune.trainable  # the Tune layer: Ray arrives here, and the probe sees it
    print(json.dumps({"core": core, "tune": "ray" in sys.modules, "curriculum_needs_runner": curriculum_needs_runner}))
""")


@pytest.mark.slow  # a fresh Python process
def test_the_core_never_imports_ray():
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"core": [], "tune": True, "curriculum_needs_runner": False}


CHECK_PROBE = textwrap.dedent("""
    import json
    from ajax_tune.compat import backends_are_initialized
    from ajax_tune.runner import Runner
    started = {}
    for agent, env in (("ppo", "cartpole"), ("dqn", "cartpole"), ("sac", "pendulum"), ("td3", "pendulum")):
        Runner.check({"env": {"name": env}, "agent": {"name": agent}})
        started[agent] = backends_are_initialized()
    print(json.dumps(started))
""")


@pytest.mark.slow  # a fresh Python process
def test_checking_a_config_starts_no_jax_backend():
    """A driver that only validates (`Runner.check`, as `ajax-tune run` does before Ray starts) must
    not start JAX's backends: a started backend makes every later fork a warning under Ray, and
    fixes platform and memory settings before a trial can choose them. Each agent's constructor
    describes its state by shapes, never by arrays."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", CHECK_PROBE], env=env, capture_output=True, text=True, timeout=300, check=True)
    started = json.loads(out.stdout.strip().splitlines()[-1])
    assert started == {"ppo": False, "dqn": False, "sac": False, "td3": False}


VALIDATE_PROBE = textwrap.dedent("""
    import json, sys
    from ajax_tune.errors import ConfigError
    from ajax_tune.tune.experiment import Experiment
    seen = {}
    for name, overrides in (("quickstart", []), ("population", ["tune.population=2"])):
        Experiment.load(sys.argv[1], overrides)
        seen[name] = sorted(m for m in ("ray", "ray.tune") if m in sys.modules)
    try:  # an option is still checked against the searcher's signature, which imports Tune
        Experiment.load(sys.argv[1], ["tune.search={name: random, max_concurent: 2}"])
    except ConfigError as exc:
        seen["refused"] = str(exc)
    seen["after_refusal"] = sorted(m for m in ("ray", "ray.tune") if m in sys.modules)
    print(json.dumps(seen))
""")


@pytest.mark.slow  # a fresh Python process
def test_validating_an_experiment_with_tunes_defaults_imports_no_ray():
    """`ajax-tune run` validates before its Ray starts and imports Ray Tune (a second here) while
    Ray starts: validating a search with no options of its own, as a population or not, must not
    import it. A search given options is built to check them, Tune imported."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    quickstart = str(pathlib.Path(__file__).resolve().parent.parent / "configs" / "quickstart.yaml")
    out = subprocess.run(
        [sys.executable, "-c", VALIDATE_PROBE, quickstart], env=env, capture_output=True, text=True, timeout=300, check=True
    )
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen["quickstart"] == [] and seen["population"] == []
    assert "tune.search (random): unknown option 'max_concurent'" in seen["refused"]
    assert seen["after_refusal"] == ["ray", "ray.tune"]


PACKAGE = pathlib.Path(ajax_tune.__file__).resolve().parent


def _module_name(path: pathlib.Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports() -> dict[str, set[str]]:
    """Each ajax_tune module and the ajax_tune modules it imports anywhere in its source."""
    modules = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found: set[str] = set()
        for node in _runtime_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                found.add(node.module)
                found |= {f"{node.module}.{alias.name}" for alias in node.names}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _runtime_nodes(tree: ast.AST):
    """Every node but those under `if TYPE_CHECKING:` (imports for annotations only)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", "")) == "TYPE_CHECKING":
            yield from (n for branch in node.orelse for n in [branch, *_runtime_nodes(branch)])
            continue
        yield node
        yield from _runtime_nodes(node)


def test_no_module_imports_one_that_imports_it_back():
    graph = _imports()
    # A package counts like a module: its __init__ imports its submodules when it is imported, so a
    # submodule importing a sibling through the package (`from ajax_tune.agents import x` inside
    # ajax_tune.agents.ppo) closes a circle. Only the top package is left out: it imports nothing
    # until an attribute is asked for.
    edges = {m: deps - {"ajax_tune"} for m, deps in graph.items() if m != "ajax_tune"}
    circles = []
    for start in edges:
        stack, seen = [(start, (start,))], set()
        while stack:
            node, path = stack.pop()
            for dep in edges.get(node, ()):
                if dep == start:
                    circles.append(" -> ".join((*path, dep)))
                elif dep not in seen:
                    seen.add(dep)
                    stack.append((dep, (*path, dep)))
    assert not circles, "import circles:\n" + "\n".join(sorted(set(circles)))


#: DESIGN.md's layers, top first, each named by module prefixes (a module's longest matching prefix
#: gives its layer): a module imports modules of its own layer and of the layers below it, never
#: one above. Three placements differ from the drawing's packages, each for what the module is:
#: - a section of the trial config that `config.py` parses sits in the config layer, as
#:   `loop.config` does from its package below it: the population section and its draws (their
#:   package's `__init__` imports nothing), the `heldout` section and the task space it is written in;
#: - `results/` holds only the vocabulary of result keys, result records and series: it imports
#:   nothing but the leaves, and every layer from the loop up writes or reads result keys;
#: - what builds a trial (`build`), holds its members, predicts its keys or renders the reference
#:   sits with the runner; the checkpoint format, datasets and a policy outside JAX with the loop.
LAYERS = (
    ("cli", ("ajax_tune.cli",)),
    ("tune", ("ajax_tune.tune", "ajax_tune.plotting")),
    ("runner", ("ajax_tune.runner", "ajax_tune.members", "ajax_tune.build", "ajax_tune.expected_keys", "ajax_tune.doc_tables")),
    ("population", ("ajax_tune.population",)),
    ("curriculum", ("ajax_tune.curriculum", "ajax_tune.samplers")),
    (
        "config",
        (
            "ajax_tune.config",
            "ajax_tune.population.spec",
            "ajax_tune.population.draws",
            "ajax_tune.heldout",
            "ajax_tune.task_space",
        ),
    ),
    ("loop", ("ajax_tune.loop", "ajax_tune.checkpoint", "ajax_tune.datasets", "ajax_tune.policy")),
    ("ued", ("ajax_tune.ued",)),
    ("agents", ("ajax_tune.agents",)),
    ("envs", ("ajax_tune.envs", "ajax_tune.twins", "ajax_tune.video")),
    ("results", ("ajax_tune.results",)),
    (
        "leaves",
        (
            "ajax_tune.fields",
            "ajax_tune.schedules",
            "ajax_tune.errors",
            "ajax_tune.compat",
            "ajax_tune.imports",
            "ajax_tune.spaces",
            "ajax_tune.versions",
            "ajax_tune.jax_setup",
            "ajax_tune.memory",
            "ajax_tune.yaml_loader",
        ),
    ),
)
LAYER_NAMES = [name for name, _ in LAYERS]


def layer_of(module: str) -> str | None:
    """The layer of `module`: the one its longest matching prefix is declared in (None: no layer)."""
    found = [
        (len(prefix), name)
        for name, prefixes in LAYERS
        for prefix in prefixes
        if module == prefix or module.startswith(prefix + ".")
    ]
    return max(found)[1] if found else None


def climbs(graph: dict[str, set[str]]) -> list[str]:
    """Each import of a module of a higher layer than the importer's."""
    out = []
    for module, deps in sorted(graph.items()):
        if module == "ajax_tune":  # the top package imports nothing until an attribute is asked for
            continue
        here = LAYER_NAMES.index(layer_of(module))
        for dep in sorted(deps - {"ajax_tune"}):
            if LAYER_NAMES.index(layer_of(dep)) < here:
                out.append(f"{module} ({layer_of(module)}) imports {dep} ({layer_of(dep)})")
    return out


def test_every_module_has_a_layer():
    unplaced = sorted(m for m in _imports() if m != "ajax_tune" and layer_of(m) is None)
    assert not unplaced, "declare the layer of these modules in LAYERS: " + ", ".join(unplaced)


def test_imports_point_down_the_layers():
    found = climbs(_imports())
    assert not found, "imports that climb a layer:\n" + "\n".join(found)


def test_a_climbing_import_is_found():
    """The check itself: the loop importing the runner, and the population section importing
    its package's PBT, are each reported; PBT importing the section and the result keys is not."""
    graph = {
        "ajax_tune.loop.program": {"ajax_tune.runner"},
        "ajax_tune.population.spec": {"ajax_tune.population.pbt"},
        "ajax_tune.population.pbt": {"ajax_tune.population.spec", "ajax_tune.results.keys"},
    }
    assert climbs(graph) == [
        "ajax_tune.loop.program (loop) imports ajax_tune.runner (runner)",
        "ajax_tune.population.spec (config) imports ajax_tune.population.pbt (population)",
    ]


#: Modules below the Tune layer that may import Ray, each only inside the functions that run where
#: Tune does: compat, the one door to every library's private APIs, and search spaces turned into
#: Tune's domains.
RAY_DOORS = ("ajax_tune.compat", "ajax_tune.spaces")


def test_nothing_below_the_tune_layer_imports_ray():
    offenders = []
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        if name == "ajax_tune" or layer_of(name) in ("cli", "tune") or name.startswith(RAY_DOORS):
            continue
        for node in _runtime_nodes(ast.parse(path.read_text())):
            modules = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom)
                else []
            )
            offenders += [f"{name} imports {m}" for m in modules if m == "ray" or m.startswith("ray.")]
    assert not offenders, "\n".join(offenders)
