from ajax_tune.agents.ppo.agent import PPO, PPOState
from ajax_tune.agents.ppo.config import PPOConfig, PPOHparams, RecurrentConfig
from ajax_tune.agents.ppo.recurrent import RecurrentPPO

__all__ = ["PPO", "PPOConfig", "PPOHparams", "PPOState", "RecurrentConfig", "RecurrentPPO"]
