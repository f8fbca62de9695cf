"""Checkpoint size and save / restore time of one ajax_tune trial (project interpreter)."""

from __future__ import annotations

import os
import pathlib
import shutil
import tempfile

import protocol

s = protocol.settings()

import jax  # noqa: E402
import numpy as np  # noqa: E402

from ajax_tune.agents import make_agent  # noqa: E402
from ajax_tune.config import Config  # noqa: E402
from ajax_tune.envs import make_env  # noqa: E402
from ajax_tune.loop import TrainLoop  # noqa: E402

config = Config.from_dict(s["config"])
env = make_env(config.env.name)
agent = make_agent(config.agent_name, config.agent, env.observation_space, env.action_space)
loop = TrainLoop(env, agent, config.train)
state, _ = loop.train(loop.init())
jax.block_until_ready(state)
state_bytes = sum(np.asarray(x).nbytes for x in jax.tree.leaves(jax.device_get(state)))

root = pathlib.Path(tempfile.mkdtemp(prefix="ajax_tune_ckpt_"))
saves, restores, sizes = [], [], []
try:
    for i in range(s.get("repeats", 5)):
        where = root / f"ckpt{i}"
        _, save_s, _ = protocol.time_call(loop.save, where, state)
        sizes.append(sum(f.stat().st_size for f in where.rglob("*") if f.is_file()))
        (restored, _), restore_s, _ = protocol.time_call(lambda where=where: jax.block_until_ready(loop.restore(where)))
        saves.append(save_s)
        restores.append(restore_s)
    same = all(
        np.array_equal(a, b) for a, b in zip(jax.tree.leaves(jax.device_get(state)), jax.tree.leaves(jax.device_get(restored)))
    )
finally:
    shutil.rmtree(root, ignore_errors=True)
protocol.emit(
    {
        "side": "ajax_tune",
        "state_bytes": state_bytes,
        "checkpoint_bytes": int(np.median(sizes)),
        "save_s": sorted(saves)[len(saves) // 2],
        "restore_s": sorted(restores)[len(restores) // 2],
        "save_s_all": [round(x, 4) for x in saves],
        "restore_s_all": [round(x, 4) for x in restores],
        "restored_identical": bool(same),
        "device": str(jax.devices()[0]),
        "cpu_count": os.cpu_count(),
        "versions": protocol.versions("ajax-tune", "jax", "orbax-checkpoint"),
    }
)
