"""Do the learning samplers beat domain randomisation where the choice of tasks matters?

The distribution: corridors of 4 to 32 cells whose door behind the start pays 0.2. Trained on
a long corridor alone, PPO leaves through the door and never finds the far end (worth 1; see
tests/test_tune.py's payoff test); short corridors teach it to walk right.

Fixed before the first run, and not changed after it:
- budget: 12 calls of 3072 env steps per seed (16 envs x 32 steps x 6 updates), 36,864 steps
  per seed, the budget at which the hand-made ladder of the payoff test reaches 32 cells;
- 4 seeds (vmapped in one trial; the seeds share the sampler's draws), the same initial
  parameters for every sampler (same train.seed), every sampler with its default settings
  (seed 0), only the space given;
- the measure: the held-out success rate, over the 8 corridors of 4, 8, ..., 32 cells (door
  open), the mean over the 4 seeds and the 8 tasks, averaged over the last 3 calls' evaluations
  (a deterministic policy: one episode per task says it all). Also reported: the same rate
  averaged over all 12 calls (the area under the curve: how soon it got there).

All three runs share one compiled program: the sampler lives on the host, so `reconfigure`
swaps it without rebuilding.

What the first run measured (final / area under the curve): Uniform 1.00 / 0.93, LearningProgress
1.00 / 0.80, PLR 1.00 / 0.93. Neither learning sampler beat Uniform: on this distribution the
short corridors that domain randomisation keeps drawing teach walking right, and every held-out
corridor is solved within 4 of the 12 calls. PLR draws exactly Uniform's tasks until its buffer
reaches `min_fill` (new levels come from the same seeded generator), so its curve matches
Uniform's; LearningProgress spreads its draws by progress and got there later (call 10). Measured
again after the rollout's random draws were batched (which changed every random stream):
Uniform 1.00 / 0.92, LearningProgress 1.00 / 0.90, PLR 1.00 / 0.92, every held-out corridor
solved by call 4 (Uniform, PLR) or 5 (LearningProgress); and with PPO on raw observations (its
default since): 1.00 / 0.98, 1.00 / 0.97, 1.00 / 0.98, solved by call 2 (Uniform, PLR) or 3. So the test asserts what holds: every
sampler ends with the whole held-out set solved (1.0 over the last 3 calls), the
two learning samplers really steered (their draws left Uniform's), and the runs were on equal
terms (one program, the same env steps). It prints the measurement on a `RESULT` line.
"""

import json

import numpy as np
import pytest

from ajax_tune.runner import Runner

pytestmark = pytest.mark.learning

CALLS = 12
LAST = 3
SAMPLERS = ("uniform", "learning_progress", "plr")
SPACE = {"length": [4, 32], "exit_reward": 0.2}


def config(sampler: str) -> dict:
    return {
        "env": {
            "name": "corridor",
            "kwargs": {"max_length": 32, "max_episode_steps": 40},
            "task": {"length": 4, "exit_reward": 0.2},
        },
        "agent": {
            "num_envs": 16,
            "unroll_length": 32,
            "num_minibatches": 2,
            "update_epochs": 2,
            "hidden_sizes": [32, 32],
            "lr": 3e-3,
        },
        "train": {
            "total_timesteps": CALLS * 3072,
            "timesteps_per_iteration": 3072,
            "num_seeds": 4,
            "eval_episodes": 1,
            "seed": 0,
        },
        "task_sampler": {"name": sampler, "kwargs": {"space": SPACE}},
        "heldout": {"tasks": [{"length": n} for n in range(4, 33, 4)]},
    }


def compare() -> dict[str, dict]:
    runner = Runner(config(SAMPLERS[0]))
    out = {}
    for i, name in enumerate(SAMPLERS):
        if i:
            assert runner.reconfigure(config(name)) is False  # same program
        results = [runner.train() for _ in range(CALLS)]
        curve = [r["eval/heldout/success_rate_mean"] for r in results]
        out[name] = {
            "final": float(np.mean(curve[-LAST:])),
            "auc": float(np.mean(curve)),
            "curve": [round(v, 3) for v in curve],
            "trained_length_mean": float(np.mean([r["tasks/length/mean"] for r in results])),
            "trained_lengths": [round(r["tasks/length/mean"], 2) for r in results],
            "env_steps": results[-1]["env_steps"],
            "last": {k: v for k, v in results[-1].items() if k.startswith("sampler/")},
        }
    assert runner.loop.compilations == 1
    return out


def test_learning_samplers_against_uniform_on_deceptive_corridors():
    scores = compare()
    print("RESULT " + json.dumps(scores))
    assert len({s["env_steps"] for s in scores.values()}) == 1  # equal budgets
    for name, s in scores.items():
        assert s["final"] == 1.0, (name, s["curve"])  # every sampler learns the whole held-out set
    uniform = scores["uniform"]["trained_lengths"]
    for name in ("learning_progress", "plr"):
        assert scores[name]["trained_lengths"] != uniform, name  # it steered: other tasks than Uniform's
    assert scores["plr"]["last"]["sampler/replay_share"] > 0
