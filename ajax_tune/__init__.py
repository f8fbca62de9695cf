"""ajax_tune: Ray Tune trainables for fully jitted JAX reinforcement learning."""

__version__ = "0.1.0"
