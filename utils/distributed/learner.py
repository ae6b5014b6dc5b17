"""A learner of a distributed run: the project's trainer of one seed (its agents, replay, evaluations, files and
checkpoints), whose steps are the transitions its actors send instead of its own environments' steps.

Step t of the learner is the t-th step it stores (one transition per agent of its group); it trains at every step
past ``--start_steps`` as the single-machine loop does, evaluates every ``--eval_freq`` stored steps on its own
evaluation environments, and writes the same curves, record and checkpoints. Every ``refresh_every`` updates it
publishes its actors' parameters (with the update count, their *version*). The last step of every block is stored
as the end of an episode (a cut: it still bootstraps unless the environment terminated there), so that N-step
returns and V-trace's sequences, which read consecutive rows, never join one actor's steps to another's. On pixel
and sensor tasks every block's first step is stored as a *start* (its stacks' older frames are the actor's, not the
rows before it: ``ImageReplayBuffer`` keeps them as the start's head). Per evaluation it also writes
``{stem}_distributed.npy``: [steps stored per second, blocks waiting in its queue, mean policy lag (updates between
the version that acted and the learner's count when the step is stored), then each actor's share of the steps].
"""
from __future__ import annotations

import signal
import time
from collections import deque

import numpy as np
import torch

from ..errors import Interrupted
from ..io import save_curve
from ..run.loop import Trainer
from ..run.progress import StopSignals
from ..run.replay.images import ImageLearner

STATS_SUFFIX = "_distributed"


