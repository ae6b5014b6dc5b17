"""How the members of a run share, as one layer between the learner and the algorithms.

A ``Scheme`` decides the buffer layout (one buffer per seed shared by its agents, or one per agent), what each
learner samples (all of its seed's buffer, or only its graph neighbours' rows), the per-sample weights the
algorithm's update reads (``agents.weighting``), what runs after an update (DPD's distillation steps, Diff-DAC's
combine), its statistics (the agents' parameter disagreement) and its extra files. The algorithms know nothing
of peers; the registry (utils.naming) says which ingredients a method has.

Members are numbered seed by seed: member m = s * N + i is agent i of the s-th seed of the process.
"""
from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from algorithms.common.members import stream_seed
from algorithms.common.nets import AgentRNG
from algorithms.sharing.dpd import Distillation
from algorithms.sharing.graph import Diffusion, LazyGossip, adjacency, check_adjacency, disagreement, neighbours
from algorithms.sharing.weights import PRECISIONS, SIMILARITIES, Weighting, dase_weighting

from ..errors import UsageError
from ..naming import DIFFUSION_WEIGHTS, METHOD, TOPOLOGIES, Method, adjacency_token, is_multi_agent, method_of
from ..settings import Settings, Token, count, defaults, internal, real, setting

if TYPE_CHECKING:  # an annotation only: the on-policy runs import this module without the replay family
    from algorithms.replay.base import Batch

KL_VAR_HELP = ("variance v of the reference Gaussian N(0, v I) of the sharing weights, or 'matched': v = the variance "
               "of the exploration noise, so a peer acting like the learner weighs ~1 (DASE_ policies with a "
               "deterministic actor; files named {policy}_matched_...)")


def kl_variance(text: str) -> float | str:
    """--kl_div_var: a positive number, or "matched" (the variance of the exploration noise)."""
    if text.strip().lower() == "matched":
        return "matched"
    try:
        value = real(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive number or 'matched'") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive (or 'matched')")
    return value


