"""ajax_tune: Ray Tune trainables for fully jitted JAX reinforcement learning.

`Runner` (the core object) and the layers below it never import Ray; `AjaxTrainable` does,
and is loaded on first use.
"""

__version__ = "0.1.0"

__all__ = [
    "AjaxTrainable",
    "Callback",
    "Config",
    "Runner",
    "TaskSettableEnv",
    "ThresholdCurriculum",
    "configure_jax",
    "trial_names",
    "__version__",
]


def __getattr__(name):
    if name == "AjaxTrainable":
        from ajax_tune.tune.trainable import AjaxTrainable

        return AjaxTrainable
    if name == "trial_names":  # no Ray needed to name trials
        from ajax_tune.tune.output import trial_names

        return trial_names
    if name == "Runner":
        from ajax_tune.runner import Runner

        return Runner
    if name == "Config":
        from ajax_tune.config import Config

        return Config
    if name == "configure_jax":
        from ajax_tune.jax_setup import configure_jax

        return configure_jax
    if name in ("ThresholdCurriculum", "Callback", "TaskSettableEnv"):
        from ajax_tune import curriculum

        return getattr(curriculum, name)
    raise AttributeError(f"module 'ajax_tune' has no attribute {name!r}")
