"""Domain randomisation: every env draws its task uniformly from the space, whatever happens."""

from __future__ import annotations

from ajax_tune.samplers.base import TaskSampler


class Uniform(TaskSampler):
    """Each field uniformly over its range or set (independently), or one of the levels uniformly.

    It learns nothing, which makes it the baseline the learning samplers must beat.
    """

    reads_learning_signal = False

    def __init__(self, space=None, levels=None, *, seed: int = 0):
        super().__init__(space, levels, seed=seed)

    def _sample(self, num_envs):
        return self.space.draw(self.rng, num_envs)
