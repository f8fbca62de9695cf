"""A callback that fingerprints a trial's replay buffers, for the Tune tests (importable by Ray
workers): it shows which buffer a trial trains on after a PBT exploit."""

import math
import zlib

import jax
import numpy as np

from ajax_tune.curriculum import Callback


def fingerprint(tree) -> float:
    """crc32 of every leaf's bytes (exact as a float)."""
    crc = 0
    for leaf in jax.tree.leaves(jax.device_get(tree)):
        crc = zlib.crc32(np.ascontiguousarray(leaf).tobytes(), crc)
    return float(crc)


class ReplayProbe(Callback):
    """`probe/buffer`: the buffers after this call; `probe/restored_buffer`: the buffers a
    checkpoint restore put in place before this call (NaN when there was none)."""

    def __init__(self):
        self.after, self.restored = math.nan, math.nan

    def on_train_result(self, control, result):
        self.after = fingerprint(control.state.agent.buffer)

    def on_checkpoint_load(self, control, checkpoint_dir):
        self.restored = fingerprint(control.state.agent.buffer)

    def metrics(self):
        out = {"probe/buffer": self.after, "probe/restored_buffer": self.restored}
        self.restored = math.nan
        return out
