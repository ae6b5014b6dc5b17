"""The TD3 tutorial's protocol: one deterministic evaluation episode after every training episode, and "solved".

``--episode_eval``: when a member's training episode ends, its current actor plays one episode without noise on an
evaluation environment of its own; the row (episode number, the member's environment steps, return) goes to
``{curve}_episode_eval.npy``. Episode e of any agent of seed s is reset with the same seed (derived from s + 100,
the evaluation seed, and e), so the agents of a seed and the same seed in other runs play the same start states,
and a resumed run plays exactly what an uninterrupted one would: nothing of these environments outlives an episode.

``--solved_at R`` (window ``--solved_window`` W): a member is solved at the first episode after which the mean of its
last W episode returns exceeds R. ``--max_episodes E``: a member is done after its E-th training episode. A member
that is solved or done stops being evaluated; it keeps acting and learning while another agent of its seed is not
done yet (so the peers' shared data and updates do not change), and the seed's run ends at the step where its last
agent is done. The record of each agent (episode and step when solved) goes to the run's JSON.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..envs.registry import make_env

COLUMNS = ("episode", "step", "return")  # the columns of {curve}_episode_eval.npy


def episode_seed(seed: int, episode: int) -> int:
    """The reset seed of episode ``episode`` (1-based) of the evaluation that follows training episodes of the run
    seeded ``seed`` (the evaluation environments' seed + 100, as the periodic evaluations)."""
    return int(np.random.SeedSequence([int(seed) + 100, int(episode)]).generate_state(1)[0])


class EpisodeEvals:
    """Per member: training episodes so far, the evaluation rows, when it was solved and whether it is done.

    ``run_seeds[m]``: the run seed of member m (its agents share the episode seeds); ``tasks[m]``: its task variant
    (None: the environment as registered)."""

    def __init__(self, env_id: str, run_seeds: list[int], tasks: list, evaluate: bool, solved_at: float | None,
                 window: int, max_episodes: int | None, kinds: dict):
        self.run_seeds = [int(s) for s in run_seeds]
        self.evaluate, self.solved_at, self.window, self.max_episodes = evaluate, solved_at, window, max_episodes
        members = len(self.run_seeds)
        self.envs = [make_env(env_id, task, **kinds, training=False) for task in tasks] if evaluate else []
        self.episodes = [0] * members  # training episodes finished
        self.rows: list[list[list[float]]] = [[] for _ in range(members)]
        self.solved: list[dict | None] = [None] * members  # {"episode": e, "step": t} once solved
        self.done = [False] * members

    def after_step(self, ended: np.ndarray, steps: int, policy: Callable[[np.ndarray], np.ndarray]) -> list[int]:
        """Count the training episodes that ended at this step (``steps``: each member's environment steps now),
        evaluate those members, and return the members that became done."""
        ended_now = [int(m) for m in np.flatnonzero(ended) if not self.done[m]]
        if not ended_now:
            return []
        for m in ended_now:
            self.episodes[m] += 1
        if self.evaluate:
            for m, ret in zip(ended_now, self.play(ended_now, policy)):
                self.rows[m].append([float(self.episodes[m]), float(steps), float(ret)])
        newly = []
        for m in ended_now:
            last = [r[2] for r in self.rows[m][-self.window:]]
            if self.solved_at is not None and len(last) == self.window and float(np.mean(last)) > self.solved_at:
                self.solved[m] = {"episode": self.episodes[m], "step": int(steps)}
            if self.solved[m] is not None or (self.max_episodes is not None and self.episodes[m] >= self.max_episodes):
                self.done[m] = True
                newly.append(m)
        return newly

    def play(self, members: list[int], policy: Callable[[np.ndarray], np.ndarray]) -> list[float]:
        """One deterministic episode of each of ``members`` (their next episode seeds), in lockstep: one policy
        call per step for all members [M, 1, obs] (rows of other members are zeros and their actions unused)."""
        first = self.envs[members[0]]
        shape = tuple(first.observation_space.shape or ())
        obs = np.zeros((len(self.run_seeds), 1, *shape), first.observation_space.dtype)
        for m in members:
            obs[m, 0] = self.envs[m].reset(seed=episode_seed(self.run_seeds[m], self.episodes[m]))[0]
        returns = {m: 0.0 for m in members}
        active = list(members)
        while active:
            actions = policy(obs)
            still = []
            for m in active:
                o, r, terminated, truncated, _ = self.envs[m].step(actions[m, 0])
                obs[m, 0] = o
                returns[m] += float(r)
                if not (terminated or truncated):
                    still.append(m)
            active = still
        return [returns[m] for m in members]

    def record(self, rows: slice) -> dict:
        """What the run's JSON says of members ``rows``: when each was solved (or null) and its episodes so far."""
        return {"solved": self.solved[rows], "episodes": self.episodes[rows]}

    def arrays(self, rows: slice) -> list[np.ndarray]:
        """The evaluation rows of members ``rows`` as float64 arrays [episodes, 3]."""
        return [np.asarray(r, dtype=np.float64).reshape(len(r), len(COLUMNS)) for r in self.rows[rows]]

    def state_dict(self, rows: slice) -> dict:
        return {"episodes": self.episodes[rows], "rows": self.rows[rows], "solved": self.solved[rows],
                "done": self.done[rows]}

    def load_state_dicts(self, states: list[dict | None]) -> None:
        """Restore from one ``state_dict`` per seed (in seed order); a checkpoint without them starts empty."""
        if not all(states):
            return
        full = [s for s in states if s]  # every one: none is None past the check
        self.episodes = [int(x) for s in full for x in s["episodes"]]
        self.rows = [[list(map(float, row)) for row in r] for s in full for r in s["rows"]]
        self.solved = [x for s in full for x in s["solved"]]
        self.done = [bool(x) for s in full for x in s["done"]]

    def close(self) -> None:
        for env in self.envs:
            env.close()
