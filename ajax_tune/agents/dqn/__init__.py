from ajax_tune.agents.dqn.agent import DQN, DQNState, epsilon
from ajax_tune.agents.dqn.config import DQNConfig, DQNHparams

__all__ = ["DQN", "DQNConfig", "DQNHparams", "DQNState", "epsilon"]
