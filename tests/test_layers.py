"""Layers: the core (`ajax_tune.runner` and everything below it) runs without Ray, and a
curriculum never needs the runner."""

import json
import os
import subprocess
import sys
import textwrap

PROBE = textwrap.dedent("""
    import json, sys
    import ajax_tune.curriculum, ajax_tune.task_control
    curriculum_needs_runner = "ajax_tune.runner" in sys.modules
    from ajax_tune.runner import Runner
    import ajax_tune.results
    Runner.check({"env": {"name": "cartpole"}, "callbacks": [{"class": "ajax_tune.curriculum:ThresholdCurriculum",
                                                                 "kwargs": {"levels": {"pole_length": [0.5, 0.6]}}}],
                  "task_sampler": {"name": "uniform", "kwargs": {"space": {"pole_length": [0.4, 0.6]}}}})
    core = sorted(m for m in sys.modules if m == "ray" or m.startswith("ray."))
    import ajax_tune.trainable  # the Tune layer: Ray arrives here, and the probe sees it
    print(json.dumps({"core": core, "tune": "ray" in sys.modules, "curriculum_needs_runner": curriculum_needs_runner}))
""")


def test_the_core_never_imports_ray():
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=300, check=True)
    seen = json.loads(out.stdout.strip().splitlines()[-1])
    assert seen == {"core": [], "tune": True, "curriculum_needs_runner": False}
