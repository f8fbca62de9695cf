"""An env factory and an agent that tests name by import path, as a user would name their own
(importable by Ray workers: the repository root is on their PYTHONPATH)."""

from ajax_tune.agents import PPO, PPOConfig
from ajax_tune.envs.corridor import Corridor

NOT_CALLABLE = 3


def short_corridor(max_episode_steps: int = 20) -> Corridor:
    """A user's env factory: the corridor, short, with its own default length."""
    return Corridor(max_length=8, max_episode_steps=max_episode_steps, default_length=3)


def not_an_env():
    return object()


class MyPPO(PPO):
    """A user's agent: the contract is a class with its config dataclass as `Config`."""

    Config = PPOConfig


class NoConfig(PPO):
    pass
