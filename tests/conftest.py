"""Test session set-up: JAX on the CPU with a persistent compilation cache, set before JAX starts."""

import collections
import os
import pathlib

os.environ.setdefault("JAX_PLATFORMS", "cpu")
_CACHE = pathlib.Path(__file__).resolve().parent.parent / ".jax_cache"
os.environ.setdefault("AJAX_TUNE_COMPILATION_CACHE", str(_CACHE))
# Most tests train for a few calls, where XLA's optimisation passes cost more time than they save:
# compile with few of them (set before JAX starts, so Ray workers and subprocesses inherit it).
# Tests marked `learning` (they train to a threshold in this process) or `optimised` (they check a
# claim about the build users run, such as bit-identical split runs) compile fully optimised.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
# The same build without XLA's CPU fusion emitters compiles in about half the time and runs these
# small programs about as fast. Fully optimised compiles get the emitters back (below), so they are
# exactly the build users run; Ray workers and subprocesses inherit the flag and only build few passes.
_FAST_BUILD_FLAG = "--xla_cpu_use_fusion_emitters=false"
if "xla_cpu_use_fusion_emitters" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = f"{os.environ.get('XLA_FLAGS', '')} {_FAST_BUILD_FLAG}".strip()

# Every Ray the suite starts (the session's, and those of the examples, the CLI's subprocesses and
# the cluster tests) skips the idle workers Ray prestarts for a first driver: Tune gives every trial
# actor a runtime env, so no trial runs in one. This is the suite's own choice, through Ray's
# documented `RAY_<config>` variables; ajax_tune itself leaves Ray's settings alone.
os.environ.setdefault("RAY_prestart_worker_first_driver", "0")

import jax  # noqa: E402
from jax._src import compiler as _compiler  # noqa: E402

from ajax_tune import jax_setup  # noqa: E402

jax.config.update("jax_compilation_cache_dir", os.environ["AJAX_TUNE_COMPILATION_CACHE"])
jax.config.update("jax_persistent_cache_min_compile_time_secs", jax_setup.CACHE_MIN_COMPILE_S)
jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

_compile_options = _compiler.get_compile_options


def _users_build_when_fully_optimised(*args, **kwargs):
    """A compile with every pass on undoes the fast build's flag (XLA takes a per-compile option
    over XLA_FLAGS): split runs checked there are bit-identical in the users' build, not a cousin."""
    options = _compile_options(*args, **kwargs)
    chosen = {name for name, _ in options.env_option_overrides}  # a program's own choice stands (the loop's init)
    if not jax.config.read("jax_disable_most_optimizations") and "xla_cpu_use_fusion_emitters" not in chosen:
        options.env_option_overrides = [*options.env_option_overrides, ("xla_cpu_use_fusion_emitters", True)]
    return options


_compiler.get_compile_options = _users_build_when_fully_optimised

import pytest  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parent.parent  # where `tests.support` is importable from
SLOW_MODULES = {"test_examples.py"}  # each test runs a script in its own process, with its own Ray
BEFORE_RAY_MODULES = {"test_bad_input.py"}  # asserts that nothing started Ray in this process


def pytest_collection_modifyitems(config, items):
    """Mark `slow` every test that starts Ray (uses the `ray_session` fixture), spawns processes,
    trains to a threshold (`learning`), compiles fully optimised (`optimised`) or compiles and
    trains whole programs for seconds (`heavy`), so that `pytest -m "not slow"` is the fast loop.
    Plain `pytest` runs everything but the `long` tier, the learning claims of benchmark size
    (`pytest -m long` runs them, as does naming one by its node id)."""
    if not config.option.markexpr and not any("::" in arg for arg in config.args):
        long = [item for item in items if item.get_closest_marker("long") is not None]
        if long:
            config.hook.pytest_deselected(items=long)
            items[:] = [item for item in items if item.get_closest_marker("long") is None]
    for item in items:
        heavy = item.get_closest_marker("heavy") is not None
        if (
            "ray_session" in getattr(item, "fixturenames", ())
            or item.path.name in SLOW_MODULES
            or heavy
            or wants_full_build(item)
        ):
            item.add_marker(pytest.mark.slow)
    # The heaviest files first. Each xdist worker takes a whole file at a time (`--dist loadfile`),
    # so a long file handed out last runs alone at the end while the other core waits: in a cold
    # run in collection order, one worker finished 59 s before the other. Rough seconds per test
    # of each kind; the sort is stable, so a file's tests keep their order. Files that check that a
    # refused run starts no Ray go before them all, while the worker's session Ray is not up yet
    # (`ajax-tune run` uses a Ray its process already runs).
    cost = collections.Counter()
    for item in items:
        cost[item.path] += 30 if wants_full_build(item) else 10 if item.get_closest_marker("slow") else 0.2
    items.sort(key=lambda item: (item.path.name not in BEFORE_RAY_MODULES, -cost[item.path]))


def wants_full_build(item) -> bool:
    return any(item.get_closest_marker(name) is not None for name in ("learning", "long", "optimised"))


@pytest.fixture(autouse=True)
def _fully_optimised(request):
    """Full XLA optimisation for the duration of a `learning` test (its run time, not its compile
    time, is what it costs) or an `optimised` one (what it checks must hold where users run)."""
    if not wants_full_build(request.node):
        yield
        return
    from tests.support.helpers import fully_optimised

    with fully_optimised():
        yield


def cpus_per_worker() -> int:
    """This process's share of the machine: each xdist worker starts a Ray of its own, so the
    workers split the CPUs between them rather than each booking all of them."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    return max(1, len(os.sched_getaffinity(0)) // workers)


@pytest.fixture(scope="session")
def ray_session():
    """One local Ray for the whole session, of this worker's share of the CPUs. Workers inherit
    the environment, so they use the same compilation cache and, with the repository root on
    their PYTHONPATH, import the test helpers as `tests.support.*`."""
    import ray

    paths = [str(ROOT), os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
    os.environ.setdefault("RAY_AIR_NEW_OUTPUT", "0")
    ray.init(num_cpus=cpus_per_worker(), include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield ray
    ray.shutdown()
