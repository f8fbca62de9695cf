"""Agents: each implements the contract in `base.Agent` (init, act, transition, update, health,
with_hparams); the training loop owns everything else: stepping envs, evaluating, writing rows."""

from ajax_tune.agents.base import Agent, AgentBase, Clock
from ajax_tune.agents.bc import BC, BCConfig
from ajax_tune.agents.dqn import DQN, DQNConfig
from ajax_tune.agents.iql import IQL, IQLConfig
from ajax_tune.agents.ppo import PPO, PPOConfig
from ajax_tune.agents.sac import SAC, SACConfig
from ajax_tune.agents.td3 import TD3, TD3Config
from ajax_tune.agents.td3bc import TD3BC, TD3BCConfig

AGENTS = {
    "ppo": (PPO, PPOConfig),
    "sac": (SAC, SACConfig),
    "dqn": (DQN, DQNConfig),
    "td3": (TD3, TD3Config),
    # offline: they learn from train.dataset (loop/offline.py)
    "td3bc": (TD3BC, TD3BCConfig),
    "iql": (IQL, IQLConfig),
    "bc": (BC, BCConfig),
}


def make_agent(name: str, config, observation_space, action_space, image_shape=None):
    """The agent `name` builds for `config` (in the form the config selects); `image_shape` is
    the env's, for an agent with `encoder` set (`agents/encoders.py`)."""
    agent_cls, _ = AGENTS[name]
    extra = {} if getattr(config, "encoder", None) is None else {"image_shape": image_shape}
    return agent_cls.form(config)(config, observation_space, action_space, **extra)


__all__ = [
    "AGENTS",
    "Agent",
    "AgentBase",
    "BC",
    "BCConfig",
    "Clock",
    "DQN",
    "DQNConfig",
    "IQL",
    "IQLConfig",
    "PPO",
    "PPOConfig",
    "SAC",
    "SACConfig",
    "TD3",
    "TD3Config",
    "TD3BC",
    "TD3BCConfig",
    "make_agent",
]
