"""What a run will hold in memory, estimated from its settings alone before anything is built: one line naming the
flags that make it too big, instead of an allocator's traceback (or a machine swapping) minutes later.

Every size flag enters the estimate: the learners (``--seeds`` x ``--num_agents``) multiply all of it; per learner
its networks (``--hidden_size``/``--hidden_sizes``, ``--ensemble_q`` critics, ``--image_features``, ``--seq_hidden``:
parameters, target copies and Adam's moments, and the module objects of every critic), one update's batch
(``--batch_size`` x ``--seq_len`` windows of activations; ``--dpd_batch_size``; ``--rnd_n_sample`` candidate
actions per step; ACER's ``--sdn_samples``), the replay rows the run will write (``--buffer_size``), its
environments (``--envs_per_agent`` and one per ``--eval_episodes``) and worker processes (``--env_workers``).

Each figure is a lower bound (the input and output layers, whose sizes come with the environment, are taken at
their least), so a run refused here could never have fit. The buffers' and rollouts' exact sizes are checked again
once the environment's shapes are known, before they are allocated (``setup.replay_memory_check``,
``setup.rollout_memory``).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..naming import ALGORITHM
from ..settings import defaults
from .memory import check_fits, human

FLOAT = 4
COPIES = 4  # a trained network: its parameters, its target copy (or the evaluation copy), Adam's two moments
NETWORK_OBJECT = 40_000  # one critic's modules, online and target (measured: 19 KB + 29 KB for a 1-unit QNetwork)
ENV_BYTES = 5_000  # one environment in this process (measured: 5.4 KB for CartPole-v1, 5.8 KB for Pendulum-v1)
WORKER_BYTES = 40e6  # one environment worker process (Python, NumPy, Gymnasium: 45 MB resident)
CANDIDATE_BYTES = 500  # --rnd_n_sample: one candidate action's tensors, held until the step picks one (608 B)
ROW_BYTES = 20  # a replay row at least: observation and next observation, action, reward, flag (4 bytes each)
IMAGE_FLAT = 64 * 7 * 7  # the Nature CNN's flattened output on an 84x84 frame, which every image task has
IMAGE_ACTIVATIONS = 32 * 20 * 20 + 64 * 9 * 9 + 64 * 7 * 7  # its three convolutions' outputs per 84x84 image
IMAGE_BYTES = 84 * 84  # one uint8 84x84 frame
RND_WIDTH = 64  # utils.run.replay's RND models (algorithms/replay/intrinsic.py: WIDTH)


@dataclass
class Part:
    """One share of the run's memory: what it is, the flags (name, value) that size it, bytes on the run's device
    and in host memory (the same place on the CPU)."""
    what: str
    flags: list
    device: float = 0.0
    host: float = 0.0

    def shown(self) -> str:
        return " x ".join(f"{name} {value}" for name, value in self.flags)

    def hint(self) -> str:
        return "lower " + " or ".join(dict.fromkeys(name for name, _ in self.flags))


def mlp_parameters(widths, inputs: int = 1, outputs: int = 1) -> int:
    """Weights and biases of an MLP inputs -> widths -> outputs."""
    sizes = [max(int(inputs), 1), *widths, max(int(outputs), 1)]
    return sum(a * b + b for a, b in zip(sizes, sizes[1:]))


def replay_parts(cfg, members: int) -> list[Part]:
    a, algo = cfg.algorithm, cfg.algo_settings()
    own, seq, images = algo.own, algo.sequence, algo.images
    sac = not hasattr(own, "hidden")  # SAC's one --hidden_size, TD3's and DDPG's --hidden_sizes
    widths = [max(int(w), 0) for w in ([own.hidden_size] * 2 if sac else own.hidden)]
    hidden: list[tuple[str, str | int]] = [("--hidden_sizes", " ".join(map(str, widths)))] if not sac else \
        [("--hidden_size", widths[0])]
    critics = int(getattr(own, "ensemble_q", 1 if a == "DDPG" else 2))  # DDPG: one critic; discrete SAC: twin Qs
    nets = 1 + critics
    flags: list[tuple[str, str | int]] = [("--ensemble_q", critics)] if critics > 2 else []  # what was raised first, then the widths
    inputs, encoder, per_row = 1, 0, nets * sum(widths)
    window = 1
    state = 0  # what a replay row stores of the encoder's state (algorithms/replay/sequence.py: state_size)
    if seq.seq_encoder:  # one encoder per member: GRU 3 gates, LSTM 4; attention query, key and value
        h, kind = seq.seq_hidden, seq.seq_encoder
        encoder = (4 if kind == "lstm" else 3) * h * (h + 1)
        state = {"gru": h, "lstm": 2 * h}.get(kind, 2 * seq.seq_len)  # attn: its window's steps
        inputs, window, per_row = h, seq.seq_len, per_row + h
        if h != defaults(type(seq))["seq_hidden"]:
            flags.append(("--seq_hidden", h))
    if images is not None:  # one Nature CNN per member (and its target); the heads read its features
        features = images.image_features
        encoder = IMAGE_FLAT * features + features
        inputs, per_row = features, per_row + features + 2 * IMAGE_ACTIVATIONS
        if features != defaults(type(images))["image_features"]:
            flags.append(("--image_features", features))
    flags += hidden
    per_member = FLOAT * COPIES * (nets * mlp_parameters(widths, inputs) + encoder)
    parts = [Part("the networks", flags, device=members * per_member, host=nets * NETWORK_OBJECT)]
    batch = [("--batch_size", cfg.batch_size)] + ([("--seq_len", window)] if window > 1 else [])
    rows = members * max(cfg.batch_size, 0) * window
    image = 2 * 3 * IMAGE_BYTES if images is not None else ROW_BYTES
    parts.append(Part("one update's batch", batch, device=rows * (FLOAT * per_row + image)))
    if cfg.is_dpd:  # each agent's actor and its peer's on the distillation batch
        size = int(cfg.sharing_settings().dpd_batch_size)
        parts.append(Part("one distillation batch", [("--dpd_batch_size", size)],
                          device=members * size * (2 * FLOAT * sum(widths) + ROW_BYTES)))
    if own.rnd:  # K candidate actions per step, each scored by the RND predictor and target
        k = own.rnd_n_sample
        parts.append(Part("the candidate actions of a step", [("--rnd_n_sample", k)],
                          device=members * k * 2 * 2 * RND_WIDTH * FLOAT, host=k * CANDIDATE_BYTES))
    # the rows the run will write (every agent's steps, at most the capacity per seed); on a GPU all of it at once
    steps = cfg.max_time_steps * cfg.num_agents
    capacity = max(cfg.buffer_size, 0)
    written = capacity if str(cfg.device).startswith("cuda") else min(capacity, max(steps, 0))
    row = ROW_BYTES + FLOAT * state + (IMAGE_BYTES if images is not None else 0)
    parts.append(Part("the replay buffers", [("--buffer_size", cfg.buffer_size)],
                      device=len(cfg.seed_list()) * written * row))
    return parts


def rollout_parts(cfg, members: int) -> list[Part]:
    own = cfg.algo_settings().own
    h = own.hidden_size
    nets = 3 if cfg.algorithm == "ACER" else 2  # policy and value (ACER: Q, and the average policy)
    params = nets * mlp_parameters([h, h]) + (8 * h * h if getattr(own, "recurrent", False) else 0)  # A2C, SEAC: --recurrent
    parts = [Part("the networks", [("--hidden_size", h)], device=members * FLOAT * 3 * params)]
    if "sdn_samples" in cfg.algo:  # continuous ACER: the advantage network on n sampled actions of every rollout step
        n = own.sdn_samples
        rows = members * own.n_steps * cfg.envs_per_agent * n
        parts.append(Part("the stochastic dueling network's samples", [("--sdn_samples", n)],
                          device=rows * 2 * h * FLOAT))
    return parts


def footprint(cfg) -> list[Part]:
    """The parts of ``cfg``'s memory, each a lower bound (see the module's docstring)."""
    members = len(cfg.seed_list()) * max(int(cfg.num_agents), 1)
    family = ALGORITHM[cfg.algorithm].family
    if family == "replay":
        parts = replay_parts(cfg, members)
    elif family == "rollout":
        parts = rollout_parts(cfg, members)
    else:  # A3C: its processes are checked by check_a3c
        parts = rollout_parts(cfg, len(cfg.seed_list()))
    k = cfg.envs_per_agent
    envs = [("--envs_per_agent", k)] if k > 1 else []
    parts.append(Part("the environments", envs + [("--eval_episodes", cfg.eval_episodes)],
                      host=members * (max(k, 1) + max(cfg.eval_episodes, 0)) * ENV_BYTES))
    if cfg.env_workers:
        parts.append(Part("the environment workers", [("--env_workers", cfg.env_workers)],
                          host=min(cfg.env_workers, members) * WORKER_BYTES))
    return parts


def check_footprint(cfg) -> None:
    """A UsageError (one line) when the run's estimate exceeds the memory available: the GPU's for what lives
    there (with ``--device cuda``), the machine's for the rest. It names the largest part's flags, and the learners
    that multiply it."""
    parts = footprint(cfg)
    seeds, members = len(cfg.seed_list()), len(cfg.seed_list()) * max(int(cfg.num_agents), 1)
    gpu = str(cfg.device).startswith("cuda")
    places = [("device", cfg.device), ("host", None)] if gpu else [(None, None)]
    for place, device in places:
        size = (lambda p: p.device + p.host) if place is None else (lambda p: getattr(p, place))  # noqa: E731
        need = sum(size(p) for p in parts)
        largest = max(parts, key=size)
        if not need or not largest.flags:
            continue
        rest = need - size(largest)
        what = f"{largest.shown()}: {largest.what} of {members} learner(s)"
        if rest >= 0.1 * need:
            what += f" ({human(size(largest))}) and the rest of the run"
        hint = largest.hint()
        if seeds > 1:
            hint += " or run fewer --seeds at once"
        check_fits(what, need, device, hint)
