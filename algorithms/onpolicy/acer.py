"""ACER for discrete actions (Wang et al. 2017) for N members at once, each with its own K environments and its
own replay of past rollouts.

Every rollout (n steps of K environments, with the behaviour policy's probabilities mu) is used for one on-policy
update, then stored; then each member takes Poisson(``replay_ratio``) off-policy updates, each on one stored
rollout drawn uniformly from its own replay (once it holds ``replay_start`` transitions); with ``replay_only`` the
on-policy update is skipped (Wang et al.'s continuous ACER is "entirely off-policy"). One update, per
trajectory (the formulas are in algorithms/onpolicy/acer_math.py, tested there on hand-computed examples):

    rho = pi / mu;  Q_ret by Retrace with min(1, rho) traces, bootstrapped with V(s') = sum_a pi(a|s') Q(s', a)
    where an episode was truncated or the trajectory ends, not after a termination;
    policy: the truncated importance weight min(c, rho_a) (Q_ret - V) plus the bias correction over all actions
    with relu(1 - c / rho_b), its gradient with respect to the probabilities projected onto the trust region
    k^T z <= delta around the average policy (k = grad KL(pi_avg || pi)), then back-propagated;
    loss = policy - ent_coef * H(pi) + q_coef * (Q_ret - Q(s, a))^2 / 2, averaged over the steps.

The average policy network follows the online one by Polyak averaging (``trust_region_decay`` 0.99). RMSprop with
each member's gradient clipped to ``max_grad_norm``. A member that draws fewer replay updates than another simply
skips the later ones: its parameters, optimizer state and average network are left exactly as they were, and every
member's random draws (Poisson counts, replayed slots) come in fixed-size blocks from its own stream, so a member
learns the same whatever it is batched with (seeds in one process equal seeds alone).
"""
from __future__ import annotations

import math

import torch
from torch import nn

from ..common.members import stream_seed
from ..common.nets import AgentRNG, freeze, init_generators, rmsprop
from ..common.optim import MemberAdam
from .a2c import ActorCritic, ActorCriticMembers, clip_per_member
from .acer_math import (
    acer_critic_loss,
    acer_policy_loss,
    acer_policy_objective_gradient,
    entropy_gradient_wrt_probs,
    kl_gradient_wrt_probs,
    policy_and_values,
    retrace_targets,
    trust_region,
    trust_region_policy_loss,
)
from .frame_store import FrameStore, is_frame_stack, packed_shape

MAX_REPLAYS = 32  # the Poisson draw is capped here (P(k >= 32) < 1e-12 for a ratio of 4)


