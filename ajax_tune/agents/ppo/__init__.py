from ajax_tune.agents.ppo.agent import PPO, PPOState
from ajax_tune.agents.ppo.config import PPOConfig, PPOHparams

__all__ = ["PPO", "PPOConfig", "PPOHparams", "PPOState"]
