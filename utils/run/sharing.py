"""How the members of a run share, as one layer between the learner and the algorithms.

A ``Scheme`` decides the buffer layout (one buffer per seed shared by its agents, or one per agent), what each
learner samples (all of its seed's buffer, or only its graph neighbours' rows), the per-sample weights the
algorithm's update reads (``agents.weighting``), what runs after an update (DPD's distillation steps, Diff-DAC's
combine), its statistics (the agents' parameter disagreement) and its extra files. The algorithms know nothing
of peers; the registry (utils.naming) says which ingredients a method has.

Members are numbered seed by seed: member m = s * N + i is agent i of the s-th seed of the process.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch

from algorithms.replay.base import Batch
from algorithms.common.members import stream_seed
from algorithms.sharing.dpd import Distillation
from algorithms.sharing.graph import Diffusion, LazyGossip, adjacency, check_adjacency, disagreement, neighbours
from algorithms.common.nets import AgentRNG
from algorithms.sharing.weights import PRECISIONS, SIMILARITIES, Weighting, dase_weighting

from ..naming import DIFFUSION_WEIGHTS, METHOD, TOPOLOGIES, Method, method_of

# the keys of RunConfig.sharing, with their defaults
DEFAULTS = {"similarity": "js", "kl_div_var": 0.1, "kl_precision": "float64", "dpd_alpha": 1.0, "dpd_batch_size": 256, "topology": None,
            "adjacency": None, "diffusion_weights": "uniform", "link_drop": 0.0, "sync_freq": 0, "message_delay": 1.0}


@dataclass(frozen=True)
class SharingSettings:
    """A run's sharing settings, typed; ``check`` says what is wrong with them (ValueError, one line)."""

    method: Method
    num_agents: int = 1
    similarity: str = "js"
    kl_div_var: float | str = 0.1
    kl_precision: str = "float64"
    dpd_alpha: float = 1.0
    dpd_batch_size: int = 256
    topology: Optional[str] = None  # None: the method's default (complete; a ring for DIFF_)
    adjacency: Optional[list] = None  # an explicit graph instead of a named topology
    diffusion_weights: str = "uniform"
    link_drop: float = 0.0
    sync_freq: int = 0  # the reference's lazy gossip (algorithms.sharing.graph.LazyGossip); 0: synchronous combines
    message_delay: float = 1.0  # its simulated mean message delay, in updates

    @staticmethod
    def of(policy: str, num_agents: int, sharing: dict) -> "SharingSettings":
        unknown = set(sharing) - set(DEFAULTS)
        if unknown:
            raise ValueError(f"unknown sharing settings {sorted(unknown)}")
        return SharingSettings(method_of(policy), int(num_agents), **{**DEFAULTS, **sharing})

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

    def check(self) -> None:
        m = self.method
        if self.similarity not in SIMILARITIES:
            raise ValueError(f"--similarity {self.similarity!r}: use one of {', '.join(SIMILARITIES)}")
        if self.kl_precision not in PRECISIONS:
            raise ValueError(f"--kl_precision {self.kl_precision!r}: use one of {', '.join(PRECISIONS)}")
        if self.topology is not None and self.topology not in TOPOLOGIES:
            raise ValueError(f"--topology {self.topology!r}: use one of {', '.join(TOPOLOGIES)}")
        if self.topology is not None and self.adjacency is not None:
            raise ValueError("--topology and --adjacency both name the graph: give one of them")
        if self.diffusion_weights not in DIFFUSION_WEIGHTS:
            raise ValueError(f"--diffusion_weights {self.diffusion_weights!r}: use uniform or metropolis")
        if self.sync_freq < 0 or not self.message_delay >= 0:
            raise ValueError(f"--sync_freq {self.sync_freq} / --message_delay {self.message_delay}: both >= 0")
        if self.sync_freq and (not m.diffuses or self.link_drop > 0):
            raise ValueError("--sync_freq: a diffusing policy without --link_drop")
        if not 0.0 <= self.link_drop < 1.0:
            raise ValueError(f"--link_drop {self.link_drop}: a probability in [0, 1)")
        if self.graph_named and not m.multi_agent:
            raise ValueError("--topology/--adjacency: a single-agent policy has no graph; use a DASE_, DPD_ or DIFF_ "
                             "policy")
        if self.graph_named and self.num_agents < 2:
            raise ValueError(f"--topology/--adjacency: a graph of {self.num_agents} agent has no links; "
                             "use --num_agents 2 or more")
        if not m.diffuses and (self.diffusion_weights != "uniform" or self.link_drop > 0):
            raise ValueError("--diffusion_weights/--link_drop apply to diffusion (--diffusion or a DIFF_ policy)")
        if m.multi_agent and self.num_agents >= 2:
            try:
                graph = self.graph()  # raises on a malformed --adjacency
            except ValueError as e:
                raise ValueError(f"--adjacency: {e}" if self.adjacency is not None else str(e)) from None
            if m.distils and not _slots_are_permutations(neighbours(graph)):
                raise ValueError("DPD on this graph: every learner's k-th neighbour must be a different learner "
                                 "(true on complete graphs and rings); use --topology complete, ring or none")


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
        combined (one host sync)."""
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
        state = {}
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
    return SharingSettings(METHOD[""], num_agents)
