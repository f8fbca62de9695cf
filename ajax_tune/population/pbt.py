"""PBT inside a trial: the worst members of a population continue from a copy of a better one.

Between calls, every `population.pbt.interval` calls, members are ranked by the population's
`select` metric in the call's result (NaN counts as worst, and so does a member whose state
stopped being finite; a call where no member has a value exploits nothing). The bottom
`quantile` of members (at least one, at most half) each take a member of the top `quantile`,
drawn at random: exploit and explore, as Tune's PBT does across trials, here across the lanes
of one program.

- Exploit is one gather along the lane axis of the whole `TrainState` (parameters, optimiser
  state, normalisers, replay buffer, env state with its tasks, counters, keys), jitted once and
  run on the device, so the population never passes through the host. Recipient member r's
  seed lanes take donor d's seed lanes one to one (lane r*S + s takes lane d*S + s). Each
  recipient lane's key is folded with a number drawn for that exploit, so the copy does not
  replay its donor's random stream (as a Tune trial re-keys a checkpoint from another trial).
- Explore starts from the donor's override (so the recipient follows every traced setting the
  donor follows) and changes each mutated setting: a number is multiplied by one of
  `perturbation_factors` and kept inside its distribution's bounds, or, with
  `resample_probability`, drawn from the distribution; a setting explored from a list steps to
  a neighbour in it, or is drawn from it (and is drawn from it when its value is not in it).
  The new settings reach the lanes as every traced setting does (`TrainLoop.set_hparams`).

Lineage is kept per member: the override it follows now, the member it last took a state from
(-1 before its first exploit) and how many exploits it took. It goes into every checkpoint with
the exploit round and the salt, and each round's draws come from (seed, salt, round), so a
restored run exploits as the uninterrupted one would. Nothing here knows about Ray.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Mapping, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune import compat
from ajax_tune.errors import CheckpointError
from ajax_tune.population.draws import draw_domain
from ajax_tune.population.spec import PBT, Mutation, setting_override, setting_value, setting_values
from ajax_tune.results import keys as K


def take_lanes(state, index):
    """`state` with lane i holding lane `index[i]` (as many lanes as `index` has)."""
    return jax.tree.map(lambda x: jnp.take(x, index, axis=0), state)


def _take_lanes(state, index, salts):
    """`take_lanes`; a lane with a non-zero salt re-keyed by it."""
    moved = take_lanes(state, index)
    keys = jax.vmap(lambda key, salt: jnp.where(salt > 0, jax.random.fold_in(key, salt), key))(moved.key, salts)
    return moved.replace(key=keys)


def lane_gather():
    """The exploit's program: a gather of every lane, the old state donated. One per loop (its
    compilations are counted apart from the train program's). A function of its own: jit's
    cache belongs to the function, so one shared by every loop would count the others' shapes."""

    def take_lanes(state, index, salts):
        return _take_lanes(state, index, salts)

    return jax.jit(take_lanes, donate_argnums=0)