class DistributedTrainer(Trainer):
    """``Trainer`` fed by actors through ``queue`` (see the module's docstring)."""

    def __init__(self, cfg, queue, refresh_every: int, actors: int):
        self.queue, self.refresh_every, self.actors = queue, int(refresh_every), int(actors)
        self.inbox: deque = deque()  # stored steps not yet learned from: (fields, version, actor)
        self.incoming = None  # parameters the evolver sent, loaded at the next step
        self.stopper = StopSignals()  # its signum set by the driver (LearnerActor.stop): no handlers in this thread
        self.evaluated_at = None  # the step of the last evaluation
        super().__init__(cfg, validated=True)
        # what the scripts print (a line per evaluation, a pause), kept for the driver to print (``said``): a Ray
        # worker's own output does not reach the terminal
        self.lines: list[str] = []
        self.progress.echo = lambda line: self.lines.append(line)  # the list of the moment (said() swaps it)
        buffer = self.learner.buffer
        self.images = isinstance(self.learner, ImageLearner)
        self.writer_offsets = torch.arange(buffer.writers, device=buffer.device)  # a step's rows from its first
        if hasattr(buffer, "restart_from_stored"):  # --seq_encoder: every block starts mid-episode, its first row
            buffer.restart_from_stored = True  # restarting windows from the actor's stored state
        self.stats_path = self.files[0].results / f"{cfg.stem}{STATS_SUFFIX}.npy"
        self.stats_rows: list[list[float]] = []
        self.reset_period()
        self.publish()

    def reset_period(self) -> None:
        self.lag_sum, self.lag_n, self.period_start = 0.0, 0, time.perf_counter()
        self.received = np.zeros(self.actors)

    def publish(self, done: bool = False) -> None:
        """The actors' parameters as they are now, for the actors to fetch (``LearnerActor.latest``)."""
        agents = self.learner.agents
        copy = lambda net: {k: v.detach().cpu().clone() for k, v in net.state_dict().items()}  # noqa: E731
        latest = {"version": int(agents.updates), "done": done, "warmup": self.t < self.cfg.start_time_steps}
        if self.cfg.per:  # the actors compute initial priorities: every network
            latest["networks"] = {name: copy(net) for name, net in agents.networks.items()}
        else:
            latest["actor"] = copy(agents.actor)
        if hasattr(agents, "encoder") and "networks" not in latest:  # --seq_encoder: the encoder acts too
            latest["encoder"] = copy(agents.encoder)
        if self.learner.normalizer is not None:  # --normalize_obs: the actors act on the same statistics
            latest["obs_normalizer"] = copy(self.learner.normalizer)
        # one assignment, once complete: the actors read it from other threads (LearnerActor.latest)
        self.latest = latest

    def receive(self) -> bool:
        """Blocks from the queue (waiting for one if none is there) into the inbox, step by step; False when told to
        stop while waiting (its actors may be gone)."""
        waiting = self.queue.qsize()
        if waiting:
            blocks = self.queue.get_nowait_batch(waiting)
        else:
            from ray.util.queue import Empty

            while True:
                try:
                    blocks = [self.queue.get(block=True, timeout=1.0)]
                    break
                except Empty:
                    if self.stopper.signum:
                        return False
        for block in blocks:
            last = len(block["rewards"]) - 1
            for s in range(last + 1):
                fields = tuple(None if block[k] is None else block[k][s] for k in
                               ("obs", "actions", "rewards", "next_obs", "terminated", "ended"))
                if s == last:  # the next stored step may be another actor's: cut the episode here
                    fields = (*fields[:5], np.ones_like(fields[5]))
                if "state" in block:  # --seq_encoder: the stored state, and a start at the block's first row
                    first = np.ones_like(block["first"][s]) if s == 0 else block["first"][s]
                    fields = (*fields, block["state"][s], first)
                behaviour = None if block["behaviour"] is None else tuple(b[s] for b in block["behaviour"])
                td = None if block.get("td_errors") is None else block["td_errors"][s]
                self.inbox.append((fields, behaviour, block["version"], block["actor"], td, s == 0))
        return True

    def step(self) -> None:
        if self.incoming is not None:
            self.load_parameters(self.incoming)
            self.incoming = None
        while not self.inbox:
            if not self.receive():
                return  # stopping: nothing stored this step (the loop checkpoints and stops)
        fields, behaviour, version, actor, td, first = self.inbox.popleft()
        (obs, actions, rewards, next_obs, terminated, ended), recurrent = fields[:6], fields[6:]
        if self.learner.normalizer is not None:  # every stored observation joins the statistics (acting's, there)
            self.learner.normalizer.observe(self.learner.agents._obs(obs))
        if recurrent:  # as the actor acted: [o, a_prev] rows, its state before acting, episode (or block) starts
            state, first = recurrent
            self.learner.buffer.add(obs, actions, rewards, next_obs, terminated, behaviour, ended,
                                    state=torch.as_tensor(state), first=first)
        elif self.images:  # a block's first stacks reach back into the actor's earlier frames: a start
            self.learner.store(obs, actions, rewards, next_obs, terminated, behaviour, ended=ended,
                               start=np.full(len(actions), first))
        else:
            self.learner.store(obs, actions, rewards, next_obs, terminated, behaviour, ended=ended)
        if td is not None:  # the actor's initial priorities of the rows just written, under every member
            buffer = self.learner.buffer
            rows = ((buffer.newest + self.writer_offsets) % buffer.capacity).view(1, -1)
            buffer.priorities.update(rows.expand(buffer.priorities.members, -1),
                                     torch.as_tensor(td, device=buffer.device).reshape(buffer.priorities.members, -1))
        warmup = self.t < self.cfg.start_time_steps
        if not warmup:
            self.learner.train(self.t)
        updates = int(self.learner.agents.updates)
        self.lag_sum += updates - version
        self.lag_n += 1
        self.received[actor] += 1
        self.t += self.learner.steps_per_iteration
        if updates - self.latest["version"] >= self.refresh_every or warmup != self.latest["warmup"]:
            self.publish()

    def stop_signals(self) -> StopSignals:
        return self.stopper

    def start_evaluation(self) -> None:
        """The period's distributed statistics, then the evaluation (none when a step stored nothing: stopping)."""
        if self.t == self.evaluated_at:
            return
        self.evaluated_at = self.t
        seconds = time.perf_counter() - self.period_start
        total = self.received.sum()
        row = [total / seconds if total else np.nan, float(self.queue.qsize()),
               self.lag_sum / self.lag_n if self.lag_n else np.nan,
               *(self.received / total if total else np.full(self.actors, np.nan))]
        # one row per evaluation: those of the evaluations kept (a resumed run drops the rows written after its
        # checkpoint), then this one's
        self.stats_rows = self.stats_rows[:len(self.curves[0])] + [row]
        save_curve(self.stats_path, np.asarray(self.stats_rows, dtype=np.float64))
        self.reset_period()
        super().start_evaluation()

    def run(self, *args, **kwargs):
        if self.stats_path.exists():  # a resumed run: the rows of the evaluations it keeps
            self.stats_rows = np.load(self.stats_path).tolist()
        try:
            curves = super().run(*args, **kwargs)
        finally:
            self.publish(done=True)
        self.stats_rows = self.stats_rows[:len(curves[0])] if curves else self.stats_rows
        save_curve(self.stats_path, np.asarray(self.stats_rows, dtype=np.float64))
        return curves

    # ---- the evolver's side ---------------------------------------------------------------------------------
    def parameters(self) -> dict[str, torch.Tensor]:
        """Every network's parameters (online and target), by name, on the CPU."""
        return {f"{name}.{k}": p.detach().cpu().clone() for name, net in self.learner.agents.networks.items()
                for k, p in net.named_parameters()}

    @torch.no_grad()
    def load_parameters(self, params: dict[str, torch.Tensor]) -> None:
        for name, net in self.learner.agents.networks.items():
            for k, p in net.named_parameters():
                p.copy_(params[f"{name}.{k}"].to(p.device, p.dtype))
        self.publish()


