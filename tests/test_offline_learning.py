"""Offline agents learn pendulum from datasets a trained SAC policy collected.

One SAC policy is trained online per test session (module fixture), then collects an expert
dataset with exploration noise (a uniform random action with probability 0.2) and a random one.
Returns are compared as D4RL does, normalised between the random policy's return (0) and the
collecting policy's (1): pendulum's returns are negative, so "90% of the collecting policy's
return" is a normalised score of at least 0.9.
"""

import jax
import numpy as np
import pytest

from ajax_tune import datasets
from ajax_tune.agents import SAC, SACConfig
from ajax_tune.envs import make_env
from ajax_tune.loop import LoopConfig, TrainLoop
from ajax_tune.loop.summary import summarize
from ajax_tune.runner import Runner
from tests.support.helpers import fully_optimised

pytestmark = pytest.mark.learning

ROWS = 10_000  # 50 episodes of pendulum


@pytest.fixture(scope="module")
def pendulum_datasets(tmp_path_factory):
    # a module fixture, set up before conftest's switch. Only the collecting policy's training
    # needs the full build; the four collections compile faster in the suite's cheap one
    with fully_optimised():
        env = make_env("pendulum")
        agent = SAC(
            SACConfig(num_envs=4, unroll_length=8, batch_size=128, hidden_sizes=(64, 64), lr=1e-3, learning_starts=1_000),
            env.observation_space,
            env.action_space,
        )
        loop = TrainLoop(env, agent, LoopConfig(total_timesteps=20_000, timesteps_per_iteration=4_000, eval_episodes=8))
        state, curve = loop.init(seed=0), []
        while loop.timestep(state) < 20_000:
            state, rows = loop.train(state)
            curve.append(round(summarize(rows)["eval/return_mean"]))
            if curve[-1] >= -200:
                break
        print("collecting SAC policy (eval return per 4k env steps):", curve)
    one = jax.tree.map(lambda x: x[0], state.agent)
    root = tmp_path_factory.mktemp("datasets")
    expert = datasets.collect(loop.env, ROWS, agent=agent, agent_state=one, epsilon=0.2, seed=1)
    random = datasets.collect(loop.env, ROWS, seed=2)
    # half random, half expert, as many rows as the expert set: a dataset is an argument of the
    # compiled program, so TD3+BC trains on both with one compilation
    half = ROWS // 2
    mixed = datasets.concatenate(
        [
            datasets.collect(loop.env, half, seed=3),
            datasets.collect(loop.env, half, agent=agent, agent_state=one, epsilon=0.2, seed=4),
        ]
    )
    found = {
        "expert": str(expert.save(root / "expert")),
        "mixed": str(mixed.save(root / "mixed")),
        "collecting_return": expert.source["return_mean"],
        "random_return": random.source["return_mean"],
    }
    print("dataset episode returns: expert", round(found["collecting_return"]), "random", round(found["random_return"]))
    yield found


def offline_runner(path, name, **agent):
    return Runner(
        {
            "env": {"name": "pendulum"},
            "agent": {"name": name, "hidden_sizes": [64, 64], **agent},
            "train": {
                "dataset": path,
                "total_timesteps": 6_000,
                "timesteps_per_iteration": 2_000,
                "num_seeds": 4,
                "eval_episodes": 8,
            },
        }
    )


def train(runner, calls, until=None):
    curve = []
    for _ in range(calls):
        result = runner.train()
        curve.append(round(result["eval/return_mean"]))
        assert result["train/nonfinite"] == 0.0 and result["perf/compilations"] == 1
        if until is not None and until(result["eval/return_mean"]):
            break
    return result, curve


@pytest.mark.parametrize("name", [pytest.param("td3bc", marks=pytest.mark.long), "iql"])
def test_offline_agents_reach_90_percent_of_the_collecting_policy(pendulum_datasets, name):
    low, high = pendulum_datasets["random_return"], pendulum_datasets["collecting_return"]
    score = lambda r: (r - low) / (high - low)  # noqa: E731
    result, curve = train(offline_runner(pendulum_datasets["expert"], name), calls=3, until=lambda r: score(r) >= 0.9)
    print(
        f"{name} on the expert dataset (eval return per 2k updates, 4 seeds):", curve, "normalised:", round(score(curve[-1]), 3)
    )
    assert score(result["eval/return_mean"]) >= 0.9, (curve, low, high)


def test_td3bc_beats_behaviour_cloning_on_a_mixed_dataset(pendulum_datasets):
    """Half the rows random, half collected as the expert set was (5,000 + 5,000 rows, the expert
    set's shape, so TD3+BC trains on both datasets with one compilation): cloning copies both;
    TD3+BC's critic picks the better. With alpha 10, the critic weighs more than at the default
    2.5, which stays near cloning here (measured after 6k updates, 4 seeds, on 10k random + 10k
    expert rows: alpha 1, 2.5, 5, 10 gave -783, -663, -507, -355; BC -720). Asserted over 4
    seeds per agent: TD3+BC ends 6,000 updates at least 0.15 of the normalised score (random 0,
    collecting policy 1) above BC. Measured on these 5k + 5k rows in the users' build: TD3+BC
    -1270, -885, -359 after 2k, 4k, 6k updates, BC -839, -806, -820 (0.42 apart at the end;
    -362 against -880 on an earlier build). The test was cut from the docs' 10k + 10k rows in
    d009214 to compile TD3+BC once; the docs now say 5k + 5k."""
    low, high = pendulum_datasets["random_return"], pendulum_datasets["collecting_return"]
    score = lambda r: (r - low) / (high - low)  # noqa: E731
    td3bc, td3bc_curve = train(offline_runner(pendulum_datasets["mixed"], "td3bc", alpha=10.0), calls=3)
    bc, bc_curve = train(offline_runner(pendulum_datasets["mixed"], "bc"), calls=3)
    gap = score(td3bc["eval/return_mean"]) - score(bc["eval/return_mean"])
    print("mixed dataset, eval return per 2k updates: td3bc", td3bc_curve, "bc", bc_curve, "normalised gap:", round(gap, 3))
    assert gap >= 0.15, (td3bc_curve, bc_curve, low, high)
    assert np.isfinite(bc["loss/actor"])
