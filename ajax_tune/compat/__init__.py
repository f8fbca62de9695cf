"""Every private API of jax, ray, brax, the env suites and CPython that ajax_tune relies on, and
every API that differs between the versions it supports (pyproject's ranges; `versions.py` checks
them): the one door to them, one module per library, each name re-exported here
(`from ajax_tune import compat; compat.jit_cache_size(...)`).

None of the private ones is a public, documented interface; each is here because no public one
does the job. A new version of a library may move or drop any of them: `tests/test_compat.py` calls
every name below against the installed versions (and checks that it calls every one), so such a
move fails there, loudly and by name, rather than somewhere deep in a training run. When it does,
fix the function here. Outside this package no private API is used (`tests/support/private_api.py`).

Nothing is imported at module level: the core layers use this package without importing Ray,
and the command line without importing JAX.
"""

from ajax_tune.compat import jax, pandas, python, ray_recovery, ray_tune, ray_wandb, suites
from ajax_tune.compat.base import CompatError
from ajax_tune.compat.jax import *  # noqa: F403
from ajax_tune.compat.pandas import *  # noqa: F403
from ajax_tune.compat.python import *  # noqa: F403
from ajax_tune.compat.ray_recovery import *  # noqa: F403
from ajax_tune.compat.ray_tune import *  # noqa: F403
from ajax_tune.compat.ray_wandb import *  # noqa: F403
from ajax_tune.compat.suites import *  # noqa: F403

#: the modules, one per library
MODULES = (jax, pandas, python, ray_recovery, ray_tune, ray_wandb, suites)

__all__ = ["CompatError", *(name for module in MODULES for name in module.__all__)]
