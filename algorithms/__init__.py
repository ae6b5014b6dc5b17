"""DDPG, TD3 and SAC for N agents at once, the DASE sharing weights, and the DPD baseline."""
from .base import Batch, StackedAgents
from .ddpg import DDPG
from .dpd import DPD_DDPG, DPD_SAC, DPD_TD3
from .sac import SAC
from .td3 import TD3

__all__ = ["Batch", "StackedAgents", "DDPG", "TD3", "SAC", "DPD_DDPG", "DPD_TD3", "DPD_SAC"]
