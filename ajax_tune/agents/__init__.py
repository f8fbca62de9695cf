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


def make_agent(agent: str | type, config, observation_space, action_space, image_shape=None):
    """The agent built for `config`: `agent` is a name in `AGENTS` or an agent class (a user's,
    whose class need not have forms), built in the form the config selects; `image_shape` is the
    env's, for an agent with `encoder` set (`agents/encoders.py`). The one way agents are built."""
    agent_cls = AGENTS[agent][0] if isinstance(agent, str) else agent
    form = getattr(agent_cls, "form", None)
    extra = {} if getattr(config, "encoder", None) is None else {"image_shape": image_shape}
    return (form(config) if callable(form) else agent_cls)(config, observation_space, action_space, **extra)


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
