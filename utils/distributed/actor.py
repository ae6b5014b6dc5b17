"""An actor of a distributed run: one environment per agent of its learner's group, stepped with a copy of the
group's policies, and the transitions sent to the learner in blocks.

Before each block the actor asks its learner for parameters newer than its own (the learner publishes them every
``--refresh_every`` updates) and takes them; random actions while the learner is in its warm-up. Actor k of K
explores at its own level, as ASAC's actors do: SAC adds Gaussian noise of std ``noise * k / (K - 1)`` before the
tanh (``--action_noise``'s rule), TD3 and DDPG that much on top of ``--expl_noise``, discrete SAC takes a random
action with that probability. A restarted actor (Ray restarts one that dies) starts new episodes. On pixel and
sensor tasks the actor holds the image agents' encoders (fetched with the policies) and sends whole observations,
frame stacks included; the learner keeps each frame once and the older frames of a block's first stack as its head
(``ImageReplayBuffer``'s starts).

With prioritized replay the actor also computes each transition's initial priority, as Ape-X's actors do: the
learner publishes all its networks (online, target, SAC's temperature), and the actor evaluates |TD error| of every
step of its block under every agent of its group (``td_errors``), with the N-step return the learner will read
(summed up to N steps of the same environment, cut where an episode ended and at the block's end, which the learner
stores as a cut). Until the learner's warm-up ends the actor sends none (the learner's largest priority then).
"""
from __future__ import annotations

import numpy as np
import torch

from algorithms.replay.base import Batch


def actor_level(k: int, actors: int, noise: float) -> float:
    """Actor k's extra exploration level among ``actors``: 0 for the first, ``noise`` for the last."""
    return 0.0 if actors < 2 else noise * k / (actors - 1)


