"""Replay learners on images: SAC, discrete SAC, TD3 or DDPG on the features of a convolutional encoder, and the
self-supervised auxiliary losses of Advanced-Soft-Actor-Critic (``--siamese atc|byol``).

Every member has its own encoder (the Nature CNN, ``algorithms.common.cnn``, with ``image_features`` outputs, then
SAC-AE's LayerNorm and tanh) and a target copy. One update, as SAC-AE and DrQ train pixel SAC (Yarats et al. 2019, 2021):

1. x = f(o) with gradient, x' = f(o') and the target encoder's x^ = f^(o') without;
2. the algorithm's own update with x in place of the states: the critics read x with its gradient (the critic
   loss trains the encoder), the policy and temperature the detached x, the target the policy at x' and the target
   critics at x^ (TD3's and DDPG's target actor at x^);
3. when the target critics move, the target encoder moves with them (Polyak, the same rate).

The auxiliary loss (its value per member added to the critic's loss and minimised with it, on every sampled
transition, own or shared, with weight 1) trains the encoder to tell observations apart:

- **ATC** (augmented temporal contrast, Stooke et al. 2021): the anchor u = c(f(aug(o))) (c a linear compressor)
  and its prediction p = u + h(u) (h a 2-layer MLP) against the positives v = c^(f^(aug(o'))) of the momentum
  (target) encoder and compressor: logits_ij = p_i W v_j over the batch, loss = cross-entropy of row i with j = i
  (the batch's other next observations are the negatives);
- **BYOL** (Grill et al. 2020): two augmented views of o; the online projection z = g(f(aug1(o))) and prediction
  q(z), against the target projection g^(f^(aug2(o))); loss = 2 - 2 cos(q(z1), z^2), symmetrised over the views.

``aug`` is DrQ's random shift (pad 4 pixels by replicating the edges, crop back at a shift drawn per sample from
the member's update stream). ``--siamese_use_q`` ("contrastive Q" in ASAC): the critics' Q-values of the stored
action are also asked to agree between the two views (the online critics' on the first, the target critics' on the
second, their mean squared difference added to the loss): our reading of ASAC's flag.
"""
from __future__ import annotations

import copy

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..common.cnn import BatchedNatureCNN
from ..common.members import stream_seed
from ..common.nets import MLP, BatchedLinear, freeze, init_generators, soft_update
from ..common.observations import Part, unpack
from .base import Batch
from .ddpg import DDPG
from .discrete_sac import DiscreteSAC
from .sac import SAC
from .td3 import TD3

PAD = 4  # DrQ's random shift: up to 4 pixels each way


def random_shift(x: torch.Tensor, shifts: torch.Tensor) -> torch.Tensor:
    """Images [M, B, C, H, W] shifted by ``shifts`` [M, B, 2] (row and column offsets in 0..2*PAD) inside their
    edge-replicated padding: out[..., y, x] = padded[..., y + dy, x + dx], i.e. the image at the row and column
    clamped to the image (replicated edges are clamped indices), gathered in the images' own dtype."""
    m, b, c, h, w = x.shape
    rows = (shifts[..., 0:1] - PAD + torch.arange(h, device=x.device)).clamp_(0, h - 1)  # [M, B, H]
    cols = (shifts[..., 1:2] - PAD + torch.arange(w, device=x.device)).clamp_(0, w - 1)  # [M, B, W]
    out = x.gather(3, rows.view(m, b, 1, h, 1).expand(m, b, c, h, w))
    return out.gather(4, cols.view(m, b, 1, 1, w).expand(m, b, c, h, w))


def atc_loss(anchor: torch.Tensor, positive: torch.Tensor, bilinear: torch.Tensor) -> torch.Tensor:
    """ATC's contrastive loss per member: anchors and positives [M, B, D], the bilinear form W [M, D, D]."""
    logits = torch.einsum("mid,mde,mje->mij", anchor, bilinear, positive)
    logits = logits - logits.amax(-1, keepdim=True).detach()
    labels = torch.arange(anchor.shape[1], device=anchor.device)
    return -logits.log_softmax(-1)[:, labels, labels].mean(-1)


