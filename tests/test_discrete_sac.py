"""Discrete SAC (sac_main.py on a discrete action space): the critic target, actor and temperature losses against a
plain per-sample loop, exploration and greedy evaluation, DPD's categorical distillation against a per-sample
computation, every sac_main.py policy on CartPole and a task variant, the flags' defaults (the continuous SAC's
untouched), and learning CartPole (slow). Elsewhere: stacked members == members alone
(tests/test_batched_update.py), the categorical DASE weight vs torch.distributions (tests/test_sharing.py), the
buffer (tests/test_buffer.py), bad input (tests/test_cli.py), capture safety (tests/test_capture_safety.py), seeds
in one process and their checkpoints (tests/test_seeds.py)."""
import copy
import json
import math
import time
from pathlib import Path

import numpy as np
import pytest
import torch

import sac_main
from algorithms.replay.base import Batch
from algorithms.replay.discrete_sac import DiscreteSAC
from algorithms.sharing.weights import PerSampleCategorical, dase_weighting
from utils.cli import main_guard
from utils.run import RunConfig, train
from utils.run.replay.learner import Learner
from utils.run.sharing import Scheme, SharingSettings

OBS, ACT, B = 5, 3, 40


def random_batch(n: int, gen: torch.Generator, b: int = B) -> Batch:
    writer = torch.randint(0, n, (n, b), generator=gen)
    return Batch(obs=torch.randn(n, b, OBS, generator=gen),
                 action=torch.randint(0, ACT, (n, b, 1), generator=gen).to(torch.get_default_dtype()),
                 reward=torch.randn(n, b, 1, generator=gen), next_obs=torch.randn(n, b, OBS, generator=gen),
                 not_done=(torch.rand(n, b, 1, generator=gen) > 0.2).to(torch.get_default_dtype()),
                 own=writer == torch.arange(n).view(-1, 1),
                 behaviour_probs=torch.softmax(2.0 * torch.randn(n, b, ACT, generator=gen), -1))


def probabilities(logits) -> list[float]:
    """softmax of one row of logits, in Python floats."""
    z = [float(x) for x in logits]
    top = max(z)
    e = [math.exp(x - top) for x in z]
    return [x / sum(e) for x in e]


def kl(p: list[float], q: list[float]) -> float:
    return sum(a * (math.log(a) - math.log(b)) for a, b in zip(p, q) if a > 0)


SETTINGS = dict(gamma=0.9, tau=0.1, lr=1e-3, alpha=0.3, reward_scale=2.0, hidden_size=16, target_entropy_scale=0.7)