class EnvActor:
    """Ray actor: steps its environments with its learner's policies (see the module's docstring)."""

    def __init__(self, cfg, index: int, actors: int, noise: float, block: int, seed: int):
        from utils.envs.registry import make_env, sensor_layout
        from utils.naming import ALGORITHM
        from utils.run.setup import member_tasks

        torch.set_num_threads(1)
        # the learner's rounding (a Ray worker is a process of its own, with the CPU's default otherwise)
        torch.set_flush_denormal(bool(cfg.flush_denormals))
        self.index, self.block = int(index), int(block)
        spec = ALGORITHM[cfg.algorithm]
        member_seeds = cfg.agent_seeds()
        tasks = member_tasks(cfg, member_seeds)[0]
        self.envs = [make_env(cfg.env, task, actions=spec.actions, who=cfg.algorithm) for task in tasks]
        probe = self.envs[0]
        discrete = not hasattr(probe.action_space, "low")
        act_dim = int(probe.action_space.n) if discrete else int(probe.action_space.shape[0])
        low, high = (None, None) if discrete else (probe.action_space.low, probe.action_space.high)
        # what the learner keeps to itself: the intrinsic models (they shape its updates only), the noise spread
        learner_only = ("action_noise", "normalize_obs", "curiosity", "curiosity_strength", "rnd", "rnd_strength",
                        "rnd_n_sample")
        algo = {k: v for k, v in cfg.algo.items() if k not in learner_only}
        typed = cfg.algo_settings()
        self.recurrent = bool(typed.sequence.seq_encoder)
        parts = sensor_layout(cfg.env)  # pixel and sensor tasks: the image agents' encoders act
        obs_dim = int(probe.observation_space.shape[0])
        if self.recurrent:  # --seq_encoder: the agents' recurrent form, acting as RecurrentLearner acts
            cls = spec.form("recurrent", discrete)
        elif parts is not None:
            cls, obs_dim = spec.form("image", discrete), parts
            # the auxiliary loss shapes the learner's updates only
            algo = {k: v for k, v in algo.items() if k not in ("siamese", "siamese_use_q")}
        else:
            cls = spec.form("learner", discrete)
        self.agents = cls(obs_dim, act_dim, low, high, member_seeds, "cpu", **algo)
        if self.recurrent:
            from utils.run.replay.recurrent import PrevAction

            n = len(member_seeds)
            self.first = np.ones(n, dtype=np.float32)  # every member's next step starts an episode
            self.prev = np.zeros((n, self.agents.prev_width), dtype=np.float32)  # --prev_action
            self.coding = PrevAction(self.agents, n)
        self.normalizer = None  # --normalize_obs: the learner's statistics, fetched with its parameters
        if typed.own.normalize_obs:
            from algorithms.common.normalizer import ObsNormalizer

            self.normalizer = ObsNormalizer(len(member_seeds), obs_dim, "cpu")
        level = actor_level(index, actors, noise)
        if cfg.algorithm in ("TD3", "DDPG"):
            level += typed.own.expl_noise
        if level > 0 or cfg.algorithm in ("TD3", "DDPG"):
            self.agents.set_action_noise([level] * len(member_seeds))
        self.prioritized, self.n_step = bool(cfg.per), int(cfg.n_step)
        self.gamma = typed.discount
        self.rng = np.random.default_rng([int(seed), self.index])
        for env in self.envs:
            env.action_space.seed(int(self.rng.integers(2 ** 31)))
        self.obs = np.stack([env.reset(seed=int(self.rng.integers(2 ** 31)))[0] for env in self.envs])
        self.version, self.warmup, self.steps = -1, True, 0

    def refresh(self, learner) -> bool:
        """Newer parameters from the learner, if any; False once the learner is done."""
        import ray

        latest = ray.get(learner.latest.remote(self.version))
        if latest is None:
            return True
        if latest["done"]:
            return False
        if "encoder" in latest:  # --seq_encoder: the encoder acts too
            self.agents.encoder.load_state_dict(latest["encoder"])
        if "networks" in latest:  # prioritized replay: every network, for the TD errors
            for name, net in self.agents.networks.items():
                net.load_state_dict(latest["networks"][name])
        else:
            self.agents.actor.load_state_dict(latest["actor"])
        if self.normalizer is not None:
            self.normalizer.load_state_dict(latest["obs_normalizer"])
        self.version, self.warmup = latest["version"], latest["warmup"]
        return True

    def collect(self) -> dict:
        """``block`` steps of every environment, as arrays [S, N, ...]."""
        keys = ("obs", "actions", "rewards", "next_obs", "terminated", "ended")
        out = {k: [] for k in keys + (("state", "first") if self.recurrent else ())}
        behaviour = []
        for _ in range(self.block):
            if self.recurrent:
                actions, beh = self.recurrent_act()
            elif self.warmup:
                actions, beh = np.stack([env.action_space.sample() for env in self.envs]), None
            else:
                actions, beh = self.agents.explore(self.normalised(self.obs))
            next_obs, rewards, terminated, ended = [], [], [], []
            for env, a in zip(self.envs, actions):
                o, r, term, trunc, _ = env.step(a)
                next_obs.append(o), rewards.append(r), terminated.append(term), ended.append(term or trunc)
            next_obs = np.stack(next_obs)
            stored_obs, stored_next = self.obs, next_obs
            if self.recurrent:
                stored_obs, stored_next = self.recurrent_stored(actions, next_obs, np.asarray(ended, dtype=bool))
                out["state"].append(self.stored.numpy())
                out["first"].append(self.first_now)
            for k, v in zip(keys, (stored_obs, actions, rewards, stored_next, terminated, ended)):
                out[k].append(np.asarray(v))
            behaviour.append(beh)
            self.obs = np.stack([env.reset(seed=int(self.rng.integers(2 ** 31)))[0] if e else o
                                 for env, e, o in zip(self.envs, ended, next_obs)])
        block = {k: np.stack(v) for k, v in out.items()}
        block["behaviour"] = None if any(b is None for b in behaviour) else tuple(np.stack(x) for x in zip(*behaviour))
        block.update(version=self.version, actor=self.index)
        if self.prioritized and not self.warmup and not self.recurrent:  # windows: the learner's largest priority
            block["td_errors"] = self.td_errors(block)
        self.steps += self.block
        return block

    # ---- --seq_encoder: acting with a state, as RecurrentLearner acts ---------------------------------------
    def recurrent_act(self):
        """Every member's encoder steps on [o, a_prev] (the warm-up's random steps too); the state before it is kept
        for the learner (R2D2's stored state)."""
        self.stored = self.agents.acting.clone()
        x = self.coding.with_prev(self.obs, self.prev)
        features = self.agents.observe(self.agents._obs(x))
        if self.warmup:
            return np.stack([env.action_space.sample() for env in self.envs]), None
        with self.agents.acting_noise():
            action, behaviour = self.agents.explore_device(features)
        return action.numpy(), None if behaviour is None else tuple(b.numpy() for b in behaviour)

    def recurrent_stored(self, actions, next_obs, ended):
        """The step's observations as the learner stores them ([o, a_prev], [o', a]); the acting state zeroed and
        the previous action cleared where an episode ended; whether this step started an episode."""
        obs, stored_next = self.coding.with_prev(self.obs, self.prev), next_obs
        if self.coding.width:
            taken = self.coding.encode(actions)
            stored_next = self.coding.with_prev(next_obs, taken)
            self.prev = taken * (1.0 - ended.astype(np.float32))[:, None]
        self.first_now, self.first = self.first.copy(), ended.astype(np.float32)
        self.agents.episodes_ended(torch.as_tensor(ended))
        return obs, stored_next

    def normalised(self, obs):
        """Observations as the learner's networks read them (--normalize_obs: its statistics as last fetched)."""
        if self.normalizer is None:
            return obs
        return self.normalizer(torch.as_tensor(np.asarray(obs), dtype=torch.float32).unsqueeze(1)).squeeze(1)

    def run(self, learner, queue) -> int:
        """Blocks to the learner until it is done; the steps taken."""
        while self.refresh(learner):
            queue.put(self.collect())
        return self.steps

    def td_errors(self, block: dict) -> np.ndarray:
        """|TD error| [S, N members, N writers] of every step of ``block`` under every agent of the group."""
        reward, discount, next_obs, not_done = n_step_targets(block, self.n_step, self.gamma)
        s, n = reward.shape
        every = lambda x: torch.as_tensor(x, dtype=torch.float32).reshape(1, s * n, *x.shape[2:]).expand(  # noqa
            len(self.agents.seeds), -1, *x.shape[2:])
        actions = np.asarray(block["actions"], dtype=np.float32)
        obs, next_obs = every(block["obs"]), every(next_obs)
        if self.normalizer is not None:
            obs, next_obs = self.normalizer(obs), self.normalizer(next_obs)
        batch = Batch(obs=obs, action=every(actions.reshape(s, n, -1)),
                      reward=every(reward[..., None]), next_obs=next_obs, not_done=every(not_done[..., None]),
                      own=torch.zeros((len(self.agents.seeds), s * n), dtype=torch.bool),
                      discount=every(discount[..., None]) if self.n_step > 1 else None)
        return self.agents.td_errors(batch).reshape(-1, s, n).permute(1, 0, 2).numpy()


