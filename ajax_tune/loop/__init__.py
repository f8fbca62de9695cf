"""The resumable, jitted, agent-neutral training loop.

    program.py    the pure functions one trial compiles: init and call (PureJaxRL's make_train)
    rollout.py    stepping envs with a policy: the unroll, and evaluation's episodes
    offline.py    the program for a dataset alone, built from the same parts
    compiled.py   the program under jit: donation, compile counting
    lanes.py      editing a state's lanes on the host (tasks, traced settings, random streams)
    state.py      the data: TrainState, CallOutput, CallStats
    config.py     the `train` section of a trial config
    train_loop.py TrainLoop: all of the above for one trial

Nothing here knows about Ray.
"""

from ajax_tune.loop.config import LoopConfig
from ajax_tune.loop.state import CallOutput, CallStats, TrainState
from ajax_tune.loop.train_loop import TrainLoop

__all__ = ["CallOutput", "CallStats", "LoopConfig", "TrainLoop", "TrainState"]
