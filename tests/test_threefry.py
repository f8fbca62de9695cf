"""Threefry-2x32 lowered as straight-line code on the CPU (`ajax_tune/threefry.py`): the same hash,
bit for bit, with no loop in the compiled program."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ajax_tune import threefry

# Random123's known answers for Threefry-2x32 with 20 rounds: (key, counter) -> output.
KNOWN_ANSWERS = [
    ((0x00000000, 0x00000000), (0x00000000, 0x00000000), (0x6B200159, 0x99BA4EFE)),
    ((0xFFFFFFFF, 0xFFFFFFFF), (0xFFFFFFFF, 0xFFFFFFFF), (0x1CB996FC, 0xBB002BE7)),
    ((0x13198A2E, 0x03707344), (0x243F6A88, 0x85A308D3), (0xC4923A9C, 0x483DF7A0)),
]

# Draws of every kind the loop makes, printed as integers so two processes can be compared.
DRAWS = """
import json, sys
import jax, jax.numpy as jnp
from ajax_tune import threefry
installed = threefry.install()
key = jax.random.key(7)
out = {
    "split": jax.random.key_data(jax.random.split(key, (3, 5))).tolist(),
    "bits": jax.random.bits(key, (4, 33), jnp.uint32).tolist(),
    "uniform": jax.random.uniform(jax.random.fold_in(key, 3), (17,)).tolist(),
    "categorical": jax.random.categorical(key, jnp.zeros((8, 5))).tolist(),
    "permutation": jax.random.permutation(key, 50).tolist(),
    "installed": installed,
    "while_loops": jax.jit(lambda k: jax.random.split(k, 4)).lower(key).compile().as_text().count(" while("),
}
print(json.dumps(out))
"""


def test_the_hash_gives_random123s_known_answers():
    for (k1, k2), (c1, c2), expected in KNOWN_ANSWERS:
        as_numpy = threefry.threefry2x32(*(np.array([v], np.uint32) for v in (k1, k2, c1, c2)))
        assert [int(a[0]) for a in as_numpy] == list(expected)
        as_jax = jax.jit(threefry.threefry2x32)(*(jnp.array([v], jnp.uint32) for v in (k1, k2, c1, c2)))
        assert [int(a[0]) for a in as_jax] == list(expected)


def _ops(compiled) -> list[str]:
    """A compiled program's instructions with their names left out, in order."""
    return [re.sub(r"%[\w.\-]+", "%", line.split(", metadata=")[0]) for line in compiled.as_text().splitlines() if " = " in line]


@pytest.mark.parametrize("key_shape, count_shape", [((), (5, 3)), ((1, 3), (2, 3)), ((4,), (4,))])
def test_the_emitted_lowering_is_the_program_tracing_the_hash_gives(key_shape, count_shape):
    # The lowering emits `threefry2x32`'s ops directly instead of tracing it at every call site:
    # the bits, and the optimised program op for op, are those of the traced function.
    assert threefry.install()
    from jax.extend.random import threefry2x32_p

    rng = np.random.default_rng(0)
    args = [
        jnp.asarray(rng.integers(0, 2**32, shape, dtype=np.uint32)) for shape in (key_shape, key_shape, count_shape, count_shape)
    ]
    emitted = jax.jit(lambda *a: threefry2x32_p.bind(*a)).lower(*args).compile()
    traced = jax.jit(lambda *a: list(threefry.threefry2x32(*a))).lower(*args).compile()
    for ours, reference in zip(emitted(*args), traced(*args)):
        assert ours.shape == count_shape and np.array_equal(np.asarray(ours), np.asarray(reference))
    assert _ops(emitted) == _ops(traced)


def _draws(rolled: bool) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", threefry.ROLLED_ENV: "1" if rolled else "0"}
    done = subprocess.run([sys.executable, "-c", DRAWS], env=env, capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_draw_is_the_one_jaxs_own_lowering_makes():
    ours, jaxs = _draws(rolled=False), _draws(rolled=True)
    assert ours.pop("installed") is True and jaxs.pop("installed") is False
    assert ours.pop("while_loops") == 0, "the unrolled hash left a loop in the program"
    assert jaxs.pop("while_loops") >= 1, "JAX's CPU lowering was expected to loop (the reason for this module)"
    assert ours == jaxs


# A fresh process that builds a loop and nothing else, then compiles a split.
LOOP_ONLY = """
import jax
from ajax_tune.agents import PPO, PPOConfig
from ajax_tune.envs import make_env
from ajax_tune.loop import LoopConfig, TrainLoop
env = make_env("cartpole")
agent = PPO(PPOConfig(num_envs=2, unroll_length=4, num_minibatches=1, update_epochs=1), env.observation_space, env.action_space)
TrainLoop(env, agent, LoopConfig(total_timesteps=8, timesteps_per_iteration=8))
print(jax.jit(lambda k: jax.random.split(k, 4)).lower(jax.random.key(0)).compile().as_text().count(" while("))
"""


@pytest.mark.slow  # a fresh Python process
def test_building_a_loop_installs_it_in_its_process():
    env = {**os.environ, "JAX_PLATFORMS": "cpu", threefry.ROLLED_ENV: "0"}
    done = subprocess.run([sys.executable, "-c", LOOP_ONLY], env=env, capture_output=True, text=True, timeout=120, check=True)
    assert int(done.stdout.strip().splitlines()[-1]) == 0, "a split after building a loop still compiled JAX's loop"
