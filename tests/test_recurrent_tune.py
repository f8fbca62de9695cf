"""Recurrent PPO where the rest of the project puts agents: as members of a population (lanes of
one program, each env of each lane with its own carry) and as Tune trials that PBT exploits
(the donor's checkpoint, carries included, becomes the recipient's state, and it trains on)."""

import jax
import numpy as np
import pytest

from ajax_tune.results import keys as K
from ajax_tune.runner import Runner
from tests.support.helpers import host

UNROLL = 4 * 16
LRS = (1e-3, 3e-3)


def recurrent_config(**sections):
    config = {
        "env": {"name": "cartpole", "kwargs": {"hide_velocities": True}},
        "agent": {
            "num_envs": 4,
            "unroll_length": 16,
            "num_minibatches": 2,
            "update_epochs": 2,
            "hidden_sizes": [16],
            "lr": LRS[0],
            "recurrent": {"cell": "gru", "size": 8},
        },
        "train": {"total_timesteps": 20 * UNROLL, "timesteps_per_iteration": 2 * UNROLL, "num_seeds": 2, "eval_episodes": 2},
    }
    config.update(sections)
    return config


@pytest.mark.heavy
def test_a_population_of_recurrent_members_keeps_a_carry_per_env_of_each_lane():
    """Two members differing in lr, two seeds each: four lanes, each with its envs' carries, each
    member under its own settings, in one program; and a member's lanes, carries included, are
    those of a single run of its config (`tests/test_population.py` checks this agent by agent
    for feed-forward agents; here the carry is the leaf it has not seen), and the member reports
    that run's evaluation return. The single run is a second (small, cheap-build) program: 9 s
    with a cold cache on 2 quiet cores, against 5 s without it."""
    runner = Runner(recurrent_config(population={"members": [{"agent": {"lr": lr}} for lr in LRS]}))
    first = runner.train()
    state = host(runner.state)
    assert runner.loop.num_lanes == 4 and state.carry.shape == (4, 4, 8)
    assert np.all(np.isfinite(state.carry)) and not np.array_equal(state.carry[0], state.carry[2])
    np.testing.assert_allclose(state.agent.hp.lr.peak, np.repeat(np.float32(LRS), 2))
    assert runner.train()["perf/compilations"] == 1

    single = Runner(recurrent_config(agent={**recurrent_config()["agent"], "lr": LRS[1]}))
    result = single.train()
    ours, theirs = jax.tree.map(lambda x: x[2:], state), host(single.state)
    assert jax.tree.structure(ours) == jax.tree.structure(theirs)
    # the tolerance of tests/test_population.py: a vmap over more lanes may reorder a reduction
    for x, y in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
        np.testing.assert_allclose(x, y, rtol=1e-5, atol=1e-6)
    assert first[K.member_key(1, "eval/return_mean")] == result["eval/return_mean"]


def test_tunes_pbt_exploits_a_recurrent_trial_and_it_trains_on(ray_session, tmp_path):
    from ray import tune

    from tests.test_tune import fit_synch_pbt

    space = recurrent_config(train={**recurrent_config()["train"], "num_seeds": 1})
    space["agent"] = {**space["agent"], "lr": tune.grid_search(list(LRS)), "ent_coef": 0.01}
    # two trials: at the interval the worse one takes the better one's checkpoint
    mutations = {"agent": {"ent_coef": [0.0, 0.01, 0.02]}}
    _, per_trial, exploits = fit_synch_pbt(space, tmp_path, "recurrent_pbt", mutations, metric="train/episode_return_mean")
    assert exploits, "Tune's PBT never exploited"
    budget = space["train"]["timesteps_per_iteration"]
    assert len(per_trial) == 2
    for rows in per_trial.values():
        assert rows[-1]["training_iteration"] == 2  # every trial, a recipient too, trained to the end
        for r in rows:
            assert r["perf/compilations"] == 1 and r["env_steps"] == r["training_iteration"] * budget
            assert np.isfinite(r["loss/policy"]) and r["train/nonfinite"] == 0.0
    assert {r["config"]["agent"]["ent_coef"] for rows in per_trial.values() for r in rows} <= {0.0, 0.01, 0.02}
