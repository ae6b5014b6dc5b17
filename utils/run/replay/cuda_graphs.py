"""The batched update as CUDA graphs (``--cuda_graphs``): one graph per branch of the update schedule.

An update launches a few hundred small kernels; on a GPU their launch cost, not the arithmetic,
sets the speed. A CUDA graph records the kernels of one ``Learner.update_once`` (sampling, the
algorithm's update with its DASE weights and fused capturable Adam, the soft updates, the
diagnostics) and replays them with one launch. Everything the update reads lives in tensors that
stay in place (buffer arrays and its size on the device, parameters, optimizer state, random
counters), so a replay computes exactly what an eager call would.

Python decides which graph to replay: TD3 alternates a critic-only step and a critic + actor +
targets step (``schedule()`` names the branch), and the Python counters the eager code advances
(``agents.updates``) are advanced here, since a replay runs no Python. The first updates run eagerly
until every optimizer has its state; each branch is captured the first time it comes up.
"""
from __future__ import annotations

from collections.abc import Callable, Hashable

import torch


class UpdateGraphs:
    """Replays ``learner.update_once`` from CUDA graphs keyed by ``learner.agents.schedule()``."""

    def __init__(self, learner, extra_warmup: int = 2):
        self.learner = learner
        self.graphs: dict[Hashable, object] = {}
        self.extra_warmup = extra_warmup
        self.pool = self._pool()
        # the streams the update draws from hash on every call: a block's slice index would be frozen in a graph.
        # For good: a block is found by the count of Python calls, which a replayed graph advances the counters
        # without making, so blocks turned back on after a replay would hand out the wrong numbers.
        for rng in (learner.agents.update_rng, learner.sampler, *learner.scheme.streams()):
            rng.blocks = False

    def reset(self) -> None:
        """Forget the graphs (after optimizer state was replaced, e.g. by loading a checkpoint)."""
        self.graphs.clear()

    def ready(self) -> bool:
        """Captures need every optimizer's state to exist already (Adam creates it on its first step)."""
        optimizers = self.learner.agents._optimizers().values()
        if not all(len(opt.state) for opt in optimizers if opt is not None):
            return False
        if self.extra_warmup > 0:
            self.extra_warmup -= 1
            return False
        return True

    def step(self) -> None:
        """One update of every member: eager until ready, then by replaying the branch's graph."""
        agents = self.learner.agents
        if not self.ready():
            self._eager(self.learner.update_once)
            return
        key = agents.schedule()
        if key not in self.graphs:
            updates = agents.updates
            try:
                self.graphs[key] = self._capture(self.learner.update_once)
            except RuntimeError as e:  # an op this torch/GPU cannot capture: carry on without graphs
                agents.updates = updates
                self.give_up(e)
                self.learner.update_once()
                return
            agents.updates = updates  # capturing ran the Python of one update but not its kernels
        self._replay(self.graphs[key])
        agents.updates += 1  # what the eager update's Python would have done

    def give_up(self, error: Exception) -> None:
        """Eager updates from now on, with one line on stderr saying why (a capture records kernels without
        running them, so the failed one changed no state; the Python counters were restored by the caller)."""
        import sys

        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        print(f"note: CUDA graph capture failed ({first}); continuing with eager updates "
              "(--no_cuda_graphs skips the attempt)", file=sys.stderr)
        self.learner.graphs = None

    # ---- the CUDA primitives (a test replaces them to check the bookkeeping on the CPU) ----------
    def _pool(self):
        return torch.cuda.graph_pool_handle()

    def _eager(self, fn: Callable[[], None]) -> None:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up off the default stream, as capture wants
            fn()
        torch.cuda.current_stream().wait_stream(side)

    def _capture(self, fn: Callable[[], None]):
        graph = torch.cuda.CUDAGraph()
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, pool=self.pool):
            fn()
        return graph

    def _replay(self, graph) -> None:
        graph.replay()
