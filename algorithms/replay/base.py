"""What the replay family shares: the batch of transitions its updates read and ``StackedAgents`` (exploring with
noise, the sharing weights of each sample, the update schedule)."""
from __future__ import annotations

import copy
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from ..common.members import Members
from ..common.nets import adam, clear_noise, draw_noise, freeze, make_noisy, noisy_layers
from ..sharing.weights import Weighting


@dataclass
class Batch:
    """Transitions for N learners, every field [N, B, ...]; own[n, b] says agent n wrote it."""

    obs: torch.Tensor | dict  # image agents: the observation's parts by key
    action: torch.Tensor
    reward: torch.Tensor  # [N, B, 1]
    next_obs: torch.Tensor | dict
    not_done: torch.Tensor  # [N, B, 1]: 1 - terminated (a time-limit cut still bootstraps)
    own: torch.Tensor  # [N, B] bool
    behaviour_mean: torch.Tensor | None = None  # Gaussian SAC only (pre-tanh)
    behaviour_std: torch.Tensor | None = None
    behaviour_probs: torch.Tensor | None = None  # discrete SAC only: [N, B, A], the writer's probabilities
    # N-step returns (--n_step > 1): reward is then the discounted sum of the rewards up to the cut, next_obs and
    # not_done those of the cut's step, and discount [N, B, 1] gamma^(steps); None: one step, the algorithm's gamma
    discount: torch.Tensor | None = None
    # V-trace (--vtrace): the N steps themselves, every field [N, B, n, ...] (obs, action, reward, next_obs,
    # not_done, used = 1 for the steps the return sums, behaviour_mean, behaviour_std)
    sequence: dict | None = None

    # prioritized replay (--prioritized): the rows sampled [N, B] (their priorities are updated after the step) and
    # the importance weights [N, B, 1] multiplied into the sharing weights of the losses
    index: torch.Tensor | None = None
    importance: torch.Tensor | None = None
    # recurrent learners (--seq_encoder): obs and next_obs are then the encoder's features, detached, for the policy;
    # the critics read ``critic_obs`` (the same features, with the encoder's gradient) and the target critics
    # ``target_next_obs`` (the target encoder's features of the next observations). None: obs and next_obs.
    critic_obs: torch.Tensor | None = None
    target_next_obs: torch.Tensor | None = None
    # a loss per member [M] minimised with the critic's (a recurrent learner's prediction model); None: none
    auxiliary_loss: torch.Tensor | None = None

    def critic_objective(self, critic_loss: torch.Tensor) -> torch.Tensor:
        """What the critic's optimizer minimises: the summed critic losses, plus the auxiliary loss if any."""
        total = critic_loss.sum()
        return total if self.auxiliary_loss is None else total + self.auxiliary_loss.sum()

    @property
    def critic_input(self) -> torch.Tensor:
        """What the critics read: the states, or a recurrent learner's features with their gradient."""
        return self.obs if self.critic_obs is None else self.critic_obs

    @property
    def target_input(self) -> torch.Tensor:
        """What the target critics read of the next states."""
        return self.next_obs if self.target_next_obs is None else self.target_next_obs

    def loss_weights(self, w: torch.Tensor) -> torch.Tensor:
        """The per-sample weights of the losses: the sharing weights ``w``, times the importance weights of
        prioritized replay (the losses are weighted means, so the importance correction is self-normalised)."""
        return w if self.importance is None else w * self.importance

    def td_error(self, *errors: torch.Tensor) -> torch.Tensor | None:
        """|TD error| per sample [N, B, 1] (the mean over twin critics) for prioritized replay; None otherwise."""
        if self.index is None:
            return None
        return sum(e.detach().abs() for e in errors) / len(errors)

    def gamma(self, default: float):
        """The discount of the bootstrap: per sample for N-step batches, else the algorithm's own."""
        return default if self.discount is None else self.discount


