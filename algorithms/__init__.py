"""DDPG, TD3 and SAC for N agents at once, and the DASE sharing weights."""
from .base import Batch, StackedAgents
from .ddpg import DDPG
from .sac import SAC
from .td3 import TD3

__all__ = ["Batch", "StackedAgents", "DDPG", "TD3", "SAC"]