class ACER(ActorCriticMembers):
    """N ACER members; ``update`` takes one fresh rollout: the on-policy update, storing it, the replay updates."""

    STATS = ("policy_loss", "q_loss", "entropy", "replay_updates")
    REPLAY = True  # its learner tells it the rollout's shape (n steps x K environments) to size the replay

    def __init__(self, obs_shape, act_dim: int, low, high, seeds, device, discrete: bool, lr: float = 7e-4,
                 gamma: float = 0.99, ent_coef: float = 0.01, q_coef: float = 0.5, max_grad_norm: float = 10.0,
                 hidden_size: int = 64, rms_alpha: float = 0.99, rms_eps: float = 1e-5, trace_max: float = 10.0,
                 trust_region: bool = True, trust_region_decay: float = 0.99, trust_region_threshold: float = 1.0,
                 replay_ratio: float = 4.0, replay_start: int = 1000, buffer_size: int = 100_000,
                 rollout: tuple[int, int] = (20, 8), replay_only: bool = False, optimizer: str = "rmsprop",
                 trust_region_entropy: bool = False, prob_eps: float = 0.0):
        if not discrete and type(self) is ACER:
            raise ValueError("ACER takes discrete actions; continuous actions: acer_continuous.ContinuousACER")
        super().__init__(seeds, low, high, device)
        self.discrete = True
        self.gamma, self.ent_coef, self.q_coef = float(gamma), float(ent_coef), float(q_coef)
        self.max_grad_norm, self.c = float(max_grad_norm), float(trace_max)
        self.use_trust_region, self.decay, self.delta = bool(trust_region), float(trust_region_decay), \
            float(trust_region_threshold)
        self.replay_ratio, self.replay_start = float(replay_ratio), int(replay_start)
        self.replay_only = bool(replay_only)
        self.entropy_in_trust_region = bool(trust_region_entropy)
        self.eps = float(prob_eps)  # OpenAI baselines', A3C-ACER-PyTorch's 1e-6 where it divides by or logs pi, mu
        self.optimizer = optimizer
        self.model, self.average = self.build(obs_shape, act_dim, hidden_size)
        self.actor = self.model
        if optimizer == "adam":  # A3C-ACER-PyTorch's (shared) Adam, one step count per member
            self.opt = MemberAdam(self.model.parameters(), lr=lr)
        elif optimizer in ("rmsprop", "rmsprop_tf"):  # rmsprop_tf: baselines' (TensorFlow's) RMSprop
            self.opt = rmsprop(self.model.parameters(), lr=lr, alpha=rms_alpha, eps=rms_eps,
                               tf_like=optimizer == "rmsprop_tf")
        else:
            raise ValueError(f"ACER: optimizer {optimizer!r} is not rmsprop, rmsprop_tf or adam")
        self.networks = {"model": self.model, "average": self.average}
        self.behaviour_width = act_dim
        # the replay: per member, ``slots`` stored rollouts of n steps x K environments
        n_steps, k = rollout
        self.slots = max(1, int(buffer_size) // (n_steps * k))
        self.rollout_size = n_steps * k
        self.n_steps, self.k = n_steps, k
        self.memory: dict[str, torch.Tensor] = {}
        self.frames: FrameStore | None = None  # Atari: the observations, each frame once (algorithms/onpolicy/frame_store.py)
        self.stored = 0  # rollouts stored so far (the same for every member)
        self.replay_rng = AgentRNG([stream_seed(s, "replay") for s in self.seeds], self.device)

    def non_finite_hint(self) -> str | None:
        """What to try when a loss went non-finite (the run's stop message): discrete ACER's exact formulas divide by
        and take the log of pi, nan once a probability has underflowed to 0, and torch's RMSprop, whose square
        average starts at 0, makes first steps of about 10 lr per weight: on Pong at lr 7e-4 seed 4's policy fell
        onto one action (smallest probability 1e-42) in its sixth update."""
        if self.eps:
            return None
        fix = "--optimizer rmsprop_tf (OpenAI baselines' RMSprop: lr-sized first steps) or a lower --lr; " \
            if self.optimizer == "rmsprop" else "a lower --lr; "
        return (f"ACER's policy has likely collapsed onto one action (a probability of 0 is nan in the exact "
                f"formulas): try {fix}--prob_eps 1e-6 keeps the update finite")

    def build(self, obs_shape, act_dim: int, hidden_size: int):
        """The online network and its Polyak average (frozen), both drawn from the members' seeds."""
        model = ActorCritic(obs_shape, act_dim, (hidden_size, hidden_size), init_generators(self.seeds), True,
                            value_outputs=act_dim).to(self.device)
        average = freeze(ActorCritic(obs_shape, act_dim, (hidden_size, hidden_size), init_generators(self.seeds),
                                     True, value_outputs=act_dim).to(self.device))
        return model, average

    # ---- acting -------------------------------------------------------------------------------------------
    @torch.no_grad()
    def sample(self, obs: torch.Tensor):
        dist = self.model.policy(obs)
        return dist.sample(self.explore_rng), dist.probs

    # ---- the loss of one batch of trajectories -------------------------------------------------------------
    def losses(self, b: dict) -> dict[str, torch.Tensor]:
        """Per member, the ACER losses of its trajectories ``b`` (every field [N, T, K, ...]), averaged over steps."""
        obs, next_obs = b["obs"], b["next_obs"]
        n, t, k = obs.shape[:3]
        flat = lambda x: x.reshape(n, t * k, *x.shape[3:])  # noqa: E731
        time_last = lambda x: x.view(n, t, k, *x.shape[2:]).transpose(1, 2)  # [N, T*K, ...] -> [N, K, T, ...]  # noqa: E731
        x = self.model.features(flat(obs))
        logits, q = time_last(self.model.pi(x)), time_last(self.model.v(x))  # [N, K, T, A]
        log_pi, pi, values = policy_and_values(logits, q)
        actions = b["actions"].transpose(1, 2)  # [N, K, T]
        mu = b["mu"].transpose(1, 2)
        rho = pi.detach() / (mu + self.eps) if self.eps else pi.detach() / mu.clamp_min(1e-8)
        q_taken = q.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        with torch.no_grad():
            y = self.model.features(flat(next_obs))
            boundary = policy_and_values(time_last(self.model.pi(y)), time_last(self.model.v(y)))[2]
            rho_taken = rho.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
            q_ret = retrace_targets(b["rewards"].transpose(1, 2), 1.0 - b["terminated"].transpose(1, 2),
                                    b["ended"].transpose(1, 2), q_taken.detach(), values.detach(), rho_taken,
                                    boundary, self.gamma)
        entropy = -(pi * log_pi).sum(-1)
        bonus = self.ent_coef * entropy  # added to the objective after the trust region (unless inside it)
        if self.use_trust_region:
            g = acer_policy_objective_gradient(pi, q, values, q_ret, rho, actions, self.c, self.eps)
            if self.entropy_in_trust_region:  # OpenAI baselines, A3C-ACER-PyTorch: the bonus's gradient projected too
                g = g + self.ent_coef * entropy_gradient_wrt_probs(pi, log_pi)
                bonus = torch.zeros_like(entropy)
            with torch.no_grad():
                avg_pi = time_last(self.average.policy(flat(obs)).probs)
            z = trust_region(g, kl_gradient_wrt_probs(avg_pi, pi, self.eps), self.delta,
                             **({"eps": self.eps} if self.eps else {}))
            policy = trust_region_policy_loss(pi, z)
        else:
            policy = acer_policy_loss(log_pi, pi, q, values, q_ret, rho, actions, self.c, self.eps)
        critic = acer_critic_loss(q_taken, q_ret)
        mean = lambda x: x.mean(dim=(1, 2))  # noqa: E731
        return {"loss": mean(policy - bonus + self.q_coef * critic), "policy_loss": mean(policy),
                "q_loss": mean(critic), "entropy": mean(entropy)}

    def step(self, b: dict, mask: torch.Tensor | None = None) -> dict[str, torch.Tensor]:
        """One gradient step of every member (``mask`` [N] bool: only those; the others stay exactly as they were)."""
        out = self.losses(b)
        loss = out["loss"] if mask is None else torch.where(mask, out["loss"], torch.zeros_like(out["loss"]))
        params = [p for group in self.opt.param_groups for p in group["params"]]
        for p, g in zip(params, torch.autograd.grad(loss.sum(), params)):
            p.grad = g.contiguous()
        if self.max_grad_norm > 0:  # 0: no clipping
            clip_per_member(params, self.max_grad_norm)
        before = None
        if isinstance(self.opt, MemberAdam):  # masks its members itself: step counts, moments and parameters
            self.opt.step(mask=mask)
        else:
            if mask is not None:
                # before the optimizer's first step its state is RMSprop's initial one (--replay_only): zeros, ones
                # for TensorFlow's
                first = float(getattr(self.opt, "STATE_INIT", 0.0))
                before = [(p.detach().clone(), self.opt.state[p]["square_avg"].clone() if self.opt.state[p]
                           else torch.full_like(p, first)) for p in params]
            self.opt.step()
        with torch.no_grad():
            if before is not None:
                for p, (old_p, old_v) in zip(params, before):
                    keep = ~mask.view(-1, *(1,) * (p.dim() - 1))
                    p.copy_(torch.where(keep, old_p, p))
                    v = self.opt.state[p]["square_avg"]
                    v.copy_(torch.where(keep, old_v, v))
            w = torch.full((len(self.seeds),), 1.0 - self.decay, device=self.device)
            if mask is not None:
                w = w * mask
            for a, p in zip(self.average.parameters(), self.model.parameters()):
                a.add_((p - a) * w.view(-1, *(1,) * (p.dim() - 1)))
        return {key: v.detach() for key, v in out.items()}

    # ---- the replay ------------------------------------------------------------------------------------------
    def remember(self, rollout: dict) -> None:
        compact = is_frame_stack(rollout["obs"])
        if not self.memory:
            if compact:
                self.frames = FrameStore(len(self.seeds), self.slots, self.n_steps, self.k,
                                         tuple(rollout["obs"].shape[3:]), self.device)
            self.memory = {key: torch.zeros((v.shape[0], self.slots, *v.shape[1:]), dtype=v.dtype, device=v.device)
                           for key, v in rollout.items() if not (compact and key in ("obs", "next_obs"))}
        slot = self.stored % self.slots
        for key, v in self.memory.items():
            v[:, slot].copy_(rollout[key])
        if self.frames is not None:
            self.frames.put(slot, rollout["obs"], rollout["next_obs"])
        self.stored += 1

    def replayed(self, slots: torch.Tensor) -> dict:
        """Member m's stored rollout in its slot ``slots[m]`` (every field [N, n, K, ...]), as it was handed over."""
        rows = torch.arange(len(self.seeds), device=self.device)
        batch = {key: v[rows, slots] for key, v in self.memory.items()}
        if self.frames is not None:
            batch["obs"], batch["next_obs"] = self.frames.get(slots)
        return batch

    def replay_counts(self) -> torch.Tensor:
        """Each member's number of replay updates, Poisson(replay_ratio) by Knuth's product of uniforms [N]."""
        u = self.replay_rng.uniform(MAX_REPLAYS)  # [N, MAX]
        return (torch.cumprod(u, dim=1) > math.exp(-self.replay_ratio)).sum(1)

    def update(self, rollout: dict) -> dict[str, torch.Tensor]:
        """The on-policy update on the fresh rollout, then it is stored, then the replay updates. With
        ``replay_only`` (Wang et al. 2017's continuous ACER, "entirely off-policy") the fresh rollout is only stored,
        and the statistics returned are each member's mean over its replay updates (0 where it took none)."""
        info = None if self.replay_only else self.step(rollout)
        self.remember(rollout)
        n = len(self.seeds)
        counts = torch.zeros(n, dtype=torch.long, device=self.device)
        if self.replay_ratio > 0 and min(self.stored, self.slots) * self.rollout_size >= self.replay_start:
            counts = self.replay_counts()
            slots = self.replay_rng.randint(min(self.stored, self.slots), MAX_REPLAYS)  # [N, MAX]
            for j in range(int(counts.max())):
                batch = self.replayed(slots[:, j])
                out = self.step(batch, mask=counts > j)
                if self.replay_only:
                    taken = {k: torch.where(counts > j, v, torch.zeros_like(v)) for k, v in out.items()}
                    info = taken if info is None else {k: info[k] + v for k, v in taken.items()}
        if self.replay_only:
            zeros = torch.zeros(n, device=self.device)
            info = {"loss": zeros, "policy_loss": zeros, "q_loss": zeros, "entropy": zeros} if info is None else \
                {k: v / counts.clamp_min(1) for k, v in info.items()}
        self.updates += 1
        info["replay_updates"] = counts.to(torch.float32)
        return info

    def mixed_parameters(self) -> list[nn.Parameter]:
        return list(self.model.parameters())

    # ---- checkpoints: the replay and its stream ----------------------------------------------------------
    def replay_state(self, rows: slice) -> dict:
        return {"memory": {k: v[rows].cpu().clone() for k, v in self.memory.items()}, "stored": self.stored,
                "rng": self.replay_rng.get_state()[rows],
                **({"frames": self.frames.state(rows)} if self.frames is not None else {})}

    def load_replay_state(self, states: list[dict]) -> None:
        self.stored = int(states[0]["stored"])
        keys = states[0]["memory"].keys()
        memory = {k: torch.cat([s["memory"][k] for s in states]).to(self.device) for k in keys}
        self.replay_rng.set_state([x for s in states for x in s["rng"]])
        old = "obs" in memory and is_frame_stack(memory["obs"][:, 0])  # written before frames were kept once
        if old or "frames" in states[0]:
            obs, next_obs = memory.pop("obs", None), memory.pop("next_obs", None)
            shape = obs.shape[-3:] if old else packed_shape(states[0]["frames"]["first"])[-3:]
            self.frames = FrameStore(len(self.seeds), self.slots, self.n_steps, self.k, tuple(shape), self.device)
            if old:  # every stack stored whole: keep each frame once, slot by slot
                for slot in range(self.slots):
                    self.frames.put(slot, obs[:, slot], next_obs[:, slot])
            else:
                self.frames.load([s["frames"] for s in states])
        self.memory = memory