class InTrialPBT:
    """The population's PBT: who exploits whom, the explored settings, the lineage."""

    def __init__(self, config, gather=None):
        self.config = config  # the trial config; members are rebuilt from it under their overrides
        self.settings: PBT = config.population.pbt
        self.population = config.population
        self._gather = gather or lane_gather()
        self.reset()

    def reset(self) -> None:
        """A fresh run's lineage: every member as the population wrote it, never exploited."""
        size = self.population.size
        self.overrides = [copy.deepcopy(dict(o)) for o in self.population.overrides]
        self.members = list(self.population.members)
        self.parent, self.exploits = [-1] * size, [0] * size
        self.round, self.salt = 0, 0
        self.salts: dict[int, int] = {}  # recipient -> the number its lanes were re-keyed with, last round

    def curriculum_salt(self, recipient: int) -> int:
        """What a recipient's curriculum reseeds with after taking its donor's state (as its
        lanes were re-keyed), so that its draws do not replay the donor's either."""
        return self.salts[recipient]

    @property
    def compilations(self) -> int:
        return compat.jit_cache_size(self._gather)

    def due(self, iteration: int) -> bool:
        """Whether the call that made `iteration` calls ends with an exploit."""
        return iteration > 0 and iteration % self.settings.interval == 0

    # -- one round -----------------------------------------------------------------------

    def exploit(self, state, results: Sequence[Mapping[str, float]], num_seeds: int):
        """One round on the call's per-member results: returns the new state (the old one is
        donated) and the (recipient, donor) pairs. Settings are explored here but written into
        the lanes by the caller (`TrainLoop.set_hparams` over `members`)."""
        rng = np.random.default_rng([self.settings.seed, self.salt, self.round])
        self.round, self.salts = self.round + 1, {}
        pairs = plan([score(r, self.population.metric) for r in results], self.population.mode, self.settings.quantile, rng)
        if not pairs:
            return state, pairs
        lanes = self.population.size * num_seeds
        index, salts = np.arange(lanes, dtype=np.int32), np.zeros(lanes, np.uint32)
        for recipient, donor in pairs:
            index[recipient * num_seeds : (recipient + 1) * num_seeds] = np.arange(donor * num_seeds, (donor + 1) * num_seeds)
            self.salts[recipient] = int(rng.integers(1, 2**32 - 1, dtype=np.uint32))
            salts[recipient * num_seeds : (recipient + 1) * num_seeds] = self.salts[recipient]
            self.explore(recipient, donor, rng)
        return self._gather(state, jnp.asarray(index), jnp.asarray(salts)), pairs

    def explore(self, recipient: int, donor: int, rng: np.random.Generator) -> None:
        source = self.members[donor]
        override = copy.deepcopy(self.overrides[donor])
        for mutation in self.population.mutations:
            value = explore_value(mutation, setting_value(source, mutation.path), self.settings, rng)
            override = setting_override(source, mutation.path, value, override)
        self.overrides[recipient] = override
        self.members[recipient] = self.config.member(override, f"population.members[{recipient}] (explored)")
        self.parent[recipient] = donor
        self.exploits[recipient] += 1

    # -- results and checkpoints ---------------------------------------------------------

    def metrics(self) -> dict[str, float]:
        """Lineage and the traced settings each member follows from here on."""
        out: dict[str, float] = {}
        for k, member in enumerate(self.members):
            out[K.member_key(k, "parent")] = float(self.parent[k])
            out[K.member_key(k, "exploits")] = float(self.exploits[k])
            out.update({K.member_key(k, name): value for name, value in setting_values(member).items()})
        out[K.PBT_KEYS[0]] = float(sum(self.exploits))
        out[K.PBT_KEYS[1]] = float(self.compilations)
        return out

    def get_state(self) -> dict[str, Any]:
        return {
            "overrides": copy.deepcopy(self.overrides),
            "parent": list(self.parent),
            "exploits": list(self.exploits),
            "round": self.round,
            "salt": self.salt,
        }

    def set_state(self, saved: Mapping[str, Any] | None, where: Any) -> None:
        """The lineage a checkpoint at `where` kept (none: a fresh one). The members' overrides
        apply over the trial config in force, so Tune's own mutations of other settings hold."""
        self.reset()
        if saved is None:
            return
        size = self.population.size
        if len(saved.get("overrides", ())) != size:
            raise CheckpointError(
                f"{where} holds the lineage of {len(saved.get('overrides', ()))} member(s); this population has {size}"
            )
        self.overrides = [copy.deepcopy(dict(o)) for o in saved["overrides"]]
        self.members = [self.config.member(o, f"{where}: member {k}") for k, o in enumerate(self.overrides)]
        self.parent, self.exploits = [int(p) for p in saved["parent"]], [int(e) for e in saved["exploits"]]
        self.round, self.salt = int(saved["round"]), int(saved["salt"])

    def reseed(self, salt: int) -> None:
        """Another trial continues from this lineage (a Tune PBT exploit): its own draws."""
        self.salt = int(np.random.default_rng([self.salt, int(salt)]).integers(2**31))


def score(result: Mapping[str, float], metric: str) -> float:
    """A member's rank score: its metric, or NaN (the worst) when any of its seeds stopped being
    finite, whatever its evaluation said, so a diverged member is replaced and never copied."""
    return math.nan if result.get(K.NONFINITE, 0.0) else float(result.get(metric, math.nan))


def plan(scores: Sequence[float], mode: str, quantile: float, rng: np.random.Generator) -> list[tuple[int, int]]:
    """(recipient, donor) pairs: the bottom `quantile` of members by score (NaN worst; at least
    one, at most half), each with a donor drawn from the top `quantile`. Nothing when no score
    is a number."""
    values = np.asarray(scores, np.float64)
    if len(values) < 2 or np.all(np.isnan(values)):
        return []
    signed = larger_is_better(values, mode)
    order = sorted(range(len(values)), key=lambda k: (signed[k], k))  # worst first, ties by index
    count = min(max(1, math.ceil(len(values) * quantile)), len(values) // 2)
    bottom, top = order[:count], order[-count:]
    return [(recipient, top[int(rng.integers(count))]) for recipient in bottom]


def larger_is_better(scores, mode: str) -> np.ndarray:
    """Scores as numbers where larger is better whatever `mode` is, NaN the worst (-inf)."""
    values = np.asarray(scores, np.float64)
    return np.where(np.isnan(values), -np.inf, values if mode == "max" else -values)


def explore_value(mutation: Mutation, current: Any, settings: PBT, rng: np.random.Generator) -> Any:
    """A new value of one setting from its donor's, as Tune's PBT explores one."""
    resample = rng.random() < settings.resample_probability
    if mutation.choices is not None:
        choices = list(mutation.choices)
        if resample or current not in choices:
            return copy.deepcopy(choices[int(rng.integers(len(choices)))])
        i = min(max(choices.index(current) + (1 if rng.random() < 0.5 else -1), 0), len(choices) - 1)
        return copy.deepcopy(choices[i])
    domain = mutation.domain
    if resample:
        value = draw_domain(domain, rng, mutation.name)
    else:
        value = current * settings.perturbation_factors[int(rng.integers(len(settings.perturbation_factors)))]
    low, high = domain.args[0], domain.args[1]
    if domain.kind == "randint":
        return int(min(max(round(value), low), high - 1))
    if domain.kind.startswith("q"):
        value = round(value / domain.args[2]) * domain.args[2]
    return float(min(max(float(value), low), high))
