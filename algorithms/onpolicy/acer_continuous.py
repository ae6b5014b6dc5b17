"""ACER for continuous actions (Wang et al. 2017, section 5) for N members at once; replay, Poisson replay updates,
Polyak average network, RMSprop and per-member clipping are discrete ACER's (algorithms/onpolicy/acer.py).

* **Policy**: a Gaussian with a fixed diagonal covariance around the mean phi_theta(s) (a tanh MLP); its standard
  deviation is ``action_std`` times half the action range, per dimension (0.3 by default: the paper's 0.3 on MuJoCo's
  [-1, 1] actions, section 6). Exploration draws from it; evaluation plays the mean.
* **Stochastic dueling network** (SDN): V(s) and A(s, a) (tanh MLPs), and

      Q~(s, a) = V(s) + A(s, a) - (1/n) sum_i A(s, u_i),   u_i ~ pi(.|s), n = ``sdn_samples``.

* **Targets**, backwards over each stored trajectory with the importance weight rho_t = pi(a_t|s_t) / mu(a_t|s_t)
  (mu: the behaviour policy that acted, a Gaussian around the stored behaviour mean) and d action dimensions:

      Q_ret(s_t, a_t) = r_t + gamma [c_{t+1} (Q_ret(s_{t+1}, a_{t+1}) - Q~(s_{t+1}, a_{t+1})) + V(s_{t+1})],
      c = min(1, rho^(1/d));   Q_opc: the same with c = 1;
      V_target(s_t) = min(1, rho_t) (Q_ret(s_t, a_t) - Q~(s_t, a_t)) + V(s_t),

  bootstrapped with V(s') where an episode is cut by its time limit or the trajectory ends, not after a termination
  (``acer_math.retrace_targets``, with the trace weights passed in).
* **Critic loss**: (Q_ret - Q~(s_t, a_t))^2 / 2 + (V_target - V(s_t))^2 / 2, targets held constant.
* **Policy**: the gradient with respect to the statistics phi (the mean)

      g = min(c, rho_t) (Q_opc - V) grad_phi log f(a_t|phi) + [1 - c / rho'_t]_+ (Q~(s_t, a') - V) grad_phi log f(a'|phi),

  a' ~ pi(.|s_t) one sample, grad_phi log f(a|phi) = (a - phi) / sigma^2; projected onto the trust region
  k^T z <= delta with k = grad_phi KL(f(.|phi_avg) || f(.|phi)) = (phi - phi_avg) / sigma^2
  (``acer_math.trust_region``), then back-propagated through phi. The entropy of a fixed covariance is a constant:
  no entropy term.

The SDN's samples and a' come from each member's own counter-based stream; a member whose replay update is masked
out (it drew fewer Poisson updates) gets its stream's counter back, so a member learns the same whatever it is
batched with.
"""
from __future__ import annotations

import torch
from torch import nn

from ..common.members import stream_seed
from ..common.nets import MLP, AgentRNG, freeze, init_generators
from .acer import ACER
from .acer_math import acer_critic_loss, retrace_targets, trust_region, trust_region_policy_loss

CONTINUOUS_DEFAULTS = {"action_std": 0.3, "sdn_samples": 5}


