"""Why discrete SAC did not learn Acrobot-v1 (issue 89): the project's ``DiscreteSAC`` in a plain loop of one agent,
printing every ``--every`` steps what the training scripts do not: the mean return of the last 10 training episodes,
the greedy and the sampled policy's evaluation (5 episodes each), the temperature alpha, the policy's entropy and the
critic's spread over actions (mean over the last 1000 states of max_a Q - min_a Q).

    python -m benchmarks.discrete_sac_entropy --seed 0 --steps 50000 --target_entropy_scale 0.89
    python -m benchmarks.discrete_sac_entropy --seed 0 --steps 50000 --target_entropy_scale 0.3

The loop is the project's own learner with a uniform replay of every transition, 1000 random warm-up steps, one
update per step from a batch of 256, 64-64 networks and Adam lr 1e-3 (docs/replay.md's Acrobot flags); a
termination stops the bootstrap, a time-limit cut does not. Measurements, not a test: docs/replay.md quotes them.
"""
from __future__ import annotations

import argparse
import time

import gymnasium as gym
import numpy as np
import torch

from algorithms.replay.base import Batch
from algorithms.replay.discrete_sac import DiscreteSAC


def evaluate(agent: DiscreteSAC, env, sample: bool, episodes: int = 5, seed: int = 1000) -> float:
    gen = torch.Generator().manual_seed(seed)
    returns = []
    for e in range(episodes):
        obs, _ = env.reset(seed=seed + e)
        done, total = False, 0.0
        while not done:
            with torch.no_grad():
                logits = agent.actor.logits(torch.as_tensor(obs, dtype=torch.float32).view(1, 1, -1))[0, 0]
                action = int(torch.multinomial(logits.softmax(-1), 1, generator=gen)) if sample \
                    else int(logits.argmax())
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        returns.append(total)
    return float(np.mean(returns))


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.discrete_sac_entropy", description=__doc__.split("\n")[0])
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--steps", type=int, default=50_000)
    p.add_argument("--every", type=int, default=10_000)
    p.add_argument("--env", default="Acrobot-v1")
    p.add_argument("--target_entropy_scale", type=float, default=0.89)
    p.add_argument("--hidden_size", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--start_steps", type=int, default=1000)
    p.add_argument("--batch_size", type=int, default=256)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    env, eval_env = gym.make(args.env), gym.make(args.env)
    obs_dim, n_actions = env.observation_space.shape[0], int(env.action_space.n)
    agent = DiscreteSAC(obs_dim, n_actions, None, None, [args.seed], hidden_size=args.hidden_size, lr=args.lr,
                        target_entropy_scale=args.target_entropy_scale)
    rng = np.random.default_rng(args.seed)
    n = args.steps
    obs_buf, next_buf = np.zeros((n, obs_dim), np.float32), np.zeros((n, obs_dim), np.float32)
    act_buf, rew_buf, term_buf = np.zeros(n, np.int64), np.zeros(n, np.float32), np.zeros(n, np.float32)
    obs, _ = env.reset(seed=args.seed)
    episode, returns, start = 0.0, [], time.time()
    print(f"{args.env}, seed {args.seed}, target entropy {args.target_entropy_scale} log {n_actions} = "
          f"{agent.target_entropy:.3f} nats (uniform: {np.log(n_actions):.3f})")
    for t in range(n):
        action = int(rng.integers(n_actions)) if t < args.start_steps \
            else int(agent.explore(obs[None].astype(np.float32))[0][0])
        next_obs, reward, terminated, truncated, _ = env.step(action)
        obs_buf[t], act_buf[t], rew_buf[t], next_buf[t], term_buf[t] = obs, action, reward, next_obs, terminated
        episode += float(reward)
        obs = next_obs
        if terminated or truncated:
            returns.append(episode)
            episode, (obs, _) = 0.0, env.reset()
        if t >= args.start_steps:
            i = rng.integers(0, t + 1, args.batch_size)
            agent.update(Batch(obs=torch.as_tensor(obs_buf[i])[None],
                               action=torch.as_tensor(act_buf[i]).view(1, -1, 1).float(),
                               reward=torch.as_tensor(rew_buf[i]).view(1, -1, 1),
                               next_obs=torch.as_tensor(next_buf[i])[None],
                               not_done=torch.as_tensor(1 - term_buf[i]).view(1, -1, 1),
                               own=torch.ones(1, args.batch_size, dtype=torch.bool)))
        if (t + 1) % args.every == 0:
            recent = torch.as_tensor(obs_buf[max(0, t - 999):t + 1])[None]
            with torch.no_grad():
                log_p = agent.actor.log_probs(recent)
                entropy = float(-(log_p.exp() * log_p).sum(-1).mean())
                q1, _ = agent.critic(recent)
                spread = float((q1.max(-1).values - q1.min(-1).values).mean())
                alpha = float(agent.temperature.log_alpha.exp().mean())
            print(f"step {t + 1:>7,}: training {np.mean(returns[-10:]) if returns else float('nan'):7.1f} "
                  f"({len(returns)} episodes), greedy {evaluate(agent, eval_env, False):7.1f}, sampled "
                  f"{evaluate(agent, eval_env, True):7.1f}, alpha {alpha:.4f}, entropy {entropy:.3f}, "
                  f"Q spread {spread:.3f}, {time.time() - start:.0f} s", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