def n_step_targets(block: dict, n_step: int, gamma: float):
    """Per step s and writer w of a block [S, N]: the N-step reward sum_{k<=j} gamma^k r_{s+k}, its discount
    gamma^(j+1), the next state and not_done of step s + j, where j < n_step stops at the first step that ended
    its episode or at the block's last step (``utils.run.replay.buffer``'s rule, with the block's end as a cut)."""
    r = np.asarray(block["rewards"], dtype=np.float64)
    ended = np.asarray(block["ended"], dtype=bool).copy()
    ended[-1] = True
    s_len = r.shape[0]
    reward, discount = r.copy(), np.full(r.shape, gamma)
    last = np.arange(s_len)[:, None].repeat(r.shape[1], axis=1)  # s + j
    cols = np.arange(r.shape[1])
    open_ = ~ended  # still summing
    for k in range(1, n_step):
        nxt = np.minimum(last + 1, s_len - 1)
        step = open_ & (last + 1 < s_len)
        reward = np.where(step, reward + gamma ** k * r[nxt, cols], reward)
        discount = np.where(step, discount * gamma, discount)
        last = np.where(step, nxt, last)
        open_ = step & ~ended[last, cols]
    next_obs = np.asarray(block["next_obs"])[last, cols]
    not_done = 1.0 - np.asarray(block["terminated"], dtype=np.float64)[last, cols]
    return reward.astype(np.float32), discount.astype(np.float32), next_obs, not_done.astype(np.float32)
