"""What both sides of the maze parity study measure beyond their own logs, computed the same way
for each (numpy only: the peer's interpreter imports it too).

- A level buffer per evaluation: each worker saves its buffer's filled slots to one npz
  (`save_levels`) and the driver reads the figures back (`buffer_figures`): its size, the mean
  score of its filled slots, non-finite ones counted apart (JaxUED's logged
  `level_sampler/mean_score` averages every filled slot, so one -inf would make it -inf;
  ajax_tune's `ued/score_mean` leaves them out; a rollout that ends no episode scores -inf, which
  cannot happen here: every 256-step rollout ends an episode of at most 250), and the mean
  shortest path of its solvable levels (unsolvable ones counted apart: the generator places
  walls without checking).
- The training return of maze_plr.py, which does not log one: `ended_returns` of each update's
  `(dones, rewards)`, as ajax_tune's `train/episode_return_mean` counts episodes (every episode
  that ended in the rollout, time-limit ends included).
"""

from __future__ import annotations

import math
import pathlib

import numpy as np

#: The arrays a worker saves per evaluation: the filled slots only, positions as (x, y).
FIELDS = ("wall_map", "agent_pos", "goal_pos", "scores")


def save_levels(path, wall_map, agent_pos, goal_pos, scores, size: int, **facts) -> None:
    """One evaluation's buffer: its first `size` slots (the filled ones on both sides) and any
    scalar facts beside them (the update it was read after, gradient updates so far)."""
    size = int(size)
    arrays = {
        "wall_map": np.asarray(wall_map, bool)[:size],
        "agent_pos": np.asarray(agent_pos, np.int32)[:size],
        "goal_pos": np.asarray(goal_pos, np.int32)[:size],
        "scores": np.asarray(scores, np.float32)[:size],
    }
    np.savez(path, **arrays, **{k: np.asarray(v) for k, v in facts.items()})


def shortest_paths(walls, start, goal) -> np.ndarray:
    """Moves from start to goal of many mazes at once (4-neighbour steps, turns not counted, as
    `ajax_tune.envs.jaxued_adapter.shortest_path` counts them for one): breadth-first search as
    frontier expansion over `[N, H, W]` wall grids, every maze one step per round. `start` and
    `goal` are `[N, 2]` (x, y). Returns int `[N]`, -1 where the goal cannot be reached."""
    walls = np.asarray(walls, bool)
    start, goal = np.asarray(start, np.int64), np.asarray(goal, np.int64)
    n, h, w = walls.shape
    out = np.where((start == goal).all(axis=1), 0, -1)
    active = np.nonzero(out < 0)[0]
    reached = np.zeros((len(active), h, w), bool)
    reached[np.arange(len(active)), start[active, 1], start[active, 0]] = True
    open_cells = ~walls[active]
    gx, gy = goal[active, 0], goal[active, 1]
    for step in range(1, h * w + 1):
        if not len(active):
            break
        grown = reached.copy()
        grown[:, 1:, :] |= reached[:, :-1, :]
        grown[:, :-1, :] |= reached[:, 1:, :]
        grown[:, :, 1:] |= reached[:, :, :-1]
        grown[:, :, :-1] |= reached[:, :, 1:]
        grown &= open_cells
        grown |= reached  # the start stays reached (the agent stands on it)
        hit = grown[np.arange(len(active)), gy, gx]
        out[active[hit]] = step
        # a maze leaves the search once solved, or once a round reaches nothing new (unsolvable)
        keep = ~hit & (grown != reached).any(axis=(1, 2))
        active, reached, open_cells, gx, gy = active[keep], grown[keep], open_cells[keep], gx[keep], gy[keep]
    return out


def buffer_figures(path) -> dict:
    """The figures of one saved buffer (`save_levels`): size, mean finite score and how many
    scores were not finite, mean shortest path of the solvable levels and the unsolvable share;
    NaN where the buffer holds nothing to average."""
    with np.load(path) as data:
        arrays = {k: data[k] for k in data.files}
    scores = arrays["scores"].astype(np.float64)
    finite = np.isfinite(scores)
    paths = shortest_paths(arrays["wall_map"], arrays["agent_pos"], arrays["goal_pos"])
    solvable = paths >= 0
    size = len(scores)
    facts = {k: v.item() for k, v in arrays.items() if k not in FIELDS and v.ndim == 0}
    return {
        **facts,
        "size": size,
        "score_mean": float(scores[finite].mean()) if finite.any() else math.nan,
        "scores_not_finite": int((~finite).sum()),
        "shortest_path_mean": float(paths[solvable].mean()) if solvable.any() else math.nan,
        "unsolvable_share": float((~solvable).mean()) if size else math.nan,
    }


def read_levels(directory) -> list[dict]:
    """Every evaluation's buffer figures in a worker's levels directory, in order."""
    return [buffer_figures(p) for p in sorted(pathlib.Path(directory).glob("eval_*.npz"))]


def ended_returns(dones, rewards) -> tuple[float, int]:
    """The summed return and the number of the episodes that ended in one `[T, N]` rollout: an
    episode's return is its env's rewards since the rollout's start or the env's previous end."""
    dones, rewards = np.asarray(dones, bool), np.asarray(rewards, np.float64)
    t, envs = np.arange(len(dones))[:, None], np.arange(dones.shape[1])
    last_end = np.maximum.accumulate(np.where(dones, t, -1), axis=0)  # the latest end at or before t
    before = np.vstack([np.full((1, dones.shape[1]), -1), last_end[:-1]])  # ... strictly before t
    cum = np.vstack([np.zeros((1, dones.shape[1])), np.cumsum(rewards, axis=0)])
    returns = cum[t + 1, envs] - cum[before + 1, envs]
    return float(returns[dones].sum()), int(dones.sum())
