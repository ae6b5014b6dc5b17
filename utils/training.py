"""The one training loop behind both command lines: N agents, lockstep environments, one shared buffer."""
from __future__ import annotations

import json
import platform
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import torch

from algorithms import DDPG, SAC, TD3
from algorithms.base import stream_seed
from algorithms.nets import AgentRNG

from .buffer import SharedReplayBuffer
from .checkpoint import FORMAT as CHECKPOINT_FORMAT
from .checkpoint import (EpisodeRecord, RunLock, check_compatible, global_rng_state, read_checkpoint, restore_env,
                         set_global_rng_state)
from .envs import seeded_envs
from .errors import Interrupted, NonFinite, UsageError
from .evaluation import Evaluator
from .io import save_curve, save_json, save_torch

ALGORITHMS = {"DDPG": DDPG, "TD3": TD3, "SAC": SAC}
PROJECT_ROOT = Path(__file__).resolve().parent.parent


@dataclass
class RunConfig:
    """Everything a run needs; the command lines fill it from their flags."""

    policy: str  # TD3, DDPG, SAC, or DASE_ + one of them
    env: str  # a resolved Gymnasium id
    seed: int = 0
    num_agents: int = 1
    max_time_steps: int = 1_000_000
    start_time_steps: int = 25_000
    eval_freq: int = 1000
    eval_episodes: int = 10
    batch_size: int = 256
    buffer_size: int = 1_000_000
    updates_per_step: int = 1
    device: str = "cpu"
    results_dir: str = "Learning Curves"
    save_model: bool = False
    load_model: str = ""
    models_dir: str = "models"
    quiet: bool = False
    checkpoint_freq: int = 50_000  # 0: no checkpoints
    checkpoint_dir: str | None = None  # default: {results_dir}/checkpoints
    resume: bool = False
    threads: int | None = None  # torch CPU threads; None: torch's default (all cores)
    compile: bool = False  # torch.compile the networks
    overwrite: bool = False
    algo: dict = field(default_factory=dict)  # keyword arguments of the algorithm class
    flags: dict = field(default_factory=dict)  # the command line as parsed, for the record

    @property
    def algorithm(self) -> str:
        return self.policy.removeprefix("DASE_")

    @property
    def is_dase(self) -> bool:
        return self.policy.startswith("DASE_")

    @property
    def stem(self) -> str:
        return f"{self.policy}_{self.env}_{self.seed}"

    def agent_names(self) -> list[str]:
        """File stems per agent, as in the paper's data: {stem} or {stem}_Agent_{i}."""
        if not self.is_dase:
            return [self.stem]
        return [f"{self.stem}_Agent_{i}" for i in range(self.num_agents)]

    @property
    def checkpoint_path(self) -> Path:
        return Path(self.checkpoint_dir or Path(self.results_dir) / "checkpoints") / f"{self.stem}.pt"

    def agent_seeds(self) -> list[int]:
        return [self.seed + 100 * i for i in range(self.num_agents)]


def validate(cfg: RunConfig, names: dict[str, str] | None = None) -> None:
    """Reject impossible settings before anything is created or written.

    ``names`` maps RunConfig fields to the flag names of the calling command line.
    """
    flag = lambda field: "--" + (names or {}).get(field, field)  # noqa: E731
    if cfg.algorithm not in ALGORITHMS:
        raise UsageError(f"--policy: unknown policy {cfg.policy!r}")
    positive = {"num_agents": cfg.num_agents, "max_time_steps": cfg.max_time_steps, "eval_freq": cfg.eval_freq,
                "batch_size": cfg.batch_size, "buffer_size": cfg.buffer_size, "updates_per_step": cfg.updates_per_step,
                "eval_episodes": cfg.eval_episodes}
    for name, value in positive.items():
        if value <= 0:
            raise UsageError(f"{flag(name)} must be a positive integer, got {value}")
    if not cfg.is_dase and cfg.num_agents != 1:
        raise UsageError(f"--num_agents {cfg.num_agents}: {cfg.policy} is a single agent; use DASE_{cfg.policy} for several")
    if cfg.start_time_steps < 0:
        raise UsageError(f"{flag('start_time_steps')} must be >= 0, got {cfg.start_time_steps}")
    if cfg.eval_freq > cfg.max_time_steps:
        raise UsageError(f"--eval_freq {cfg.eval_freq} is larger than the run ({cfg.max_time_steps} steps): "
                         f"lower --eval_freq or raise {flag('max_time_steps')}")
    if cfg.threads is not None and cfg.threads <= 0:
        raise UsageError(f"--threads must be a positive integer, got {cfg.threads}")
    if cfg.checkpoint_freq < 0:
        raise UsageError(f"--checkpoint_freq must be >= 0 (0 disables checkpoints), got {cfg.checkpoint_freq}")
    if cfg.resume and cfg.overwrite:
        raise UsageError("--resume and --overwrite contradict each other: pick one")
    if cfg.buffer_size < cfg.num_agents:
        raise UsageError(f"--buffer_size {cfg.buffer_size} cannot hold one step of {cfg.num_agents} agents")
    if not 0 <= cfg.seed or cfg.seed + 100 * cfg.num_agents >= 2**32:
        raise UsageError(f"--seed {cfg.seed}: seeds must be in [0, 2**32 - {100 * cfg.num_agents})")
    folders = {"--results_dir": cfg.results_dir, "--checkpoint_dir": cfg.checkpoint_path.parent,
               "--models_dir": cfg.models_dir}
    for name, folder in folders.items():
        blocked = next((p for p in [Path(folder), *Path(folder).parents] if p.exists()), None)
        if blocked is not None and not blocked.is_dir():
            raise UsageError(f"{name} {folder}: {blocked} is a file, not a folder; pick another path")


