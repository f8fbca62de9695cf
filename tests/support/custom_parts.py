"""An env factory and an agent that tests name by import path, as a user would name their own
(importable by Ray workers: the repository root is on their PYTHONPATH)."""

import gymnasium
import jax
import jax.numpy as jnp
import numpy as np

from ajax_tune.agents import PPO, PPOConfig
from ajax_tune.envs.base import Env, EnvState, TaskField, stack_tasks
from ajax_tune.envs.corridor import Corridor
from ajax_tune.errors import TaskError

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


class Coin(Env):
    """A user's env with no task fields (`task_spec = {}`): a coin is shown each step, and
    naming it pays 1. Its one task is the empty one."""

    name = "coin"
    observation_space = gymnasium.spaces.Box(0.0, 1.0, (2,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)
    max_episode_steps = 10
    task_spec = {}

    def _coin(self, key):
        return jax.nn.one_hot(jax.random.bernoulli(key).astype(jnp.int32), 2, dtype=jnp.float32)

    def reset(self, key, task) -> EnvState:
        return EnvState.create(obs=self._coin(key), task=task, physics=jnp.zeros((), jnp.int32))

    def step(self, state, action, key) -> EnvState:
        named = (jnp.argmax(state.obs) == action).astype(jnp.float32)
        return state.replace(obs=self._coin(key), reward=named, terminated=jnp.zeros((), jnp.bool_))


def coin() -> Coin:
    return Coin()


class NamedCorridor(Corridor):
    """A corridor that knows tasks by name, in named sets (as a suite names its shipped levels),
    and carries a large task field (as a level does) that results leave out."""

    NAMES = {"short": 2, "middle": 4, "long": 6}
    SETS = {"all": ("short", "middle", "long"), "ends": ("short", "long")}

    def __init__(self):
        super().__init__(max_length=8, max_episode_steps=20, default_length=3)
        self.name = "named_corridor"
        self.task_spec = {**self.task_spec, "walls": TaskField(0.0, 0.0, 1.0, np.float32, (4, 5), "unused: a level's data")}

    def task_names(self):
        return list(self.NAMES)

    def named_task(self, name):
        if name not in self.NAMES:
            raise TaskError(f"{self.name} has no task {name!r}")
        return self.validate_task({"length": self.NAMES[name], "walls": np.full((4, 5), self.NAMES[name] / 10)})

    def named_task_sets(self):
        return tuple(self.SETS)

    def named_tasks(self, name):
        if name not in self.SETS:
            return super().named_tasks(name)
        return self.SETS[name], stack_tasks([self.named_task(n) for n in self.SETS[name]])


def named_corridor() -> NamedCorridor:
    return NamedCorridor()