def byol_loss(prediction: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """BYOL's loss per member: 2 - 2 cos(prediction, target), averaged over the batch ([M, B, D] each)."""
    return (2 - 2 * F.cosine_similarity(prediction, target, dim=-1)).mean(-1)


class Siamese(nn.Module):
    """The heads of ATC or BYOL on an encoder's ``features`` (see the module's docstring), and their targets."""

    def __init__(self, kind: str, features: int, gens, latent: int = 128, hidden: int = 256):
        super().__init__()
        self.kind = kind
        if kind == "atc":
            self.compress = BatchedLinear(features, latent, gens)
            self.predict = MLP((latent, hidden, latent), gens)
            self.bilinear = nn.Parameter(torch.stack([torch.eye(latent) for _ in gens]))
        elif kind == "byol":
            self.compress = MLP((features, hidden, latent), gens)  # BYOL's projection
            self.predict = MLP((latent, hidden, latent), gens)
        else:
            raise ValueError(f"unknown siamese loss {kind!r}")
        self.compress_target = freeze(copy.deepcopy(self.compress))

    def loss(self, encoder: SensorEncoder, encoder_target: SensorEncoder, obs: dict, next_obs: dict,
             shifts: dict) -> torch.Tensor:
        """The loss per member [M] on a batch of observations (and next ones) {part: [M, B, ...]}; ``shifts``
        {image part: [2, M, B, 2]} the two augmentations."""
        first = self.compress(encoder(encoder.augment(obs, shifts, 0)))
        if self.kind == "atc":
            with torch.no_grad():
                positive = self.compress_target(encoder_target(encoder.augment(next_obs, shifts, 1)))
            return atc_loss(first + self.predict(first), positive, self.bilinear)
        second = self.compress(encoder(encoder.augment(obs, shifts, 1)))
        with torch.no_grad():
            target_first = self.compress_target(encoder_target(encoder.augment(obs, shifts, 0)))
            target_second = self.compress_target(encoder_target(encoder.augment(obs, shifts, 1)))
        return byol_loss(self.predict(first), target_second) + byol_loss(self.predict(second), target_first)

    def follow(self, tau: float) -> None:
        """The target heads move towards the online ones (with the target encoder)."""
        soft_update(self.compress_target, self.compress, tau)


class SensorEncoder(nn.Module):
    """Every member's encoders of an observation's parts (``utils.envs.pixels.Part``): a Nature CNN per image part
    (``features`` outputs each, any resolution of 36x36 or more), the vector parts as they are; their outputs side by
    side in the parts' order. Member i's CNN of the first image is drawn from its "encoder" stream, the others' from
    "encoder:{key}"."""

    def __init__(self, parts, seeds, features: int):
        super().__init__()
        self.parts = tuple(parts)
        images = [p for p in self.parts if p.image]
        if not images:
            raise ValueError("an image learner needs an image part")
        self.cnns = nn.ModuleDict({
            p.key: BatchedNatureCNN(p.shape[0], init_generators([stream_seed(s, "encoder" if i == 0 else
                                                                             f"encoder:{p.key}") for s in seeds]),
                                    features=int(features), size=tuple(p.shape[1:]), relu_out=False)
            for i, p in enumerate(images)})
        # SAC-AE's head on every CNN: LayerNorm (a gain and bias per member and feature), then tanh, so that the
        # features stay in [-1, 1] (unbounded ReLU features saturate a tanh policy from the first updates)
        m = len(seeds)
        self.gains = nn.ParameterDict({p.key: nn.Parameter(torch.ones(m, 1, int(features))) for p in images})
        self.shifts = nn.ParameterDict({p.key: nn.Parameter(torch.zeros(m, 1, int(features))) for p in images})
        self.features = int(features) * len(images) + sum(p.size for p in self.parts if not p.image)

    def forward(self, obs: dict) -> torch.Tensor:
        """{part: [M, B, ...]} -> features [M, B, F]."""
        out = [self.head(p.key, self.cnns[p.key](obs[p.key])) if p.image else obs[p.key].float() for p in self.parts]
        return out[0] if len(out) == 1 else torch.cat(out, dim=-1)

    def head(self, key: str, x: torch.Tensor) -> torch.Tensor:
        """tanh(LayerNorm(x)) with each member's gain and bias: [M, B, F] -> [M, B, F]."""
        return torch.tanh(F.layer_norm(x, x.shape[-1:]) * self.gains[key] + self.shifts[key])

    def augment(self, obs: dict, shifts: dict, view: int) -> dict:
        """The observations with every image part shifted by its ``shifts[key][view]``."""
        return {k: random_shift(v, shifts[k][view]) if k in self.cnns else v for k, v in obs.items()}


class ImageAgents:
    """The image form of a replay algorithm (a mixin before it; see the module's docstring). ``parts``: the
    observations' parts, or the shape of a frame stack (one part)."""

    def __init__(self, parts, act_dim, low, high, seeds, device="cpu", *, image_features=50, siamese=None,
                 siamese_use_q=False, **algo):
        if parts and isinstance(parts[0], int):  # a frame stack's shape
            parts = (Part("pixels", tuple(int(x) for x in parts), True),)
        self.parts = tuple(parts)
        encoder = SensorEncoder(self.parts, seeds, image_features)
        super().__init__(encoder.features, act_dim, low, high, seeds, device, **algo)
        if getattr(self, "vtrace", None):
            raise ValueError("V-trace is not implemented for image learners")
        self.encoder = encoder.to(self.device)
        self.encoder_target = freeze(copy.deepcopy(self.encoder))
        self.networks.update(encoder=self.encoder, encoder_target=self.encoder_target)
        self.critic_opt.add_param_group({"params": list(self.encoder.parameters())})
        self.siamese, self.siamese_use_q = None, bool(siamese_use_q)
        if siamese:
            self.siamese = Siamese(siamese, self.encoder.features,
                                   init_generators([stream_seed(s, "siamese") for s in seeds])).to(self.device)
            self.networks["siamese"] = self.siamese
            self.critic_opt.add_param_group({"params": [p for p in self.siamese.parameters() if p.requires_grad]})

    def _obs(self, obs) -> dict:
        """Observations as the environments give them (a frame stack, or a Dict's parts packed in one vector), as
        the encoder reads them: {part: tensor} (images uint8: the encoder divides by 255)."""
        if isinstance(obs, dict):
            return obs
        return unpack(torch.as_tensor(np.asarray(obs), device=self.device), self.parts)

    @torch.no_grad()
    def features(self, obs) -> torch.Tensor:
        """The encoders' features of one observation per member [M, ...] -> [M, F]."""
        return self.encoder({k: v.unsqueeze(1) for k, v in self._obs(obs).items()}).squeeze(1)

    @torch.no_grad()
    def act(self, obs) -> torch.Tensor:
        """Deterministic actions (evaluation): observations [M, E, ...] -> actions."""
        return self.actor(self.encoder(self._obs(obs)))

    def explore(self, obs):
        with self.acting_noise():
            action, behaviour = self.explore_device(self.features(obs))
        host = None if behaviour is None else tuple(b.cpu().numpy() for b in behaviour)
        return action.cpu().numpy(), host

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One gradient step of every member on its images (see the module's docstring)."""
        features = self.encoder(batch.obs)
        with torch.no_grad():
            next_features = self.encoder(batch.next_obs)
            target_next = self.encoder_target(batch.next_obs)
        steps = Batch(features.detach(), batch.action, batch.reward, next_features, batch.not_done, batch.own,
                      batch.behaviour_mean, batch.behaviour_std, batch.behaviour_probs, critic_obs=features,
                      target_next_obs=target_next)
        if self.siamese is not None:
            steps.auxiliary_loss = self.auxiliary_loss(batch)
        info = super().update(steps)
        if self.updates % self.target_period == 0:  # the target critics moved
            soft_update(self.encoder_target, self.encoder, self.tau)
            if self.siamese is not None:
                self.siamese.follow(self.tau)
        if self.siamese is not None:
            info["siamese_loss"] = steps.auxiliary_loss.detach()
        return info

    def auxiliary_loss(self, batch: Batch) -> torch.Tensor:
        """The siamese loss per member [M] (and, with --siamese_use_q, the critics' agreement between views)."""
        b = batch.action.shape[1]
        shifts = {key: self.update_rng.randint(2 * PAD + 1, 2, b, 2).permute(1, 0, 2, 3)  # [2, M, B, 2] each
                  for key in self.encoder.cnns}
        loss = self.siamese.loss(self.encoder, self.encoder_target, batch.obs, batch.next_obs, shifts)
        if self.siamese_use_q:
            view = self.encoder.augment
            online = self.critic_values(self.encoder(view(batch.obs, shifts, 0)), batch.action, self.critic)
            with torch.no_grad():
                target = self.critic_values(self.encoder_target(view(batch.obs, shifts, 1)), batch.action,
                                            self.critic_target)
            loss = loss + (online - target).pow(2).mean((1, 2))
        return loss

    def critic_values(self, features: torch.Tensor, action: torch.Tensor, critic: nn.Module) -> torch.Tensor:
        """Every critic's Q-value of the stored action, side by side [M, B, critics]."""
        if self.low is None:  # discrete: each critic's row of action values, at the stored index
            index = action.long()
            return torch.cat([q.gather(-1, index) for q in critic(features)], dim=-1)
        values = critic(features, action)
        return torch.cat([values] if torch.is_tensor(values) else list(values), dim=-1)


class ImageSAC(ImageAgents, SAC):
    """SAC (Gaussian or deterministic policy) on a convolutional encoder's features."""


class ImageDiscreteSAC(ImageAgents, DiscreteSAC):
    """Discrete SAC on a convolutional encoder's features."""


class ImageTD3(ImageAgents, TD3):
    """TD3 on a convolutional encoder's features (the target actor reads the target encoder's)."""


class ImageDDPG(ImageAgents, DDPG):
    """DDPG on a convolutional encoder's features."""
