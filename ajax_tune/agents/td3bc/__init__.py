from ajax_tune.agents.td3bc.agent import TD3BC, BehaviourCloning
from ajax_tune.agents.td3bc.config import TD3BCConfig, TD3BCHparams

__all__ = ["BehaviourCloning", "TD3BC", "TD3BCConfig", "TD3BCHparams"]
