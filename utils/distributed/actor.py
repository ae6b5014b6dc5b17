"""An actor of a distributed run: one environment per agent of its learner's group, stepped with a copy of the
group's policies, and the transitions sent to the learner in blocks.

Before each block the actor asks its learner for parameters newer than its own (the learner publishes them every
``--refresh_every`` updates) and takes them; random actions while the learner is in its warm-up. Actor k of K
explores at its own level, as ASAC's actors do: SAC adds Gaussian noise of std ``noise * k / (K - 1)`` before the
tanh (``--action_noise``'s rule), TD3 and DDPG that much on top of ``--expl_noise``, discrete SAC takes a random
action with that probability. A restarted actor (Ray restarts one that dies) starts new episodes.
"""
from __future__ import annotations

import numpy as np
import torch


def actor_level(k: int, actors: int, noise: float) -> float:
    """Actor k's extra exploration level among ``actors``: 0 for the first, ``noise`` for the last."""
    return 0.0 if actors < 2 else noise * k / (actors - 1)


class EnvActor:
    """Ray actor: steps its environments with its learner's policies (see the module's docstring)."""

    def __init__(self, cfg, index: int, actors: int, noise: float, block: int, seed: int):
        from utils.envs.registry import make_env
        from utils.naming import ALGORITHM
        from utils.run.replay.learner import ALGORITHMS, DISCRETE
        from utils.run.setup import member_tasks

        torch.set_num_threads(1)
        self.index, self.block = int(index), int(block)
        spec = ALGORITHM[cfg.algorithm]
        member_seeds = cfg.agent_seeds()
        tasks = member_tasks(cfg, member_seeds)[0]
        self.envs = [make_env(cfg.env, task, actions=spec.actions, who=cfg.algorithm) for task in tasks]
        probe = self.envs[0]
        discrete = not hasattr(probe.action_space, "low")
        act_dim = int(probe.action_space.n) if discrete else int(probe.action_space.shape[0])
        low, high = (None, None) if discrete else (probe.action_space.low, probe.action_space.high)
        algo = {k: v for k, v in cfg.algo.items() if k not in ("action_noise",)}
        cls = (DISCRETE if discrete else ALGORITHMS)[cfg.algorithm]
        self.agents = cls(int(probe.observation_space.shape[0]), act_dim, low, high, member_seeds, "cpu", **algo)
        level = actor_level(index, actors, noise)
        if cfg.algorithm in ("TD3", "DDPG"):
            level += float(cfg.algo.get("expl_noise", 0.1))
        if level > 0 or cfg.algorithm in ("TD3", "DDPG"):
            self.agents.set_action_noise([level] * len(member_seeds))
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
        self.agents.actor.load_state_dict(latest["actor"])
        self.version, self.warmup = latest["version"], latest["warmup"]
        return True

    def collect(self) -> dict:
        """``block`` steps of every environment, as arrays [S, N, ...]."""
        keys = ("obs", "actions", "rewards", "next_obs", "terminated", "ended")
        out = {k: [] for k in keys}
        behaviour = []
        for _ in range(self.block):
            if self.warmup:
                actions, beh = np.stack([env.action_space.sample() for env in self.envs]), None
            else:
                actions, beh = self.agents.explore(self.obs)
            next_obs, rewards, terminated, ended = [], [], [], []
            for env, a in zip(self.envs, actions):
                o, r, term, trunc, _ = env.step(a)
                next_obs.append(o), rewards.append(r), terminated.append(term), ended.append(term or trunc)
            next_obs = np.stack(next_obs)
            for k, v in zip(keys, (self.obs, actions, rewards, next_obs, terminated, ended)):
                out[k].append(np.asarray(v))
            behaviour.append(beh)
            self.obs = np.stack([env.reset(seed=int(self.rng.integers(2 ** 31)))[0] if e else o
                                 for env, e, o in zip(self.envs, ended, next_obs)])
        block = {k: np.stack(v) for k, v in out.items()}
        block["behaviour"] = None if any(b is None for b in behaviour) else tuple(np.stack(x) for x in zip(*behaviour))
        block.update(version=self.version, actor=self.index)
        self.steps += self.block
        return block

    def run(self, learner, queue) -> int:
        """Blocks to the learner until it is done; the steps taken."""
        while self.refresh(learner):
            queue.put(self.collect())
        return self.steps