def notices(cfg: RunConfig, names: dict[str, str] | None = None) -> list[str]:
    """Legal settings that are probably not what the user meant."""
    flag = lambda field: "--" + (names or {}).get(field, field)  # noqa: E731
    out = []
    if cfg.start_time_steps >= cfg.max_time_steps:
        out.append(f"note: {flag('start_time_steps')} {cfg.start_time_steps} >= {flag('max_time_steps')} "
                   f"{cfg.max_time_steps}: the whole run acts randomly and never trains")
    if cfg.max_time_steps % cfg.eval_freq:
        out.append(f"note: the last {cfg.max_time_steps % cfg.eval_freq} steps are not evaluated "
                   f"({flag('max_time_steps')} is not a multiple of --eval_freq {cfg.eval_freq})")
    return out


def software_versions() -> dict:
    import gymnasium

    versions = {"python": platform.python_version(), "torch": torch.__version__, "numpy": np.__version__,
                "gymnasium": gymnasium.__version__}
    for mod in ("mujoco", "Box2D"):
        try:
            versions[mod] = __import__(mod).__version__
        except Exception:
            versions[mod] = None
    return versions


def git_commit() -> str | None:
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=PROJECT_ROOT, capture_output=True, text=True, timeout=5)
        return out.stdout.strip() or None
    except Exception:
        return None


def load_models(agents, cfg: RunConfig) -> None:
    """--load_model NAME: agent i loads models/NAME[_Agent_i].pt ("default": the run's own names)."""
    for i, own in enumerate(cfg.agent_names()):
        if cfg.load_model == "default":
            candidates = [own]
        else:
            candidates = [f"{cfg.load_model}_Agent_{i}", cfg.load_model]
        paths = [Path(cfg.models_dir) / f"{c}.pt" for c in candidates]
        path = next((p for p in paths if p.is_file()), None)
        if path is None:
            raise UsageError(f"--load_model: no model file {paths[0]} (save one with --save_model, or check --models_dir)")
        try:
            state = torch.load(path, map_location="cpu", weights_only=True)
            agents.load_agent_state(i, state)
        except Exception as e:
            raise UsageError(f"--load_model: cannot load {path} into {cfg.policy} on {cfg.env}: {e}") from None


