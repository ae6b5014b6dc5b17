"""This project beside Stable-Baselines3 on the same machine: the same jobs at equal settings, timed in turn.

    python -m benchmarks.peers [--jobs a2c td3 sac td3_seeds a2c_atari] [--runs 3] [--core 1] [--threads 1]
                               [--scale 1] [--json peers.json]

Each job is one of our commands and the SB3 program that does the same work (the same networks, batch, learning
rates, warm-up, environments and steps, 10 deterministic evaluation episodes at the start and at the end, one torch
thread), each run as a whole process (imports included) and timed by its wall clock. The two alternate, ours first,
``--runs`` times, so that a machine that gets slower or faster meanwhile weighs on both alike; the table gives each
side's median and the ratio of the medians (ours / SB3: below 1 is faster) with the range of the per-pair ratios,
and each side's environment steps per second: over the median wall clock (start-up and evaluations included), and
over the learning alone (ours: the record's loop seconds less its evaluations'; SB3: model.learn() timed). ``--core N`` pins both to core N (sched_setaffinity), as the numbers in docs/performance.md were taken;
``--threads T`` gives both sides T torch threads (and our EnvPool T threads).

Jobs:
- a2c: A2C on CartPole-v1, 8 environments, n = 5, RMSprop 7e-4, 64-64 tanh, 100k environment steps in all.
- td3: TD3 on Pendulum-v1, 256-256, batch 256, Adam 3e-4, 1000 random steps, then one update per step; 20k steps.
- sac: Gaussian SAC on Pendulum-v1 at the same sizes, temperature 0.2 (fixed, as ours by default); 20k steps.
- td3_seeds: 10 seeds of the td3 job for 2k steps each: ours in one process (--seeds 0-9), SB3 one seed after another.
- a2c_atari: A2C on PongNoFrameskip-v4, 16 environments, n = 5, the Nature CNN shared by policy and value, RMSprop
  7e-4 (eps 1e-5), 32k environment steps in all, one evaluation game at the start and at the end; ours on EnvPool
  (--env_backend envpool), SB3 with its Atari wrappers (make_atari_env, VecFrameStack 4; needs opencv). Beside the
  two, the arithmetic limit: the same network's work per step alone (``network_limit``: acting on 16 frame stacks
  5 times, then one forward and backward pass and an RMSprop step on the 80, plus the bootstrap values) in steps/s.

SB3 is optional (``pip install -r requirements-bench.txt``); without it the script says so and exits 2. ``--scale s``
multiplies every job's steps (a quick check; the published numbers use 1).
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from utils.cli import Parser, available_cores, tool_guard
from utils.errors import UsageError
from utils.io import output_file_problem

PROG = "python -m benchmarks.peers"
ROOT = Path(__file__).resolve().parent.parent
INSTALL = "pip install -r requirements-bench.txt"
EVAL_EPISODES = 10


@dataclass(frozen=True)
class Job:
    name: str
    what: str
    steps: int  # environment steps (a2c: of all 8 environments together; td3_seeds: per seed)
    start: int = 0  # random warm-up steps of the replay learners


JOBS = {
    "a2c": Job("a2c", "A2C, CartPole-v1, 8 environments, n = 5", 100_000),
    "td3": Job("td3", "TD3, Pendulum-v1, 256-256, batch 256, one seed", 20_000, 1000),
    "sac": Job("sac", "SAC (Gaussian), Pendulum-v1, 256-256, batch 256, one seed", 20_000, 1000),
    "td3_seeds": Job("td3_seeds", "TD3, Pendulum-v1, 10 seeds: ours --seeds 0-9, SB3 one after another", 2_000, 1000),
    "a2c_atari": Job("a2c_atari", "A2C, PongNoFrameskip-v4, 16 environments, n = 5, Nature CNN", 32_000),
}
ATARI_ENVS, ATARI_EVAL_GAMES = 16, 1


def scaled(job: Job, scale: float) -> Job:
    """The job with its steps multiplied (the replay learners keep at least their warm-up plus one update; A2C a
    whole number of 8-environment steps)."""
    steps = max(int(job.steps * scale), 8)
    if job.name == "a2c":
        steps -= steps % 8
    elif job.name == "a2c_atari":  # whole rollouts of the 16 environments
        steps = max(steps - steps % (5 * ATARI_ENVS), 5 * ATARI_ENVS)
    else:
        steps = max(steps, job.start + 1)
    return Job(job.name, job.what, steps, job.start)


def ours(job: Job, out: str, threads: int = 1) -> list[str]:
    """Our command for the job (results in ``out``): evaluations at step 0 and at the end only."""
    common = ["--threads", str(threads), "--quiet", "--results_dir", out, "--checkpoint_freq", "0"]
    if job.name == "a2c_atari":
        return ["ac_main.py", "--policy", "A2C", "--env", "PongNoFrameskip-v4", "--env_backend", "envpool",
                "--env_workers", str(threads), "--envs_per_agent", str(ATARI_ENVS), "--n_steps", "5",
                "--max_time_steps", str(job.steps), "--eval_freq", str(job.steps), "--eval_episodes",
                str(ATARI_EVAL_GAMES), *common]
    common += ["--eval_episodes", str(EVAL_EPISODES)]
    if job.name == "a2c":
        return ["ac_main.py", "--policy", "A2C", "--env", "CartPole-v1", "--envs_per_agent", "8", "--n_steps", "5",
                "--max_time_steps", str(job.steps), "--eval_freq", str(job.steps), *common]
    if job.name == "sac":
        return ["sac_main.py", "--policy", "SAC", "--policy_type", "Gaussian", "--env", "Pendulum-v1",
                "--num_steps", str(job.steps), "--start_steps", str(job.start), "--eval_freq", str(job.steps), *common]
    seeds = ["--seeds", "0-9"] if job.name == "td3_seeds" else ["--seed", "0"]
    return ["DASE_main.py", "--policy", "TD3", "--env", "Pendulum-v1", *seeds, "--max_time_steps", str(job.steps),
            "--start_time_steps", str(job.start), "--eval_freq", str(job.steps), *common]


# The SB3 side: one program, its settings as JSON in argv[1]. Every value is spelled out so that nothing rests on
# SB3's defaults staying what they are.
SB3_PROGRAM = r'''
import json, sys, time
import numpy as np
import torch
import gymnasium as gym
from stable_baselines3 import A2C, SAC, TD3
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.evaluation import evaluate_policy
from stable_baselines3.common.noise import NormalActionNoise

s = json.loads(sys.argv[1])
torch.set_num_threads(s["threads"])
for seed in s["seeds"]:
    if s["job"] == "a2c_atari":
        from stable_baselines3.common.env_util import make_atari_env
        from stable_baselines3.common.vec_env import VecFrameStack
        import ale_py
        gym.register_envs(ale_py)
        env = VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=s["envs"], seed=seed), n_stack=4)
        model = A2C("CnnPolicy", env, learning_rate=7e-4, n_steps=5, gamma=0.99, gae_lambda=1.0, ent_coef=0.01,
                    vf_coef=0.5, max_grad_norm=0.5, rms_prop_eps=1e-5, use_rms_prop=True, normalize_advantage=False,
                    seed=seed, device="cpu")
        eval_env = VecFrameStack(make_atari_env("PongNoFrameskip-v4", n_envs=1, seed=seed + 100), n_stack=4)
    elif s["job"] == "a2c":
        env = make_vec_env("CartPole-v1", n_envs=8, seed=seed)
        model = A2C("MlpPolicy", env, learning_rate=7e-4, n_steps=5, gamma=0.99, gae_lambda=1.0, ent_coef=0.01,
                    vf_coef=0.5, max_grad_norm=0.5, rms_prop_eps=1e-5, use_rms_prop=True, normalize_advantage=False,
                    policy_kwargs=dict(net_arch=dict(pi=[64, 64], vf=[64, 64]), activation_fn=torch.nn.Tanh),
                    seed=seed, device="cpu")
        eval_env = gym.make("CartPole-v1")
    else:
        env = gym.make("Pendulum-v1")
        high = float(env.action_space.high[0])
        common = dict(learning_rate=3e-4, buffer_size=1_000_000, learning_starts=s["start"], batch_size=256,
                      tau=0.005, gamma=0.99, train_freq=1, gradient_steps=1, seed=seed, device="cpu",
                      policy_kwargs=dict(net_arch=[256, 256]))
        if s["job"] == "sac":
            model = SAC("MlpPolicy", env, ent_coef=0.2, target_update_interval=1, **common)
        else:
            noise = NormalActionNoise(np.zeros(1), 0.1 * high * np.ones(1))
            model = TD3("MlpPolicy", env, action_noise=noise, policy_delay=2, target_policy_noise=0.2,
                        target_noise_clip=0.5, **common)
        eval_env = gym.make("Pendulum-v1")
    start, _ = evaluate_policy(model, eval_env, n_eval_episodes=s["episodes"], deterministic=True)
    clock = time.perf_counter()
    model.learn(total_timesteps=s["steps"])
    print(f"learn_s {time.perf_counter() - clock:.3f}", flush=True)
    end, _ = evaluate_policy(model, eval_env, n_eval_episodes=s["episodes"], deterministic=True)
    print(f"seed {seed}: evaluation {start:.1f} -> {end:.1f}", flush=True)
'''


def sb3(job: Job, threads: int = 1) -> list[str]:
    seeds = list(range(10)) if job.name == "td3_seeds" else [0]
    settings = {"job": "td3" if job.name == "td3_seeds" else job.name, "steps": job.steps, "start": job.start,
                "seeds": seeds, "episodes": ATARI_EVAL_GAMES if job.name == "a2c_atari" else EVAL_EPISODES,
                "threads": threads, "envs": ATARI_ENVS}
    return ["-c", SB3_PROGRAM, json.dumps(settings)]


# The arithmetic limit of the a2c_atari job: the Nature CNN (shared trunk, policy and value heads) doing exactly the
# work A2C needs per rollout of n steps x E environments, timed alone; prints environment steps per second.
LIMIT_PROGRAM = r'''
import json, sys, time
import torch
from torch import nn
s = json.loads(sys.argv[1])
torch.set_num_threads(s["threads"])
torch.manual_seed(0)
trunk = nn.Sequential(nn.Conv2d(4, 32, 8, 4), nn.ReLU(), nn.Conv2d(32, 64, 4, 2), nn.ReLU(), nn.Conv2d(64, 64, 3, 1),
                      nn.ReLU(), nn.Flatten(), nn.Linear(3136, 512), nn.ReLU())
pi, v = nn.Linear(512, s["actions"]), nn.Linear(512, 1)
params = [*trunk.parameters(), *pi.parameters(), *v.parameters()]
opt = torch.optim.RMSprop(params, lr=7e-4, alpha=0.99, eps=1e-5)
e, n = s["envs"], s["n_steps"]
frames = torch.randint(0, 256, (n + 1, e, 4, 84, 84), dtype=torch.uint8)
def rollout():
    with torch.no_grad():
        for t in range(n + 1):  # n acting passes and the bootstrap values of the last observations
            h = trunk(frames[t].float() / 255.0)
            torch.distributions.Categorical(logits=pi(h)).sample(); v(h)
    h = trunk(frames[:n].reshape(n * e, 4, 84, 84).float() / 255.0)
    dist = torch.distributions.Categorical(logits=pi(h))
    actions = dist.sample()
    loss = -(dist.log_prob(actions)).mean() + 0.5 * v(h).pow(2).mean() - 0.01 * dist.entropy().mean()
    opt.zero_grad(); loss.backward(); nn.utils.clip_grad_norm_(params, 0.5); opt.step()
for _ in range(5):
    rollout()
rounds, start = 0, time.perf_counter()
while time.perf_counter() - start < s["seconds"]:
    rollout(); rounds += 1
print(rounds * n * e / (time.perf_counter() - start))
'''


def network_limit(threads: int, seconds: float = 20.0) -> float:
    """Environment steps per second of A2C's network work alone (LIMIT_PROGRAM) with ``threads`` torch threads."""
    settings = {"threads": threads, "envs": ATARI_ENVS, "n_steps": 5, "actions": 6, "seconds": seconds}
    out = subprocess.run([sys.executable, "-c", LIMIT_PROGRAM, json.dumps(settings)], cwd=ROOT, capture_output=True,
                         text=True, env=thread_env(threads))
    if out.returncode != 0:
        raise UsageError(f"the arithmetic-limit program failed: {(out.stderr.strip().splitlines() or ['?'])[-1]}")
    return float(out.stdout.split()[-1])


