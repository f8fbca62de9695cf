"""A stopped trial's worker ends quietly when Ray sends it SIGTERM (ASHA stopping trials is normal)."""

import os
import pathlib
import subprocess
import sys

import pytest

TESTS = pathlib.Path(__file__).resolve().parent

DRIVER = """
import atexit, os, signal, threading, time
import ray
from ray import tune
from tests.support.helpers import corridor_config
from ajax_tune import AjaxTrainable

def exit_cleanup():  # what an exiting worker still runs (JAX, orbax, Ray), when Ray's SIGTERM comes
    threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGTERM)).start()
    start = time.monotonic()
    while time.monotonic() - start < 3:
        sum(range(1000))

class Plain(tune.Trainable):
    def step(self):
        return {"x": 1.0}

class Ours(AjaxTrainable):
    pass

def stop_and_terminate(cls, config):
    actor = ray.remote(num_cpus=1)(cls).remote(config=config)
    ray.get(actor.train.remote())
    ray.get(actor.__ray_call__.remote(lambda self: atexit.register(exit_cleanup)))
    ray.get(actor.stop.remote())  # Tune's last call on a stopped trial's actor
    actor.__ray_terminate__.remote()
    time.sleep(6)
    print(f"-- {cls.__name__} done", flush=True)

ray.init(num_cpus=1, include_dashboard=False)
stop_and_terminate(Plain, {})
config = corridor_config()
config["train"]["timesteps_per_iteration"] = 128
stop_and_terminate(Ours, config)
"""


@pytest.mark.slow  # a Ray of its own, with worker output reaching the driver as in a user's terminal
def test_a_stopped_trial_ends_quietly_at_rays_sigterm(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(TESTS.parent)}
    run = subprocess.run(
        [sys.executable, "-c", DRIVER],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
        timeout=300,
        cwd=tmp_path,
    )
    out = run.stdout  # worker output and the driver's own, in the order they came
    assert run.returncode == 0, out[-3000:]
    plain, ours = out.split("-- Plain done")
    assert "SystemExit: 1" in plain and "Traceback" in plain  # Ray's handler, during a plain trainable's exit
    assert "-- Ours done" in ours
    assert "SystemExit" not in ours and "Traceback" not in ours, ours[-3000:]
