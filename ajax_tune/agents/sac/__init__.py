from ajax_tune.agents.sac.agent import SAC, SACState
from ajax_tune.agents.sac.config import SACConfig, SACHparams

__all__ = ["SAC", "SACConfig", "SACHparams", "SACState"]
