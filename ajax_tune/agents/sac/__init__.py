from ajax_tune.agents.sac.agent import SAC, SACState, SACTransition
from ajax_tune.agents.sac.config import SACConfig

__all__ = ["SAC", "SACConfig", "SACState", "SACTransition"]
