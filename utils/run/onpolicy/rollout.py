"""The on-policy learner: every member acts in its own K environments (``--envs_per_agent``), collects n steps of
them (``--n_steps``), and all members then take one batched update (A2C; DIFF_A2C then averages parameters with
its graph neighbours, Diff-DAC's Diff-A2C).

It speaks the loop's learner protocol (``utils.run.protocol``), as the off-policy ``Learner`` does: the loop asks
for actions, hands back what the environments did, and says ``train(t)`` after every step; the learner decides
when a rollout is complete and updates then.
"""
from __future__ import annotations

import copy

import numpy as np
import torch

from algorithms.common.nets import AgentRNG
from algorithms.onpolicy.acer_continuous import CONTINUOUS_DEFAULTS
from algorithms.onpolicy.seac import SEAC

from ...errors import UsageError
from ...naming import ALGORITHM
from ..config import AlgoSettings
from ..protocol import members_broken
from ..sharing import Scheme, SharingSettings, independent


def check_action_flags(algorithm: str, algo: dict, discrete: bool) -> None:
    """A UsageError for a setting that does not apply to the action space (``discrete``): continuous ACER's on a
    discrete one or with another algorithm, discrete ACER's on a Box."""
    own = AlgoSettings.of(algorithm, algo).own
    if algorithm == "ACER" and not discrete:
        if own.trust_region_entropy:
            raise UsageError("--trust_region_entropy applies to discrete ACER (the fixed-covariance Gaussian's "
                             "entropy does not depend on its mean); drop it")
        if own.prob_eps:
            raise UsageError("--prob_eps applies to discrete ACER (the Gaussian's importance weights are ratios "
                             "of densities, not of probabilities); drop it")
    elif any(key in algo for key in CONTINUOUS_DEFAULTS):
        raise UsageError(f"--{next(key for key in CONTINUOUS_DEFAULTS if key in algo)} applies to ACER on a Box "
                         "action space; drop it")