def thread_env(threads: int) -> dict:
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}


def timed(argv: list[str], core: int | None, threads: int = 1) -> tuple[float, str]:
    """Wall seconds and standard output of ``python argv`` run in the repository folder (a failure is a UsageError
    naming it)."""
    pin = (lambda: os.sched_setaffinity(0, {core})) if core is not None else None
    start = time.perf_counter()
    out = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, preexec_fn=pin,
                         env=thread_env(threads))
    wall = time.perf_counter() - start
    if out.returncode != 0:
        last = (out.stderr.strip().splitlines() or ["(no output)"])[-1]
        raise UsageError(f"{' '.join(argv[:1]) if argv[0] != '-c' else 'the SB3 program'} failed "
                         f"(exit {out.returncode}): {last}")
    return wall, out.stdout


def learning_seconds(ours_out: str | None = None, sb3_stdout: str | None = None) -> float:
    """The seconds of learning alone: ours from the finished run's records in ``ours_out`` (its loop's seconds less
    its evaluations'; a --seeds run trains its seeds in one loop and writes that loop's timing into every seed's
    record, so it counts once), SB3's from the program's ``learn_s`` lines (model.learn() timed)."""
    if sb3_stdout is not None:
        return sum(float(line.split()[1]) for line in sb3_stdout.splitlines() if line.startswith("learn_s "))
    timings = {(t["loop_s"], t["evaluation_s"]) for record in Path(ours_out).glob("*.json")
               if (t := json.loads(record.read_text()).get("timing")) is not None}
    if len(timings) != 1:
        raise UsageError(f"{ours_out}: expected one process's loop timing in the run's records, found {len(timings)}")
    ((loop, evaluation),) = timings
    return loop - evaluation


