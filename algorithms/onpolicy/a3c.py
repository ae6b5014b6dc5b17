"""A3C (Mnih et al. 2016, "Asynchronous Methods for Deep Reinforcement Learning"): the model, the n-step loss and
the optimizer whose state the asynchronous actor-learners share. The processes that run them live in
``utils.run.onpolicy.asynchronous``.

One rollout of n steps s_0, a_0, r_0, ..., s_{n-1}, a_{n-1}, r_{n-1} (an episode may end inside it) gives

* n-step returns, from the last step backwards: R_i = r_i + gamma * R_{i+1} inside an episode; R_i = r_i after a
  termination (no bootstrap); R_i = r_i + gamma * V(s'_i) where the chain is cut without a termination: at a
  time-limit truncation (s'_i is the real last observation of that episode, not the next episode's first) and
  at the rollout's last step (s'_{n-1} = the observation the next rollout starts from);
* advantages by GAE(lambda): delta_i = r_i + gamma * V(s'_i) [0 after a termination] - V(s_i),
  A_i = delta_i + gamma * lambda * A_{i+1} inside an episode (A_i = delta_i where the chain is cut); with
  lambda = 1 (the default) A_i = R_i - V(s_i), the paper's n-step advantage;
* the loss, summed over the rollout's steps as the paper accumulates its gradients:
  sum_i [ -log pi(a_i|s_i) * A_i - ent_coef * H(pi(.|s_i)) + vf_coef * (R_i - V(s_i))^2 ],
  A_i and R_i held constant (no gradient through the targets). The value target is the n-step return R_i also
  when lambda < 1 (GAE only shapes the policy's advantage).
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical, Normal

ENCODERS = ("nature", "a3c")  # Atari trunks: the Nature DQN's (default), the A3C references' smaller one


NATURE_FEATURES, ATARI_LSTM = 512, 256  # the Nature CNN's output; the LSTM after it (--recurrent)


def nature_cnn(frames: Sequence[int]) -> nn.Sequential:
    """The Nature DQN's encoder (Mnih et al. 2015) for [B, C, 84, 84] frames in [0, 1]: 32 8x8/4, 64 4x4/2,
    64 3x3/1, ReLU after each, then a linear layer of 512 and ReLU."""
    c, h, w = frames
    convs = nn.Sequential(nn.Conv2d(c, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(),
                          nn.Conv2d(64, 64, 3, 1), nn.ReLU(), nn.Flatten())
    with torch.no_grad():
        flat = convs(torch.zeros(1, c, h, w)).shape[1]
    return nn.Sequential(*convs, nn.Linear(flat, NATURE_FEATURES), nn.ReLU())


def a3c_cnn(frames: Sequence[int], recurrent: bool) -> tuple[nn.Sequential, int]:
    """The A3C references' smaller Atari trunk for [B, C, 84, 84] frames in [0, 1]: 16 8x8/4, 32 4x4/2, ReLU after
    each (Mnih et al. 2016, section 8). Recurrent: the flattened 32x9x9 maps go straight into the LSTM, as
    A3C-ACER-PyTorch's A3C; feed-forward: a linear layer of 256 and ReLU, as the paper's. (trunk, its width)"""
    c, h, w = frames
    convs = nn.Sequential(nn.Conv2d(c, 16, 8, 4), nn.ReLU(), nn.Conv2d(16, 32, 4, 2), nn.ReLU(), nn.Flatten())
    with torch.no_grad():
        flat = convs(torch.zeros(1, c, h, w)).shape[1]
    if recurrent:
        return convs, flat
    return nn.Sequential(*convs, nn.Linear(flat, ATARI_LSTM), nn.ReLU()), ATARI_LSTM


def mlp(inp: int, hidden: int, out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(inp, hidden), nn.Tanh(), nn.Linear(hidden, hidden), nn.Tanh(),
                         nn.Linear(hidden, out))


class ActorCritic(nn.Module):
    """Separate policy and value MLPs (``hidden_size`` x 2, tanh) on flat observations.

    Discrete actions (``low``/``high`` None, ``act_dim`` = number of actions): categorical logits. Box actions:
    a Gaussian whose mean the policy MLP gives and whose log standard deviation is one state-independent parameter
    per action dimension (starting at 0); sampled actions are clipped to [low, high] for the environment, the
    log-probability being that of the unclipped sample. The policy's last layer starts 100x smaller than
    PyTorch's default, so that the first policy is close to uniform (discrete) or centred (Box).
    """

    def __init__(self, obs_dim: int, act_dim: int, hidden_size: int = 64, low=None, high=None,
                 recurrent: bool = False, frames: Sequence[int] | None = None, encoder: str = "nature"):
        super().__init__()
        self.discrete = low is None
        self.obs_dim, self.act_dim, self.hidden_size = obs_dim, act_dim, hidden_size
        self.recurrent = bool(recurrent)
        self.frames = tuple(frames) if frames is not None else None  # stacked image frames (C, H, W): Atari
        self.obs_shape = self.frames or (obs_dim,)
        if encoder not in ENCODERS or (encoder != "nature" and self.frames is None):
            raise ValueError(f"encoder {encoder!r}: one of {ENCODERS}, and only for image frames")
        self.encoder = encoder
        trunk = NATURE_FEATURES
        if self.frames is not None and encoder == "a3c":
            self.fc, trunk = a3c_cnn(self.frames, self.recurrent)
            width = ATARI_LSTM
        elif self.frames is not None:  # the Nature CNN's trunk, shared by the heads (then the LSTM, if recurrent)
            self.fc = nature_cnn(self.frames)
            width = ATARI_LSTM if self.recurrent else NATURE_FEATURES
        elif self.recurrent:  # linear + tanh, an LSTM cell, then linear heads on its output
            self.fc = nn.Sequential(nn.Linear(obs_dim, hidden_size), nn.Tanh())
            width = hidden_size
        if self.recurrent:
            self.lstm = nn.LSTMCell(trunk if self.frames else hidden_size, width)
        if self.recurrent or self.frames is not None:
            self.policy, self.value = nn.Linear(width, act_dim), nn.Linear(width, 1)
            last = self.policy
        else:  # flat observations, feed-forward: separate policy and value MLPs
            self.fc = None
            self.policy = mlp(obs_dim, hidden_size, act_dim)
            self.value = mlp(obs_dim, hidden_size, 1)
            last = self.policy[-1]
        self.width = width if self.fc is not None else hidden_size
        with torch.no_grad():
            last.weight.mul_(0.01)
            last.bias.zero_()
        if not self.discrete:
            self.log_std = nn.Parameter(torch.zeros(act_dim))
            self.register_buffer("low", torch.as_tensor(np.asarray(low), dtype=torch.float32))
            self.register_buffer("high", torch.as_tensor(np.asarray(high), dtype=torch.float32))

    def spec(self) -> dict:
        """The constructor's arguments: enough to build an identical (untrained) model in another process."""
        spec = {"obs_dim": self.obs_dim, "act_dim": self.act_dim, "hidden_size": self.hidden_size}
        if self.recurrent:
            spec["recurrent"] = True
        if self.frames is not None:
            spec["frames"] = list(self.frames)
        if self.encoder != "nature":  # absent for the default: earlier model files and checkpoints stay as they were
            spec["encoder"] = self.encoder
        if not self.discrete:
            spec.update(low=self.low.tolist(), high=self.high.tolist())
        return spec

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        """What the heads (or the LSTM) read: the observation itself (flat, feed-forward), else the trunk's output."""
        if self.fc is None:
            return obs
        if self.frames is not None:
            lead = obs.shape[:-3]
            return self.fc(obs.reshape(-1, *self.frames) / 255.0).reshape(*lead, -1)
        return self.fc(obs)

    def distribution(self, obs: torch.Tensor):
        return self.head_distribution(self.policy(self.features(obs)))

    def head_distribution(self, out: torch.Tensor):
        if self.discrete:
            return Categorical(logits=out, validate_args=False)
        return Normal(out, self.log_std.exp().expand_as(out), validate_args=False)

    def forward(self, obs: torch.Tensor):
        """(action distribution, V(s)) for observations [..., obs_dim] (feed-forward models)."""
        x = self.features(obs)
        return self.head_distribution(self.policy(x)), self.value(x).squeeze(-1)

    def state_value(self, obs: torch.Tensor) -> torch.Tensor:
        """V(s) [...] of a feed-forward model."""
        return self.value(self.features(obs)).squeeze(-1)

    # ---- --recurrent: a state (h, c) [B, H], zeros at an episode's start -------------------------------------
    def initial_state(self, batch: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.zeros(batch, self.width), torch.zeros(batch, self.width)

    def step(self, obs: torch.Tensor, state):
        """One step: obs [B, ...], state (h, c) [B, H] -> (the policy head's output, V [B], the next state)."""
        h, c = self.lstm(self.features(obs), state)
        return self.policy(h), self.value(h).squeeze(-1), (h, c)

    def log_prob(self, dist, actions: torch.Tensor) -> torch.Tensor:
        lp = dist.log_prob(actions)
        return lp if self.discrete else lp.sum(-1)

    def entropy(self, dist) -> torch.Tensor:
        h = dist.entropy()
        return h if self.discrete else h.sum(-1)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, greedy: bool = False, state=None):
        """(the action to learn from, the action for the environment): a sample (greedy: the argmax / the mean),
        and that action clipped to the bounds (Box) or as integers (discrete). Draws as ``distribution`` would
        describe, without building the distribution object (most of the cost of a step on small networks).
        Recurrent: from ``state``, and the next state comes third."""
        if self.recurrent:
            lead = obs.shape[:obs.dim() - len(self.obs_shape)]
            out, _, state = self.step(obs.reshape(-1, *self.obs_shape), state)
            a, env_action = self._draw(out.reshape(*lead, -1), greedy)
            return a, env_action, state
        return self._draw(self.policy(self.features(obs)), greedy)

    def _draw(self, out: torch.Tensor, greedy: bool) -> tuple[torch.Tensor, np.ndarray]:
        if self.discrete:
            if greedy:
                a = out.argmax(-1)
            else:
                # inverse CDF: the first action whose cumulative probability exceeds a uniform draw
                cdf = torch.softmax(out, -1).cumsum(-1)
                a = (cdf < torch.rand(cdf.shape[:-1] + (1,))).sum(-1).clamp_max(self.act_dim - 1)
            return a, a.numpy()
        a = out if greedy else out + self.log_std.exp() * torch.randn_like(out)
        return a, torch.maximum(torch.minimum(a, self.high), self.low).numpy()


