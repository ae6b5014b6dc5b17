"""DDPG, TD3 and SAC for N agents at once, the DASE sharing weights, DPD's distillation and graph diffusion."""
from .base import Batch, StackedAgents
from .ddpg import DDPG
from .dpd import Distillation
from .sac import SAC
from .td3 import TD3

__all__ = ["Batch", "StackedAgents", "DDPG", "TD3", "SAC", "Distillation"]
