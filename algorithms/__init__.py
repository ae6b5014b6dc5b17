"""The algorithms, a room per family: common/ (what both build on), replay/ (DDPG, TD3, SAC), onpolicy/ (A2C, ACER,
A3C) and sharing/ (DASE's weights, DPD's distillation, graph diffusion). The replay family's classes are exported
here."""
from .replay.base import Batch, StackedAgents
from .replay.ddpg import DDPG
from .replay.sac import SAC
from .replay.td3 import TD3
from .sharing.dpd import Distillation

__all__ = ["Batch", "StackedAgents", "DDPG", "TD3", "SAC", "Distillation"]
