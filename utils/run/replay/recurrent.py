"""The learner of recurrent replay agents (``--seq_encoder``): ``Learner`` with sequence replay, each member's
acting state carried from step to step (zeroed when its episode ends, kept in checkpoints), and a stateful policy
for evaluation.

Acting runs the encoder at every step, the warm-up's random steps included, so the state stored with each row is
the state the member had when it acted there (R2D2's stored state); the update's burn-in refreshes it.
"""
from __future__ import annotations

import copy

import numpy as np
import torch

from ...naming import ALGORITHM
from .learner import STATS, Learner
from .sequences import SequenceReplayBuffer


class PrevAction:
    """``--prev_action``: a member's last action as the encoder reads it (one-hot, or scaled to [-1, 1] by the
    algorithm's bounds) and the [o, a_prev] observation; the recurrent learner's and the distributed actors'."""

    def __init__(self, agents, members: int):
        self.width, self.members, self.discrete = agents.prev_width, members, agents.low is None
        if self.width and not self.discrete:
            half = agents.scale  # (high - low) / 2, the algorithms' own
            self.mid, self.half = (agents.low + half).cpu().numpy(), half.cpu().numpy()

    def encode(self, actions: np.ndarray) -> np.ndarray:
        """Actions [M, ...] as the encoder reads them."""
        m = self.members
        if self.discrete:
            return np.eye(self.width, dtype=np.float32)[np.asarray(actions).reshape(m).astype(np.int64)]
        return ((np.asarray(actions, dtype=np.float32).reshape(m, -1) - self.mid) / self.half).astype(np.float32)

    def with_prev(self, obs: np.ndarray, prev: np.ndarray) -> np.ndarray:
        """[o, a_prev] per member (``obs`` unchanged without --prev_action)."""
        if not self.width:
            return obs
        return np.concatenate([np.asarray(obs, dtype=np.float32).reshape(self.members, -1), prev], axis=-1)