def compare(pairs: list[tuple[float, float]]) -> dict:
    """Medians of each side and the ratio of the medians (ours / SB3), with the per-pair ratios' range."""
    a, b = [p[0] for p in pairs], [p[1] for p in pairs]
    ratios = [x / y for x, y in pairs]
    return {"ours_s": statistics.median(a), "sb3_s": statistics.median(b),
            "ratio": statistics.median(a) / statistics.median(b), "pair_ratios": ratios}


def has_sb3() -> bool:
    try:
        import stable_baselines3  # noqa: F401
    except ImportError:
        return False
    return True


def _main(argv=None) -> int:
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("--jobs", nargs="+", default=list(JOBS), help=f"which jobs (default: all: {' '.join(JOBS)})")
    p.add_argument("--runs", type=int, default=3, help="timed pairs per job (default: 3)")
    p.add_argument("--core", type=int, default=None, help="pin both sides to this core (default: no pinning)")
    p.add_argument("--threads", type=int, default=1, help="torch threads of both sides, and our EnvPool's (default: 1)")
    p.add_argument("--scale", type=float, default=1.0, help="multiply every job's steps (default: 1)")
    p.add_argument("--json", type=str, default=None, help="write every timing here as JSON")
    args = p.parse_args(argv)
    unknown = [j for j in args.jobs if j not in JOBS]
    if unknown:
        p.error(f"--jobs: unknown job {unknown[0]!r}; pick from {', '.join(JOBS)}")
    if not 1 <= args.runs <= 100:
        p.error(f"--runs {args.runs}: give 1 to 100")
    if args.core is not None and args.core not in os.sched_getaffinity(0):
        p.error(f"--core {args.core}: this process may use cores {sorted(os.sched_getaffinity(0))}")
    if not 0.001 <= args.scale <= 100:
        p.error(f"--scale {args.scale}: give 0.001 to 100")
    if not 1 <= args.threads <= available_cores():
        p.error(f"--threads {args.threads}: give 1 to {available_cores()} (the cores here)")
    if args.core is not None and args.threads != 1:
        p.error(f"--core pins to one core; drop it or --threads {args.threads}")
    if args.json is not None and (problem := output_file_problem(args.json)):
        p.error(f"--json {args.json[:60]}: {problem}")
    if not has_sb3():
        p.error(f"Stable-Baselines3 is not installed: {INSTALL}")
    rows = []
    print(f"{available_cores()} core(s) here; {'pinned to core ' + str(args.core) if args.core is not None else 'not pinned'}"
          f"; {args.threads} thread(s) a side; {args.runs} pair(s) per job, ours first", flush=True)
    for name in args.jobs:
        job = scaled(JOBS[name], args.scale)
        pairs, learning = [], []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as out:
                mine, _ = timed(ours(job, out, args.threads), args.core, args.threads)
                mine_learning = learning_seconds(ours_out=out)
            theirs, text = timed(sb3(job, args.threads), args.core, args.threads)
            pairs.append((mine, theirs))
            learning.append((mine_learning, learning_seconds(sb3_stdout=text)))
        total = job.steps * (10 if name == "td3_seeds" else 1)
        row = {"job": name, "what": job.what, "steps": job.steps, **compare(pairs), "pairs": pairs,
               "learning": compare(learning), "learning_pairs": learning}
        row.update(ours_steps_s=total / row["ours_s"], sb3_steps_s=total / row["sb3_s"],
                   ours_learning_steps_s=total / row["learning"]["ours_s"],
                   sb3_learning_steps_s=total / row["learning"]["sb3_s"])
        line = (f"{name:>9} | {job.what} | {job.steps:,} steps | ours {row['ours_s']:.1f} s, {row['ours_steps_s']:,.0f} "
                f"steps/s | SB3 {row['sb3_s']:.1f} s, {row['sb3_steps_s']:,.0f} steps/s | ours / SB3 {row['ratio']:.2f} "
                f"(pairs {min(row['pair_ratios']):.2f}-{max(row['pair_ratios']):.2f}; speed x{1 / row['ratio']:.2f}) | "
                f"learning alone: ours {row['ours_learning_steps_s']:,.0f}, SB3 {row['sb3_learning_steps_s']:,.0f} "
                f"steps/s (x{row['ours_learning_steps_s'] / row['sb3_learning_steps_s']:.2f})")
        if name == "a2c_atari":
            row["limit_steps_s"] = network_limit(args.threads)
            line += (f" | network alone {row['limit_steps_s']:,.0f} steps/s: ours' learning at "
                     f"{100 * row['ours_learning_steps_s'] / row['limit_steps_s']:.0f} %")
        rows.append(row)
        print(line, flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "runs": args.runs, "core": args.core,
                                               "threads": args.threads, "scale": args.scale}, indent=2))
    return 0


def main(argv=None) -> int:
    return tool_guard(PROG, _main, argv)


if __name__ == "__main__":
    raise SystemExit(main())
