"""Successive halving inside a trial: the worse members of a population stop, the rest go on.

A population's lanes share the machine: on a CPU, or a GPU past what it runs in parallel, K
members train each about 1/K as fast as one would alone. `population.prune` spends that time as
Hyperband's brackets do (Li et al., 2018): all members train for a first rung of
`grace_period` calls, then only the best `1 / reduction_factor` of them go on, for a rung
`reduction_factor` times as long, and so on down to `min_members`, so that the members that
looked worst early stop costing the others anything.

At the end of a rung (ranked by the population's `select` metric in that call's result; NaN,
or a member whose state stopped being finite, counts as worst; ties go to the lower index)
the survivors' lanes are gathered out of the `TrainState` (one `take` along the lane axis, on
the device), the program is rebuilt for that many lanes (one compilation per size the
population passes through) and each survivor continues exactly where it was: its parameters,
optimiser, buffers, env state and key, its curriculum objects, its settings. Members are
renumbered 0..n-1 in the order they had; `member/<k>/origin` says which member of the
population as configured each one is, and checkpoints record the survivors, so a restore (or
`Runner.from_checkpoint`) rebuilds the same lanes. Nothing here knows about Ray.
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import numpy as np

from ajax_tune.population import pbt


def survivors(scores: Sequence[float], mode: str, keep: int) -> list[int]:
    """The `keep` best members by score (NaN worst, ties to the lower index), in index order."""
    signed = pbt.larger_is_better(scores, mode)
    best_first = sorted(range(len(signed)), key=lambda k: (-signed[k], k))
    return sorted(best_first[:keep])


def ranked_survivors(results, metric: str, mode: str, keep: int) -> list[int]:
    """`survivors` of a call's per-member results, each scored as PBT scores it."""
    return survivors([pbt.score(r, metric) for r in results], mode, keep)


def lane_index(members: Sequence[int], num_seeds: int) -> np.ndarray:
    """The lanes of `members` (members-major, `num_seeds` lanes each), in their order."""
    return np.concatenate([np.arange(m * num_seeds, (m + 1) * num_seeds) for m in members]).astype(np.int32)


#: `state` holding only the lanes `index`, in that order (a smaller lane axis): PBT's gather,
#: without re-keying (a survivor goes on with its own random stream).
take_lanes = jax.jit(pbt.take_lanes)