class GaussianSDN(nn.Module):
    """N members' policy mean phi(s), V(s) and A(s, a): three tanh MLPs of two hidden layers."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int, gens):
        super().__init__()
        self.mu = MLP([obs_dim, hidden, hidden, act_dim], gens, activation="tanh")
        self.v = MLP([obs_dim, hidden, hidden, 1], gens, activation="tanh")
        self.a = MLP([obs_dim + act_dim, hidden, hidden, 1], gens, activation="tanh")

    def mean(self, obs: torch.Tensor) -> torch.Tensor:
        return self.mu(obs)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        return self.v(obs).squeeze(-1)

    def advantage(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        """A(s, a) for obs [N, ..., obs_dim] and actions [N, ..., act_dim] of the same leading shape -> [N, ...]."""
        lead = actions.shape[:-1]
        x = torch.cat([obs, actions], dim=-1).reshape(lead[0], -1, obs.shape[-1] + actions.shape[-1])
        return self.a(x).view(lead)


def gaussian_log_ratio(actions: torch.Tensor, mean: torch.Tensor, behaviour: torch.Tensor,
                       sigma: torch.Tensor) -> torch.Tensor:
    """log f(a|mean) - log f(a|behaviour) for Gaussians of the same diagonal sigma [d]: summed over the last dim."""
    return ((actions - behaviour).pow(2) - (actions - mean).pow(2)).div(2 * sigma.pow(2)).sum(-1)


class ContinuousACER(ACER):
    """N continuous-action ACER members (see the module's docstring)."""

    def __init__(self, obs_shape, act_dim: int, low, high, seeds, device, discrete: bool,
                 action_std: float = CONTINUOUS_DEFAULTS["action_std"],
                 sdn_samples: int = CONTINUOUS_DEFAULTS["sdn_samples"], **kwargs):
        if discrete or len(obs_shape) != 1:
            raise ValueError("continuous ACER takes a Box action space and flat observations")
        self.action_std, self.sdn_samples = float(action_std), int(sdn_samples)
        super().__init__(obs_shape, act_dim, low, high, seeds, device, True, **kwargs)
        self.discrete = False
        half = (torch.as_tensor(high, dtype=torch.float32) - torch.as_tensor(low, dtype=torch.float32)) / 2
        self.sigma = (self.action_std * half).to(self.device)  # [d]; the rollout keeps the behaviour mean (width d)
        self.sdn_rng = AgentRNG([stream_seed(s, "sdn") for s in self.seeds], self.device)
        self.sdn_rng.blocks = False  # its counters are put back for masked members, which a block cache would miss

    def non_finite_hint(self) -> None:
        """A Gaussian's densities do not underflow as a softmax's probabilities do: the general advice stands."""
        return None

    def build(self, obs_shape, act_dim: int, hidden_size: int):
        model = GaussianSDN(obs_shape[0], act_dim, hidden_size, init_generators(self.seeds)).to(self.device)
        average = freeze(GaussianSDN(obs_shape[0], act_dim, hidden_size, init_generators(self.seeds)).to(self.device))
        return model, average

    # ---- acting -------------------------------------------------------------------------------------------
    @torch.no_grad()
    def sample(self, obs: torch.Tensor):
        mean = self.model.mean(obs)  # [N, K, d]
        return mean + self.sigma * self.explore_rng.normal(*mean.shape[1:]), mean

    @torch.no_grad()
    def eval_actions(self, model, obs: torch.Tensor, rng=None):
        """The mean action, or with ``rng`` (--eval_policy sample) a draw of the Gaussian policy, clipped."""
        mean = model.mean(obs)
        if rng is not None:
            mean = mean + self.sigma * rng.normal(*mean.shape[1:])
        return torch.clamp(mean, self.low, self.high)

    def env_actions(self, actions: torch.Tensor) -> torch.Tensor:
        return torch.clamp(actions, self.low, self.high)

    # ---- the loss -------------------------------------------------------------------------------------------
    def losses(self, b: dict) -> dict[str, torch.Tensor]:
        obs, next_obs = b["obs"], b["next_obs"]
        n, t, k = obs.shape[:3]
        d, m, sigma = self.sigma.shape[0], self.sdn_samples, self.sigma
        flat = lambda x: x.reshape(n, t * k, *x.shape[3:])  # noqa: E731
        time_last = lambda x: x.view(n, t, k, *x.shape[2:]).transpose(1, 2)  # [N, T*K, ...] -> [N, K, T, ...]  # noqa: E731
        o = obs.transpose(1, 2)  # [N, K, T, obs]
        phi = time_last(self.model.mean(flat(obs)))  # [N, K, T, d]
        v = time_last(self.model.value(flat(obs)))  # [N, K, T]
        actions, behaviour = b["actions"].transpose(1, 2), b["mu"].transpose(1, 2)
        # the SDN's n samples and the bias correction's a' (the last), from the member's own stream
        u = phi.detach().unsqueeze(-2) + sigma * self.sdn_rng.normal(k, t, m + 1, d)  # [N, K, T, m+1, d]
        adv = self.model.advantage(o.unsqueeze(-2).expand(*u.shape[:-1], o.shape[-1]), u)  # [N, K, T, m+1]
        baseline = adv[..., :m].mean(-1)
        q_taken = v + self.model.advantage(o, actions) - baseline
        with torch.no_grad():
            q_prime = v + adv[..., m] - baseline
            rho = gaussian_log_ratio(actions, phi, behaviour, sigma).exp()
            a_prime = u[..., m, :]
            rho_prime = gaussian_log_ratio(a_prime, phi, behaviour, sigma).exp()
            boundary = time_last(self.model.value(flat(next_obs)))
            args = (b["rewards"].transpose(1, 2), 1.0 - b["terminated"].transpose(1, 2), b["ended"].transpose(1, 2))
            q_ret = retrace_targets(*args, q_taken, v, rho.pow(1.0 / d), boundary, self.gamma)
            q_opc = retrace_targets(*args, q_taken, v, torch.ones_like(rho), boundary, self.gamma)
            v_target = rho.clamp(max=1.0) * (q_ret - q_taken) + v
            score = lambda a: (a - phi) / sigma.pow(2)  # noqa: E731  grad_phi log f(a|phi)
            g = (rho.clamp(max=self.c) * (q_opc - v)).unsqueeze(-1) * score(actions) \
                + ((1.0 - self.c / rho_prime).clamp(min=0.0) * (q_prime - v)).unsqueeze(-1) * score(a_prime)
            if self.use_trust_region:
                phi_avg = time_last(self.average.mean(flat(obs)))
                g = trust_region(g, (phi - phi_avg) / sigma.pow(2), self.delta)
        policy = trust_region_policy_loss(phi, g)
        critic = acer_critic_loss(q_taken, q_ret) + 0.5 * (v_target - v).pow(2)
        mean = lambda x: x.mean(dim=(1, 2))  # noqa: E731
        return {"loss": mean(policy + self.q_coef * critic), "policy_loss": mean(policy), "q_loss": mean(critic),
                "entropy": torch.zeros(n, device=obs.device)}

    def step(self, b: dict, mask: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        before = self.sdn_rng.counter.clone()
        out = super().step(b, mask)
        if mask is not None:  # a member whose update was masked out did not draw
            self.sdn_rng.counter.copy_(torch.where(mask, self.sdn_rng.counter, before))
        return out

    # ---- checkpoints ------------------------------------------------------------------------------------------
    def replay_state(self, rows: slice) -> dict:
        return {**super().replay_state(rows), "sdn_rng": self.sdn_rng.get_state()[rows]}

    def load_replay_state(self, states: list[dict]) -> None:
        super().load_replay_state(states)
        self.sdn_rng.set_state([x for s in states for x in s["sdn_rng"]])
