from ajax_tune.agents.dqn.agent import DQN, DQNState, DQNTransition, epsilon
from ajax_tune.agents.dqn.config import DQNConfig

__all__ = ["DQN", "DQNConfig", "DQNState", "DQNTransition", "epsilon"]
