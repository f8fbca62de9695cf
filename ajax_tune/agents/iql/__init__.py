from ajax_tune.agents.iql.agent import IQL
from ajax_tune.agents.iql.config import IQLConfig, IQLHparams

__all__ = ["IQL", "IQLConfig", "IQLHparams"]
