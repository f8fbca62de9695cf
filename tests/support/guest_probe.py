"""What ajax_tune changes in the process of a user who imports it: run as a script in a fresh
process with a plain environment (`tests/test_guest.py`), it prints, as JSON, every difference
from a snapshot taken before ajax_tune was imported, after each of: importing it, training,
saving and restoring a Runner, and running a Tune trial of `AjaxTrainable` in this process.

The snapshot comes after `ray.init`, a Tune run of a plain function trainable and the import of
the libraries ajax_tune uses (`DEPENDENCIES`), so what they set up for themselves on import is in
it (gymnasium sets an environment variable and a warning filter, wandb configures its logger,
orbax's first absl message gives the root logger a handler): what is left is ajax_tune's. A
Tune run changes some things each time (its SIGINT handler, an exit function), so the Tune
trial of `AjaxTrainable` is compared with a Tune run of the plain trainable just before it. The
trial's own process is Ray's worker; what `AjaxTrainable.setup` sets there (`configure_jax`) is
that worker's business.

`python -m tests.support.guest_probe STORAGE_DIR [--break WHAT]`: `--break` makes ajax_tune do
one of the things it must not, after the snapshot (for checking that the probe sees it).
"""

from __future__ import annotations

import argparse
import faulthandler
import gc
import importlib
import json
import logging
import os
import pathlib
import random
import signal
import sys
import threading
import types
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import ray
from ray import tune

ROOT = pathlib.Path(__file__).resolve().parent.parent.parent
#: What ajax_tune imports of other libraries when it is imported and when a Runner trains and saves.
DEPENDENCIES = ("flax.linen", "optax", "gymnasium", "matplotlib.figure", "orbax.checkpoint", "ray.air.integrations.wandb")
#: Libraries whose functions and classes must stay the ones they define (nothing monkeypatched).
WATCHED = ("jax", "jaxlib", "ray", "numpy", "optax", "flax", "orbax", "logging", "warnings", "os", "signal", "atexit")

CONFIG = {
    "env": {"name": "corridor", "kwargs": {"max_length": 8, "max_episode_steps": 10}, "task": {"length": 3}},
    "agent": {"num_envs": 4, "unroll_length": 8, "hidden_sizes": [8], "num_minibatches": 1, "update_epochs": 1},
    "train": {"timesteps_per_iteration": 32, "num_seeds": 1, "eval_episodes": 1},
}


def compat_readers():
    """ajax_tune.compat's readers of the lowering registry and of atexit, loaded without running
    ajax_tune's own `__init__` (its import is under test), then forgotten by `sys.modules`."""
    package = types.ModuleType("ajax_tune")
    package.__path__ = [str(ROOT / "ajax_tune")]
    sys.modules["ajax_tune"] = package
    compat = importlib.import_module("ajax_tune.compat")
    for name in [m for m in sys.modules if m == "ajax_tune" or m.startswith("ajax_tune.")]:
        del sys.modules[name]
    return compat.registered_lowerings, compat.atexit_callback_count


REGISTERED_LOWERINGS, ATEXIT_CALLBACKS = compat_readers()


def _loggers() -> dict:
    manager = logging.root.manager
    loggers = {"": logging.root, **{n: lg for n, lg in manager.loggerDict.items() if isinstance(lg, logging.Logger)}}
    return {
        name: (logger.level, logger.propagate, logger.disabled, tuple(logger.handlers), tuple(logger.filters))
        for name, logger in loggers.items()
    }


def _definitions() -> dict:
    """Every function and class the watched libraries' loaded modules define, and every method
    of those classes, by identity: a monkeypatch shows as another object under the same name."""
    seen = {}
    for name, module in list(sys.modules.items()):
        if module is None or name.split(".")[0] not in WATCHED:
            continue
        for attr, value in list(vars(module).items()):
            if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, type)):
                seen[f"{name}.{attr}"] = value
                if isinstance(value, type) and value.__module__ == name:
                    for member, method in list(vars(value).items()):
                        if isinstance(method, (types.FunctionType, classmethod, staticmethod, property)):
                            seen[f"{name}.{attr}.{member}"] = method
    return seen


def snapshot() -> dict:
    return {
        "jax.config": dict(jax.config.values),
        "os.environ": dict(os.environ),
        "cwd": os.getcwd(),
        "lowerings": REGISTERED_LOWERINGS(),
        "loggers": _loggers(),
        "logging": (logging.root.manager.disable, logging.getLoggerClass(), logging.lastResort, logging.raiseExceptions),
        "signals": {sig.name: signal.getsignal(sig) for sig in signal.valid_signals() if isinstance(sig, signal.Signals)},
        "hooks": (sys.excepthook, sys.displayhook, sys.unraisablehook, sys.breakpointhook, threading.excepthook),
        "tracing": (sys.gettrace(), sys.getprofile(), threading.gettrace(), threading.getprofile(), faulthandler.is_enabled()),
        "atexit": ATEXIT_CALLBACKS(),
        "warnings.filters": list(warnings.filters),
        "sys": (list(sys.path), list(sys.meta_path), list(sys.path_hooks), sys.getrecursionlimit(), sys.getswitchinterval()),
        "gc": (gc.isenabled(), gc.get_threshold()),
        "numpy": (np.geterr(), np.get_printoptions()),
        "random": (random.getstate(), np.random.get_state(legacy=False)),
        "definitions": _definitions(),
    }