@dataclass
class GraphSettings(Settings):
    """How a seed's agents are linked (every multi-agent method; the on-policy family's only sharing flags). The
    method and the agents come from the policy and --num_agents."""

    method: Method = internal(None)
    num_agents: int = internal(1)
    policy: str = internal("")  # for the messages
    topology: str | None = setting(
        None, "the agents' communication graph: DASE_ learners sample only their own and their neighbours' "
        "transitions, DPD_ learners distil only from neighbours, DIFF_ learners average parameters with neighbours; "
        "star: agent 0 is the hub; files carry it unless complete", parse=str, choices=TOPOLOGIES,
        default_text="complete; ring for DIFF_",
        token=Token(30, lambda v, s, p: adjacency_token(s["adjacency"]) if s.get("adjacency") is not None
                    else None if v in (None, "complete") else str(v),
                    "|".join([t for t in TOPOLOGIES if t != "complete"] + ["adj[0-9a-f]{8}"])))
    adjacency: list | None = setting(
        None, "an explicit graph instead of --topology: a 0/1 symmetric matrix with a zero diagonal, as JSON "
        "(e.g. '[[0,1],[1,0]]') or a .npy or .txt file; files carry adj + a hash of it", parse=str,
        metavar="MATRIX", default_text="none")
    diffusion_weights: str = setting(
        "uniform", "diffusion: uniform = 1 / (neighbours + 1) each, Diff-DAC's; metropolis = Metropolis-Hastings, "
        "doubly stochastic", parse=str, choices=DIFFUSION_WEIGHTS,
        token=Token(40, lambda v, s, p: "metropolis" if v == "metropolis" else None, "metropolis"))
    link_drop: float = setting(
        0.0, "diffusion: probability that a parameter message between neighbours is lost at an update, drawn from "
        "each agent's own random stream", parse=real, low=0, high=1, high_open=True,
        token=Token(50, lambda v, s, p: f"drop{float(v):g}" if float(v or 0.0) > 0.0 else None, "drop[0-9.]+"))
    sync_freq: int = setting(
        0, "diffusion: Diff-DAC's reference gossip with bounded asynchrony, simulated: a learner combines only when "
        "every neighbour's unread message has arrived, skips at most K combines in a row, then waits; 0: every "
        "combine waits (synchronous); files named sync{K}", parse=int, low=0, metavar="K",
        token=Token(60, lambda v, s, p: None if int(v or 0) <= 0 else f"sync{int(v)}" + (
            f"_delay{float(s['message_delay']):g}" if float(s.get("message_delay", 1.0)) != 1.0 else ""),
            r"sync\d+|delay[0-9.]+"))
    message_delay: float = setting(
        1.0, "with --sync_freq K > 0: mean delay of a message in updates (geometric on 0, 1, ...; drawn per message "
        "and link from each agent's own stream); files named delay{d} unless 1", parse=real, low=0)

    @classmethod
    def of(cls, policy: str, num_agents: int, sharing: dict) -> GraphSettings:
        """The settings a run's record holds (what it does not name at its default)."""
        unknown = set(sharing) - set(defaults(cls))
        if unknown:
            raise UsageError(f"unknown sharing settings {sorted(unknown)}")
        return cls(method=method_of(policy), num_agents=int(num_agents), policy=policy, **sharing)

    def record(self) -> dict:
        """Every setting; a diffusing method's graph by name (its default topology when none was given)."""
        out = super().record()
        if self.method.diffuses and self.topology is None and self.adjacency is None:
            out["topology"] = self.method.default_topology
        return out

    @property
    def multi_agent(self) -> bool:
        """Several agents per seed that share: the method's, or the algorithm's own (SEAC)."""
        return is_multi_agent(self.policy) if self.policy else self.method.multi_agent

    @property
    def graph_named(self) -> bool:
        """A topology or matrix was given (not the method's default)."""
        return self.topology is not None or self.adjacency is not None

    @property
    def samples_by_writer(self) -> bool:
        """Experience shared on a graph that is not complete: learners sample their own and neighbours' rows."""
        if not self.method.experience or self.num_agents < 2:
            return False
        return not bool((self.graph() + np.eye(self.num_agents, dtype=np.int64)).all())

    def graph(self) -> np.ndarray:
        """The adjacency matrix over one seed's agents."""
        if self.adjacency is not None:
            return check_adjacency(self.adjacency, self.num_agents)
        return adjacency(self.topology or self.method.default_topology, self.num_agents)

    def check_together(self) -> None:
        m = self.method
        if self.topology is not None and self.adjacency is not None:
            raise UsageError("--topology and --adjacency both name the graph: give one of them")
        if self.sync_freq == 0 and self.message_delay != 1.0:
            raise UsageError("--message_delay delays the messages of --sync_freq K > 0; give --sync_freq too")
        if self.sync_freq and not m.diffuses:
            raise UsageError(f"--sync_freq: {self.policy or 'this policy'} combines no parameters; use a DIFF_ policy or "
                             "--diffusion")
        if self.sync_freq and self.link_drop > 0:
            raise UsageError("--sync_freq with --link_drop: messages are delayed or dropped, not both; drop one")
        if self.graph_named and not self.multi_agent:
            raise UsageError("--topology/--adjacency: a single-agent policy has no graph; use a DASE_, DPD_ or DIFF_ "
                             "policy")
        if self.graph_named and self.num_agents < 2:
            raise UsageError(f"--topology/--adjacency: a graph of {self.num_agents} agent has no links; "
                             "use --num_agents 2 or more")
        if not m.diffuses and (self.diffusion_weights != "uniform" or self.link_drop > 0):
            raise UsageError("--diffusion_weights/--link_drop apply to diffusion (--diffusion or a DIFF_ policy)")
        if self.multi_agent and self.num_agents >= 2:
            try:
                graph = self.graph()  # raises on a malformed --adjacency
            except ValueError as e:
                raise UsageError(f"--adjacency: {e}" if self.adjacency is not None else str(e)) from None
            if m.distils and not _slots_are_permutations(neighbours(graph)):
                raise UsageError("DPD on this graph: every learner's k-th neighbour must be a different learner "
                                 "(true on complete graphs and rings); use --topology complete, ring or none")


