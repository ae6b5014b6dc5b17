"""Observations made of parts (several sensors): which part is an image and which a vector, where each lies in a
packed vector, and how the learners unpack them (the environments' side: ``utils.envs.pixels.PackedSensors``)."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch


@dataclass(frozen=True)
class Part:
    """One sensor of an observation: its key, shape, whether it is a frame stack (stored frame by frame), and where
    it lies in a packed vector (``start``; None when the observation is the image itself, not packed)."""
    key: str
    shape: tuple[int, ...]
    stacked: bool
    start: int | None = None

    @property
    def image(self) -> bool:
        return len(self.shape) == 3

    @property
    def size(self) -> int:
        return int(np.prod(self.shape))


def unpack(obs, parts: tuple[Part, ...]) -> dict:
    """Observations [..., packed] (numpy or torch) as their parts {key: [..., *shape]} (images back to uint8); a
    single unpacked image part: {key: obs}."""
    if len(parts) == 1 and parts[0].start is None:
        return {parts[0].key: obs}
    lead = tuple(obs.shape[:-1])
    out = {}
    for p in parts:
        x = obs[..., p.start:p.start + p.size].reshape(*lead, *p.shape)
        if p.image:
            x = x.to(torch.uint8) if isinstance(x, torch.Tensor) else x.astype(np.uint8)
        out[p.key] = x
    return out