def group_curve(curves) -> list[float]:
    """The mean over the agents' curves [agents][evaluations] at every evaluation all of them have."""
    length = min(len(c) for c in curves)
    return [float(np.mean([c[i] for c in curves])) for i in range(length)]


class LearnerActor:
    """A learner as a Ray actor (threaded: the actors fetch its parameters while it trains)."""

    def __init__(self, cfg, queue, refresh_every: int, actors: int):
        self.trainer = DistributedTrainer(cfg, queue, refresh_every, actors)
        self.removed = False

    def run(self) -> dict:
        """{"curves": every agent's curve} when it finished or paused (--stop_at); {"interrupted": signum,
        "message": the stop report} when the driver stopped it (``stop``): it checkpointed first."""
        try:
            return {"curves": [c.tolist() for c in self.trainer.run()]}
        except Interrupted as e:
            if self.removed:
                return {"removed": True, "message": str(e).split(": ", 1)[-1]}
            return {"interrupted": e.signum, "message": str(e)}

    def remove(self) -> None:
        """The evolver drops this learner: it stops as on SIGTERM (a checkpoint; its actors end with it)."""
        self.removed = True
        self.trainer.stopper.signum = int(signal.SIGTERM)

    def stop(self, signum: int) -> None:
        """Stop at the end of the current step with a checkpoint, as the scripts do on SIGINT/SIGTERM."""
        self.trainer.stopper.signum = int(signum)

    def latest(self, known: int):
        """The published parameters, or None if the actor has them already (``known``: its version)."""
        latest = self.trainer.latest
        return None if latest["version"] == known and not latest["done"] and known >= 0 else latest

    def evaluations(self) -> list[float]:
        """The learner's curve so far: at each evaluation the mean over its group's agents (a DASE learner's N; the
        evolver ranks whole groups)."""
        return group_curve(self.trainer.curves)

    def parameters(self) -> dict[str, torch.Tensor]:
        return self.trainer.parameters()

    def set_parameters(self, params: dict[str, torch.Tensor]) -> None:
        self.trainer.incoming = params

    def step(self) -> int:
        return int(self.trainer.t)

    def said(self) -> list[str]:
        """The lines the learner printed since the last call (the scripts' lines: one per evaluation)."""
        lines, self.trainer.lines = self.trainer.lines, []
        return lines
