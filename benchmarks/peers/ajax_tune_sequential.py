"""Train several trial configs one after another in one process with one `Runner`: the first
builds (and compiles) the loop, each later one is `reconfigure`d onto it (a new run; the
program is kept when only traced settings differ). Reports each config's time and the
compilations counted from jit's cache; wall time counts from this process's start.
"""

from __future__ import annotations

import time

START = time.perf_counter()

import protocol  # noqa: E402

s = protocol.settings()

import jax  # noqa: E402

from ajax_tune.jax_setup import configure_jax  # noqa: E402

configure_jax(cpus=s.get("cpus", 1))
from ajax_tune.runner import Runner  # noqa: E402

runner, trials = None, []
for config in s["configs"]:
    t0 = time.perf_counter()
    if runner is None:
        runner = Runner(config)
        rebuilt = True
    else:
        rebuilt = runner.reconfigure(config)
    results = [runner.train() for _ in range(s["iterations"])]
    trials.append(
        {
            "wall_s": round(time.perf_counter() - t0, 3),
            "rebuilt": rebuilt,
            "eval_return": results[-1].get("eval/return_mean"),
            "compilations": results[-1]["perf/compilations"],
        }
    )
protocol.emit(
    {
        "side": "ajax_tune_sequential",
        "wall_s": round(time.perf_counter() - START, 3),
        "trials": trials,
        "compilations": runner.retired_compilations + runner.loop.compilations,
        "device": str(jax.devices()[0]),
    }
)
