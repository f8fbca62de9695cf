from ajax_tune.agents.bc.agent import BC
from ajax_tune.agents.bc.config import BCConfig, BCHparams

__all__ = ["BC", "BCConfig", "BCHparams"]
