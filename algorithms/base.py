"""What every algorithm shares: acting, exploring, and per-agent save/load of stacked weights."""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
from torch import nn

from .nets import AgentRNG, adam, freeze
from .sharing import Weighting


def stream_seed(seed: int, stream: str) -> int:
    """A seed for one named random stream of an agent, derived from the agent's seed."""
    return int(np.random.SeedSequence([int(seed), sum(map(ord, stream))]).generate_state(1)[0])


@dataclass
class Batch:
    """Transitions for N learners, every field [N, B, ...]; own[n, b] says agent n wrote it."""

    obs: torch.Tensor
    action: torch.Tensor
    reward: torch.Tensor  # [N, B, 1]
    next_obs: torch.Tensor
    not_done: torch.Tensor  # [N, B, 1]: 1 - terminated (a time-limit cut still bootstraps)
    own: torch.Tensor  # [N, B] bool
    behaviour_mean: Optional[torch.Tensor] = None  # Gaussian SAC only (pre-tanh)
    behaviour_std: Optional[torch.Tensor] = None
    behaviour_probs: Optional[torch.Tensor] = None  # discrete SAC only: [N, B, A], the writer's probabilities
    # N-step returns (--n_step > 1): reward is then the discounted sum of the rewards up to the cut, next_obs and
    # not_done those of the cut's step, and discount [N, B, 1] gamma^(steps); None: one step, the algorithm's gamma
    discount: Optional[torch.Tensor] = None
    # V-trace (--vtrace): the N steps themselves, every field [N, B, n, ...] (obs, action, reward, next_obs,
    # not_done, used = 1 for the steps the return sums, behaviour_mean, behaviour_std)
    sequence: Optional[dict] = None

    # prioritized replay (--prioritized): the rows sampled [N, B] (their priorities are updated after the step) and
    # the importance weights [N, B, 1] multiplied into the sharing weights of the losses
    index: Optional[torch.Tensor] = None
    importance: Optional[torch.Tensor] = None
    # recurrent learners (--seq_encoder): obs and next_obs are then the encoder's features, detached, for the policy;
    # the critics read ``critic_obs`` (the same features, with the encoder's gradient) and the target critics
    # ``target_next_obs`` (the target encoder's features of the next observations). None: obs and next_obs.
    critic_obs: Optional[torch.Tensor] = None
    target_next_obs: Optional[torch.Tensor] = None
    # a loss per member [M] minimised with the critic's (a recurrent learner's prediction model); None: none
    auxiliary_loss: Optional[torch.Tensor] = None

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


