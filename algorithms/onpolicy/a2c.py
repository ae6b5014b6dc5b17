"""A2C (the synchronous, batched advantage actor-critic of Mnih et al. 2016, as SB3 and Diff-DAC's learners run it)
for N members at once, each learning from its own K environments.

Per member, from a rollout of n steps of its K environments (obs [N, n, K, ...]):

    delta_t = r_t + gamma * (1 - terminated_t) * V(s'_t) - V(s_t)       (s'_t: the real next state, so a time-limit
    A_t     = delta_t + gamma * lambda * (1 - ended_t) * A_{t+1}           truncation bootstraps, a termination not)
    R_t     = A_t + V(s_t)

(lambda = 1: the plain n-step returns R = r + gamma R of A3C; lambda = 0.95: GAE), and the loss

    L = -mean(log pi(a_t|s_t) * A_t) + vf_coef * mean((R_t - V(s_t))^2) - ent_coef * mean(H(pi(.|s_t)))

minimised by RMSprop (alpha 0.99, eps 1e-5) after clipping each member's gradient to norm ``max_grad_norm``.
Every member's loss touches only its own slice of the stacked parameters, and RMSprop is element-wise, so one
optimizer over the stacked parameters is N independent ones (checked against a per-member loop in the tests).
"""
from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from ..common.distributions import Categorical, DiagGaussian
from ..common.members import Members
from ..common.nets import MLP, BatchedLinear, adam, init_generators, rmsprop
from .recurrent import RecurrentActorCritic, masked


class ActorCritic(nn.Module):
    """Policy head and value of N members: separate tanh MLPs for flat observations (SB3's default for A2C), one
    shared Nature CNN with two linear heads for stacked image frames (DQN's and the ACER reference's network)."""

    def __init__(self, obs_shape: Sequence[int], act_dim: int, hidden: Sequence[int], gens, discrete: bool,
                 value_outputs: int = 1, activation: str = "tanh", init: str = "torch"):
        super().__init__()  # value_outputs: 1 for V(s); the number of actions for ACER's Q(s, .)
        if len(obs_shape) == 1:  # init "orthogonal" (SEAC's): the policy's last layer with gain 0.01
            self.encoder = None
            self.pi = MLP([obs_shape[0], *hidden, act_dim], gens, init, activation, out_gain=0.01)
            self.v = MLP([obs_shape[0], *hidden, value_outputs], gens, init, activation)
        else:
            from ..common.cnn import BatchedNatureCNN

            self.encoder = BatchedNatureCNN(obs_shape[0], gens)
            self.pi = BatchedLinear(self.encoder.features, act_dim, gens)
            self.v = BatchedLinear(self.encoder.features, value_outputs, gens)
        self.log_std = None if discrete else nn.Parameter(torch.zeros(len(gens), 1, act_dim))

    def features(self, obs: torch.Tensor) -> torch.Tensor:
        return obs if self.encoder is None else self.encoder(obs)

    def forward(self, obs: torch.Tensor):
        """obs [N, B, ...] -> (the action distribution, values [N, B])."""
        x = self.features(obs)
        return self.distribution(self.pi(x)), self.v(x).squeeze(-1)

    def distribution(self, head: torch.Tensor):
        return Categorical(head) if self.log_std is None else DiagGaussian(head, self.log_std)

    def policy(self, obs: torch.Tensor):
        return self.distribution(self.pi(self.features(obs)))

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.v(self.features(obs)).squeeze(-1)


def advantages(rewards: torch.Tensor, values: torch.Tensor, next_values: torch.Tensor, terminated: torch.Tensor,
               ended: torch.Tensor, gamma: float, lam: float) -> torch.Tensor:
    """GAE(lambda) advantages along dim 1 (time) of [N, T, K] tensors; ``next_values`` = V(s'_t) of each step's
    real next state, ``terminated``/``ended`` 0/1 floats (ended: terminated or truncated)."""
    delta = rewards + gamma * (1.0 - terminated) * next_values - values
    carry = (gamma * lam) * (1.0 - ended)
    out = torch.empty_like(delta)
    a = torch.zeros_like(delta[:, 0])
    for t in range(delta.shape[1] - 1, -1, -1):
        a = delta[:, t] + carry[:, t] * a
        out[:, t] = a
    return out


