"""The errors a user's input can cause. Kept free of heavy imports, so the command line can
catch them without loading JAX."""


class ConfigError(ValueError):
    """A config value that is missing, unknown, of the wrong type or out of range."""


class TaskError(ValueError):
    """A task that does not fit its env: wrong structure, shape, dtype or range."""


class CheckpointError(RuntimeError):
    """A checkpoint that cannot be restored here: missing, truncated, foreign or incompatible."""


class LaunchError(Exception):
    """Something about where or how to run that the user must change: a storage path, an
    experiment directory, a cluster to join."""
