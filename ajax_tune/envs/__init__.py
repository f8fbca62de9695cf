"""Functional JAX environments whose difficulty (the task) is data."""

from ajax_tune.envs.base import Env, EnvState, Episode, Task, TaskError, TaskField, flatten_task, validate_task
from ajax_tune.envs.registry import make_env, register, registered_envs
from ajax_tune.envs.wrappers import EpisodeWrapper, VecEnv

__all__ = [
    "Env",
    "EnvState",
    "Episode",
    "EpisodeWrapper",
    "Task",
    "TaskError",
    "TaskField",
    "VecEnv",
    "flatten_task",
    "make_env",
    "register",
    "registered_envs",
    "validate_task",
]