def clip_per_member(params: list[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale each member's gradient (its slice of every parameter) to global norm at most ``max_norm``, as
    ``torch.nn.utils.clip_grad_norm_`` does for one model; returns the norms before clipping [N]."""
    # Each member's squared norm is summed parameter by parameter in a fixed order, and each parameter's rows are
    # reduced as a batch of at least two rows: torch reduces a column of a [params, N] stack, and a lone [1, D] row,
    # in an order that depends on N, so a member's clipping (hence its run) would depend on how many members share
    # the model (found on Pendulum, where Gaussian actions carry the last bits on).
    total = None
    for p in params:
        g = p.grad.reshape(p.shape[0], -1)
        sq = g.expand(2, -1).pow(2).sum(1)[:1] if g.shape[0] == 1 else g.pow(2).sum(1)
        total = sq if total is None else total + sq
    norm = total.sqrt()
    scale = (max_norm / (norm + 1e-6)).clamp(max=1.0)
    for p in params:
        p.grad.mul_(scale.view(-1, *(1,) * (p.dim() - 1)))
    return norm


class ActorCriticMembers(Members):
    """What the on-policy family's members share (A2C, ACER): observations as the rollouts keep them (image frames
    stay uint8), ``--recurrent``'s acting state, evaluation's greedy actions and the actions the environments get.
    Subclasses build ``self.model`` (an actor-critic of this module or of onpolicy/recurrent.py) and set
    ``self.discrete``."""

    recurrent = False  # --recurrent (set by A2C's constructor; ACER has none)
    behaviour_width = 0  # what the rollout keeps of the behaviour policy per step (ACER: its probabilities)
    state = None  # --recurrent: the acting state (h, c) [N, K, H] of every member's environments

    def mixed_parameters(self) -> list[nn.Parameter]:
        return list(self.model.parameters())

    def _obs(self, obs) -> torch.Tensor:
        obs = torch.as_tensor(obs, device=self.device)
        return obs if obs.dtype == torch.uint8 else obs.to(torch.float32)

    def acting_state(self, envs: int) -> tuple[torch.Tensor, torch.Tensor]:
        """--recurrent: the acting state of the members' ``envs`` environments (zeros before the first step)."""
        if self.state is None:
            self.state = self.model.initial_state(envs)
        return self.state

    def episodes_ended(self, ended: torch.Tensor) -> None:
        """--recurrent: zero the acting state of the environments whose episode ended [N, K] (the next
        observation starts a new one)."""
        if self.recurrent and self.state is not None:
            self.state = masked(self.state, ended)

    @torch.no_grad()
    def eval_actions(self, model: ActorCritic, obs: torch.Tensor, state=None, rng=None):
        """Evaluation actions of ``model`` (this model or a snapshot of it): the mode, or with ``rng`` (an
        ``AgentRNG``, --eval_policy sample) a draw from the policy; clipped to the bounds. Recurrent: from ``state``
        (h, c) [N, B, H], and returns (actions, the next state)."""
        pick = (lambda dist: dist.mode()) if rng is None else (lambda dist: dist.sample(rng))  # noqa: E731
        if self.recurrent:
            dist, _, state = model.step(obs, state)
            a = pick(dist)
            return (a if self.discrete else torch.clamp(a, self.low, self.high)), state
        a = pick(model.policy(obs))
        return a if self.discrete else torch.clamp(a, self.low, self.high)

    def env_actions(self, actions: torch.Tensor) -> torch.Tensor:
        """What the environments get: a Gaussian draw clipped to the bounds (its log-probability stays the draw's)."""
        return actions if self.discrete else torch.clamp(actions, self.low, self.high)


class A2C(ActorCriticMembers):
    """N A2C members (see the module's docstring); ``update`` takes one rollout of every member."""

    STATS = ("policy_loss", "value_loss", "entropy")  # what ``update`` reports per member, for the curves' period

    def __init__(self, obs_shape, act_dim: int, low, high, seeds, device, discrete: bool, lr: float = 7e-4,
                 gamma: float = 0.99, gae_lambda: float = 1.0, ent_coef: float = 0.01, vf_coef: float = 0.5,
                 max_grad_norm: float = 0.5, hidden_size: int = 64, rms_alpha: float = 0.99, rms_eps: float = 1e-5,
                 recurrent: bool = False, optimizer: str = "rmsprop", activation: str = "tanh", init: str = "torch",
                 adam_eps: float = 1e-8):
        super().__init__(seeds, low, high, device)
        self.discrete = discrete
        self.gamma, self.gae_lambda = float(gamma), float(gae_lambda)
        self.ent_coef, self.vf_coef, self.max_grad_norm = float(ent_coef), float(vf_coef), float(max_grad_norm)
        gens = init_generators(self.seeds)
        self.recurrent = bool(recurrent)
        if self.recurrent:  # --recurrent: an LSTM between the encoder and the heads (onpolicy/recurrent.py)
            self.model = RecurrentActorCritic(obs_shape, act_dim, hidden_size, gens, discrete).to(self.device)
        else:
            self.model = ActorCritic(obs_shape, act_dim, (hidden_size, hidden_size), gens, discrete,
                                     activation=activation, init=init).to(self.device)
        self.state = None  # --recurrent: the acting state (h, c) [N, K, H] of every member's environments
        self.actor = self.model  # evaluation plays a copy of it
        if optimizer not in ("rmsprop", "rmsprop_tf", "adam"):  # rmsprop_tf: baselines' (TensorFlow's) RMSprop
            raise ValueError(f"A2C: optimizer {optimizer!r} is not rmsprop, rmsprop_tf or adam")
        if optimizer == "adam":  # SEAC's; every member steps at every update, so one step count serves all
            self.opt = adam(self.model.parameters(), lr=lr, eps=adam_eps)
        else:
            self.opt = rmsprop(self.model.parameters(), lr=lr, alpha=rms_alpha, eps=rms_eps,
                               tf_like=optimizer == "rmsprop_tf")
        self.networks = {"model": self.model}

    @torch.no_grad()
    def sample(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Training actions for obs [N, K, ...]: [N, K] (discrete) or [N, K, A] (unclipped Gaussian draws), and
        what the update needs of the behaviour policy (None for A2C). Recurrent: advances the acting state."""
        if self.recurrent:
            dist, _, self.state = self.model.step(obs, self.acting_state(obs.shape[1]))
            return dist.sample(self.explore_rng), None
        return self.model.policy(obs).sample(self.explore_rng), None

    def update(self, rollout: dict) -> dict[str, torch.Tensor]:
        """One gradient step of every member on its rollout: obs, next_obs [N, T, K, ...], actions [N, T, K(, A)],
        rewards, terminated, ended [N, T, K] (and h0, c0 [N, K, H] with --recurrent). Returns per-member losses
        [N]."""
        out = self.losses(rollout)
        params = [p for group in self.opt.param_groups for p in group["params"]]
        for p, g in zip(params, self.gradients(out["loss"], params)):
            p.grad = g.contiguous()
        if self.max_grad_norm > 0:  # 0: no clipping (Diff-DAC's reference leaves it unset)
            clip_per_member(params, self.max_grad_norm)
        self.opt.step()
        self.updates += 1
        return {key: v.detach() for key, v in out.items()}

    def gradients(self, loss: torch.Tensor, params: list) -> list[torch.Tensor]:
        """Every member's gradient of its own loss ``loss`` [N] (one backward pass)."""
        return list(torch.autograd.grad(loss.sum(), params))

    def next_values(self, values: torch.Tensor, next_obs: torch.Tensor, ended: torch.Tensor) -> torch.Tensor:
        """V(s'_t) [N, T, K] of image rollouts without a second pass over every next observation: within a rollout
        s'_t is s_{t+1} unless the episode ended at t, so V(s'_t) is the value the loss's forward pass gave s_{t+1};
        the network runs only on the last step's next observations and on the last observations of episodes that
        ended (a truncated one bootstraps from it), at every (t, k) where some member needs one."""
        out = torch.empty_like(values)
        out[:, :-1] = values[:, 1:]
        need = (ended > 0).any(0)  # [T, K]
        need[-1] = True
        out[:, need] = self.model.value(next_obs[:, need])
        return out

    def losses(self, rollout: dict) -> dict[str, torch.Tensor]:
        """Per member, the A2C loss of its rollout and its parts [N] (``loss`` with the graph to the parameters)."""
        obs, next_obs = rollout["obs"], rollout["next_obs"]
        n, t, k = obs.shape[:3]
        flat = lambda x: x.reshape(n, t * k, *x.shape[3:])  # noqa: E731
        if self.recurrent:  # replayed from the state the rollout began with (truncated back-propagation over n)
            starts = torch.cat([torch.zeros_like(rollout["ended"][:, :1]), rollout["ended"][:, :-1]], dim=1)
            dist, values, after = self.model.unroll(obs, (rollout["h0"], rollout["c0"]), starts)
            with torch.no_grad():
                next_values = self.model.next_values(next_obs, after).view(n, t, k)
        else:
            dist, values = self.model(flat(obs))
            with torch.no_grad():
                next_values = self.next_values(values.detach().view(n, t, k), next_obs, rollout["ended"]) \
                    if obs.dim() > 4 else self.model.value(flat(next_obs)).view(n, t, k)
        with torch.no_grad():
            adv = advantages(rollout["rewards"], values.detach().view(n, t, k), next_values, rollout["terminated"],
                             rollout["ended"], self.gamma, self.gae_lambda)
            returns = (adv + values.detach().view(n, t, k)).view(n, t * k)
        log_prob = dist.log_prob(flat(rollout["actions"]))
        policy_loss = -(log_prob * adv.view(n, t * k)).mean(1)
        value_loss = (returns - values).pow(2).mean(1)
        entropy = dist.entropy().mean(1)
        loss = policy_loss + self.vf_coef * value_loss - self.ent_coef * entropy
        return {"policy_loss": policy_loss, "value_loss": value_loss, "entropy": entropy, "loss": loss}