class StackedAgents:
    """N agents of one algorithm with parameters stacked on a leading agent dimension.

    Subclasses build ``self.actor`` (returns deterministic actions for [N, B, obs]) and
    list their networks in ``self.networks`` (name -> module) for saving.
    """

    gaussian_behaviour = False  # True when transitions must carry the behaviour Gaussian
    behaviour_width = 0  # A when transitions must carry the behaviour's action probabilities (discrete SAC)

    def __init__(self, seeds, low, high, device, expl_noise: float):
        self.members = len(seeds)  # every agent of every seed this batched model holds
        self.seeds = [int(s) for s in seeds]
        self.device = torch.device(device)
        self.low = self.high = self.scale = None  # a discrete action space has no bounds
        if low is not None:
            self.low = torch.as_tensor(np.asarray(low), dtype=torch.float32, device=self.device)
            self.high = torch.as_tensor(np.asarray(high), dtype=torch.float32, device=self.device)
            self.scale = (self.high - self.low) / 2
        self.expl_noise = float(expl_noise)
        self.update_rng = AgentRNG([stream_seed(s, "update") for s in self.seeds], self.device)
        self.explore_rng = AgentRNG([stream_seed(s, "explore") for s in self.seeds], self.device)
        self.networks: dict[str, nn.Module] = {}
        self.weighting = Weighting()  # how much each sample counts; a sharing scheme may replace it
        self.updates = 0  # gradient steps taken (drives TD3's and SAC's update schedules)

    @torch.no_grad()
    def start_equal(self, agents_per_seed: int) -> None:
        """Every agent of a seed starts from agent 0's parameters (online and target networks alike; the optimisers
        have no state yet, so they start equal too): Diff-DAC's common initialisation. Agent 0's parameters were
        drawn from the seed's own stream, so a seed's run is the same alone or batched with others."""
        n = agents_per_seed
        for name, net in self.networks.items():
            for pname, p in net.named_parameters():
                if p.shape[:1] != (self.members,):  # every parameter is stacked over the members
                    raise ValueError(f"{name}.{pname} of shape {tuple(p.shape)} is not stacked over the members")
                rows = p.view(self.members // n, n, *p.shape[1:])
                rows.copy_(rows[:, :1].clone().expand_as(rows))

    def deterministic_actor_critic(self, actor: nn.Module, critic: nn.Module, actor_lr: float, critic_lr: float,
                                   critic_weight_decay: float = 0.0) -> None:
        """TD3's and DDPG's networks: the actor and critic on the device, frozen copies as targets, one Adam for
        each, all listed in ``self.networks``."""
        self.actor, self.critic = actor.to(self.device), critic.to(self.device)
        self.actor_target = freeze(copy.deepcopy(self.actor))
        self.critic_target = freeze(copy.deepcopy(self.critic))
        self.actor_opt = adam(self.actor.parameters(), lr=actor_lr)
        self.critic_opt = adam(self.critic.parameters(), lr=critic_lr, weight_decay=critic_weight_decay)
        self.networks = {"actor": self.actor, "critic": self.critic,
                         "actor_target": self.actor_target, "critic_target": self.critic_target}

    def exploration_variance(self) -> torch.Tensor:
        """The variance of the exploration noise per action dimension [A], in action units."""
        return (self.expl_noise * self.scale).pow(2)

    def mixed_parameters(self) -> list[nn.Parameter]:
        """What parameter diffusion averages between neighbours: the online networks (targets follow them)."""
        return [*self.actor.parameters(), *self.critic.parameters()]

    def add_optimizer(self, name: str, optimizer: torch.optim.Optimizer) -> None:
        """An optimizer of a sharing scheme over these parameters (DPD's distillation): checkpointed with the rest."""
        setattr(self, name, optimizer)

    def compile(self, **kwargs) -> None:
        """torch.compile every network in place (parameter names, hence files, stay the same)."""
        for net in self.networks.values():
            net.compile(**kwargs)

    def _obs(self, obs) -> torch.Tensor:
        return torch.as_tensor(obs, dtype=torch.float32, device=self.device)

    @torch.no_grad()
    def act(self, obs) -> torch.Tensor:
        """Deterministic actions (evaluation): obs [N, B, obs_dim] -> [N, B, act_dim]."""
        return self.actor(self._obs(obs))

    def explore(self, obs) -> tuple[np.ndarray, Optional[tuple[np.ndarray, np.ndarray]]]:
        """Training actions for one state per agent: obs [N, obs_dim] -> ([N, act_dim], behaviour), on the host."""
        action, behaviour = self.explore_device(self._obs(obs))
        host = None if behaviour is None else tuple(b.cpu().numpy() for b in behaviour)
        return action.cpu().numpy(), host

    @torch.no_grad()
    def explore_device(self, obs: torch.Tensor) -> tuple[torch.Tensor, Optional[tuple[torch.Tensor, torch.Tensor]]]:
        """``explore`` on the device: actions [N, act_dim] and, for Gaussian SAC, the behaviour (mean, std) (discrete
        SAC: actions [N] and its probabilities, (probs,))."""
        a = self.actor(obs.unsqueeze(1)).squeeze(1)
        noise = self.explore_rng.normal(a.shape[-1]) * (self.expl_noise * self.scale)
        return torch.clamp(a + noise, self.low, self.high), None

    @torch.no_grad()
    def weights(self, batch: Batch, policy_actions: Optional[torch.Tensor] = None) -> torch.Tensor:
        """Per-sample weights [N, B, 1] from ``self.weighting``; pass pi(s) if it is already computed."""
        return self.weighting(self, batch, policy_actions)

    def update(self, batch: Batch) -> dict[str, torch.Tensor]:
        raise NotImplementedError

    def schedule(self) -> tuple:
        """Which branch the next ``update`` takes (its kernels differ per branch: one CUDA graph each)."""
        return ()

    @property
    def target_period(self) -> int:
        """Updates between moves of the target networks (after the update whose count is a multiple of it)."""
        return int(getattr(self, "target_update_interval", 1))

    # ---- checkpoints: the whole state of all agents -------------------------------------
    def _optimizers(self) -> dict[str, torch.optim.Optimizer]:
        return {k: v for k, v in vars(self).items() if isinstance(v, torch.optim.Optimizer)}

    def state_dict(self, rows: slice | None = None) -> dict:
        """Networks, targets, optimizers, random generators and counters of all agents, or of ``rows``.

        A slice of the members is exactly what a model of only those members would hold: several
        seeds in one process checkpoint each seed as if it had run alone.
        """
        networks, optimizers = {}, {}
        for name, net in self.networks.items():
            params = {k for k, _ in net.named_parameters()}
            networks[name] = {k: _take(v, rows) if k in params else v for k, v in net.state_dict().items()}
        for name, opt in self._optimizers().items():
            full = opt.state_dict()
            per_member = {i: {k: _take(v, rows) if _per_member(v) else v for k, v in st.items()}
                          for i, st in full["state"].items()}
            optimizers[name] = {"state": per_member, "param_groups": full["param_groups"]}
        pick = (lambda x: x) if rows is None else (lambda x: x[rows])
        return {
            "networks": networks,
            "optimizers": optimizers,
            "rng": {"update": pick(self.update_rng.get_state()), "explore": pick(self.explore_rng.get_state())},
            "updates": self.updates,
        }

    def load_state_dict(self, state: dict | list[dict]) -> None:
        """Restore what ``state_dict`` returned; a list of slices is joined in order (same algorithm and sizes)."""
        state = _join(state, self) if isinstance(state, list) else state
        for name, net in self.networks.items():
            net.load_state_dict(state["networks"][name])
        for name, opt in self._optimizers().items():
            opt.load_state_dict(state["optimizers"][name])
        self.update_rng.set_state(state["rng"]["update"])
        self.explore_rng.set_state(state["rng"]["explore"])
        self.updates = int(state["updates"])

    # ---- per-agent files ------------------------------------------------------------
    def agent_state(self, i: int) -> dict[str, dict[str, torch.Tensor]]:
        """Agent i's parameters (networks and targets) as ordinary single-agent tensors."""
        return {
            name: {k: p.detach()[i : i + 1].cpu().clone() for k, p in net.named_parameters()}
            for name, net in self.networks.items()
        }

    @torch.no_grad()
    def load_agent_state(self, i: int, state: dict[str, dict[str, torch.Tensor]]) -> None:
        """Load one agent's parameters (from ``agent_state``) into slot i."""
        for name, net in self.networks.items():
            if name not in state:
                raise KeyError(f"model file has no {name!r} networks")
            params = dict(net.named_parameters())
            if set(params) != set(state[name]):
                raise KeyError(f"{name!r} networks do not match this algorithm's architecture")
            for k, p in params.items():
                if p[i : i + 1].shape != state[name][k].shape:
                    raise ValueError(f"{name}.{k}: shape {tuple(state[name][k].shape)} does not match {tuple(p[i:i+1].shape)}")
                p[i : i + 1].copy_(state[name][k].to(self.device))


def _per_member(v) -> bool:
    """Optimizer state with a leading member dimension (moments), as opposed to shared scalars (step)."""
    return torch.is_tensor(v) and v.dim() > 0


def _take(t: torch.Tensor, rows: slice | None) -> torch.Tensor:
    return t if rows is None else t[rows].clone()  # clone: a saved view would carry the whole storage


def _join(states: list[dict], agents: "StackedAgents") -> dict:
    """One state from member slices in order (the inverse of ``state_dict(rows)`` over a partition)."""
    if len({int(s["updates"]) for s in states}) != 1:
        raise ValueError("the slices were taken at different update counts")
    first = states[0]
    cat = lambda values: torch.cat(list(values)) if len(values) > 1 else values[0]  # noqa: E731
    networks = {}
    for name, net in agents.networks.items():
        params = {k for k, _ in net.named_parameters()}
        networks[name] = {k: cat([s["networks"][name][k] for s in states]) if k in params else v
                          for k, v in first["networks"][name].items()}
    optimizers = {}
    for name, opt_state in first["optimizers"].items():
        joined = {i: {k: cat([s["optimizers"][name]["state"][i][k] for s in states]) if _per_member(v) else v
                      for k, v in st.items()}
                  for i, st in opt_state["state"].items()}
        optimizers[name] = {"state": joined, "param_groups": opt_state["param_groups"]}
    rng = {k: [g for s in states for g in s["rng"][k]] for k in first["rng"]}
    return {"networks": networks, "optimizers": optimizers, "rng": rng, "updates": first["updates"]}