@dataclass
class Rollout:
    """n steps of one actor-learner: obs [n, obs_dim], actions [n] (discrete) or [n, act_dim], rewards [n],
    terminated / truncated [n] (the episode ended at that step by its terminal state / by its time limit),
    next_obs [n, obs_dim]: the real observation after each step (for an episode's last step, its final observation,
    not the next episode's first)."""

    obs: torch.Tensor
    actions: torch.Tensor
    rewards: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    next_obs: torch.Tensor
    state: tuple | None = None  # --recurrent: the state (h, c) [1, H] the rollout began with

    def __len__(self) -> int:
        return len(self.rewards)


def nstep_targets(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor,
                  truncated: torch.Tensor, gamma: float, gae_lambda: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """(n-step returns R, advantages A) of one rollout, both [n] (see the module's docstring).

    ``values`` V(s_i), ``next_values`` V(s'_i) of the real next observations (used at a truncation and at the
    rollout's last step; ignored after a termination, and elsewhere only by GAE's delta, where s'_i = s_{i+1})."""
    n = len(rewards)
    returns, advantages = torch.empty(n), torch.empty(n)
    R = A = 0.0
    for i in reversed(range(n)):
        boot = 0.0 if terminated[i] else float(next_values[i])
        cut = bool(terminated[i]) or bool(truncated[i]) or i == n - 1
        R = float(rewards[i]) + gamma * (boot if cut else R)
        delta = float(rewards[i]) + gamma * boot - float(values[i])
        A = delta + (0.0 if cut else gamma * gae_lambda * A)
        returns[i], advantages[i] = R, A
    return returns, advantages


def rollout_loss(model: ActorCritic, rollout: Rollout, gamma: float = 0.99, gae_lambda: float = 1.0,
                 ent_coef: float = 0.01, vf_coef: float = 0.5) -> torch.Tensor:
    """The A3C loss of one rollout (a scalar with the graph to ``model``'s parameters). Recurrent: replayed step by
    step from the state the rollout began with, the state zeroed after an episode's end (back-propagation through
    the rollout's n steps); V(s'_i) from the state after step i."""
    if model.recurrent:
        state, heads, vals, nexts = rollout.state, [], [], []
        for i in range(len(rollout)):
            out, v, state = model.step(rollout.obs[i:i + 1], state)
            heads.append(out)
            vals.append(v)
            with torch.no_grad():
                nexts.append(model.step(rollout.next_obs[i:i + 1], state)[1])
            if rollout.terminated[i] or rollout.truncated[i]:
                state = model.initial_state()
        dist, values = model.head_distribution(torch.cat(heads)), torch.cat(vals)
        next_values = torch.cat(nexts)
    else:
        dist, values = model(rollout.obs)
        with torch.no_grad():
            next_values = model.state_value(rollout.next_obs)
    returns, advantages = nstep_targets(rollout.rewards, values.detach(), next_values, rollout.terminated,
                                        rollout.truncated, gamma, gae_lambda)
    policy_loss = -(model.log_prob(dist, rollout.actions) * advantages).sum()
    entropy = model.entropy(dist).sum()
    value_loss = (returns - values).pow(2).sum()
    return policy_loss - ent_coef * entropy + vf_coef * value_loss


class SharedAdam(torch.optim.Adam):
    """Adam whose state (step, first and second moments) is created at once and lives in shared memory, so that
    every process holding this optimizer (passed to it at spawn) steps the same state on the same shared
    parameters. Lock-free (Hogwild): concurrent steps may interleave, as in the paper."""

    def __init__(self, params, lr: float = 1e-4, betas=(0.9, 0.999), eps: float = 1e-8):
        super().__init__(params, lr=lr, betas=betas, eps=eps, foreach=False)  # the in-place single-tensor path
        for group in self.param_groups:
            for p in group["params"]:
                state = self.state[p]
                state["step"] = torch.zeros(())
                state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
                state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        self.share_memory()

    def share_memory(self) -> None:
        """Move the state to shared memory (again after ``load_state_dict``, which puts fresh tensors there)."""
        for state in self.state.values():
            for value in state.values():
                if torch.is_tensor(value):
                    value.share_memory_()

    def load_state_dict(self, state_dict) -> None:
        super().load_state_dict(state_dict)
        self.share_memory()
