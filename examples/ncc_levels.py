"""NCC, a level algorithm written outside ajax_tune as any user would write one, and named by import
path: `ued: {algorithm: ncc_levels:NCC, ...}` with this file beside the script that trains (the
tests load it under that name too). docs/write-a-level-algorithm.md walks through it.

NCC (Monette, Letcher, Beukman, Jackson, Rutherford, Goldie and Foerster, "An Optimisation
Framework for Unsupervised Environment Design", RLC 2025, arXiv 2505.20659) casts level selection
as a game: the agent minimises, and an adversary maximises, the expected score of the policy's
levels, and the adversary is a probability vector over a buffer of levels rather than a network.
Its objective is the expected score plus an entropy bonus, `f(y) = y . s + entropy_coef * H(y)`,
strongly concave in y, and it climbs that objective by projected gradient ascent while the agent
learns by its own optimiser: two timescales, `step_size` for the adversary against the agent's
learning rate (in the analysis of two-timescale gradient descent ascent the strongly concave side,
here the adversary, takes the larger step).

What one update does here, in the order of the authors' practical code (github.com/nmonette/
NCC-UED, the Minigrid learnability variant):

1. The first update fills the buffer with `buffer_size` generated levels and the distribution y
   is uniform over them.
2. The rollout's levels are drawn (with replacement) from y as it stands before this update's
   step, from the buffer as it stands before this update's replacement: the alternating order
   the paper analyses.
3. Every buffer level is scored under the current policy by its learnability p (1 - p), p the
   success rate of `scoring_episodes` episodes of the sampling policy (the score the paper's
   Minigrid NCC uses; SFL's).
4. The dynamic buffer (as PLR's): `candidates` fresh levels are scored likewise and offered in
   turn, each replacing the buffer's lowest-scoring level when it scores higher, so the buffer
   keeps the best of its levels and the candidates (the authors offer them best first; with
   this rule the order only decides between equal scores). A replaced slot keeps its
   probability (and its step accumulator) for the level that takes it over, as in the authors'
   code. `candidates: 0` keeps the first buffer (their static buffer).
5. The adversary steps: `y <- P(y + step_size * g)`, with `g = s - entropy_coef * (log y + 1)`,
   the gradient of f on the new scores, and P the Euclidean projection onto the truncated simplex
   {y : sum(y) = 1, y >= min_prob}. `step: adaptive` (the default, as their practical scripts)
   divides each level's gradient by `(0.1 + sum of its squared gradients so far) ** 0.4`, the
   adaptive step of their Minigrid code; `step: plain` is the analysis's constant step.
6. The agent learns from every rollout (PPO, or any agent: NCC needs no value estimates).

Where this simplifies: only the learnability score is offered (the paper also runs MaxMC and
positive value loss, which need a value-scored rollout of every buffer level, and a regret
oracle on Minigrid); the entropy coefficient is constant (their Craftax script decays it as
1 / (t + 1) ** (1/3)); the adaptive step is their Minigrid script's, not the Adam-like TiAda step
of their XLand script; and `rescore_every` > 1 (ours, for budgets that cannot score the whole
buffer every update) takes steps on the last scores between rescorings. The distribution is
over the buffer's slots, so it is exactly what a checkpoint, a PBT exploit or a population
member carries with the rest of the algorithm's state.

Run `python examples/ncc_levels.py [--smoke]` to train it under Tune with Population Based
Training over its traced settings (`step_size`, `entropy_coef`).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pathlib

import jax
import jax.numpy as jnp
from flax import struct

from ajax_tune.errors import ConfigError
from ajax_tune.fields import static, traced
from ajax_tune.ued import Decision, LevelAlgorithm, LevelSettings, Needs, RunShape
from ajax_tune.ued import buffer as B
from ajax_tune.ued.scores import learnability

STEPS = ("adaptive", "plain")
#: The adaptive step's accumulator starts here and divides the gradient by its power `POWER`
#: (the authors' Minigrid values).
ACCUMULATOR_START, POWER = 0.1, 0.4


@dataclasses.dataclass(frozen=True)
class NCCSettings(LevelSettings):
    buffer_size: int = static(4000, ge=1, doc="levels the adversary's distribution is over")
    candidates: int | None = static(
        None, ge=0, doc="fresh levels scored and offered to the buffer at each rescoring (default: agent.num_envs); 0 keeps it"
    )
    scoring_episodes: int = static(5, ge=1, doc="episodes of the sampling policy per level to estimate its success rate")
    rescore_every: int = static(1, ge=1, doc="updates between scorings of the buffer (1: every update, as the paper)")
    step: str = static("adaptive", choices=STEPS, doc="the adversary's step: per-level adaptive, or plain projected ascent")
    duplicate_check: bool = static(False, doc="a candidate already in the buffer updates its score instead of taking a slot")
    step_size: float = traced(0.1, gt=0.0, doc="the adversary's step size (its timescale against the agent's learning rate)")
    entropy_coef: float = traced(0.05, ge=0.0, doc="weight of the distribution's entropy in the adversary's objective")
    min_prob: float = traced(1e-5, gt=0.0, doc="the least probability of a buffer level (the truncated simplex)")

    def __post_init__(self):
        super().__post_init__()
        if self.min_prob * self.buffer_size >= 1.0:
            raise ConfigError(
                f"ued.min_prob ({self.min_prob}) x ued.buffer_size ({self.buffer_size}) must be below 1: every level "
                f"of the buffer gets at least min_prob of a distribution that sums to 1"
            )


@struct.dataclass
class NCCState:
    buffer: B.LevelBuffer  # the levels and their latest learnability (the adversary's payoffs)
    probs: jax.Array  # float32 [buffer_size]: the adversary's distribution over the buffer's slots
    squares: jax.Array  # float32 [buffer_size]: the adaptive step's accumulated squared gradients


@struct.dataclass
class Memo:
    slots: jax.Array  # int32 [num_envs]: the slots the rollout's levels came from
    taken: jax.Array  # int32: candidates written into the buffer this update


# -- the adversary, as pure functions (tests check them against their closed forms) ---------------


def project(x: jax.Array, floor) -> jax.Array:
    """The Euclidean projection of `x` onto {y : sum(y) = 1, y >= floor}: `max(x - tau, floor)`
    for the one tau that sums it to 1, found by sorting (Duchi et al. 2008, shifted by the floor)."""
    n = x.shape[0]
    shifted = x - floor
    ordered = jnp.sort(shifted)[::-1]
    excess = jnp.cumsum(ordered) - (1.0 - n * floor)
    count = jnp.arange(1, n + 1)
    support = jnp.max(jnp.where(ordered - excess / count > 0, count, 1))
    tau = excess[support - 1] / support
    return jnp.maximum(shifted - tau, 0.0) + floor


def ascent(probs, squares, scores, step_size, entropy_coef, min_prob, adaptive: bool) -> tuple[jax.Array, jax.Array]:
    """One projected step up `f(y) = y . scores + entropy_coef * H(y)`; returns the distribution
    and the adaptive step's accumulator."""
    gradient = scores - entropy_coef * (jnp.log(probs) + 1.0)
    if adaptive:
        squares = squares + gradient**2
        gradient = gradient / squares**POWER
    return project(probs + step_size * gradient, min_prob), squares