class StackedAgents(Members):
    """N replay learners of one algorithm (``Members``): exploration noise, the per-sample weights a sharing scheme
    sets, the update schedule, and TD3's and DDPG's actor-critic."""

    gaussian_behaviour = False  # True when transitions must carry the behaviour Gaussian
    behaviour_width = 0  # A when transitions must carry the behaviour's action probabilities (discrete SAC)

    def __init__(self, seeds, low, high, device, expl_noise: float):
        super().__init__(seeds, low, high, device)
        self.expl_noise = float(expl_noise)
        self.weighting = Weighting()  # how much each sample counts; a sharing scheme may replace it
        # noisy networks (--noisy): the modules whose noise is drawn before each exploration step (from the
        # exploration stream) and before each update (from the update stream); none by default
        self.acting_noisy: tuple[nn.Module, ...] = ()
        self.update_noisy: tuple[nn.Module, ...] = ()
        # --action_noise: each member's exploration level [N] (None: the algorithm's own, --expl_noise for TD3/DDPG)
        self.action_noise: torch.Tensor | None = None

    def set_action_noise(self, levels) -> None:
        """Each member's exploration level (ASAC's action-noise range; see the algorithms' ``explore_device``)."""
        self.action_noise = torch.as_tensor(np.asarray(levels), dtype=torch.float32, device=self.device)

    @staticmethod
    def noisy(module: nn.Module, noisy: bool, sigma0: float) -> nn.Module:
        """``module`` with noisy linear layers when ``noisy`` (``algorithms.common.nets.NoisyBatchedLinear``)."""
        return make_noisy(module, sigma0) if noisy else module

    def _noise(self, rng, modules):
        """Noise for ``modules`` while the context lasts; without noisy networks (the default) nothing at all, as
        this runs at every environment step and update."""
        return self._noisy_context(rng, modules) if modules else nullcontext()

    @contextmanager
    def _noisy_context(self, rng, modules):
        for m in modules:
            draw_noise(m, rng)
        try:
            yield
        finally:
            for m in modules:
                clear_noise(m)

    def acting_noise(self):
        """A context in which the noisy networks that act carry new noise from the exploration stream (nothing is
        drawn without --noisy); outside it they are their means, as evaluation plays them."""
        return self._noise(self.explore_rng, self.acting_noisy)

    def update_noise(self):
        """A context in which the noisy networks an update reads carry new noise from the update stream, each its
        own draw (the online and target networks independent, as in Fortunato et al.)."""
        return self._noise(self.update_rng, self.update_noisy)

    def deterministic_actor_critic(self, actor: nn.Module, critic: nn.Module, actor_lr: float, critic_lr: float,
                                   critic_weight_decay: float = 0.0) -> None:
        """TD3's and DDPG's networks: the actor and critic on the device, frozen copies as targets, one Adam for
        each, all listed in ``self.networks``."""
        self.actor, self.critic = actor.to(self.device), critic.to(self.device)
        self.actor_target = freeze(copy.deepcopy(self.actor))
        if noisy_layers(self.actor):  # --noisy
            self.acting_noisy, self.update_noisy = (self.actor,), (self.actor, self.actor_target)
        self.critic_target = freeze(copy.deepcopy(self.critic))
        self.actor_opt = adam(self.actor.parameters(), lr=actor_lr)
        self.critic_opt = adam(self.critic.parameters(), lr=critic_lr, weight_decay=critic_weight_decay)
        self.networks = {"actor": self.actor, "critic": self.critic,
                         "actor_target": self.actor_target, "critic_target": self.critic_target}

    def exploration_variance(self) -> torch.Tensor:
        """The variance of the exploration noise per action dimension [A], in action units (--expl_noise's: with
        --action_noise there is no one variance, and --kl_div_var matched is refused)."""
        return (self.expl_noise * self.scale).pow(2)

    def mixed_parameters(self) -> list[nn.Parameter]:
        """What parameter diffusion averages between neighbours: the online networks (targets follow them)."""
        return [*self.actor.parameters(), *self.critic.parameters()]

    def explore(self, obs) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray] | None]:
        """Training actions for one state per agent: obs [N, obs_dim] -> ([N, act_dim], behaviour), on the host."""
        with self.acting_noise():
            action, behaviour = self.explore_device(self._obs(obs))
        host = None if behaviour is None else tuple(b.cpu().numpy() for b in behaviour)
        return action.cpu().numpy(), host

    @torch.no_grad()
    def explore_device(self, obs: torch.Tensor) -> tuple[torch.Tensor, tuple[torch.Tensor, torch.Tensor] | None]:
        """``explore`` on the device: actions [N, act_dim] and, for Gaussian SAC, the behaviour (mean, std) (discrete
        SAC: actions [N] and its probabilities, (probs,))."""
        a = self.actor(obs.unsqueeze(1)).squeeze(1)
        level = self.expl_noise if self.action_noise is None else self.action_noise.unsqueeze(-1)
        noise = self.explore_rng.normal(a.shape[-1]) * (level * self.scale)
        return torch.clamp(a + noise, self.low, self.high), None

    @torch.no_grad()
    def weights(self, batch: Batch, policy_actions: torch.Tensor | None = None) -> torch.Tensor:
        """Per-sample weights [N, B, 1] from ``self.weighting``; pass pi(s) if it is already computed."""
        return self.weighting(self, batch, policy_actions)

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    @torch.no_grad()
    def td_errors(self, batch: Batch) -> torch.Tensor:
        """|TD error| [N, B] of every agent on ``batch`` without learning: the mean over its critics of |Q(s, a) -
        target|, as ``update`` reports it for prioritized replay (the distributed actors' initial priorities)."""
        target = self.target(batch)
        errors = [(q - target).abs() for q in self.stored_action_values(batch)]
        return (sum(errors) / len(errors)).squeeze(-1)

    def stored_action_values(self, batch: Batch) -> tuple[torch.Tensor, ...]:
        """Each critic's Q of the batch's stored actions, [N, B, 1] each."""
        return tuple(self.critic(batch.critic_input, batch.action))

    def schedule(self) -> tuple:
        """Which branch the next ``update`` takes (its kernels differ per branch: one CUDA graph each)."""
        return ()

    @property
    def target_period(self) -> int:
        """Updates between moves of the target networks (after the update whose count is a multiple of it)."""
        return int(getattr(self, "target_update_interval", 1))