class RecurrentLearner(Learner):
    """``Learner`` for agents with a sequence encoder (see the module's docstring)."""

    buffer: SequenceReplayBuffer

    def make_agents(self, algorithm: str, algo: dict, discrete: bool, *args):
        spec = ALGORITHM[algorithm]  # the registry (utils/naming.py)
        if not spec.has("recurrent", discrete) or (discrete and "discrete" not in spec.actions):
            raise ValueError(f"--seq_encoder: no recurrent form of {algorithm} on this action space")
        return spec.form("recurrent", discrete)(*args, **algo)

    def make_buffer(self, obs_dim, act_dim, buffer_size, n_step, gamma, sequences, prioritized):
        if self.scheme.by_writer or self.scheme.distillation is not None:
            raise ValueError("--seq_encoder: graph-restricted and DPD replay are not implemented for sequences")
        self.agents.n_step = int(n_step)  # N-step returns inside each window
        w = self.scheme.writers
        self.first = np.ones(self.members, dtype=np.float32)  # every member's next step starts an episode
        self.stored: torch.Tensor | None = None  # the states of the last ``act``, for ``store``
        # --prev_action: each member's last action as the encoder reads it (zeros when an episode starts); the
        # buffer stores [o_t, a_{t-1}] as the observation and [o_{t+1}, a_t] as the next one
        self.prev = np.zeros((self.members, self.agents.prev_width), dtype=np.float32)
        self.coding = PrevAction(self.agents, self.members)
        capacity, width = buffer_size - buffer_size % w, obs_dim + self.agents.prev_width
        self.check_memory(SequenceReplayBuffer.bytes_for(width, act_dim, 1, self.agents.gaussian_behaviour,
                                                         self.agents.behaviour_width,
                                                         self.agents.encoder.state_size), capacity)
        return SequenceReplayBuffer(width, act_dim, capacity, w,
                                    self.device,
                                    seq_len=self.agents.seq_len, state_size=self.agents.encoder.state_size,
                                    groups=self.scheme.groups, gaussian_behaviour=self.agents.gaussian_behaviour,
                                    behaviour_width=self.agents.behaviour_width, prioritized=prioritized)

    def accumulate(self, own: torch.Tensor, info: dict) -> None:
        """The period's sums, and the prediction model's loss (``--use_prediction``)."""
        super().accumulate(own, info)
        if "prediction_loss" in info:
            if not hasattr(self, "prediction_sum"):
                self.prediction_sum = torch.zeros(self.members, dtype=torch.float64, device=self.device)
            self.prediction_sum += info["prediction_loss"].double()

    def period_stats(self) -> dict[str, np.ndarray]:
        """``Learner.period_stats`` and, with a prediction model, its mean loss over the period's updates."""
        updates = self.stats[STATS.index("updates")].cpu().numpy().copy()
        stats = super().period_stats()
        if hasattr(self, "prediction_sum"):
            with np.errstate(invalid="ignore", divide="ignore"):
                stats["prediction_loss"] = self.prediction_sum.cpu().numpy() / updates
            self.prediction_sum.zero_()
        return stats

    def act(self, obs: np.ndarray, warmup: bool):
        """Every member's encoder steps (the warm-up too); exploration actions from its features (None: random)."""
        self.stored = self.agents.acting.clone()
        features = self.agents.observe(self.agents._obs(self.coding.with_prev(obs, self.prev)))
        if warmup:
            return None, None
        with self.agents.acting_noise():
            action, behaviour = self.agents.explore_device(features)
        return action.cpu().numpy(), None if behaviour is None else tuple(b.cpu().numpy() for b in behaviour)

    def explore(self, obs: np.ndarray):
        return self.act(obs, False)

    def store(self, obs, actions, rewards, next_obs, terminated, behaviour=None, ended=None) -> None:
        ended = np.asarray(terminated if ended is None else ended, dtype=bool).reshape(-1)
        if self.agents.prev_width:
            taken = self.coding.encode(actions)
            obs, next_obs = self.coding.with_prev(obs, self.prev), self.coding.with_prev(next_obs, taken)
            self.prev = taken * (1.0 - ended.astype(np.float32))[:, None]
        if self.stored is None:  # act() keeps the states it acted from
            raise RuntimeError("store before act: no acting state to store")
        self.buffer.add(obs, actions, rewards, next_obs, terminated, behaviour, ended, state=self.stored,
                        first=self.first)
        self.first = ended.astype(np.float32)
        self.agents.episodes_ended(torch.as_tensor(ended, device=self.device))

    @torch.no_grad()
    def snapshot(self, t: int = 0):
        """The encoders and actors as they are now, as a stateful policy: an evaluation's episodes all start
        together from a zero state (one state per block of episodes, ``part``, for evaluations on several tasks)."""
        agents = copy.deepcopy(self.agents.encoder), copy.deepcopy(self.agents.actor)
        encoder, actor = agents
        states: dict[int, torch.Tensor] = {}
        prevs: dict[int, torch.Tensor] = {}  # --prev_action: the last actions, as the encoder reads them
        device, width, discrete = self.device, self.agents.prev_width, self.agents.low is None
        if width and not discrete:
            mid, half = self.agents.low + self.agents.scale, self.agents.scale

        @torch.no_grad()
        def policy(obs: np.ndarray, part: int = 0) -> np.ndarray:
            x = torch.as_tensor(obs, dtype=torch.float32, device=device)
            state = states.get(part)
            if state is None:
                state = encoder.initial_state(x.shape[1])
                prevs[part] = torch.zeros(*x.shape[:2], width, dtype=x.dtype, device=device)  # nothing done yet
            if width:
                x = torch.cat([x, prevs[part]], dim=-1)
            features, states[part] = encoder.step(x, state)
            action = actor(features)
            if width:
                prevs[part] = torch.nn.functional.one_hot(action.long(), width).to(x.dtype) if discrete \
                    else (action - mid) / half
            return action.cpu().numpy()
        policy.stateful = True  # type: ignore[attr-defined]  # Evaluation reads it: one state per task block
        return policy

    def state_dict(self, seed_index: int) -> dict:
        rows = slice(seed_index * self.agents_per_seed, (seed_index + 1) * self.agents_per_seed)
        state = {**super().state_dict(seed_index), "acting_state": self.agents.acting[rows].cpu().clone(),
                 "first": torch.from_numpy(self.first[rows].copy())}
        if self.agents.prev_width:
            state["prev_action"] = torch.from_numpy(self.prev[rows].copy())
        return state

    def load_state_dicts(self, states: list[dict]) -> None:
        super().load_state_dicts(states)
        self.agents.acting.copy_(torch.cat([s["acting_state"] for s in states]).to(self.device))
        self.first = torch.cat([s["first"] for s in states]).numpy().astype(np.float32)
        if self.agents.prev_width:
            self.prev = torch.cat([s["prev_action"] for s in states]).numpy().astype(np.float32)
