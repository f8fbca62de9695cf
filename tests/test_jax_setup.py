"""A trial's JAX settings (`ajax_tune.jax_setup.configure_jax`), applied in a fresh process as a
trial's would be: before JAX's backend starts."""

import json
import os
import subprocess
import sys

import pytest

PROBE = """
import json, os
from ajax_tune.jax_setup import configure_jax
applied = configure_jax(cpus=1)
import jax.numpy as jnp
print(json.dumps({"applied": applied, "flags": os.environ["XLA_FLAGS"], "sum": float((jnp.ones(3) + 1).sum())}))
"""


@pytest.mark.slow  # a fresh Python process
def test_a_one_cpu_trial_gets_single_threaded_xla_with_flags_xla_reads(tmp_path):
    """Every token is a `--flag` XLA knows: it dies on an unknown one, and it silently ignores a
    token without the dashes, which would then set nothing."""
    env = {k: v for k, v in os.environ.items() if k not in ("XLA_FLAGS", "JAX_PLATFORMS")}
    env["AJAX_TUNE_COMPILATION_CACHE"] = str(tmp_path / "cache")
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["sum"] == 6.0
    assert seen["flags"].split() == ["--xla_cpu_multi_thread_eigen=false"]
    assert seen["applied"]["JAX_PLATFORMS"] == "cpu"
    assert seen["applied"]["jax_compilation_cache_dir"] == str(tmp_path / "cache")