def entropy(probs: jax.Array) -> jax.Array:
    return -jnp.sum(probs * jnp.log(probs))


# -- the algorithm ---------------------------------------------------------------------------------


class NCC(LevelAlgorithm):
    Settings = NCCSettings
    row_keys = (
        "ued/adversary_entropy",  # H(y), nats: log(buffer_size) when uniform, 0 on one level
        "ued/adversary_max_prob",  # the most probable level's probability
        "ued/adversary_score",  # y . s, the expected learnability of the levels it plays
        "ued/score_mean",  # the buffer's mean learnability
        "ued/levels_taken",  # candidates written into the buffer per update
    )
    latest_keys = row_keys[:4]

    def __init__(self, settings: NCCSettings, num_envs: int, tools):
        super().__init__(settings, num_envs, tools)
        self.candidates = num_envs if settings.candidates is None else settings.candidates

    @classmethod
    def needs(cls, settings: NCCSettings) -> Needs:
        # the buffer is scored at once, then the candidates (their count known only with num_envs)
        return Needs(success=True, scoring_episodes=settings.scoring_episodes, scored_levels=settings.buffer_size)

    @classmethod
    def check(cls, settings: NCCSettings, run: RunShape) -> list[str]:
        if settings.rescore_every > run.updates:
            return [
                f"ued.rescore_every ({settings.rescore_every}) is more than the run's {run.updates} updates: the "
                f"buffer is scored once, at the first update, and the adversary climbs those scores to the end"
            ]
        return []

    def init(self, level, key) -> NCCState:
        n = self.settings.buffer_size
        return NCCState(
            buffer=self.fill(B.empty(level, n), key),  # fresh levels, scored by the first `choose`
            probs=jnp.full((n,), 1.0 / n, jnp.float32),
            squares=jnp.full((n,), ACCUMULATOR_START, jnp.float32),
        )

    def choose(self, state: NCCState, hp, key, context) -> tuple[NCCState, Decision]:
        k_draw, k_score = jax.random.split(key)
        buffer = state.buffer
        n = self.settings.buffer_size
        slots = jax.random.choice(k_draw, n, (self.num_envs,), p=state.probs)
        levels = jax.tree.map(lambda x: x[slots], buffer.levels)

        agent_state = context.agent_state
        if self.settings.rescore_every == 1:
            buffer, taken, scoring_steps = self.rescore(buffer, k_score, agent_state)
        else:
            due = (context.iteration % self.settings.rescore_every == 0) | ~jnp.all(jnp.isfinite(buffer.scores))
            buffer, taken, scoring_steps = jax.lax.cond(
                due,
                lambda b: self.rescore(b, k_score, agent_state),
                lambda b: (b, jnp.zeros((), jnp.int32), jnp.zeros((), jnp.int32)),
                buffer,
            )
        probs, squares = ascent(
            state.probs,
            state.squares,
            buffer.scores,
            hp.step_size,
            hp.entropy_coef,
            hp.min_prob,
            adaptive=self.settings.step == "adaptive",
        )
        decision = Decision(
            levels=levels, learn=jnp.bool_(True), memo=Memo(slots=slots, taken=taken), scoring_steps=scoring_steps
        )
        return NCCState(buffer=buffer, probs=probs, squares=squares), decision

    def fill(self, buffer: B.LevelBuffer, key) -> B.LevelBuffer:
        n = B.capacity(buffer)
        return buffer.replace(levels=self.fresh_levels(key, n), size=jnp.int32(n))

    def rescore(self, buffer: B.LevelBuffer, key, agent_state) -> tuple[B.LevelBuffer, jax.Array, jax.Array]:
        """The buffer with every level's learnability under the current policy and the better
        candidates in place of its worst; how many it took, and the scoring episodes' env steps."""
        k_buffer, k_fresh, k_candidates = jax.random.split(key, 3)
        scores, steps = self.learnability(agent_state, buffer.levels, k_buffer)
        buffer = buffer.replace(scores=scores)
        if not self.candidates:
            return buffer, jnp.zeros((), jnp.int32), steps
        fresh = self.fresh_levels(k_fresh, self.candidates)
        fresh_scores, fresh_steps = self.learnability(agent_state, fresh, k_candidates)
        # with no staleness, the slot of least replay weight is the lowest-scoring one
        buffer, written = B.insert(
            buffer, fresh, fresh_scores, temperature=1.0, staleness_coef=0.0, duplicate_check=self.settings.duplicate_check
        )
        return buffer, jnp.sum(written >= 0).astype(jnp.int32), steps + fresh_steps

    def learnability(self, agent_state, levels, key) -> tuple[jax.Array, jax.Array]:
        """p (1 - p) of each level ([count]), p its success rate, and the env steps it took."""
        count = jax.tree.leaves(levels)[0].shape[0]
        keys = jax.random.split(key, count)
        episodes = jax.vmap(self.tools.evaluate, in_axes=(None, 0, 0))(agent_state, levels, keys)
        success_rate = jnp.mean(episodes["eval/success"], axis=-1)
        return learnability(success_rate), jnp.sum(episodes["eval/length"]).astype(jnp.int32)

    def rows(self, state: NCCState, decision: Decision) -> dict[str, jax.Array]:
        probs, scores = state.probs, state.buffer.scores
        values = (entropy(probs), jnp.max(probs), jnp.sum(probs * scores), jnp.mean(scores), decision.memo.taken)
        return {k: v.astype(jnp.float32) for k, v in zip(self.row_keys, values, strict=True)}


