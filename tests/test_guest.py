"""The guest promise: a library in someone else's process changes nothing global unasked.

Importing ajax_tune, training, saving and restoring a `Runner` and running a Tune trial of
`AjaxTrainable` leave the process as they found it: JAX's config values, the environment
(XLA_FLAGS and JAX_PLATFORMS among it) and working directory, JAX's registered MLIR lowerings,
every logger's level and handlers, the signal handlers and the except/display/unraisable hooks,
tracing and profiling hooks, the count of exit functions, warning filters, `sys.path` and the
import machinery, the garbage collector's settings, numpy's error and print settings, the global
random states of Python and numpy, and every function and class of jax, ray, numpy, optax, flax,
orbax and the standard modules they use (nothing monkeypatched). `tests/support/guest_probe.py`
takes the snapshots, in a fresh process with a plain environment: the suite's own settings
(conftest sets JAX and XLA options for its process and its children) must not stand in for a
user's.
"""

import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent


@pytest.mark.slow  # a fresh process that starts Ray and runs two Tune experiments
def test_ajax_tune_leaves_the_process_it_runs_in_as_it_found_it(tmp_path):
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", str(tmp_path)),
        "PYTHONPATH": str(ROOT),
        "JAX_PLATFORMS": "cpu",  # as a user without a GPU would set it
        # the suite's compilation cache, so the trial's process compiles little (its own setting)
        "AJAX_TUNE_COMPILATION_CACHE": os.environ.get("AJAX_TUNE_COMPILATION_CACHE", str(ROOT / ".jax_cache")),
    }
    done = subprocess.run(
        [sys.executable, "-m", "tests.support.guest_probe", str(tmp_path)],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=550,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    phases = json.loads(done.stdout.strip().splitlines()[-1])
    assert phases["import"] == {}, "importing ajax_tune changed the process"
    assert phases["runner"] == {}, "training, saving and restoring a Runner changed the process"
    assert phases["tune"] == {}, "a Tune trial of AjaxTrainable changed the process (beyond what any Tune run changes)"
    # the control is real: a Tune run does change the process, and the probe sees it
    assert "signals: SIGINT" in phases["tune_control"]


ROOT_LOGGER_PROBE = """
import logging, sys, tempfile
from ajax_tune import Runner
runner = Runner({"env": {"name": "corridor"}, "agent": {"num_envs": 4, "unroll_length": 16, "hidden_sizes": [8]},
                 "train": {"timesteps_per_iteration": 128, "eval_episodes": 1}})
directory = tempfile.mkdtemp() + "/checkpoint"
runner.save(directory)
runner.restore(directory)
print(len(logging.root.handlers), "orbax.checkpoint" in sys.modules)
"""


@pytest.mark.slow  # a fresh process
def test_the_first_checkpoint_leaves_the_root_logger_without_a_handler():
    """Orbax, imported at the first checkpoint, and absl's logging under it give Python's root
    logger a stderr handler when it has none (the probe above imports orbax before its snapshot,
    so it cannot see this): a user who configured no logging still has none after a save and a
    restore."""
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", ""),
        "PYTHONPATH": str(ROOT),
        "JAX_PLATFORMS": "cpu",
    }
    done = subprocess.run(
        [sys.executable, "-c", ROOT_LOGGER_PROBE], env=env, cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["0", "True"]  # orbax was imported, and the root logger kept no handler