def test_critic_target_and_losses_equal_a_per_sample_loop(float64):
    """One update of two DASE members (the paper's "js" weights, so the weights are in play), every quantity
    recomputed sample by sample and action by action in Python floats from the networks' outputs:

        y = 2 r + 0.9 not_done sum_a pi(a|s') (min_j Q'_j(s', a) - alpha log pi(a|s'))
        critic = sum_b w_b ((Q_1(s_b, a_b) - y_b)^2 + (Q_2(s_b, a_b) - y_b)^2) / sum_b w_b
        actor = sum_b w_b sum_a pi(a|s_b) (alpha log pi(a|s_b) - min_j Q_j(s_b, a)) / sum_b w_b   (critics stepped)
        temperature = sum_b w_b (-log alpha) (sum_a pi(a|s_b) log pi(a|s_b) + 0.7 log 3) / sum_b w_b

    and the first Adam step of log(alpha) is -lr * sign of the temperature loss's gradient."""
    agents = DiscreteSAC(OBS, ACT, None, None, [3, 103], "cpu", **SETTINGS)
    agents.weighting = dase_weighting(agents, "js", 0.1)
    assert isinstance(agents.weighting, PerSampleCategorical)
    batch = random_batch(2, torch.Generator().manual_seed(1))
    before = copy.deepcopy(agents)
    info = agents.update(batch)

    with torch.no_grad():
        next_logits, logits = before.actor.logits(batch.next_obs), before.actor.logits(batch.obs)
        tq1, tq2 = before.critic_target(batch.next_obs)
        q1, q2 = before.critic(batch.obs)
        sq1, sq2 = agents.critic(batch.obs)  # the critics after their step, which the actor loss reads
    log_alpha = [float(x) for x in before.temperature.log_alpha.detach()]
    h_target = 0.7 * math.log(ACT)
    for i in range(2):
        alpha = math.exp(log_alpha[i])
        w, critic, actor, temperature, entropy_gap = [], [], [], [], []
        for b in range(B):
            p_next, p = probabilities(next_logits[i, b]), probabilities(logits[i, b])
            v = sum(p_next[a] * (min(float(tq1[i, b, a]), float(tq2[i, b, a])) - alpha * math.log(p_next[a]))
                    for a in range(ACT))
            y = 2.0 * float(batch.reward[i, b]) + 0.9 * float(batch.not_done[i, b]) * v
            a_b = int(batch.action[i, b])
            critic.append((float(q1[i, b, a_b]) - y) ** 2 + (float(q2[i, b, a_b]) - y) ** 2)
            actor.append(sum(p[a] * (alpha * math.log(p[a]) - min(float(sq1[i, b, a]), float(sq2[i, b, a])))
                             for a in range(ACT)))
            neg_entropy = sum(x * math.log(x) for x in p)
            temperature.append(-log_alpha[i] * (neg_entropy + h_target))
            entropy_gap.append(-(neg_entropy + h_target))  # d(temperature term) / d log(alpha)
            beh = [float(x) for x in batch.behaviour_probs[i, b]]
            w.append(1.0 if bool(batch.own[i, b]) else math.exp(-0.5 * (kl(beh, p) + kl(p, beh))))
        mean = lambda xs: sum(wi * x for wi, x in zip(w, xs)) / sum(w)  # noqa: E731
        assert 0.0 < min(w) < 0.9  # external samples really are down-weighted
        torch.testing.assert_close(info["weights"][i, :, 0], torch.tensor(w), rtol=1e-12, atol=1e-14)
        torch.testing.assert_close(float(info["critic_loss"][i]), mean(critic), rtol=1e-11, atol=1e-12)
        torch.testing.assert_close(float(info["actor_loss"][i]), mean(actor), rtol=1e-11, atol=1e-12)
        torch.testing.assert_close(float(info["alpha_loss"][i]), mean(temperature), rtol=1e-11, atol=1e-12)
        grad = mean(entropy_gap)
        step = float(agents.temperature.log_alpha.detach()[i]) - log_alpha[i]
        torch.testing.assert_close(step, -1e-3 * grad / (abs(grad) + 1e-8), rtol=1e-9, atol=1e-12)
    # the targets moved by Polyak averaging towards the stepped critics (tau = 0.1)
    for (name, old), new, online in zip(before.critic_target.named_parameters(), agents.critic_target.parameters(),
                                        agents.critic.parameters()):
        torch.testing.assert_close(new, old + 0.1 * (online - old), rtol=1e-12, atol=1e-14, msg=name)


def test_temperature_moves_towards_the_target_entropy(float64):
    """A near-uniform policy (entropy ~ log 3) is above every target below 1: alpha falls; a policy sharpened by
    large logits is below it: alpha rises."""
    for sharpen, sign in ((0.0, -1.0), (50.0, 1.0)):
        agents = DiscreteSAC(OBS, ACT, None, None, [0], "cpu", hidden_size=16, target_entropy_scale=0.5)
        with torch.no_grad():  # logits (sharpen, 0, 0) in every state
            last = agents.actor.net.layers[-1]
            last.weight.zero_()
            last.bias.copy_(torch.tensor([sharpen, 0.0, 0.0]).view(1, 1, 3))
        before = float(agents.temperature.log_alpha.detach()[0])
        agents.update(random_batch(1, torch.Generator().manual_seed(2)))
        assert sign * (float(agents.temperature.log_alpha.detach()[0]) - before) > 0


