"""Agents learn: returns, not shapes."""

import numpy as np
import pytest

from ajax_tune.agents import PPO, PPOConfig
from ajax_tune.envs import make_env
from ajax_tune.loop import LoopConfig, TrainLoop
from ajax_tune.loop.summary import summarize
from ajax_tune.results import keys as K
from ajax_tune.runner import Runner
from ajax_tune.schedules import Schedule
from tests.support.helpers import corridor_config, corridor_loop


@pytest.mark.learning  # docs/learning.md's "PPO solves cartpole": asserted in the build users run
def test_ppo_solves_cartpole_within_500k_steps():
    """The mean evaluation return of 4 seeds (8 episodes each) reaches 475 within 500k env steps
    per seed, from below 475 at the first evaluation; it prints the curve it took. Measured in the
    users' build: 410.6, 286.6, 440.6 and 499.8 after 24,576 to 98,304 env steps per seed, so the
    threshold was crossed at a fifth of the budget. Fully optimised it took 12 s with a cold
    cache on 2 quiet cores (16 s before, in the suite's cheap build)."""
    env = make_env("cartpole")
    agent = PPO(
        PPOConfig(
            num_envs=16,
            unroll_length=128,
            num_minibatches=4,
            update_epochs=4,
            lr=Schedule(kind="linear", peak=2.5e-3),
            ent_coef=0.0,
        ),
        env.observation_space,
        env.action_space,
    )
    loop = TrainLoop(
        env, agent, LoopConfig(total_timesteps=500_000, timesteps_per_iteration=16 * 128 * 12, num_seeds=4, eval_episodes=8)
    )
    state = loop.init(seed=0)
    history = []
    while loop.timestep(state) < 500_000:
        state, rows = loop.train(state)
        result = summarize(rows)
        history.append((result["timestep"], result["eval/return_mean"]))
        if result["eval/return_mean"] >= 475:
            break
    print("cartpole, PPO (env steps per seed, mean eval return of 4 seeds):", [(int(t), round(r, 1)) for t, r in history])
    assert history[-1][1] >= 475, f"cartpole not solved in 500k steps: {history}"
    assert history[0][1] < 475  # it had to learn: the first evaluation was not already solved
    assert loop.compilations == 1


@pytest.mark.learning
def test_ppo_defaults_solve_cartpole_in_each_of_six_seed_groups():
    """A config that names only the env solves cartpole: in each of six groups of 4 seeds
    (`train.seed` 0 to 5), the mean evaluation return of the group's 4 seeds reaches 475 within
    491,520 env steps per seed, all six groups at one and the same evaluation. The six groups
    train as members of one population (members may differ in `train.seed`; a member's seeds are
    those of a single run of its config), 24 lanes of one program.

    Measured in the users' build, on two machines with the same versions and code: on one all
    six groups were at 500 from 294,912 env steps per seed to the end; on the other (2026-12-06)
    all six were at 475 or more at the third evaluation (147,456 steps: 499.6 and five at 500),
    and two groups then slid back, ending at 449.4 and 430.5. The float results of the same
    program differ between the two CPUs, and PPO with these defaults does not hold 500 in every
    seed, so the claim is that every group solves it, not that every group ends solved; the test
    stops at the first evaluation where all six are solved. Cost, cold cache, 2 quiet cores: 61 s
    for the whole budget, against 18 s for one group."""
    groups = 6
    train = {"total_timesteps": 491_520, "timesteps_per_iteration": 49_152, "num_seeds": 4}
    population = {"members": [{"train": {"seed": group}} for group in range(groups)]}
    runner = Runner({"env": {"name": "cartpole"}, "train": train, "population": population})
    result, curve = {"done": False}, []
    while not result["done"] and not (curve and all(v >= 475 for v in curve[-1])):
        result = runner.train()
        curve.append([round(result[K.member_key(g, "eval/return_mean")], 1) for g in range(groups)])
    print("cartpole, PPO defaults (mean eval return of each 4-seed group, per call):", curve)
    assert all(v >= 475 for v in curve[-1]), curve
    assert result["perf/compilations"] == 1 and result["env_steps"] == 49_152 * len(curve) <= 491_520