def _same(a, b) -> bool:
    try:
        if isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys():
            return all(_same(a[k], b[k]) for k in a)
        if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
            return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and np.array_equal(a, b)
        if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)) and len(a) == len(b):
            return type(a) is type(b) and all(_same(x, y) for x, y in zip(a, b))
        return a is b or bool(a == b)
    except Exception:  # objects that refuse to compare: only themselves are the same
        return a is b


def differences(before: dict, after: dict) -> dict[str, str]:
    """What changed, by what changed ("part: key"), in words. A key that appears is a change,
    except where it cannot change anything the user had: a new logger left at its defaults, a
    function or class of a module loaded after the snapshot, a lowering of a primitive that had
    none (a module loaded since defines it)."""
    found = {}
    known_primitives = {primitive for _, primitive in before["lowerings"]}
    for part, old in before.items():
        new = after[part]
        if not isinstance(old, dict):
            if not _same(old, new):
                found[part] = f"{old!r:.300} -> {new!r:.300}"
            continue
        for key in sorted(set(old) | set(new), key=str):
            if key not in new:
                found[f"{part}: {key}"] = "removed"
            elif key not in old:
                fresh_logger = part == "loggers" and new[key] == (logging.NOTSET, True, False, (), ())
                if fresh_logger or part == "definitions" or (part == "lowerings" and key[1] not in known_primitives):
                    continue
                found[f"{part}: {key}"] = f"added {new[key]!r:.200}"
            elif not _same(old[key], new[key]):
                found[f"{part}: {key}"] = f"{old[key]!r:.200} -> {new[key]!r:.200}"
    return found


def plain(config):
    tune.report({"x": 1.0})


def tune_run(trainable, storage: pathlib.Path, name: str, config: dict) -> None:
    tuner = tune.Tuner(
        trainable,
        param_space=config,
        run_config=tune.RunConfig(name=name, storage_path=str(storage), stop={"training_iteration": 1}, verbose=0),
    )
    results = tuner.fit()
    assert not results.errors, results.errors


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("storage")
    parser.add_argument("--break", dest="breaks", default="")
    args = parser.parse_args()
    storage = pathlib.Path(args.storage)

    jnp.ones(3).block_until_ready()  # a user's process that has used JAX
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    tune_run(plain, storage, "plain", {})
    for module in DEPENDENCIES:
        importlib.import_module(module)
    before = snapshot()
    phases = {}

    import ajax_tune
    import ajax_tune.plotting
    import ajax_tune.tune
    import ajax_tune.tune.wandb_logging
    from ajax_tune import AjaxTrainable, Runner

    if args.breaks == "env":
        os.environ["AJAX_TUNE_WAS_HERE"] = "1"
    elif args.breaks == "jax_config":
        jax.config.update("jax_default_matmul_precision", "highest")
    elif args.breaks == "logging":
        logging.getLogger("ray").setLevel(logging.ERROR)
    elif args.breaks == "patch":
        tune.Trainable.save_checkpoint = lambda self, checkpoint_dir: None
    phases["import"] = differences(before, snapshot())

    runner = Runner(CONFIG)
    runner.train()
    runner.save(storage / "runner")
    restored = Runner.from_checkpoint(storage / "runner")
    restored.train()
    trained = snapshot()
    phases["runner"] = differences(before, trained)

    tune_run(plain, storage, "plain-again", {})
    plain_again = snapshot()
    control = differences(trained, plain_again)  # what any Tune run changes
    tune_run(AjaxTrainable, storage, "ajax", CONFIG)
    after = snapshot()
    phases["tune"] = {key: change for key, change in differences(plain_again, after).items() if key not in control}
    phases["tune"].pop("atexit", None)  # counted: no more exit functions than the plain run added
    added, added_by_plain = after["atexit"] - plain_again["atexit"], plain_again["atexit"] - trained["atexit"]
    if added > added_by_plain:
        phases["tune"]["atexit"] = f"{added} exit functions added; a plain Tune run adds {added_by_plain}"
    phases["tune_control"] = control
    print(json.dumps({"ajax_tune": ajax_tune.__version__, **phases}))


if __name__ == "__main__":
    main()