def test_exploration_samples_the_policy_and_evaluation_is_greedy():
    agents = DiscreteSAC(OBS, ACT, None, None, [0, 100], "cpu", hidden_size=16)
    obs = torch.randn(2, OBS, generator=torch.Generator().manual_seed(0))
    draws, probs = [], None
    for _ in range(4000):
        action, (p,) = agents.explore_device(obs)
        assert action.dtype == torch.int64 and action.shape == (2,) and p.shape == (2, ACT)
        draws.append(action)
        probs = p
    draws = torch.stack(draws)
    with torch.no_grad():
        torch.testing.assert_close(probs, torch.softmax(agents.actor.logits(obs.unsqueeze(1)).squeeze(1), -1))
    freq = torch.stack([(draws == a).float().mean(0) for a in range(ACT)], -1)
    torch.testing.assert_close(freq, probs, atol=0.03, rtol=0)  # 4000 draws: 3 standard deviations < 0.025
    assert not torch.equal(draws[:, 0], draws[:, 1])  # each agent draws from its own stream
    greedy = agents.act(obs.unsqueeze(1).numpy())
    assert greedy.dtype == torch.int64 and torch.equal(greedy.squeeze(1), probs.argmax(-1))


def test_dpd_distils_towards_the_peers_probabilities(float64):
    """DPD_SAC on discrete actions, per sample: the peer's probabilities p, the weights clip(exp(alpha (E_p Q1_peer -
    E_p Q1_self)), 0.01, 100) normalised over the batch, the loss sum_i w_i KL(p_i || pi_self(.|s_i))."""
    seeds = [1, 101, 201]
    agents = DiscreteSAC(OBS, ACT, None, None, seeds, "cpu", hidden_size=16)
    with torch.no_grad():  # critics that disagree strongly, so the weights hit the clip bounds too
        for p in agents.critic.parameters():
            p.mul_(4.0)
    scheme = Scheme(SharingSettings.of("DPD_SAC", 3, {"dpd_alpha": 3.0}), agents, seeds, torch.device("cpu"))
    obs = torch.randn(3, B, OBS, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits, q1 = agents.actor.logits(obs), agents.critic.q1(obs)
    clipped = False
    for offset, peer in zip((1, 2), scheme.peer_slots):
        probs, w = scheme.distillation.peer_targets(obs, peer)
        for m in range(3):
            j = (m + offset) % 3
            with torch.no_grad():  # the peer's networks on the learner's states
                peer_logits, peer_q1 = agents.actor.logits(obs[m:m + 1].expand(3, -1, -1))[j], \
                    agents.critic.q1(obs[m:m + 1].expand(3, -1, -1))[j]
            raw, expected_kl = [], []
            for b in range(B):
                p = probabilities(peer_logits[b])
                torch.testing.assert_close(probs[m, b], torch.tensor(p), rtol=1e-12, atol=1e-14)
                gap = sum(p[a] * (float(peer_q1[b, a]) - float(q1[m, b, a])) for a in range(ACT))
                raw.append(min(max(math.exp(3.0 * gap), 0.01), 100.0))
                expected_kl.append(kl(p, probabilities(logits[m, b])))
            torch.testing.assert_close(w[m, :, 0], torch.tensor(raw) / sum(raw), rtol=1e-10, atol=1e-14)
            clipped |= min(raw) == 0.01 or max(raw) == 100.0
        before = copy.deepcopy(agents.actor)
        loss = scheme.distillation.distill(obs, peer)
        with torch.no_grad():
            own = torch.log_softmax(before.logits(obs), -1)
            expected = (w * (probs * (probs.log() - own)).sum(-1, keepdim=True)).sum(dim=(1, 2))
        torch.testing.assert_close(loss, expected, rtol=1e-12, atol=1e-14)
    assert clipped


def test_learner_stores_action_indices_and_behaviour_and_plays_greedy_actions():
    settings = SharingSettings.of("DASE_SAC", 2, {})
    learner = Learner("SAC", {"hidden_size": 16}, [0, 100], 2, OBS, ACT, None, None, 100, 8, 1,
                      torch.device("cpu"), settings)
    assert isinstance(learner.agents, DiscreteSAC) and learner.buffer.action.shape[-1] == 1
    obs = np.random.default_rng(0).standard_normal((2, OBS)).astype(np.float32)
    learner.store(obs, np.array([2, 0]), np.ones(2), obs, np.zeros(2, bool), None)  # warm-up: random actions
    actions, behaviour = learner.act(obs, warmup=False)
    learner.store(obs, actions, np.ones(2), obs, np.zeros(2, bool), behaviour)
    np.testing.assert_array_equal(learner.buffer.action[0, :4, 0].numpy(), [2, 0, *actions])
    np.testing.assert_allclose(learner.buffer.behaviour_probs[0, :2].numpy(), np.full((2, ACT), 1 / 3))
    np.testing.assert_allclose(learner.buffer.behaviour_probs[0, 2:4].numpy(), behaviour[0], rtol=1e-6)
    greedy = learner.snapshot()(obs[:, None])
    assert greedy.dtype == np.int64 and greedy.shape == (2, 1)
    learner.update_once()


def cartpole_cli(policy: str, folder, *extra: str, env: str = "CartPole-v1") -> int:
    return main_guard(sac_main.run, ["--policy", policy, "--env", env, "--seed", "2", "--num_steps", "400",
                                     "--start_steps", "200", "--eval_freq", "200", "--eval_episodes", "2",
                                     "--batch_size", "32", "--hidden_size", "32", "--threads", "1",
                                     "--results_dir", str(folder), "--quiet", *extra])


@pytest.mark.parametrize("policy,env", [("SAC", "CartPole-v1"), ("DASE_SAC", "CartPole-v1"),
                                        ("DPD_SAC", "CartPole-v1"), ("DIFF_SAC", "Acrobot-v1"),
                                        ("DIFF_DASE_SAC", "CartPole-v1"), ("DASE_SAC", "RandomExtremeCartPole-v1")])
def test_every_policy_trains_on_discrete_actions(policy, env, tmp_path):
    assert cartpole_cli(policy, tmp_path, env=env) == 0
    stem = f"{policy}_ring_{env}_2" if policy.startswith("DIFF") else f"{policy}_{env}_2"  # DIFF_: a ring
    record = json.loads((tmp_path / f"{stem}.json").read_text())
    # the discrete defaults: alpha tuned towards 0.89 log|A|, rewards unscaled, no policy family
    assert record["config"]["algo"] == {"gamma": 0.99, "tau": 0.005, "lr": 3e-4, "alpha": 0.2,
                                        "automatic_entropy_tuning": True, "reward_scale": 1.0, "hidden_size": 32,
                                        "target_update_interval": 1, "target_entropy_scale": 0.89}
    agents = {"SAC": 1, "DASE_SAC": 2, "DPD_SAC": 2, "DIFF_SAC": 4, "DIFF_DASE_SAC": 4}[policy]
    names = [stem] if agents == 1 else [f"{stem}_Agent_{i}" for i in range(agents)]
    for name in names:
        curve = np.load(tmp_path / f"{name}.npy")
        low, high = (-500, -50) if env.startswith("Acrobot") else (1, 500)
        assert curve.shape == (3,) and np.isfinite(curve).all() and low <= curve.min() and curve.max() <= high
        if "DASE" in policy:  # weights of the shared samples: none before the first update (step 200)
            w = np.load(tmp_path / f"{name}_weights.npy")
            assert np.isnan(w[:2]).all() and 0 < w[2] <= 1, w


def test_worker_processes_and_saved_models_give_the_same_policies(tmp_path):
    """Environments in worker processes (integer actions through shared memory) give the files of one process;
    saved models, loaded by a run that does not train, evaluate to the saved run's last score."""
    assert cartpole_cli("DASE_SAC", tmp_path / "local", "--env_workers", "0", "--save_model", "--models_dir",
                        str(tmp_path / "models")) == 0
    assert cartpole_cli("DASE_SAC", tmp_path / "pool", "--env_workers", "2") == 0
    names = sorted(p.name for p in (tmp_path / "local").glob("*.npy"))
    assert len(names) == 4  # two curves, two weight curves
    for name in names:
        assert (tmp_path / "local" / name).read_bytes() == (tmp_path / "pool" / name).read_bytes(), name
    assert cartpole_cli("DASE_SAC", tmp_path / "loaded", "--num_steps", "200", "--start_steps", "1000",
                        "--models_dir", str(tmp_path / "models"), "--load_model", "default") == 0
    for i in range(2):
        saved = np.load(tmp_path / "local" / f"DASE_SAC_CartPole-v1_2_Agent_{i}.npy")
        assert np.load(tmp_path / "loaded" / f"DASE_SAC_CartPole-v1_2_Agent_{i}.npy")[0] == saved[-1]


def test_alpha_stays_fixed_without_tuning(tmp_path):
    args = sac_main.parse(["--policy", "SAC", "--env", "CartPole-v1", "--no_automatic_entropy_tuning",
                           "--alpha", "0.05", "--target_entropy_scale", "0.6", "--quiet"])
    cfg = sac_main.build_config(args)
    assert cfg.algo["automatic_entropy_tuning"] is False and cfg.algo["target_entropy_scale"] == 0.6
    learner = Learner("SAC", cfg.algo, [0], 1, OBS, ACT, None, None, 100, 8, 1, torch.device("cpu"))
    assert learner.agents.alpha_opt is None
    batch = random_batch(1, torch.Generator().manual_seed(0))
    learner.agents.update(batch)
    torch.testing.assert_close(learner.agents.temperature().view(-1), torch.tensor([0.05]))


@pytest.mark.parametrize("argv,algo", [
    ([], {"policy_type": "Deterministic", "automatic_entropy_tuning": False, "reward_scale": 5.0}),
    (["--policy_type", "Gaussian", "--automatic_entropy_tuning"],
     {"policy_type": "Gaussian", "automatic_entropy_tuning": True, "reward_scale": 5.0}),
    (["--env", "Humanoid-v5"], {"policy_type": "Deterministic", "automatic_entropy_tuning": False,
                                "reward_scale": 20.0}),
], ids=["default", "gaussian tuned", "humanoid"])
def test_continuous_sac_keeps_its_settings(argv, algo):
    """What a continuous run records (and its checkpoints compare) is what it was before discrete SAC: the same
    keys and values, no target entropy scale."""
    if argv[:2] == ["--env", "Humanoid-v5"]:
        pytest.importorskip("mujoco")
    args = sac_main.parse(["--env", "Pendulum-v1", *argv, "--quiet"])
    cfg = sac_main.build_config(args)
    assert cfg.algo == {**algo, "gamma": 0.99, "tau": 0.005, "lr": 3e-4, "alpha": 0.2, "hidden_size": 256,
                        "target_update_interval": 1}
    # the flags as given (None: not given); the settings above as resolved
    assert cfg.flags["policy_type"] == (algo["policy_type"] if "--policy_type" in argv else None)
    assert cfg.flags["automatic_entropy_tuning"] == (True if "--automatic_entropy_tuning" in argv else None)


# ---- learning (slow) ---------------------------------------------------------------------------------------------
# Documented flags only: 64-64 networks, batch 256, Adam lr 1e-3, 1000 warm-up steps, one update per step, the default
# target entropy 0.89 log 2. Measured with one torch thread on the 2-core development machine (shared, so wall time
# is up to twice CPU time), seeds 0 / 1 / 2, 15000 steps: the first evaluation >= 475 at step 7000 / none (best 442)
# / 9000; 86-89 s of CPU each. tau 0.005 makes Q slow to converge (time constant 1 / (tau (1 - gamma)) = 20000
# updates): the curves creep towards 500 for 10-20k steps.
LEARN = dict(policy="SAC", env="CartPole-v1", seed=0, max_time_steps=12_000, start_time_steps=1000, eval_freq=500,
             eval_episodes=10, batch_size=256, threads=1, quiet=True, checkpoint_freq=0,
             algo={"hidden_size": 64, "lr": 1e-3})


@pytest.mark.slow
def test_discrete_sac_solves_cartpole(tmp_path):
    """A mean of 10 greedy evaluation episodes >= 475 at some evaluation within 12000 steps (about 70 s of CPU)."""
    start = time.process_time()
    curve = train(RunConfig(results_dir=str(tmp_path), **LEARN), stop_when=lambda curves: curves[0][-1] >= 475)[0]
    assert len(curve) <= 25 and curve[0] < 100, np.round(curve)  # ends at the first evaluation >= 475
    assert curve.max() >= 475, f"did not solve CartPole: {np.round(curve)}"
    print(f"first >= 475 at step {500 * int(np.argmax(curve >= 475))}, {time.process_time() - start:.0f} s CPU")


# Acrobot-v1 (issue 89): with the default target entropy (0.89 log 3 = 0.98 nats of the uniform's 1.10) the policy
# explores almost uniformly, never swings up, and both the greedy and the sampled policy score -500 to 100k; with
# --target_entropy_scale 0.3 (docs/replay.md's flags below) the committed run, "Learning Curves/discrete_sac_acrobot/"
# (seeds 0-4, 100k steps), passes -150 at 17k / 17k / 19k / 31k / 21k. Seed 0 here alone: 58 s of CPU.
ACROBOT = dict(policy="SAC", env="Acrobot-v1", seed=0, max_time_steps=30_000, start_time_steps=1000, eval_freq=1000,
               eval_episodes=10, batch_size=256, threads=1, quiet=True, checkpoint_freq=0,
               algo={"hidden_size": 64, "lr": 1e-3, "target_entropy_scale": 0.3})
ACROBOT_RUN = Path(__file__).resolve().parent.parent / "Learning Curves" / "discrete_sac_acrobot"


@pytest.mark.slow
def test_discrete_sac_learns_acrobot_with_the_documented_flags(tmp_path):
    """A mean of 10 greedy evaluation episodes above -150 within 30000 steps (the first such evaluation ends it)."""
    start = time.process_time()
    curve = train(RunConfig(results_dir=str(tmp_path), **ACROBOT), stop_when=lambda curves: curves[0][-1] > -150)[0]
    assert curve[0] == -500 and curve.max() > -150, f"did not learn Acrobot: {np.round(curve)}"
    print(f"first > -150 at step {1000 * int(np.argmax(curve > -150))}, {time.process_time() - start:.0f} s CPU")


def test_the_committed_acrobot_run_is_what_docs_replay_says():
    """The committed 5-seed run: every seed finished at 100k with the documented flags, and most seeds' last 10
    evaluations average better than -150 (issue 89's bar); the numbers docs/replay.md quotes recompute."""
    finals, firsts = [], []
    for seed in range(5):
        record = json.loads((ACROBOT_RUN / f"SAC_Acrobot-v1_{seed}.json").read_text())
        assert "finished" in record and record["config"]["max_time_steps"] == 100_000
        assert record["config"]["algo"]["target_entropy_scale"] == 0.3
        curve = np.load(ACROBOT_RUN / f"SAC_Acrobot-v1_{seed}.npy")
        assert len(curve) == 101
        finals.append(float(curve[-10:].mean()))
        firsts.append(1000 * int(np.argmax(curve > -150)))
    assert sum(f > -150 for f in finals) >= 3, finals
    text = (Path(__file__).resolve().parent.parent / "docs" / "replay.md").read_text()
    assert "passes -150 at " + " / ".join(f"{f // 1000}k" for f in firsts) in text
    assert "is " + ", ".join(f"{f:.1f}" for f in finals) + " (seed 1" in text