class RolloutLearner:
    """S seeds x N agents of an on-policy algorithm, K environments each, updated every n steps."""

    def __init__(self, algorithm: str, algo: dict, member_seeds: list[int], num_agents: int, envs,
                 device: torch.device, sharing: SharingSettings | None = None, common_init: bool = False,
                 eval_sample: bool = False):
        algo = dict(algo)
        self.member_seeds, self.eval_sample = list(member_seeds), eval_sample  # --eval_policy sample
        self.n_steps, self.per_member = int(algo.pop("n_steps")), int(algo.pop("envs_per_agent"))
        self.reward_scale = float(algo.pop("reward_scale", 1.0))  # what learning sees: r * scale (curves: raw r)
        self.steps_per_iteration = self.per_member  # environment steps per member and loop step
        self.agents_per_seed, self.members, self.device = num_agents, len(member_seeds), device
        self.obs_shape, self.discrete = tuple(envs.obs_shape), envs.discrete
        check_action_flags(algorithm, algo, envs.discrete)
        cls = ALGORITHM[algorithm].form("learner", envs.discrete)  # the registry: ACER on a Box is continuous ACER
        if getattr(cls, "REPLAY", False):
            algo["rollout"] = (self.n_steps, self.per_member)
        self.agents = cls(self.obs_shape, envs.act_dim, envs.low, envs.high, member_seeds, device, envs.discrete,
                          **algo)
        if common_init:  # before anything (the sharing scheme, the evaluation copy) reads the parameters
            self.agents.start_equal(num_agents)
        sharing = sharing or independent(num_agents)
        self.scheme = Scheme(sharing, self.agents, member_seeds, device)
        if isinstance(self.agents, SEAC):  # who learns from whose rollouts: the seed's graph (complete by default)
            self.agents.share(num_agents, sharing.graph())
        self.eval_model = copy.deepcopy(self.agents.model).requires_grad_(False)
        m, t, k = self.members, self.n_steps, self.per_member
        obs_dtype = torch.uint8 if len(self.obs_shape) > 1 else torch.float32
        act_shape = () if envs.discrete else (envs.act_dim,)
        self.rollout = {"obs": torch.zeros((m, t, k, *self.obs_shape), dtype=obs_dtype, device=device),
                        "next_obs": torch.zeros((m, t, k, *self.obs_shape), dtype=obs_dtype, device=device),
                        "actions": torch.zeros((m, t, k, *act_shape), dtype=torch.int64 if envs.discrete else
                                               torch.float32, device=device),
                        **{key: torch.zeros((m, t, k), device=device) for key in ("rewards", "terminated", "ended")}}
        if self.agents.behaviour_width:  # ACER: the behaviour policy's probabilities, for importance weights
            self.rollout["mu"] = torch.zeros((m, t, k, self.agents.behaviour_width), device=device)
        if self.agents.recurrent:  # --recurrent: the acting state each rollout began with, for its update
            h, c = self.agents.acting_state(k)
            self.rollout["h0"], self.rollout["c0"] = torch.zeros_like(h), torch.zeros_like(c)
        self.position = 0  # steps of the current rollout collected so far
        self.pending: torch.Tensor | None = None  # the actions drawn for the step being taken (unclipped)
        names = self.agents.STATS
        self.stat_names = names
        self.stats = torch.zeros((len(names) + 1, m), dtype=torch.float64, device=device)  # sums, then updates
        self.first_bad = torch.full((m,), -1, dtype=torch.long, device=device)

    # ---- the protocol ---------------------------------------------------------------------------------
    def act(self, obs: np.ndarray, warmup: bool) -> tuple[np.ndarray | None, None]:
        """Actions for the environments' current observations [M * K, ...] (None: random, in the warm-up)."""
        if warmup:
            return None, None
        obs_t = self.agents._obs(obs).view(self.members, self.per_member, *self.obs_shape)
        if self.agents.recurrent and self.position == 0:
            h, c = self.agents.acting_state(self.per_member)
            self.rollout["h0"].copy_(h)
            self.rollout["c0"].copy_(c)
        self.pending, self.behaviour = self.agents.sample(obs_t)
        actions = self.agents.env_actions(self.pending)
        return actions.reshape(self.members * self.per_member, *actions.shape[2:]).cpu().numpy(), None

    def store(self, obs, actions, rewards, next_obs, terminated, behaviour=None, ended=None) -> None:
        """One step of every environment into the rollout (warm-up steps, taken at random, are not kept)."""
        if self.pending is None:
            return
        m, k, i = self.members, self.per_member, self.position
        view = lambda x, dtype: torch.as_tensor(np.asarray(x), device=self.device).to(dtype).view(m, k, *self.rollout_shape(x))  # noqa: E731
        r = self.rollout
        r["obs"][:, i] = view(obs, r["obs"].dtype)
        r["next_obs"][:, i] = view(next_obs, r["next_obs"].dtype)
        r["actions"][:, i] = self.pending
        # the three per-environment scalars cross to torch as one float32 array (float64 rewards round as .to does)
        scalars = np.stack((np.asarray(rewards, dtype=np.float32), np.asarray(terminated, dtype=np.float32),
                            np.asarray(ended, dtype=np.float32)))
        rewards_t, terminated_t, ended_t = torch.from_numpy(scalars).to(self.device).view(3, m, k)
        r["rewards"][:, i] = rewards_t
        if self.reward_scale != 1.0:
            r["rewards"][:, i] *= self.reward_scale
        r["terminated"][:, i] = terminated_t
        r["ended"][:, i] = ended_t
        if "mu" in r:
            r["mu"][:, i] = self.behaviour
        self.agents.episodes_ended(r["ended"][:, i])  # --recurrent: a new episode starts from a zero state
        self.position += 1
        self.pending = None

    def rollout_shape(self, x) -> tuple[int, ...]:
        return tuple(np.shape(x)[1:])

    def train(self, t: int) -> None:
        """Update every member once its rollout is complete (every n steps); then diffusion, if any."""
        if self.position < self.n_steps:
            return
        self.position = 0
        info = self.agents.update(self.rollout)
        finite = torch.isfinite(info["loss"])
        self.stats += torch.stack([*(info[name] for name in self.stat_names), torch.ones_like(info["loss"])]).double()
        finite = self.scheme.after_update(None, finite)
        self.first_bad.copy_(torch.where((self.first_bad < 0) & ~finite, torch.full_like(self.first_bad, t),
                                         self.first_bad))

    @torch.no_grad()
    def snapshot(self, t: int = 0):
        """The policies as they are now, for the evaluation at step ``t``: obs [M, E, ...] -> actions [M, E(, A)],
        greedy, or with --eval_policy sample drawn from each member's stream of its seed and ``t`` (the same
        draws whether its seed runs alone or batched, paused or not)."""
        torch._foreach_copy_(list(self.eval_model.parameters()), list(self.agents.model.parameters()))
        model, agents = self.eval_model, self.agents
        rng = AgentRNG([eval_stream(s, t) for s in self.member_seeds], self.device) if self.eval_sample else None
        if agents.recurrent:
            return recurrent_policy(agents, model, rng)

        def policy(obs: np.ndarray) -> np.ndarray:
            return agents.eval_actions(model, agents._obs(obs), rng=rng).cpu().numpy()
        return policy

    @torch.no_grad()
    def greedy_actions(self, obs: np.ndarray) -> torch.Tensor:
        """Every member's current policy at its mode (no draw), [M, E, ...] -> actions, as ``snapshot`` evaluates
        without --eval_policy sample; a recurrent policy acts from its state, which one call does not carry."""
        if self.agents.recurrent:
            raise UsageError("--recurrent: a recurrent policy has no greedy action without its state")
        return self.agents.eval_actions(self.agents.model, self.agents._obs(obs))

    def period_stats(self) -> dict[str, np.ndarray]:
        """Per member, the mean of each statistic the algorithm declares over the updates since the last call
        (NaN where there were none); 'weight' is NaN (nothing is shared by weight)."""
        s = self.stats.cpu().numpy().copy()
        self.stats.zero_()
        with np.errstate(invalid="ignore", divide="ignore"):
            out = {name: s[j] / s[-1] for j, name in enumerate(self.stat_names)}
        out["weight"] = np.full(self.members, np.nan)
        return out

    def broken(self) -> list[tuple[int, str]]:
        return members_broken(self.first_bad, self.agents.model.parameters())

    def non_finite_hint(self) -> str | None:
        """The algorithm's advice for the stop message when a loss went non-finite (None: the general one)."""
        hint = getattr(self.agents, "non_finite_hint", None)
        return hint() if hint is not None else None

    # ---- checkpoints ------------------------------------------------------------------------------------
    def state_dict(self, seed_index: int) -> dict:
        """One seed's agents, its part of the rollout being collected, and the period's sums."""
        rows = slice(seed_index * self.agents_per_seed, (seed_index + 1) * self.agents_per_seed)
        acting = {"acting_state": [x[rows].cpu().clone() for x in self.agents.acting_state(self.per_member)]} \
            if self.agents.recurrent else {}
        return {"agents": self.agents.state_dict(rows), "period_stats": self.stats[:, rows].cpu().clone(), **acting,
                "rollout": {k: v[rows].cpu().clone() for k, v in self.rollout.items()},
                "rollout_position": self.position, **self.scheme.state_dict(rows),
                **({"replay": self.agents.replay_state(rows)} if hasattr(self.agents, "replay_state") else {})}

    def load_state_dicts(self, states: list[dict]) -> None:
        self.agents.load_state_dict([s["agents"] for s in states])
        self.stats.copy_(torch.cat([s["period_stats"] for s in states], dim=1))
        for key, value in self.rollout.items():
            value.copy_(torch.cat([s["rollout"][key] for s in states]).to(self.device))
        self.position = int(states[0]["rollout_position"])
        if self.agents.recurrent:
            self.agents.state = tuple(torch.cat([s["acting_state"][j] for s in states]).to(self.device)
                                      for j in range(2))
        if hasattr(self.agents, "replay_state"):
            self.agents.load_replay_state([s["replay"] for s in states])
        self.scheme.load_state_dicts(states)


EVAL_STREAM = 0x6576616C  # "eval": keeps the evaluation streams apart from every other stream of a seed


def eval_stream(seed: int, t: int) -> int:
    """The seed of member ``seed``'s evaluation actions at step ``t`` (--eval_policy sample)."""
    return int(np.random.SeedSequence([int(seed), int(t), EVAL_STREAM]).generate_state(1)[0])


def recurrent_policy(agents, model, rng=None):
    """A recurrent model's evaluation policy (greedy, or drawing from ``rng``): obs [M, E, ...] -> actions
    [M, E(, A)], each call
    one step of the episodes of ``part`` (an evaluation on several tasks calls it once per task and step), every
    part's state starting at zero (an evaluation's episodes all start together and each column holds one)."""
    states: dict[int, tuple] = {}

    def policy(obs: np.ndarray, part: int = 0) -> np.ndarray:
        obs_t = agents._obs(obs)
        state = states.get(part)
        if state is None:
            state = model.initial_state(obs_t.shape[1])
        actions, states[part] = agents.eval_actions(model, obs_t, state, rng)
        return actions.cpu().numpy()
    policy.stateful = True  # type: ignore[attr-defined]  # Evaluation reads it
    return policy
