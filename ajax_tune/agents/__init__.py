"""Agents: each implements the contract in `base.Agent` (init, act, transition, update, health,
with_hparams); the training loop owns everything else: stepping envs, evaluating, writing rows."""

from ajax_tune.agents.base import Agent, AgentBase, Clock
from ajax_tune.agents.dqn import DQN, DQNConfig
from ajax_tune.agents.ppo import PPO, PPOConfig
from ajax_tune.agents.sac import SAC, SACConfig
from ajax_tune.agents.td3 import TD3, TD3Config

AGENTS = {"ppo": (PPO, PPOConfig), "sac": (SAC, SACConfig), "dqn": (DQN, DQNConfig), "td3": (TD3, TD3Config)}


def make_agent(name: str, config, observation_space, action_space):
    agent_cls, _ = AGENTS[name]
    return agent_cls(config, observation_space, action_space)


__all__ = [
    "AGENTS",
    "Agent",
    "AgentBase",
    "Clock",
    "DQN",
    "DQNConfig",
    "PPO",
    "PPOConfig",
    "SAC",
    "SACConfig",
    "TD3",
    "TD3Config",
    "make_agent",
]
