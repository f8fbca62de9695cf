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


# -- what a call holds beside the state --------------------------------------------------------


def corridor(**train):
    from tests.support.helpers import corridor_config

    return corridor_config(train={**corridor_config()["train"], **train})


def test_an_evaluation_too_large_for_the_machine_is_refused_before_compiling():
    """A trillion evaluation episodes per seed: the state is small, the evaluation's envs are not."""
    from tests.support.helpers import assert_refused_before_compiling

    config = corridor(eval_episodes=10**12)
    assert_refused_before_compiling(
        config,
        r"^the trial needs about [\d.]+ GiB, [\d.]+ GiB of it for an evaluation's 1,000,000,000,000 episodes "
        r"\(train.eval_episodes\) x 1 task x 2 seeds, \d+ bytes each; this machine has [\d.]+ GiB; lower train.eval_episodes$",
    )


def test_an_unroll_too_large_for_the_machine_is_refused_before_compiling():
    from tests.support.helpers import assert_refused_before_compiling, corridor_config

    envs, steps = 2**16, 2**20  # 2^36 env steps of 2 float32 observations, for each of 2 seeds: 1 TiB
    config = corridor_config(
        agent={**corridor_config()["agent"], "num_envs": envs, "unroll_length": steps},
        train={**corridor_config()["train"], "timesteps_per_iteration": envs * steps},
    )
    assert_refused_before_compiling(
        config, r"GiB of it for the unroll's observations: 65,536 envs x 1,048,576 steps x 2 seeds; .* lower agent.num_envs"
    )


def test_the_evaluation_counts_every_heldout_task_and_its_rescoring():
    """Held-out tasks are evaluated beside the task in one evaluation, and a CVaR plays them twice:
    1 + 2 x 3 evaluations of the same episodes."""
    plain = build_loop(Config.from_dict(corridor(eval_episodes=64)))[1]
    held = {"tasks": [{"length": n} for n in (2, 3, 4)], "cvar": 0.5}
    both = build_loop(Config.from_dict({**corridor(eval_episodes=64), "heldout": held}))[1]
    assert memory.working_set(both)[0] == 7 * memory.working_set(plain)[0] > 0
    assert "x 7 tasks x 2 seeds" in memory.working_set(both)[1]
    # one episode of the evaluation holds at least one env's state, as an env of the unroll does
    per_env = memory._bytes(plain.abstract_state().env) // (2 * plain.program.num_envs)
    assert memory.working_set(plain)[0] == 2 * 64 * per_env


def test_a_larger_evaluation_needs_more_memory_with_the_same_state():
    """eval_episodes does not change the state, only what a call holds: the need grows by the
    extra evaluation's envs (and the margin's share of them), nothing else."""
    small, large = (build_loop(Config.from_dict(corridor(eval_episodes=n)))[1] for n in (1024, 4096))
    assert memory.state_bytes(small) == memory.state_bytes(large)
    per_env = memory._bytes(small.abstract_state().env) // (2 * small.program.num_envs)
    extra = memory.working_set(large)[0] - memory.working_set(small)[0]
    assert extra == 2 * (4096 - 1024) * per_env > 0  # 2 seeds, one task
    assert memory.needed_bytes(large) - memory.needed_bytes(small) == pytest.approx(extra * (1 + memory.MARGIN_FRACTION), abs=2)


def test_a_heldout_set_too_large_to_evaluate_is_refused_before_it_is_drawn():
    """A trillion held-out tasks: refused from their count, before a task is drawn or named."""
    from tests.support.helpers import assert_refused_before_compiling

    config = {**corridor(eval_episodes=2), "heldout": {"space": {"length": [1, 32]}, "num_tasks": 10**12}}
    assert_refused_before_compiling(
        config, r"GiB of it for an evaluation's 2 episodes \(train.eval_episodes\) x 1,000,000,000,001 tasks x 2 seeds"
    )


def test_a_level_algorithms_scoring_counts_the_levels_it_scores_at_once():
    """SFL plays `candidates` levels `scoring_episodes` times each in one vmapped evaluation
    (`Needs.scored_levels`): a trillion candidates are refused by name before compiling."""
    from tests.support.helpers import assert_refused_before_compiling

    sfl = {"algorithm": "sfl", "candidates": 10**12, "keep": 8, "scoring_episodes": 2}
    assert_refused_before_compiling(
        {**corridor(), "ued": sfl},
        r"GiB of it for the level algorithm's scoring: 1,000,000,000,000 levels x 2 episodes x 2 seeds, \d+ bytes each; "
        r".* lower ued.scoring_episodes or the levels ued.algorithm 'sfl' scores at once$",
    )
    small = build_loop(Config.from_dict({**corridor(), "ued": {**sfl, "candidates": 64}}))[1]
    plain = build_loop(Config.from_dict(corridor()))[1]
    per_env = memory._bytes(small.abstract_state().env) // (2 * small.program.num_envs)
    assert small.level_needs.scored_levels == 64
    scoring, what, _ = memory.working_set(small)
    assert scoring == 2 * 64 * 2 * per_env > memory.working_set(plain)[0]  # 2 seeds x 64 levels x 2 episodes
    assert what.startswith("the level algorithm's scoring: 64 levels x 2 episodes x 2 seeds")


def test_a_level_buffer_too_large_names_the_level_algorithm_not_the_agent():
    from tests.support.helpers import assert_refused_before_compiling

    assert_refused_before_compiling(
        {**corridor(), "ued": {"algorithm": "plr", "buffer_size": 10**12}},
        r"GiB of state \(2 seeds; the largest array ued\.own\.buffer\..* lower the sizes of ued.algorithm 'plr' \(its buffer\)$",
    )
