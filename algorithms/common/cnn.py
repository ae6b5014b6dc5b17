"""Convolutional encoders whose every parameter carries a leading member dimension (see ``nets.py``).

``BatchedNatureCNN`` is N independent copies of the encoder of the Nature DQN (Mnih et al., 2015), for
84x84 frame stacks. Each member's convolutions run on its own images, one member after another, so members share
no weights, no activations and no gradients, and a member's numbers are bit for bit those it has alone: one
grouped convolution of all members (their channels side by side) was tried and dropped, because oneDNN picks
other kernels for other group counts (a seed batched with others then learned other last bits than alone), and on
one CPU core it was no faster for two members.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from algorithms.common.nets import BatchedLinear

# (output channels, kernel, stride) of the three convolutions
NATURE_CONVS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))


class BatchedNatureCNN(nn.Module):
    """N Nature-DQN encoders: [N, B, C, 84, 84] (uint8 pixels, divided by 255, or float) -> [N, B, features].

    conv 32 8x8 /4 -> ReLU -> conv 64 4x4 /2 -> ReLU -> conv 64 3x3 /1 -> ReLU -> flatten (64*7*7) -> linear
    ``features`` -> ReLU. Convolution weights are stored as [N, out, in, k, k] and biases as [N, out]; the linear
    layer is a ``BatchedLinear``. Initialisation is torch's default for Conv2d and Linear (weights and biases
    uniform in +-1/sqrt(fan_in)), member i's drawn from ``gens[i]`` only, layer by layer, so its initial weights
    do not depend on how many members are built with it.
    """

    def __init__(self, in_channels: int, gens: Sequence[torch.Generator], features: int = 512,
                 size: int | tuple[int, int] = 84, relu_out: bool = True):
        super().__init__()
        self.relu_out = relu_out  # False: the linear layer's output as it is (a head normalises it)
        height, width = (size, size) if isinstance(size, int) else map(int, size)  # a frame's (H, W)
        n = len(gens)
        self.members, self.in_channels, self.features = n, in_channels, features
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        self.strides: list[int] = []
        c_in = in_channels
        for c_out, k, stride in NATURE_CONVS:
            w = torch.empty(n, c_out, c_in, k, k)
            b = torch.empty(n, c_out)
            bound = 1.0 / math.sqrt(c_in * k * k)
            with torch.no_grad():
                for i, g in enumerate(gens):
                    w[i].uniform_(-bound, bound, generator=g)
                    b[i].uniform_(-bound, bound, generator=g)
            self.weights.append(nn.Parameter(w))
            self.biases.append(nn.Parameter(b))
            self.strides.append(stride)
            height, width = (height - k) // stride + 1, (width - k) // stride + 1
            if height < 1 or width < 1:
                raise ValueError(f"frames of {size} are too small for the Nature CNN (36x36 at least)")
            c_in = c_out
        self.flat = c_in * height * width  # 64 * 7 * 7 = 3136 for 84x84 frames
        self.fc = BatchedLinear(self.flat, features, gens)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 5 or x.shape[0] != self.members or x.shape[2] != self.in_channels:
            raise ValueError(f"expected [{self.members}, B, {self.in_channels}, H, W], got {tuple(x.shape)}")
        out = self.fc(torch.stack([self.convolved(x[i], i) for i in range(self.members)]))
        return F.relu(out) if self.relu_out else out

    def convolved(self, x: torch.Tensor, i: int) -> torch.Tensor:
        """Member i's convolutions alone on its images [B, C, H, W] -> flattened [B, 64 * h * w]."""
        h = x.to(self.fc.weight.dtype)
        if x.dtype == torch.uint8:
            h = h.div_(255.0)
        for w, bias, stride in zip(self.weights, self.biases, self.strides):
            h = F.relu(F.conv2d(h, w[i], bias[i], stride=stride))
        return h.flatten(1)
