"""What both families' batched agents share: S seeds x N members stacked on a leading dimension, their bounds and
random streams, the networks they list, common initialisation, and the per-member checkpoints and model files."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from .nets import AgentRNG


def stream_seed(seed: int, stream: str) -> int:
    """A seed for one named random stream of an agent, derived from the agent's seed."""
    return int(np.random.SeedSequence([int(seed), sum(map(ord, stream))]).generate_state(1)[0])


class Members:
    """N members of one algorithm with parameters stacked on a leading member dimension.

    Subclasses build ``self.actor`` (evaluation's deterministic actions for [N, B, obs]) and list their networks in
    ``self.networks`` (name -> module) for saving; optimizers are found among their attributes.
    """

    def __init__(self, seeds, low, high, device):
        self.members = len(seeds)  # every agent of every seed this batched model holds
        self.seeds = [int(s) for s in seeds]
        self.device = torch.device(device)
        self.low = self.high = self.scale = None  # a discrete action space has no bounds
        if low is not None:
            self.low = torch.as_tensor(np.asarray(low), dtype=torch.float32, device=self.device)
            self.high = torch.as_tensor(np.asarray(high), dtype=torch.float32, device=self.device)
            self.scale = (self.high - self.low) / 2
        self.update_rng = AgentRNG([stream_seed(s, "update") for s in self.seeds], self.device)
        self.explore_rng = AgentRNG([stream_seed(s, "explore") for s in self.seeds], self.device)
        self.networks: dict[str, nn.Module] = {}
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

    # ---- checkpoints: the whole state of all members -------------------------------------
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


def _join(states: list[dict], agents: Members) -> dict:
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
