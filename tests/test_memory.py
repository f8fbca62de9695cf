"""A training state too large for the machine is refused with its size, from shapes alone: nothing
is compiled or allocated to find out."""

import pytest

from ajax_tune import memory
from ajax_tune.build import build_loop
from ajax_tune.config import Config
from ajax_tune.errors import ConfigError

TRAIN = {"num_seeds": 4, "timesteps_per_iteration": 4096, "total_timesteps": 40960}


def sac_loop(capacity):
    return build_loop(
        Config.from_dict({"env": {"name": "pendulum"}, "agent": {"name": "sac", "capacity": capacity}, "train": TRAIN})
    )[1]


def test_a_huge_replay_buffer_is_refused_with_its_size():
    loop = sac_loop(10**9)
    # at least the buffer's observations and next observations: 4 seeds x 1e9 x 3 float32, twice
    assert memory.state_bytes(loop) >= 4 * 10**9 * 3 * 4 * 2
    with pytest.raises(ConfigError) as error:
        memory.check_state_fits(loop)
    message = str(error.value)
    assert message.startswith("the trial needs about ")
    assert " GiB of state (agent.capacity 1,000,000,000 transitions x 4 seeds; the largest array agent.buffer" in message
    assert f"this machine has {memory.host_memory_bytes() / memory.GIB:.1f} GiB; lower agent.capacity" in message
    assert loop.compilations == 0  # shapes only


def test_a_state_that_fits_passes_and_counts_its_margin():
    loop = sac_loop(100_000)
    need = memory.check_state_fits(loop)
    assert need == memory.needed_bytes(loop) > memory.state_bytes(loop) + memory.MARGIN_BYTES


def test_gpu_trials_are_checked_only_against_a_known_gpu(monkeypatch):
    loop = sac_loop(10**9)
    monkeypatch.setattr(memory, "device_memory_bytes", lambda: None)  # JAX not up here: unknown, not refused
    assert memory.check_state_fits(loop, gpu=1) == memory.needed_bytes(loop)
    monkeypatch.setattr(memory, "device_memory_bytes", lambda: 80 * memory.GIB)
    with pytest.raises(ConfigError, match=r"its share of the GPU \(0.5 of 80.0 GiB\) is 40.0 GiB"):
        memory.check_state_fits(loop, gpu=0.5)


def test_device_memory_is_not_asked_of_a_cpu_backend():
    assert memory.device_memory_bytes() is None  # this session's JAX runs on the CPU


def test_host_memory_matches_the_operating_system():
    import os

    pages = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    assert abs(memory.host_memory_bytes() - pages) < 0.01 * pages


def test_a_population_counts_every_members_lanes():
    config = {"env": {"name": "pendulum"}, "agent": {"name": "sac", "capacity": 10**9}, "train": TRAIN}
    loop = build_loop(Config.from_dict({**config, "population": {"size": 3}}))[1]
    assert memory.state_bytes(loop) == 3 * memory.state_bytes(sac_loop(10**9))
    with pytest.raises(ConfigError, match=r"transitions x 3 members x 4 seeds; .* \(or the population's size\)$"):
        memory.check_state_fits(loop)