@pytest.mark.slow  # trains to a threshold in the suite's cheap build: at this size the full
# build's compile costs more than its faster run saves (cold, 2 busy cores: the test took 6 s there against 15 s fully optimised)
def test_ppo_reaches_the_end_of_a_short_corridor_every_time():
    loop = corridor_loop({"lr": Schedule(peak=3e-3)}, timesteps_per_iteration=8 * 16 * 20, total_timesteps=60_000)
    state = loop.init(seed=1)
    state = loop.set_task(state, {"length": 6})
    results = []
    for _ in range(6):
        state, rows = loop.train(state)
        results.append(summarize(rows))
    final = results[-1]
    assert results[0]["eval/success_rate_mean"] < 1.0 or results[0]["train/episode_return_mean"] < 1.0
    assert final["eval/success_rate_mean"] == 1.0
    assert final["eval/return_min"] == 1.0
    assert final["eval/length_mean"] == 6.0  # the shortest path: it learned to walk straight there
    assert np.isclose(final["curriculum/task/length"], 6)


@pytest.mark.learning
def test_a_curriculum_pays_off_on_the_deceptive_corridor():
    """docs/learning.md's "Curriculum pays off", in the build users run. Same 4 seeds (lanes of one
    run), same budget (12 calls of 3,072 env steps per seed), same 32-cell corridor whose start has
    a door paying 0.2: direct training leaves at least one seed taking the door for the whole run
    (never reaching the far end, worth 1), while a ThresholdCurriculum starting at 4 cells ends
    with every seed reaching the far end of 32 cells. Both arms run one program (the task is data;
    `reconfigure` keeps it). Measured for train seeds 0 to 3 (one run of 4 seeds each): direct
    training had 1, 0, 0 and 2 of its 4 seeds ever reaching the end (the others took the door in
    every evaluation), and the curriculum had all 4 at the end of 32 cells in all four, reaching
    32 cells at call 8 for seed 0, which the test runs. Cost, cold cache, 2 quiet cores: 8 s."""
    ladder = {
        "class": "ajax_tune.curriculum:ThresholdCurriculum",
        "kwargs": {"levels": {"length": list(range(4, 33, 4))}, "threshold": 1.0},
    }

    def config(callbacks):
        return corridor_config(
            env={"task": {"length": 32, "exit_reward": 0.2}},
            callbacks=callbacks,
            agent={"num_envs": 16, "unroll_length": 32},
            train={"timesteps_per_iteration": 16 * 32 * 6, "num_seeds": 4},
        )

    runner = Runner(config([]))
    direct = [runner.train() for _ in range(12)]
    assert runner.reconfigure(config([ladder])) is False  # the same program
    curriculum = [runner.train() for _ in range(12)]
    for name, rows in (("direct", direct), ("curriculum", curriculum)):
        lengths = [int(r["curriculum/task/length"]) for r in rows]
        arrived = [sum(r[f"eval/return_seed{i}"] == 1.0 for i in range(4)) for r in rows]
        print(f"deceptive corridor, {name}: task length per call {lengths}, seeds at the far end {arrived}")
    assert curriculum[0]["curriculum/task/length"] == 4  # the ladder starts short
    final = curriculum[-1]
    assert final["curriculum/task/length"] == 32 and final["eval/success_rate_mean"] == 1.0
    assert final["eval/return_min"] == 1.0  # every seed reaches the far end
    assert all(r["curriculum/task/length"] == 32 for r in direct)
    # a seed that never arrives keeps the worst seed's return at the door's 0.2 at best
    assert max(r["eval/success_rate_mean"] for r in direct) < 1.0
    assert max(r["eval/return_min"] for r in direct) <= 0.2 + 1e-6
    assert curriculum[-1]["env_steps"] == direct[-1]["env_steps"] and runner.loop.compilations == 1
