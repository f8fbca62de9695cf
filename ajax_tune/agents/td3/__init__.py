from ajax_tune.agents.td3.agent import TD3, TD3State
from ajax_tune.agents.td3.config import TD3Config, TD3Hparams

__all__ = ["TD3", "TD3Config", "TD3Hparams", "TD3State"]