# -- under Tune, with Population Based Training over its traced settings ---------------------------


def main():
    parser = argparse.ArgumentParser(description="NCC on corridors under Tune, with PBT over its step size and entropy")
    parser.add_argument("--smoke", action="store_true", help="a tiny run that finishes in seconds")
    parser.add_argument("--storage-path", default="./results")
    parser.add_argument("--address", help="join a running Ray cluster (e.g. 'auto') instead of starting one")
    args = parser.parse_args()

    from ajax_tune import configure_jax

    configure_jax(cpus=2)  # before this process starts JAX: CPU platform, shared compilation cache

    import ray
    from ray import tune
    from ray.tune.schedulers import PopulationBasedTraining

    from ajax_tune import AjaxTrainable, trial_names

    # Tune's workers import "ncc_levels" from this directory.
    here = pathlib.Path(__file__).resolve().parent
    local_ray = {} if args.address else {"num_cpus": 2, "include_dashboard": False}
    pythonpath = os.pathsep.join(p for p in (str(here), os.environ.get("PYTHONPATH", "")) if p)
    ray.init(address=args.address, runtime_env={"env_vars": {"PYTHONPATH": pythonpath}}, **local_ray)

    iterations = 4 if args.smoke else 20
    config = {
        "env": {"name": "corridor", "kwargs": {"max_length": 16, "max_episode_steps": 24}},
        "agent": {"num_envs": 8, "unroll_length": 24, "num_minibatches": 2, "update_epochs": 2, "hidden_sizes": [32, 32]},
        "train": {"total_timesteps": 1_000_000, "timesteps_per_iteration": 8 * 24 * 4, "num_seeds": 1, "eval_episodes": 8},
        "ued": {
            "algorithm": "ncc_levels:NCC",
            "buffer_size": 32,
            "scoring_episodes": 4,
            "step_size": tune.choice([0.05, 0.2]),
            "entropy_coef": tune.choice([0.01, 0.05]),
        },
        "resources": {"cpu": 1},  # both trials at once on 2 CPUs
    }
    # every second iteration the worse trial takes the better one's state (its agent and its
    # adversary's distribution) and explores new traced settings: no trial recompiles
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=2,
        quantile_fraction=0.5,
        synch=True,
        hyperparam_mutations={"ued": {"step_size": tune.loguniform(0.01, 1.0), "entropy_coef": tune.uniform(0.0, 0.1)}},
    )
    results = tune.Tuner(
        AjaxTrainable,
        param_space=config,
        tune_config=tune.TuneConfig(
            scheduler=pbt, metric="eval/success_rate_mean", mode="max", num_samples=2, reuse_actors=True, **trial_names()
        ),
        run_config=tune.RunConfig(
            name="ncc_levels",
            storage_path=os.path.abspath(args.storage_path),
            stop={"training_iteration": iterations},
            verbose=0 if args.smoke else 1,
        ),
    ).fit()
    assert results.num_errors == 0, [r.error for r in results if r.error]
    rows = [r.metrics for r in results]
    for r in results:
        ued = r.config["ued"]
        print(
            f"step_size {ued['step_size']:.3f}  entropy_coef {ued['entropy_coef']:.3f}  "
            f"success {r.metrics['eval/success_rate_mean']:.2f}  adversary entropy {r.metrics['ued/adversary_entropy']:.2f}"
        )
    summary = {
        "trials": len(rows),
        "iterations": [int(m["training_iteration"]) for m in rows],
        "compilations": [int(m["perf/compilations"]) for m in rows],
        "adversary_entropy": [m["ued/adversary_entropy"] for m in rows],
        "adversary_max_prob": [m["ued/adversary_max_prob"] for m in rows],
        "scoring_env_steps": [m["ued/scoring_env_steps"] for m in rows],
        "success": [m["eval/success_rate_mean"] for m in rows],
        "algorithm": results[0].config["ued"]["algorithm"],
        "step_sizes": [r.config["ued"]["step_size"] for r in results],  # where PBT left them
    }
    print("RESULT " + json.dumps(summary))


if __name__ == "__main__":
    main()
