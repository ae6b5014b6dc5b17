"""Recurrent replay learners (``--seq_encoder``): SAC, discrete SAC, TD3 or DDPG on the features of a recurrent encoder,
trained on replayed windows of steps with R2D2's stored state and burn-in (Kapturowski et al. 2019), as
Advanced-Soft-Actor-Critic trains its representation.

A batch holds, per member, B windows of L consecutive steps of one writer, the state that writer's encoder had
before the window's first step, and 1 where an episode starts (the state is zeroed there, as acting zeroed it, so
no window carries memory across an episode's start). One update:

1. burn-in: the first ``burn_in`` steps run the encoder (online and target, no gradient) from the stored state, to
   refresh it under today's parameters; they are not trained on;
2. the other T = L - burn_in steps: online features x_t (with gradient), the features of each step's next
   observation from the state after that step (online x'_t for the policy, target x^_t for the target critics);
3. the algorithm's own update on the B x T steps as samples, with x_t in place of the states: the critics read x_t
   with its gradient (the critic loss trains the encoder), the policy and temperature the detached x_t, the target
   the policy at x'_t (TD3's and DDPG's target actor at x^_t) and the target critics at x^_t; SAC's target, for
   instance, is

       y_t = scale r_t + gamma not_done_t (min_j Q^_j(x^_t, a') - alpha log pi(a'|x'_t)),  a' ~ pi(x'_t).

   Every step is weighted by the sharing weights, which the weighting computes on the features as on states (DASE's
   per-step form: every step of a shared window gets the weight its own action earns; docs/sharing.md);
4. when the target critics move, the target encoder moves with them (Polyak, the same rate).

With ``use_prediction`` (ASAC's prediction model, ``sequence.PredictionModel``) its loss on the same trained steps
is added to the critic's and minimised with it, so it trains the model and shapes the encoder.
"""
from __future__ import annotations

import copy

import torch

from ..common.members import stream_seed
from ..common.nets import freeze, init_generators, soft_update
from .base import Batch
from .ddpg import DDPG
from .discrete_sac import DiscreteSAC
from .sac import SAC
from .sequence import PredictionModel, SequenceEncoder
from .td3 import TD3