@dataclass
class SharingSettings(GraphSettings):
    """The replay family's sharing: DASE's weights of shared samples and DPD's distillation, on the graph."""

    similarity: str = setting("js", "divergence for the sharing weights: js (paper), kl, or none = no correction",
                              parse=str, choices=SIMILARITIES)
    kl_div_var: float | str = setting(0.1, KL_VAR_HELP + " (0.1 is the paper's)", parse=kl_variance, low=0,
                                      low_open=True, token=Token(10, lambda v, s, p: "matched"
                                                                 if str(v).lower() == "matched" else None, "matched"))
    kl_precision: str = setting(
        "float64", "arithmetic of the sharing weights' Gaussian fit and divergence: float64 (ours), or float32 as the "
        "paper's code (torch.distributions; weight 0 where float32 rejects the covariance); files named "
        "{policy}_float32_...", parse=str, choices=PRECISIONS,
        token=Token(20, lambda v, s, p: None if v in (None, "float64") else str(v),
                    "|".join(x for x in PRECISIONS if x != "float64")))
    dpd_alpha: float = setting(1.0, "DPD_ policies: alpha of the distillation weights clip(exp(alpha * (Q_peer - "
                               "Q_self)), 0.01, 100)", parse=real)
    dpd_batch_size: int = setting(256, "DPD_ policies: states per distillation step, from the peer's buffer",
                                  parse=count, low=1)

    def check_together(self) -> None:
        m, name = self.method, self.policy or "this policy"
        if self.kl_div_var == "matched" and not m.experience:
            raise UsageError(f"--kl_div_var matched: {name} gives no sharing weights; use it with a DASE_ policy")
        given = {k: v for k, v in vars(self).items() if k in DEFAULTS and v != DEFAULTS[k]}  # flags not at default
        if not m.experience and {"similarity", "kl_div_var"} & set(given):
            raise UsageError(f"--similarity/--kl_div_var: {name} weighs no shared samples; drop these flags (they "
                             "apply to DASE_ policies)")
        if "kl_precision" in given and (not m.experience or self.similarity == "none"):
            raise UsageError(f"--kl_precision {self.kl_precision}: {name} with --similarity {self.similarity} "
                             "computes no sharing weights; use it with a DASE_ policy and --similarity js or kl")
        if not m.distils and {"dpd_alpha", "dpd_batch_size"} & set(given):
            raise UsageError(f"--dpd_alpha/--dpd_batch_size: {name} distils nothing; drop them (they apply to DPD_ "
                             "policies)")


DEFAULTS = defaults(SharingSettings)  # each sharing flag's default, from its field


def _slots_are_permutations(nbrs: list[list[int]]) -> bool:
    degrees = {len(x) for x in nbrs}
    if len(degrees) != 1:
        return False
    return all(len({x[k] for x in nbrs}) == len(nbrs) for k in range(degrees.pop()))


