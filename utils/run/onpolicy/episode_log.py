"""The training episodes of the actor-critic family, as Diff-DAC's reference reports them.

Per member and environment the running return and length of its training episode; a finished one becomes a row
(environment index, the agent's step count at its end, return, length, wall seconds since the run began) of that
agent's ``{curve}_episodes.csv``. The rows and the running sums live in checkpoints, so a resumed run writes the
rows of an uninterrupted one (the wall clock goes on from the checkpoint's). An episode here is a whole game at its
own score: the loop passes the environments' ``last_game`` (an Atari game's unclipped rewards and its game over, all
its lives; the learner's rewards and episode ends elsewhere). A checkpoint from before whole-game rows (its log
state has no ``games``) resumes logging what its rows are, the learner's episodes (on Atari a life, its rewards
clipped), so one file never mixes lives and games.
"""
from __future__ import annotations

import time

import numpy as np

COLUMNS = ("env", "step", "return", "length", "wall_s")


class EpisodeLog:
    def __init__(self, members: int, per_member: int):
        self.members, self.per_member = members, per_member
        self.returns = np.zeros(members * per_member)
        self.lengths = np.zeros(members * per_member, dtype=np.int64)
        self.rows: list[list[tuple]] = [[] for _ in range(members)]
        self.started, self.wall_before = time.monotonic(), 0.0
        self.games = True  # rows are whole games at their own score; False: the learner's episodes (older runs)

    def wall(self) -> float:
        return self.wall_before + time.monotonic() - self.started

    def observe(self, rewards, ended, step: int) -> None:
        """One step of every environment (flat, member-major); ``step``: each agent's step count after it."""
        self.returns += np.asarray(rewards, dtype=np.float64).reshape(-1)
        self.lengths += 1
        done = np.flatnonzero(np.asarray(ended, dtype=bool).reshape(-1))
        if done.size:
            wall = round(self.wall(), 3)
            for i in done:
                m, j = divmod(int(i), self.per_member)
                self.rows[m].append((j, int(step), float(self.returns[i]), int(self.lengths[i]), wall))
            self.returns[done], self.lengths[done] = 0.0, 0

    def csv(self, member: int) -> str:
        lines = [",".join(COLUMNS)]
        lines += [f"{j},{step},{ret!r},{length},{wall:.3f}" for j, step, ret, length, wall in self.rows[member]]
        return "\n".join(lines) + "\n"

    def state_dict(self, rows: slice) -> dict:
        envs = slice(rows.start * self.per_member, rows.stop * self.per_member)
        return {"returns": self.returns[envs].tolist(), "lengths": self.lengths[envs].tolist(),
                "rows": [[list(r) for r in self.rows[m]] for m in range(rows.start, rows.stop)], "wall": self.wall(),
                "games": self.games}

    def load_state_dicts(self, states: list[dict | None]) -> None:
        """One state per seed, in seed order (a checkpoint without one, from before the log: nothing logged); a
        state without ``games`` predates whole-game rows: the run goes on logging the learner's episodes."""
        k = self.members // len(states) if states else 0
        self.games = all(state.get("games", False) for state in states if state)
        for s, state in enumerate(states):
            if not state:
                continue
            envs = slice(s * k * self.per_member, (s + 1) * k * self.per_member)
            self.returns[envs] = state["returns"]
            self.lengths[envs] = state["lengths"]
            for i, rows in enumerate(state["rows"]):
                self.rows[s * k + i] = [(int(j), int(st), float(r), int(n), float(w)) for j, st, r, n, w in rows]
        self.started, self.wall_before = time.monotonic(), max((st["wall"] for st in states if st), default=0.0)