class SequenceAgents:
    """The recurrent form of a replay algorithm (a mixin before it; see the module's docstring)."""

    def __init__(self, obs_dim, act_dim, low, high, seeds, device="cpu", *, seq_encoder="gru", seq_len=16,
                 burn_in=0, seq_hidden=64, use_prediction=False, transition_kl=0.8, prev_action=False, **algo):
        # --prev_action: the encoder reads [o_t, a_{t-1}] (a discrete action one-hot, a continuous one scaled to
        # [-1, 1]; zeros at an episode's first step); the learner stores and replays it as part of the observation
        self.prev_width = int(act_dim) if prev_action else 0
        encoder = SequenceEncoder(seq_encoder, obs_dim + self.prev_width, seq_hidden,
                                  init_generators([stream_seed(s, "encoder") for s in seeds]), context=seq_len)
        super().__init__(encoder.features, act_dim, low, high, seeds, device, **algo)
        if getattr(self, "vtrace", None):
            raise ValueError("V-trace is not implemented for recurrent learners")
        self.encoder = encoder.to(self.device)
        self.encoder_target = freeze(copy.deepcopy(self.encoder))
        self.seq_len, self.burn_in = int(seq_len), int(burn_in)
        self.n_step = 1  # N-step returns inside a window (set by the learner from --n_step)
        self.networks.update(encoder=self.encoder, encoder_target=self.encoder_target)
        # the critic's loss trains the encoder (and the prediction model): their parameters join the critic's
        # optimizer, with its settings (Adam is element-wise: the same as an optimizer of their own)
        self.critic_opt.add_param_group({"params": list(self.encoder.parameters())})
        self.prediction = None
        if use_prediction:  # trained with the critic, on the same steps (its loss added to the critic's)
            width = self.n_actions if low is None else act_dim  # a discrete action enters one-hot
            self.prediction = PredictionModel(encoder.features, width, encoder.hidden, seq_hidden,
                                              init_generators([stream_seed(s, "prediction") for s in seeds]),
                                              transition_kl).to(self.device)
            self.networks["prediction"] = self.prediction
            self.critic_opt.add_param_group({"params": list(self.prediction.parameters())})
        self.acting = self.encoder.initial_state(1).squeeze(1)  # [M, S]: each member's state while it acts

    # ---- acting ---------------------------------------------------------------------------------
    @torch.no_grad()
    def observe(self, obs: torch.Tensor) -> torch.Tensor:
        """One acting step of every member's encoder: obs [M, obs_dim] -> features [M, F]; the state moves on."""
        features, state = self.encoder.step(obs.unsqueeze(1), self.acting.unsqueeze(1))
        self.acting.copy_(state.squeeze(1))
        return features.squeeze(1)

    @torch.no_grad()
    def episodes_ended(self, ended: torch.Tensor) -> None:
        """Members whose episode ended start the next one from a zero state."""
        self.acting.mul_(1.0 - ended.to(self.acting.dtype).unsqueeze(-1))

    # ---- learning -------------------------------------------------------------------------------
    def encode(self, batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Features of the trained steps [M, B, T, F]: online (with gradient), online of the next observations and
        target of the next observations (no gradient); burn-in first (see the module's docstring)."""
        seq, k = batch.sequence, self.burn_in
        obs, first, state = batch.obs, seq["first"], seq["state"]
        restart = seq.get("restart")  # the distributed learner's: stored states where rows restart mid-episode
        early, late = (None, None) if restart is None else (restart[:, :, :k], restart[:, :, k:])
        with torch.no_grad():
            online, target = state, state
            if k:
                online = self.encoder.unroll(obs[:, :, :k], state, first[:, :, :k], early)[1][:, :, -1]
                target = self.encoder_target.unroll(obs[:, :, :k], state, first[:, :, :k], early)[1][:, :, -1]
        features, after = self.encoder.unroll(obs[:, :, k:], online, first[:, :, k:], late)
        next_obs = batch.next_obs[:, :, k:]
        with torch.no_grad():
            next_features = self.encoder.next_features(next_obs, after.detach())
            _, target_after = self.encoder_target.unroll(obs[:, :, k:], target, first[:, :, k:], late)
            target_next = self.encoder_target.next_features(next_obs, target_after)
        return features, next_features, target_next

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        """One gradient step for all members on their windows; every trained step is one sample of the losses."""
        k = self.burn_in
        features, next_features, target_next = self.encode(batch)
        m, b, t = features.shape[:3]
        flat = lambda x: None if x is None else x[:, :, k:].reshape(m, b * t, *x.shape[3:])  # noqa: E731
        reward, not_done, discount = batch.reward, batch.not_done, None
        if self.n_step > 1:
            reward, next_features, target_next, not_done, discount = self.n_step_targets(
                batch, next_features, target_next)
        steps = Batch(features.detach().reshape(m, b * t, -1), flat(batch.action), flat(reward),
                      next_features.reshape(m, b * t, -1), flat(not_done), flat(batch.own),
                      flat(batch.behaviour_mean), flat(batch.behaviour_std), flat(batch.behaviour_probs),
                      discount=flat(discount), critic_obs=features.reshape(m, b * t, -1),
                      target_next_obs=target_next.reshape(m, b * t, -1))
        if self.prediction is not None:
            action = steps.action
            if self.low is None:  # discrete: the stored index, one-hot
                action = torch.nn.functional.one_hot(action.long().squeeze(-1), self.n_actions).to(features.dtype)
            steps.auxiliary_loss = self.prediction.loss(steps.critic_obs, action,
                                                        steps.next_obs[..., self.encoder.obs_dim:], steps.reward)
        if batch.index is not None:  # prioritized windows: every step of a window carries the window's weight
            steps.index = batch.index
            steps.importance = batch.importance.expand(m, b, t).reshape(m, b * t, 1)
        info = super().update(steps)
        if self.updates % self.target_period == 0:  # the target critics moved
            soft_update(self.encoder_target, self.encoder, self.tau)
        if self.prediction is not None:
            info["prediction_loss"] = steps.auxiliary_loss.detach()
        return {**info, "own": steps.own}


    @torch.no_grad()
    def n_step_targets(self, batch: Batch, next_features: torch.Tensor, target_next: torch.Tensor):
        """N-step returns inside the window (R2D2's): for trained step t, with j < N the last step summed (the first
        that ended its episode, or the window's last),

            reward = sum_{i <= j} gamma^i r_{t+i},  bootstrap from the features of step t+j's next observation,
            not_done = that of step t+j,  discount = gamma^(j+1).

        Returns the rewards and not_done [M, B, L, 1] (burn-in rows untouched, they are not trained on), the next
        features (online and target) [M, B, T, F] and the discounts [M, B, L, 1]."""
        k, n = self.burn_in, self.n_step
        gamma = float(getattr(self, "gamma", None) or self.discount)
        r, ended = batch.reward[:, :, k:, 0], batch.sequence["ended"][:, :, k:]  # [M, B, T]
        m, b, t = r.shape
        pad = lambda x, v: torch.cat([x, torch.full((m, b, n - 1), v, dtype=x.dtype, device=x.device)], -1)  # noqa: E731
        r_n = pad(r, 0.0).unfold(-1, n, 1)  # [M, B, T, n]: r_{t+i}
        ended_n = pad(ended, 1.0).unfold(-1, n, 1)
        inside = pad(torch.ones_like(r), 0.0).unfold(-1, n, 1)  # step t+i lies in the window
        alive = torch.cumprod(torch.cat([torch.ones_like(ended_n[..., :1]), 1.0 - ended_n[..., :-1]], -1), -1)
        used = alive * inside
        powers = gamma ** torch.arange(n, dtype=r.dtype, device=r.device)
        reward = (used * powers * r_n).sum(-1)
        last = used.sum(-1).long() - 1  # j
        idx = torch.arange(t, device=r.device).view(1, 1, t) + last  # t + j
        pick = lambda x: x.gather(2, idx.unsqueeze(-1).expand(-1, -1, -1, x.shape[-1]))  # noqa: E731
        full = lambda x, rows: torch.cat([x[:, :, :k], rows], 2)  # noqa: E731
        discount = gamma ** (last + 1).to(r.dtype)
        return (full(batch.reward, reward.unsqueeze(-1)), pick(next_features), pick(target_next),
                full(batch.not_done, pick(batch.not_done[:, :, k:])), full(batch.not_done, discount.unsqueeze(-1)))


class RecurrentSAC(SequenceAgents, SAC):
    """SAC (Gaussian or deterministic policy) on a recurrent encoder's features."""


class RecurrentDiscreteSAC(SequenceAgents, DiscreteSAC):
    """Discrete SAC on a recurrent encoder's features."""


class RecurrentTD3(SequenceAgents, TD3):
    """TD3 on a recurrent encoder's features (the target actor reads the target encoder's, as the target critics)."""


class RecurrentDDPG(SequenceAgents, DDPG):
    """DDPG on a recurrent encoder's features."""
