from ajax_tune.agents.ppo.agent import PPO, PPOState
from ajax_tune.agents.ppo.config import PPOConfig

__all__ = ["PPO", "PPOConfig", "PPOState"]