class Scheme:
    """The sharing of S seeds x N agents for one batched model ``agents`` (see the module's docstring)."""

    def __init__(self, settings: SharingSettings, agents, member_seeds: list[int], device: torch.device):
        m, n, members = settings.method, settings.num_agents, len(member_seeds)
        self.method, self.seeds = m, members // n
        graph = settings.graph() if n > 1 else np.zeros((1, 1), dtype=np.int64)
        nbrs = neighbours(graph)
        # the buffer: one group per seed shared by its agents (experience), or one per agent
        self.writers = n if m.experience else 1
        self.groups = members // self.writers
        # experience on a graph that is not complete: each learner samples only its own and its neighbours' rows
        # (the writers it may read, [M, width], and how many of them, [M, 1]; without links only itself)
        self.choices = self.choice_count = None
        self.by_writer = settings.samples_by_writer
        if self.by_writer and not graph.any():
            self.choices = torch.as_tensor([[i] for i in range(n)] * self.seeds, dtype=torch.int64, device=device)
        elif self.by_writer:
            width = 1 + max(len(x) for x in nbrs)
            table = [[i, *x] + [i] * (width - 1 - len(x)) for i, x in enumerate(nbrs)]
            self.choices = torch.as_tensor(table * self.seeds, dtype=torch.int64, device=device)  # [M, width]
            self.choice_count = torch.as_tensor([[1 + len(x)] for x in nbrs] * self.seeds, dtype=torch.int64,
                                                device=device)  # [M, 1]
        agents.weighting = (dase_weighting(agents, settings.similarity, settings.kl_div_var, settings.kl_precision)
                            if m.experience else Weighting())
        self.distillation = self.distill_sampler = None
        self.peer_slots: list[torch.Tensor] = []
        if m.distils:
            self.distillation = Distillation(agents, settings.dpd_alpha, batch_size=settings.dpd_batch_size)
            self.distill_sampler = AgentRNG([stream_seed(s, "distill") for s in member_seeds], device)
            width = len(nbrs[0]) if nbrs else 0
            self.peer_slots = [torch.as_tensor([k * n + x[slot] for k in range(self.seeds) for x in nbrs],
                                               dtype=torch.int64, device=device) for slot in range(width)]
        self.diffusion = self.gossip = None
        # what diffusion averages: the online actor and critic (targets follow by their Polyak update)
        self.mixed = agents.mixed_parameters()
        if m.diffuses and n > 1:
            rng = AgentRNG([stream_seed(s, "diffusion") for s in member_seeds], device) if settings.link_drop else None
            self.diffusion = Diffusion(graph, settings.diffusion_weights, self.seeds, device, settings.link_drop, rng)
            if settings.sync_freq > 0:  # lazy gossip; its delays from their own streams
                delays = AgentRNG([stream_seed(s, "gossip") for s in member_seeds], device) \
                    if settings.message_delay > 0 else None
                self.gossip = LazyGossip(self.diffusion, settings.sync_freq, settings.message_delay, delays,
                                         self.mixed)

    def capacity(self, buffer_size: int, n_step: int = 1) -> int:
        """Rows per buffer group: sampling by writer and N-step returns need whole steps (a multiple of N)."""
        return buffer_size - buffer_size % self.writers if self.by_writer or n_step > 1 else buffer_size

    def sample(self, buffer, batch_size: int, sampler: AgentRNG, step: torch.Tensor | None = None) -> Batch:
        """Each learner's batch: from all of its group, or only from its own and its neighbours' rows (``step``:
        the environment step, for prioritized replay's annealing)."""
        if self.by_writer:
            return buffer.sample_writers(batch_size, sampler, self.choices, self.choice_count)
        return buffer.sample(batch_size, sampler, step=step)

    def after_update(self, buffer, finite: torch.Tensor) -> torch.Tensor:
        """DPD's distillation steps (one per neighbour, in turn), then the diffusion's combine."""
        if self.distillation is not None:
            for peer in self.peer_slots:
                states = buffer.sample(self.distillation.batch_size, self.distill_sampler, groups=peer).obs
                finite = finite & torch.isfinite(self.distillation.distill(states, peer))
        if self.gossip is not None:
            self.gossip.combine(self.mixed)
        elif self.diffusion is not None:
            self.diffusion.combine(self.mixed)
        return finite

    @property
    def writes_weights(self) -> bool:
        return self.method.experience

    @property
    def writes_consensus(self) -> bool:
        return self.method.diffuses

    @property
    def writes_gossip(self) -> bool:
        return self.gossip is not None

    def gossip_stats(self) -> np.ndarray:
        """Per member [M, 2] since the last call: the fraction of combines skipped and the mean age of the messages
        combined (one host sync); only written with lazy gossip (``writes_gossip``)."""
        if self.gossip is None:
            raise RuntimeError("gossip_stats: this scheme has no lazy gossip (writes_gossip is False)")
        skipped, age = self.gossip.take_stats()
        return torch.stack([skipped, age], dim=1).cpu().numpy()

    def consensus(self) -> np.ndarray:
        """Per seed, the agents' parameter disagreement now (one host sync)."""
        return disagreement(self.mixed, self.seeds).cpu().numpy()

    def streams(self) -> list[AgentRNG]:
        """The random streams the scheme draws from inside an update."""
        drop = self.diffusion.rng if self.diffusion is not None else None
        delays = self.gossip.rng if self.gossip is not None else None
        return [rng for rng in (self.distill_sampler, drop, delays) if rng is not None]

    def state_dict(self, rows: slice) -> dict:
        """The scheme's random streams of some members (its optimizers live with the agents)."""
        state: dict[str, object] = {}
        if self.distill_sampler is not None:
            state["distill_sampler"] = self.distill_sampler.get_state()[rows]
        if self.diffusion is not None and self.diffusion.rng is not None:
            state["diffusion_rng"] = self.diffusion.rng.get_state()[rows]
        if self.gossip is not None:
            state["gossip"] = self.gossip.state_dict(rows)
            if self.gossip.rng is not None:
                state["gossip_rng"] = self.gossip.rng.get_state()[rows]
        return state

    def load_state_dicts(self, states: list[dict]) -> None:
        if self.distill_sampler is not None:
            self.distill_sampler.set_state([x for s in states for x in s["distill_sampler"]])
        if self.diffusion is not None and self.diffusion.rng is not None:
            self.diffusion.rng.set_state([x for s in states for x in s["diffusion_rng"]])
        if self.gossip is not None:
            self.gossip.load_state_dicts([s["gossip"] for s in states])
            if self.gossip.rng is not None:
                self.gossip.rng.set_state([x for s in states for x in s["gossip_rng"]])


def independent(num_agents: int = 1) -> SharingSettings:
    """Settings of agents that share nothing."""
    return SharingSettings(method=METHOD[""], num_agents=num_agents)
