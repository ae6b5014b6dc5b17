"""The learner: all members' networks as one batched model, their replay buffers, the sharing scheme, and the
update schedule.

Members are numbered seed by seed: member m = s * N + i is agent i of the s-th seed of the process. One batched
update trains every member at once; the scheme (sharing.py) decides the buffers, the samples and their weights,
and what follows the update.
"""
from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from algorithms.common.members import stream_seed
from algorithms.common.nets import AgentRNG, adam, init_generators, minimise
from algorithms.common.normalizer import ObsNormalizer
from algorithms.replay.intrinsic import RND, ActionCoding, Curiosity

from ...naming import ALGORITHM
from ..config import AlgoSettings
from ..protocol import members_broken
from ..sharing import Scheme, SharingSettings, independent
from .buffer import SharedReplayBuffer
from .cuda_graphs import UpdateGraphs

STATS = ("weight_sum", "external", "critic_loss", "actor_loss", "updates", "actor_updates")


class Learner:
    """Agents of ``num_seeds`` x ``num_agents`` members, their buffers, their sharing, and the update schedule."""

    def __init__(self, algorithm: str, algo: dict, member_seeds: list[int], num_agents: int, obs_dim: Any,
                 act_dim: int, low, high, buffer_size: int, batch_size: int, updates_per_step: int,
                 device: torch.device, sharing: SharingSettings | None = None, cuda_graphs: bool = False,
                 n_step: int = 1, prioritized: dict | None = None, common_init: bool = False,
                 memory_check: Callable[[int, int, int, int], None] | None = None):
        self.agents_per_seed, self.members = num_agents, len(member_seeds)
        # memory_check(bytes per row, groups, rows per group, writers per group): called before the buffers are
        # allocated (the trainer's check that they fit, in one line instead of an allocator's traceback)
        self.memory_check = memory_check
        self.batch_size, self.updates_per_step, self.device = batch_size, updates_per_step, device
        # a discrete action space (act_dim actions, no bounds: low and high None) takes the algorithm's discrete form
        discrete = low is None
        typed = AlgoSettings.of(algorithm, algo)
        algo = dict(algo)
        normalize = bool(algo.pop("normalize_obs", False))
        action_noise = algo.pop("action_noise", None)
        intrinsic = {k: algo.pop(k) for k in ("curiosity", "curiosity_strength", "rnd", "rnd_strength", "rnd_n_sample")
                     if k in algo}
        self.agents = self.make_agents(algorithm, algo, discrete, obs_dim, act_dim, low, high, member_seeds, device)
        if action_noise is not None:  # agent i of every seed: MIN + (MAX - MIN) i / (N - 1), MIN when N = 1
            low_level, high_level = map(float, action_noise)
            spread = np.linspace(low_level, high_level, num_agents) if num_agents > 1 else np.array([low_level])
            self.agents.set_action_noise(np.tile(spread, self.members // num_agents))
        # --normalize_obs: every member's running statistics, kept with its networks (checkpoints, model files)
        self.normalizer: ObsNormalizer | None = None
        if normalize:
            self.normalizer = ObsNormalizer(self.members, obs_dim, device)
            self.agents.networks["obs_normalizer"] = self.normalizer
        if common_init:  # before anything (the sharing scheme) reads or copies the parameters
            self.agents.start_equal(num_agents)
        self.scheme = Scheme(sharing or independent(num_agents), self.agents, member_seeds, device)
        self.groups_per_seed = self.scheme.groups // self.scheme.seeds
        self.buffer = self.make_buffer(obs_dim, 1 if discrete else act_dim, buffer_size, n_step, typed.discount,
                                       typed.vtrace is not None, prioritized)
        self.sampler = AgentRNG([stream_seed(s, "sample") for s in member_seeds], device)
        # evaluation plays a copy of the actors, so training can go on while it runs
        self.make_intrinsic(obs_dim, act_dim, low, high, member_seeds, **intrinsic)
        self.eval_actor = copy.deepcopy(self.agents.actor).requires_grad_(False)
        self.eval_normalizer = copy.deepcopy(self.normalizer)  # the statistics an evaluation is frozen at
        # first step at which a member's loss was not finite (-1: none); read only at evaluations
        self.first_bad = torch.full((self.members,), -1, dtype=torch.long, device=device)
        # per member, since the last evaluation: [sum of weights given to external samples, their count,
        # sum of critic losses, sum of actor losses, updates, actor updates]; read only at evaluations
        self.stats = torch.zeros((len(STATS), self.members), dtype=torch.float64, device=device)
        self.step_t = torch.zeros((), dtype=torch.long, device=device)  # the environment step, for first_bad
        self.graphs = UpdateGraphs(self) if cuda_graphs else None

    def make_intrinsic(self, obs_dim: int, act_dim: int, low, high, member_seeds: list[int], curiosity=None,
                       curiosity_strength=1.0, rnd=False, rnd_strength=1.0, rnd_n_sample=1) -> None:
        """--curiosity / --rnd: the bonus models, kept with the networks (checkpoints, model files), one Adam over
        them (checkpointed with the agents' optimizers), and the period's sums of bonus and loss."""
        self.intrinsic: list = []
        self.rnd_n_sample = int(rnd_n_sample)
        if not curiosity and not rnd:
            return
        agents = self.agents
        coding = ActionCoding(agents.low, agents.high, act_dim if agents.low is None else None)
        gens = lambda name: init_generators([stream_seed(s, name) for s in member_seeds])  # noqa: E731
        if curiosity:
            agents.networks["curiosity"] = Curiosity(obs_dim, act_dim, gens("curiosity"), coding, curiosity,
                                                     curiosity_strength).to(self.device)
            self.intrinsic.append(agents.networks["curiosity"])
        if rnd:
            self.rnd = RND(obs_dim, act_dim, gens("rnd"), gens("rnd_target"), coding, rnd_strength).to(self.device)
            agents.networks["rnd"] = self.rnd
            self.intrinsic.append(self.rnd)
        agents.add_optimizer("intrinsic_opt", adam([p for m in self.intrinsic for p in m.parameters()
                                                    if p.requires_grad], lr=3e-4))
        self.intrinsic_sums = torch.zeros((2, self.members), dtype=torch.float64, device=self.device)

    def add_intrinsic(self, batch) -> None:
        """The bonus of every sampled transition added to its reward (the models as they are), then one step of the
        models on the batch; the period's sums of mean bonus and loss per member."""
        (bonus, loss), *others = [model.bonus_and_loss(batch.obs, batch.action, batch.next_obs)
                                  for model in self.intrinsic]
        for b, part in others:
            bonus, loss = bonus + b, loss + part
        minimise(self.agents.intrinsic_opt, loss.sum())
        batch.reward = batch.reward + bonus
        self.intrinsic_sums += torch.stack([bonus.mean((1, 2)), loss.detach()]).double()

    @torch.no_grad()
    def novel_explore(self, obs: torch.Tensor):
        """--rnd_n_sample K: K exploration actions per member, drawn one after another from its stream; the one
        the RND predictor knows least is taken (its behaviour, the policy's, is stored with it)."""
        k = self.rnd_n_sample
        candidates = []
        for _ in range(k):
            with self.agents.acting_noise():
                candidates.append(self.agents.explore_device(obs))
        actions = torch.stack([c[0] for c in candidates], dim=1)  # [M, K, A] (discrete: [M, K])
        stored = actions if self.agents.low is not None else actions.unsqueeze(-1)
        novelty = self.rnd.novelty(obs.unsqueeze(1).expand(-1, k, -1), stored).squeeze(-1)  # [M, K]
        best = novelty.argmax(1)
        chosen = actions[torch.arange(actions.shape[0], device=actions.device), best]
        behaviour = candidates[0][1]
        return chosen.cpu().numpy(), None if behaviour is None else tuple(b.cpu().numpy() for b in behaviour)

    def make_agents(self, algorithm: str, algo: dict, discrete: bool, *args):
        """The batched agents of ``algorithm`` (its discrete form on a discrete action space)."""
        return ALGORITHM[algorithm].form("learner", discrete)(*args, **algo)  # the registry (utils/naming.py)

    def make_buffer(self, obs_dim: int, act_dim: int, buffer_size: int, n_step: int, gamma: float, sequences: bool,
                    prioritized: dict | None) -> SharedReplayBuffer:
        """The replay buffers of all groups (a discrete action is stored as its index, ``act_dim`` 1)."""
        capacity = self.scheme.capacity(buffer_size, n_step)
        self.check_memory(SharedReplayBuffer.bytes_for(obs_dim, act_dim, 1, self.agents.gaussian_behaviour,
                                                       self.agents.behaviour_width), capacity)
        return SharedReplayBuffer(obs_dim, act_dim, capacity, self.scheme.writers,
                                  self.device, self.agents.gaussian_behaviour, groups=self.scheme.groups,
                                  behaviour_width=self.agents.behaviour_width, n_step=n_step, gamma=gamma,
                                  sequences=sequences, prioritized=prioritized)

    def check_memory(self, row_bytes: int, capacity: int) -> None:
        """``memory_check`` of buffers of ``capacity`` rows of ``row_bytes`` per group, before they exist."""
        if self.memory_check is not None:
            self.memory_check(row_bytes, self.scheme.groups, capacity, self.scheme.writers)

    @torch.no_grad()
    def snapshot(self, t: int = 0):
        """The actors as they are now, as a policy for evaluation ([M, E, obs_dim] -> [M, E, act_dim]; discrete:
        the greedy actions, int64 [M, E])."""
        torch._foreach_copy_(list(self.eval_actor.parameters()), list(self.agents.actor.parameters()))
        actor, device, norm = self.eval_actor, self.device, self.eval_normalizer
        if norm is not None and self.normalizer is not None:
            torch._foreach_copy_(list(norm.parameters()), list(self.normalizer.parameters()))

        @torch.no_grad()
        def policy(obs: np.ndarray) -> np.ndarray:
            x = torch.as_tensor(obs, dtype=torch.float32, device=device)
            return actor(x if norm is None else norm(x)).cpu().numpy()
        return policy

    @torch.no_grad()
    def greedy_actions(self, obs: np.ndarray) -> torch.Tensor:
        """Every member's current actor without noise, on its normalised observations: [M, E, obs] -> actions."""
        obs = self.agents._obs(obs)
        return self.agents.act(obs if self.normalizer is None else self.normalizer(obs))

    steps_per_iteration = 1  # environment steps per member and loop step

    def act(self, obs: np.ndarray, warmup: bool) -> tuple[np.ndarray | None, tuple | None]:
        """Exploration actions (and the behaviour: Gaussian SAC's Gaussian, discrete SAC's probabilities); None in
        the warm-up: random actions."""
        x = obs
        if self.normalizer is not None:  # every observation acted on, warm-up included, joins the statistics
            x = self.agents._obs(obs)
            self.normalizer.observe(x)
            x = self.normalizer(x)
        if not warmup and self.rnd_n_sample > 1:
            return self.novel_explore(self.agents._obs(x))
        return (None, None) if warmup else self.agents.explore(x)

    def explore(self, obs: np.ndarray) -> tuple[np.ndarray, tuple | None]:
        return self.agents.explore(obs if self.normalizer is None else self.normalizer(self.agents._obs(obs)))

    def store(self, obs, actions, rewards, next_obs, terminated, behaviour=None, ended=None) -> None:
        """One transition per member into the buffers (``ended``: terminated or truncated, where N-step returns
        stop; only a termination stops bootstrapping)."""
        self.buffer.add(obs, actions, rewards, next_obs, terminated, behaviour, ended)

    def train(self, t: int) -> None:
        """The updates of environment step ``t`` (``updates_per_step`` batched gradient steps)."""
        self.step_t.fill_(t)
        for _ in range(self.updates_per_step):
            if self.graphs is None:
                self.update_once()
            else:
                self.graphs.step()

    def update_once(self) -> None:
        """One batched gradient step of every member, then what the scheme runs after it (DPD's distillation,
        diffusion), with its diagnostics.

        It reads no host value that changes from step to step and writes its state in place, so a CUDA
        graph of it, replayed, does what calling it does."""
        batch = self.scheme.sample(self.buffer, self.batch_size, self.sampler, self.step_t)
        if self.normalizer is not None:
            self.normalize(batch)
        if self.intrinsic:
            self.add_intrinsic(batch)
        with self.agents.update_noise():
            info = self.agents.update(batch)
        if batch.index is not None:  # prioritized replay: the sampled rows' new priorities
            self.buffer.update_priorities(batch, info["td_error"])
        finite = torch.isfinite(info["critic_loss"])
        if "actor_loss" in info:
            finite = finite & torch.isfinite(info["actor_loss"])
        self.accumulate(info.get("own", batch.own), info)  # a recurrent update's samples are its trained steps
        finite = self.scheme.after_update(self.buffer, finite)
        self.first_bad.copy_(torch.where((self.first_bad < 0) & ~finite, self.step_t, self.first_bad))

    def normalize(self, batch) -> None:
        """The batch's states (and V-trace's steps) as the networks read them, with the statistics of now."""
        norm = self.normalizer
        if norm is None:  # called only with --normalize_obs
            return
        batch.obs, batch.next_obs = norm(batch.obs), norm(batch.next_obs)
        if batch.sequence is not None:
            for key in ("obs", "next_obs"):
                if key in batch.sequence:
                    batch.sequence[key] = norm(batch.sequence[key])

    def accumulate(self, own: torch.Tensor, info: dict) -> None:
        """Add one update's weights of external samples and losses to the period's sums (no host sync)."""
        external = (~own).unsqueeze(-1)
        actor = info.get("actor_loss")
        one = torch.ones_like(info["critic_loss"])
        self.stats += torch.stack([(info["weights"] * external).sum(dim=(1, 2)), external.sum(dim=(1, 2)),
                                   info["critic_loss"], actor if actor is not None else 0 * one, one,
                                   one if actor is not None else 0 * one]).double()

    def period_stats(self) -> dict[str, np.ndarray]:
        """Per member, over the updates since the last call: mean weight of external samples, mean critic
        and actor losses (NaN where there were none); one host sync, then the sums restart."""
        s = dict(zip(STATS, self.stats.cpu().numpy().copy()))  # on the CPU .numpy() shares memory
        self.stats.zero_()
        with np.errstate(invalid="ignore", divide="ignore"):
            out = {"weight": s["weight_sum"] / s["external"], "critic_loss": s["critic_loss"] / s["updates"],
                   "actor_loss": s["actor_loss"] / s["actor_updates"]}
            if self.intrinsic:  # --curiosity / --rnd: mean bonus and model loss per update
                sums = self.intrinsic_sums.cpu().numpy().copy()
                self.intrinsic_sums.zero_()
                out["intrinsic"] = np.stack([sums[0] / s["updates"], sums[1] / s["updates"]], axis=1)
        return out

    def broken(self) -> list[tuple[int, str]]:
        """Per member: (first bad step or -1, what broke); one host sync."""
        return members_broken(self.first_bad, (p for net in self.agents.networks.values() for p in net.parameters()))

    def state_dict(self, seed_index: int) -> dict:
        """One seed's agents, buffer and samplers: exactly what a process of that seed alone holds."""
        rows = slice(seed_index * self.agents_per_seed, (seed_index + 1) * self.agents_per_seed)
        g = self.groups_per_seed
        state = {"agents": self.agents.state_dict(rows), "sampler": self.sampler.get_state()[rows],
                 "period_stats": self.stats[:, rows].cpu().clone(),
                 "buffer": self.buffer.state_dict(slice(seed_index * g, (seed_index + 1) * g)),
                 **self.scheme.state_dict(rows)}
        if self.intrinsic:
            state["intrinsic_sums"] = self.intrinsic_sums[:, rows].cpu().clone()
        return state

    def load_state_dicts(self, states: list[dict]) -> None:
        """Restore from one ``state_dict`` per seed, in seed order."""
        self.agents.load_state_dict([s["agents"] for s in states])
        if self.graphs is not None:
            self.graphs.reset()  # the optimizers' state tensors were replaced
        g = self.groups_per_seed
        for k, s in enumerate(states):
            self.buffer.load_state_dict(s["buffer"], slice(k * g, (k + 1) * g))
        self.sampler.set_state([x for s in states for x in s["sampler"]])
        self.stats.copy_(torch.cat([s["period_stats"] for s in states], dim=1))
        if self.intrinsic:
            self.intrinsic_sums.copy_(torch.cat([s["intrinsic_sums"] for s in states], dim=1))
        self.scheme.load_state_dicts(states)