def set_global_seeds(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Trainer:
    """Sets up a run (environments, agents, shared buffer, evaluator) and runs its training loop."""

    def __init__(self, cfg: RunConfig):
        validate(cfg)
        self.cfg = cfg
        if cfg.threads:
            torch.set_num_threads(cfg.threads)
        set_global_seeds(cfg.seed)
        self.device = torch.device(cfg.device)
        self.seeds = cfg.agent_seeds()
        self.envs, self.obs = seeded_envs(cfg.env, self.seeds)
        self.episodes = [EpisodeRecord(s) for s in self.seeds]
        space = self.envs[0].action_space
        obs_dim, act_dim = self.envs[0].observation_space.shape[0], space.shape[0]
        self.agents = ALGORITHMS[cfg.algorithm](obs_dim, act_dim, space.low, space.high, self.seeds, self.device,
                                                **cfg.algo)
        if cfg.load_model:
            load_models(self.agents, cfg)
        if cfg.compile:
            self.agents.compile()
        self.buffer = SharedReplayBuffer(obs_dim, act_dim, cfg.buffer_size, cfg.num_agents, self.device,
                                         self.agents.gaussian_behaviour)
        self.sampler = AgentRNG([stream_seed(s, "sample") for s in self.seeds], self.device)
        self.evaluate = Evaluator(cfg.env, cfg.num_agents, cfg.seed + 100, cfg.eval_episodes)
        self.results = Path(cfg.results_dir)
        self.curve_paths = [self.results / f"{name}.npy" for name in cfg.agent_names()]
        self.checkpoint_path = cfg.checkpoint_path
        self.curves: list[list[float]] = [[] for _ in range(cfg.num_agents)]
        self.t = 0
        self.episode_count = [0] * cfg.num_agents
        # first step at which an agent's loss was not finite (-1: none); read only at evaluations
        self.first_bad = torch.full((cfg.num_agents,), -1, dtype=torch.long, device=self.device)
        self.stop_signal: int | None = None
        self.last_checkpoint: int | None = None

    def policy(self, obs: np.ndarray) -> np.ndarray:
        """Deterministic actions for the evaluator: [N, E, obs_dim] -> [N, E, act_dim]."""
        return self.agents.act(obs).cpu().numpy()

    def write_config(self) -> None:
        cfg = self.cfg
        record = {"config": asdict(cfg), "versions": software_versions(), "device": str(self.device),
                  "device_name": torch.cuda.get_device_name(self.device) if self.device.type == "cuda" else platform.processor(),
                  "git_commit": git_commit(), "command": sys.argv, "curves": [p.name for p in self.curve_paths],
                  "torch_threads": torch.get_num_threads(),
                  "checkpoint": str(self.checkpoint_path) if cfg.checkpoint_freq else None,
                  "started": time.strftime("%Y-%m-%dT%H:%M:%S"), "resumed_at_step": self.t or None}
        save_json(self.results / f"{cfg.stem}.json", record)

    def save_curves(self) -> None:
        for path, curve in zip(self.curve_paths, self.curves):
            save_curve(path, curve)

    def evaluation(self) -> np.ndarray:
        """Evaluate every agent, append to and save the curves (and models with --save_model)."""
        self.check_finite()
        scores = self.evaluate(self.policy)
        for i in range(self.cfg.num_agents):
            self.curves[i].append(float(scores[i]))
        self.save_curves()
        if self.cfg.save_model:
            for i, name in enumerate(self.cfg.agent_names()):
                save_torch(Path(self.cfg.models_dir) / f"{name}.pt", self.agents.agent_state(i))
        return scores

    def step(self) -> None:
        """One environment step for every agent, then the agents' updates."""
        cfg, envs, n = self.cfg, self.envs, self.cfg.num_agents
        if self.t < cfg.start_time_steps:
            actions = np.stack([env.action_space.sample() for env in envs])
            behaviour = None
        else:
            actions, behaviour = self.agents.explore(self.obs)
        next_obs = np.empty_like(self.obs)
        rewards = np.empty(n)
        terminated = np.zeros(n, dtype=bool)
        done = np.zeros(n, dtype=bool)
        for i, env in enumerate(envs):
            next_obs[i], rewards[i], terminated[i], truncated, _ = env.step(actions[i])
            self.episodes[i].actions.append(actions[i])
            done[i] = terminated[i] or truncated
        self.buffer.add(self.obs, actions, rewards, next_obs, terminated, behaviour)
        self.obs = next_obs
        for i in np.nonzero(done)[0]:
            self.episodes[i] = EpisodeRecord.before_reset(envs[i])
            self.obs[i], _ = envs[i].reset()
            self.episode_count[i] += 1
        if self.t >= cfg.start_time_steps:
            for _ in range(cfg.updates_per_step):
                info = self.agents.update(self.buffer.sample(cfg.batch_size, self.sampler))
                finite = torch.isfinite(info["critic_loss"])
                if "actor_loss" in info:
                    finite = finite & torch.isfinite(info["actor_loss"])
                self.first_bad = torch.where((self.first_bad < 0) & ~finite, self.t, self.first_bad)
        self.t += 1

    # ---- guards ------------------------------------------------------------------------------
    def check_finite(self) -> None:
        """Stop with the agent and step when a loss or a parameter went NaN/inf (one host sync)."""
        bad_params = torch.zeros(self.cfg.num_agents, dtype=torch.bool, device=self.device)
        for net in self.agents.networks.values():
            for p in net.parameters():
                bad_params |= ~torch.isfinite(p.detach()).reshape(p.shape[0], -1).all(dim=1)
        first_bad, bad_params = self.first_bad.cpu().tolist(), bad_params.cpu().tolist()
        bad = sorted((step if step >= 0 else self.t, i) for i, step in enumerate(first_bad) if step >= 0 or bad_params[i])
        if not bad:
            return
        step, i = bad[0]  # the first to break; through the shared buffer it may have broken the others
        what = f"loss at step {step}" if first_bad[i] >= 0 else f"parameters by step {step}"
        others = "".join(f", then agent {j} at step {s}" for s, j in bad[1:])
        kept = (f"the last good checkpoint ({self.checkpoint_path}, step {self.last_checkpoint}) is kept"
                if self.last_checkpoint is not None else "no checkpoint was written")
        raise NonFinite(f"agent {i} (seed {self.seeds[i]}) of {self.cfg.stem}: non-finite {what}{others}; "
                        f"stopped, {kept}. Lower the learning rates or check the rewards")

    # ---- checkpoints -------------------------------------------------------------------------
    def state_dict(self) -> dict:
        return {
            "format": CHECKPOINT_FORMAT, "config": asdict(self.cfg), "t": self.t, "curves": self.curves,
            "agents": self.agents.state_dict(), "buffer": self.buffer.state_dict(),
            "sampler": self.sampler.get_state(), "global_rng": global_rng_state(),
            "obs": torch.as_tensor(self.obs), "episode_count": self.episode_count,
            "episodes": [e.to_dict() for e in self.episodes],
            "action_space_rng": [env.action_space.np_random.bit_generator.state for env in self.envs],
        }

    def save_checkpoint(self) -> None:
        if not self.cfg.checkpoint_freq:
            return
        self.check_finite()
        save_torch(self.checkpoint_path, self.state_dict())
        self.last_checkpoint = self.t

    def load_checkpoint(self) -> None:
        """Continue exactly where the checkpoint left off."""
        state = read_checkpoint(self.checkpoint_path)
        check_compatible(state["config"], asdict(self.cfg), self.checkpoint_path)
        if state["t"] > self.cfg.max_time_steps:
            raise UsageError(f"checkpoint {self.checkpoint_path} is at step {state['t']}, beyond the requested "
                             f"budget of {self.cfg.max_time_steps}; raise the budget or use --overwrite")
        self.agents.load_state_dict(state["agents"])
        self.buffer.load_state_dict(state["buffer"])
        self.sampler.set_state(state["sampler"])
        expected = state["obs"].numpy()
        for env in self.envs:
            env.close()
        restored = [restore_env(self.cfg.env, rec, seed, space, expected[i])
                    for i, (rec, seed, space) in enumerate(zip(state["episodes"], self.seeds, state["action_space_rng"]))]
        self.envs = [r[0] for r in restored]
        self.episodes = [r[2] for r in restored]
        self.obs = expected.copy()
        set_global_rng_state(state["global_rng"])
        self.t, self.curves = int(state["t"]), [list(c) for c in state["curves"]]
        self.episode_count = list(state["episode_count"])
        self.last_checkpoint = self.t

    # ---- the run -----------------------------------------------------------------------------
    def finished_curves(self) -> list[list[float]] | None:
        """The saved curves when this exact run already finished (all evaluations present), else None."""
        cfg, record = self.cfg, self.results / f"{self.cfg.stem}.json"
        expected = cfg.max_time_steps // cfg.eval_freq + 1
        if not record.exists() or not all(p.exists() for p in self.curve_paths):
            return None
        try:
            saved = json.loads(record.read_text())["config"]
            curves = [np.load(p, allow_pickle=False) for p in self.curve_paths]
        except Exception:
            return None
        if any(c.shape != (expected,) for c in curves):
            return None
        check_compatible(saved, asdict(cfg), record)
        return [c.tolist() for c in curves]

    def prepare_outputs(self) -> bool:
        """Refuse to clobber another run; resume or start over as asked. True: nothing left to do."""
        cfg = self.cfg
        for folder in {self.results, self.checkpoint_path.parent, Path(cfg.models_dir)}:
            for tmp in folder.glob(f".{cfg.stem}*.tmp"):  # left by a write that was killed
                tmp.unlink()
        exists = [p for p in [*self.curve_paths, self.results / f"{cfg.stem}.json"] if p.exists()]
        if cfg.resume and self.checkpoint_path.exists():
            self.load_checkpoint()
            self.save_curves()  # evaluations after the checkpoint are done again
            if not cfg.quiet:
                print(f"{cfg.stem} | resumed from {self.checkpoint_path} at step {self.t}", flush=True)
            return False
        if cfg.resume and exists and (done := self.finished_curves()) is not None:
            self.curves, self.t = done, cfg.max_time_steps
            if not cfg.quiet:
                print(f"{cfg.stem} | already complete ({cfg.max_time_steps} steps): nothing to do", flush=True)
            return True
        if exists and not (cfg.resume or cfg.overwrite):
            raise UsageError(f"{exists[0]} already exists: add --resume to continue that run, --overwrite to "
                             "start it over, or pick another --seed or --results_dir")
        if cfg.resume and exists and not cfg.quiet:
            print(f"{cfg.stem} | no checkpoint at {self.checkpoint_path}: starting from step 0", flush=True)
        for p in exists:
            p.unlink()
        if self.checkpoint_path.exists():
            self.checkpoint_path.unlink()
        return False

    def _on_signal(self, signum, frame) -> None:
        self.stop_signal = signum

    def run(self, stop_at: int | None = None) -> list[np.ndarray]:
        """Train to cfg.max_time_steps, evaluating at step 0 and every cfg.eval_freq steps.

        A finished run deletes its checkpoint (the curves are complete). ``stop_at``: stop early at
        that step after writing a checkpoint, as if interrupted there (for training in pieces).
        """
        cfg = self.cfg
        lock = RunLock(self.results / f".{cfg.stem}.lock")
        lock.acquire()
        handlers = {}
        try:
            if self.prepare_outputs():
                return self.curve_arrays()
            self.write_config()
            if threading.current_thread() is threading.main_thread():
                handlers = {s: signal.signal(s, self._on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
            start = last = time.time()
            last_step = self.t
            if self.t == 0:
                self.progress(self.evaluation(), 0.0, start)
            while self.t < cfg.max_time_steps:
                self.step()
                if self.t % cfg.eval_freq == 0:
                    scores = self.evaluation()
                    now = time.time()
                    self.progress(scores, (self.t - last_step) / max(now - last, 1e-9), start)
                    last, last_step = now, self.t
                if cfg.checkpoint_freq and self.t % cfg.checkpoint_freq == 0 and self.t < cfg.max_time_steps:
                    self.save_checkpoint()
                if self.t == stop_at:
                    self.save_checkpoint()
                    return self.curve_arrays()
                if self.stop_signal is not None:
                    self.save_checkpoint()
                    name = signal.Signals(self.stop_signal).name
                    where = f"checkpoint {self.checkpoint_path}; continue with --resume" if cfg.checkpoint_freq \
                        else "no checkpoint (--checkpoint_freq 0)"
                    raise Interrupted(self.stop_signal, f"{name}: stopped {cfg.stem} at step {self.t}, {where}")
            if self.checkpoint_path.exists():
                self.checkpoint_path.unlink()  # finished: the curves say everything
        finally:
            for s, h in handlers.items():
                signal.signal(s, h)
            lock.release()
            self.close()
        return self.curve_arrays()

    def curve_arrays(self) -> list[np.ndarray]:
        return [np.asarray(c, dtype=np.float64) for c in self.curves]

    def progress(self, scores: np.ndarray, rate: float, start: float) -> None:
        """One line per evaluation: step, throughput, every agent's return, elapsed time."""
        if self.cfg.quiet:
            return
        elapsed = time.strftime("%H:%M:%S", time.gmtime(time.time() - start))
        returns = " ".join(f"{s:9.1f}" for s in scores)
        print(f"{self.cfg.stem} | step {self.t:>8d}/{self.cfg.max_time_steps} | {rate:7.1f} steps/s | "
              f"return {returns} | {elapsed}", flush=True)

    def close(self) -> None:
        for env in self.envs:
            env.close()
        self.evaluate.close()


def train(cfg: RunConfig) -> list[np.ndarray]:
    """Train cfg.num_agents agents; returns (and saves after every evaluation) their learning curves."""
    return Trainer(cfg).run()
