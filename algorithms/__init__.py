"""The algorithms, a room per family: common/ (what both build on), replay/ (DDPG, TD3, SAC), onpolicy/ (A2C, ACER,
A3C) and sharing/ (DASE's weights, DPD's distillation, graph diffusion). Importing the package imports none of them:
the replay family's classes below are loaded when first named (``from algorithms import TD3``), so an on-policy
module never pulls in the replay family."""
from __future__ import annotations

import importlib

_EXPORTS = {"Batch": ".replay.base", "StackedAgents": ".replay.base", "DDPG": ".replay.ddpg", "TD3": ".replay.td3",
            "SAC": ".replay.sac", "Distillation": ".sharing.dpd"}
__all__ = list(_EXPORTS)


def __getattr__(name: str):
    if name not in _EXPORTS:
        raise AttributeError(f"module 'algorithms' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name], __name__), name)
