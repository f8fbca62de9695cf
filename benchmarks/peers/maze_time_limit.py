"""JaxUED's maze as maze_plr.py's learner sees it: reaching the time limit ends the episode.

ajax_tune's `jaxued/maze` treats the limit as a truncation (the observation holds no clock, so
the transition bootstraps from V(s')); maze_plr.py's `done` includes the limit and its GAE stops
there, as at the goal. This env is ajax_tune's maze with the limit a termination instead, so the
study can show what that one difference does to the curves (`ued_maze.py`'s
`ajax_tune_terminal` side, named by import path: `maze_time_limit:TerminalMaze`).
"""

from __future__ import annotations

from ajax_tune.envs.jaxued_adapter import MazeEnv


class TerminalMaze(MazeEnv):
    def step(self, state, action, key):
        nxt = super().step(state, action, key)
        out_of_time = nxt.physics.time >= self.max_episode_steps
        return nxt.replace(terminated=nxt.terminated | out_of_time)
