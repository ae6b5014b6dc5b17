"""Pieces both command lines share: flags, device choice, one-line errors with exit code 2."""
from __future__ import annotations

import argparse
import os
import re
import sys
from collections import Counter
from pathlib import Path
from typing import Callable

from .cores import available_cores  # noqa: F401  (the command lines' and tools' name for it)
from .errors import Interrupted, NonFinite, UsageError, WorkerDied, disk_full_cause
from .settings import count, real  # noqa: F401  (the command lines' flag types)

EXIT_USAGE = 2
EXIT_DISK_FULL = 4  # a file could not be written: no space left on the device, or the disk quota exceeded


def kl_variance(text: str) -> float | str:
    """--kl_div_var: a positive number, or "matched" (the variance of the exploration noise)."""
    if text.strip().lower() == "matched":
        return "matched"
    try:
        value = real(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(f"{text!r}: give a positive number or 'matched'") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"{text!r} must be positive (or 'matched')")
    return value


def seed_list(tokens: list[str]) -> list[int]:
    """--seeds 0 1 2, --seeds 0-9, or both mixed (0-4 7 9): sorted, without repeats."""
    seeds: list[int] = []
    for token in tokens:
        m = re.fullmatch(r"(\d+)-(\d+)", token)
        if m:
            lo, hi = int(m.group(1)), int(m.group(2))
            if hi < lo:
                raise UsageError(f"--seeds {token}: an empty range; write LOW-HIGH with LOW <= HIGH")
            seeds.extend(range(lo, hi + 1))
        elif token.isdigit():
            seeds.append(int(token))
        else:
            raise UsageError(f"--seeds {token}: seeds are non-negative integers or ranges like 0-9")
    counts = Counter(seeds)  # linear: --seeds 0-200000 is checked at once
    repeated = sorted(s for s, k in counts.items() if k > 1)
    if repeated:
        raise UsageError(f"--seeds {' '.join(tokens)}: {', '.join(map(str, repeated))} named twice")
    return seeds


def check_policy(policy: str, script: str) -> None:
    """A UsageError unless ``script`` trains ``policy``; it names the command line that does, if any."""
    from .naming import SCRIPT_POLICIES, script_of

    if policy not in SCRIPT_POLICIES[script]:
        other = script_of(policy)
        hint = f" ({policy} runs with {other})" if other else ""
        raise UsageError(f"--policy: unknown policy {policy!r}; use one of {', '.join(SCRIPT_POLICIES[script])}{hint}")


class Parser(argparse.ArgumentParser):
    """argparse with one-line errors: 'prog: error: ... (see --help)', exit code 2."""

    def error(self, message: str):
        from .naming import SCRIPT_FLAG_NAMES, other_spellings

        if message.startswith("unrecognized arguments:") and self.prog in SCRIPT_FLAG_NAMES:
            renamed = other_spellings(self.prog)
            for token in message.partition(":")[2].split():
                flag = token.split("=", 1)[0]
                if flag in renamed:  # the other command line's name of one of ours
                    message = f"unrecognized argument {flag}: {self.prog} calls it {renamed[flag]}"
                    break
        sys.stderr.write(f"{self.prog}: error: {message} (see --help)\n")
        sys.exit(EXIT_USAGE)


def add_common_flags(p: argparse.ArgumentParser, env_default: str = "Hopper", skip: tuple[str, ...] = ()) -> None:
    """Flags that mean the same on every command line; ``skip``: those a command line does not take (ac_main.py's
    on-policy learners have no replay buffer and no sharing weights)."""

    def add(flag, **kwargs):
        if flag not in skip:
            p.add_argument(flag, **kwargs)

    add("--env", type=str, default=env_default,
        help=f"Gymnasium environment id (default: {env_default}"
             + (" = newest, Hopper-v5" if env_default == "Hopper" else "")
             + "); the paper's MuJoCo -v2 ids map to -v5")
    add("--seed", type=int, default=None, help="run seed; agent i uses seed + 100 * i (default: 0)")
    add("--seeds", type=str, nargs="+", default=None, metavar="SEED",
        help="several seeds in one process, e.g. --seeds 0 1 2 or --seeds 0-9: one batched model, each "
             "seed's files exactly those of --seed S alone (overrides --seed)")
    add("--gpu", type=int, default=0,
        help="GPU ordinal, the paper's spelling; CPU when no GPU is present (default: 0)")
    add("--device", type=str, default=None,
        help="cpu | cuda | cuda:N; overrides --gpu and fails if the device is missing (default: auto)")
    add("--num_agents", type=count, default=None,
        help="agents sharing one buffer (DASE_), distilling from each other (DPD_) or averaging parameters "
             "(DIFF_) (default: 2 for DASE_ and DPD_ policies, 4 for DIFF_, 1 otherwise)")
    add("--similarity", type=str, default="js", choices=["js", "kl", "none"],
        help="divergence for the sharing weights: js (paper), kl, or none = no correction (default: js)")
    add("--dpd_alpha", type=real, default=1.0,
        help="DPD_ policies: alpha of the distillation weights clip(exp(alpha * (Q_peer - Q_self)), "
             "0.01, 100) (default: 1.0)")
    add("--dpd_batch_size", type=count, default=256,
        help="DPD_ policies: states per distillation step, from the peer's buffer (default: 256)")
    add("--kl_div_var", type=kl_variance, default=0.1,
        help="variance v of the reference Gaussian N(0, v I) of the sharing weights, or 'matched': v = the "
             "variance of the exploration noise, so a peer acting like the learner weighs ~1 (DASE_ policies "
             "with a deterministic actor; files named {policy}_matched_...) (default: 0.1, the paper's)")
    add("--kl_precision", type=str, default="float64", choices=["float64", "float32"],
        help="arithmetic of the sharing weights' Gaussian fit and divergence: float64 (ours), or float32 as the "
             "paper's code (torch.distributions; weight 0 where float32 rejects the covariance); files named "
             "{policy}_float32_... (default: float64)")
    add("--topology", type=str, default=None, choices=["complete", "ring", "star", "none"],
        help="the agents' communication graph: DASE_ learners sample only their own and their neighbours' "
             "transitions, DPD_ learners distil only from neighbours, DIFF_ learners average parameters "
             "with neighbours; star: agent 0 is the hub; files carry it unless complete (default: complete; "
             "ring for DIFF_)")
    add("--adjacency", type=str, default=None, metavar="MATRIX",
        help="an explicit graph instead of --topology: a 0/1 symmetric matrix with a zero diagonal, as JSON "
             "(e.g. '[[0,1],[1,0]]') or a .npy or .txt file; files carry adj + a hash of it")
    add("--diffusion", action="store_true",
        help="after every update each agent averages its actor and critic with its graph neighbours "
             "(Diff-DAC's adapt-then-combine): TD3 becomes DIFF_TD3, DASE_TD3 DIFF_DASE_TD3")
    add("--diffusion_weights", type=str, default="uniform", choices=["uniform", "metropolis"],
        help="diffusion: uniform = 1 / (neighbours + 1) each, Diff-DAC's; metropolis = Metropolis-Hastings, "
             "doubly stochastic (default: uniform)")
    add("--link_drop", type=real, default=0.0,
        help="diffusion: probability that a parameter message between neighbours is lost at an update, "
             "drawn from each agent's own random stream (default: 0)")
    add("--sync_freq", type=int, default=0, metavar="K",
        help="diffusion: Diff-DAC's reference gossip with bounded asynchrony, simulated: a learner combines only "
             "when every neighbour's unread message has arrived, skips at most K combines in a row, then waits; "
             "0: every combine waits (synchronous); files named sync{K} (default: 0)")
    add("--message_delay", type=real, default=1.0,
        help="with --sync_freq K > 0: mean delay of a message in updates (geometric on 0, 1, ...; drawn per message "
             "and link from each agent's own stream); files named delay{d} unless 1 (default: 1)")
    add("--init", type=str, default=None, choices=["common", "separate"],
        help="initial parameters of a seed's agents: common = all start equal to agent 0's (drawn from the seed's "
             "own stream, as Diff-DAC's reference starts its learners), separate = each from its own seed "
             "(default: common for diffusion, DIFF_ policies and --diffusion; separate otherwise)")
    add("--buffer_size", type=count, default=1_000_000,
        help="replay capacity in transitions: the one buffer all agents share (DASE_, baselines), or each "
             "learner's own (DPD_); at least --batch_size (default: 1e6)")
    add("--n_step", type=count, default=1,
        help="N-step returns: each target sums the rewards of up to N steps of the sample's writer and bootstraps "
             "with gamma^N, cut where an episode ended (a time limit still bootstraps) (default: 1)")
    add("--prioritized", action="store_true",
        help="prioritized replay (Schaul et al. 2016): each agent samples rows with probability p^alpha / sum, "
             "p = |TD error| + eps, new rows at the highest priority; importance weights multiply the sharing weights")
    add("--per_alpha", type=real, default=0.6, help="--prioritized: priority exponent alpha (default: 0.6)")
    add("--per_beta", type=real, default=0.4,
        help="--prioritized: importance-weight exponent beta at the start, annealed linearly to 1 (default: 0.4)")
    add("--per_beta_steps", type=count, default=None,
        help="--prioritized: steps over which beta reaches 1 (default: the run's length)")
    add("--per_eps", type=real, default=1e-6, help="--prioritized: eps added to |TD error| (default: 1e-6)")
    add("--eval_freq", type=count, default=1000, help="evaluate every this many steps (default: 1000)")
    add("--eval_episodes", type=count, default=10, help="episodes per evaluation (default: 10)")
    add("--eval_seed_offset", type=int, default=100,
        help="the evaluation episodes' reset seeds derive from the run's seed plus this, for every agent of the run "
             "(default: 100); e.g. 0 makes a one-agent run of seed s + 100 score on the episodes of a run of seed s")
    add("--batch_size", type=count, default=256, help="minibatch size per agent (default: 256)")
    add("--results_dir", type=str, default="Learning Curves",
        help="where curves (.npy) and the run's config (.json) go (default: 'Learning Curves')")
    add("--save_model", action="store_true", help="save each agent's networks after every evaluation")
    add("--load_model", type=str, default="",
        help="model to start from: NAME loads models/NAME[_Agent_i].pt, 'default' the run's own name")
    add("--models_dir", type=str, default="models", help="folder of --save_model/--load_model files")
    add("--quiet", action="store_true", help="print nothing but errors")
    add("--threads", type=int, default=None,
        help="torch CPU threads; 1 when several runs share a machine. On a GPU the default is 1, so the "
             "environment workers get the cores (default: all cores on the CPU, 1 on a GPU)")
    add("--compile", action="store_true",
        help="torch.compile the networks (slow start: tens of seconds; off by default)")
    add("--checkpoint_freq", type=count, default=50_000,
        help="write a checkpoint every this many steps and on SIGINT/SIGTERM; 0 disables; a finished "
             "run deletes it (default: 50000)")
    add("--checkpoint_dir", type=str, default=None,
        help="where checkpoints go (default: RESULTS_DIR/checkpoints)")
    add("--stop_at", type=count, default=None, metavar="STEP",
        help="pause the run at this step (counted as its step budget): write its checkpoint and exit with code 0; "
             "--resume continues it as if it had never stopped, e.g. every run of a sweep to 100k first "
             "(python -m utils.sweep --until) (default: run to the end)")
    add("--resume", action="store_true",
        help="continue this run from its checkpoint (does nothing if it finished, starts from step 0 "
             "if it has no checkpoint)")
    add("--overwrite", action="store_true",
        help="start the run over, deleting its old curves, weights, JSON record and checkpoint")
    add("--cuda_graphs", action="store_const", const=True, default=None,
        help="replay each batched update from a CUDA graph (GPU only; the default on a GPU unless --compile)")
    add("--no_cuda_graphs", dest="cuda_graphs", action="store_const", const=False,
        help="eager updates on a GPU (no CUDA graphs)")
    add("--env_workers", type=int, default=None,
        help="worker processes that step the environments and evaluation episodes, evaluation then "
             "running beside training; 0: all in this process (default: the cores torch leaves free, "
             "0 when fewer than 2); results are the same for every value")
    add("--eval_tasks", type=str, default="own", choices=["own", "all"],
        help="task variants (e.g. --env RandomExtremePendulum-v1, one task per agent): 'all' also evaluates "
             "each agent on every agent's task, with the same episode seeds, into {curve}_tasks.npy "
             "[evaluations x agents]; the curve stays the own-task score (default: own)")
    add("--tensorboard", action="store_true",
        help="also log returns, losses, sharing weights and steps/s per agent for TensorBoard, under "
             "RESULTS_DIR/tensorboard/RUN (view: tensorboard --logdir RESULTS_DIR/tensorboard)")


def run_flags(args) -> dict:
    """RunConfig fields that both command lines take straight from their flags."""
    seeds = seed_list(args.seeds) if args.seeds else None
    if seeds and args.seed is not None:
        raise UsageError(f"--seed {args.seed} and --seeds {' '.join(args.seeds)}: give one of them")
    if args.seed is None and not seeds:
        args.seed = 0
    device = resolve_device(args.device, args.gpu)
    graphs = getattr(args, "cuda_graphs", False)
    graphs = graphs if graphs is not None else (device.startswith("cuda") and not args.compile)
    replay = dict(batch_size=args.batch_size, buffer_size=args.buffer_size) if hasattr(args, "batch_size") else {}
    if hasattr(args, "n_step"):
        replay["n_step"] = args.n_step
    if getattr(args, "prioritized", False):
        steps = args.per_beta_steps if args.per_beta_steps is not None else \
            getattr(args, "max_time_steps", getattr(args, "num_steps", 1))
        replay["per"] = dict(alpha=args.per_alpha, beta=args.per_beta, beta_steps=steps, eps=args.per_eps)
    elif hasattr(args, "per_alpha") and (args.per_alpha, args.per_beta, args.per_beta_steps, args.per_eps) != \
            (0.6, 0.4, None, 1e-6):
        raise UsageError("--per_alpha/--per_beta/--per_beta_steps/--per_eps apply with --prioritized; add it or drop "
                         "them")
    return dict(seed=seeds[0] if seeds else args.seed, seeds=seeds, eval_freq=args.eval_freq, eval_episodes=args.eval_episodes,
                eval_seed_offset=args.eval_seed_offset,
                **replay, results_dir=args.results_dir,
                save_model=args.save_model, load_model=args.load_model, models_dir=args.models_dir, quiet=args.quiet,
                checkpoint_freq=args.checkpoint_freq, checkpoint_dir=args.checkpoint_dir, resume=args.resume,
                stop_at=args.stop_at,
                overwrite=args.overwrite, threads=args.threads, compile=args.compile,
                tensorboard=args.tensorboard, env_workers=args.env_workers, eval_tasks=args.eval_tasks,
                cuda_graphs=graphs, device=device, init=args.init, flags=vars(args))


def resolve_policy(args) -> str:
    """--policy, with --diffusion folded in (TD3 -> DIFF_TD3, DASE_TD3 -> DIFF_DASE_TD3)."""
    from .naming import with_diffusion

    if not args.diffusion:
        return args.policy
    policy = with_diffusion(args.policy)
    if policy is None:
        raise UsageError(f"--diffusion: {args.policy} has no diffusion form; use it with TD3, DDPG, SAC or a DASE_ "
                         "policy (or a DIFF_ policy without --diffusion)")
    return policy


def read_adjacency(text: str | None):
    """--adjacency: a matrix as JSON, or a .npy / .txt file holding one; None when not given."""
    import json

    import numpy as np

    if text is None:
        return None
    path = Path(text)
    try:
        if text.lstrip().startswith("["):
            matrix = json.loads(text)
        elif path.suffix == ".npy":
            matrix = np.load(path, allow_pickle=False)
        else:
            matrix = np.loadtxt(path, ndmin=2)
        array = np.asarray(matrix, dtype=np.float64)
    except (OSError, ValueError) as e:
        what = "JSON matrix" if text.lstrip().startswith("[") else "file"
        raise UsageError(f"--adjacency {text}: cannot read this {what} ({type(e).__name__}: {e}); give JSON like "
                         "'[[0,1],[1,0]]' or a .npy/.txt file") from None
    if array.ndim != 2:
        raise UsageError(f"--adjacency {text}: a graph is a square 0/1 matrix, got shape {array.shape}")
    return [[int(x) if float(x).is_integer() else float(x) for x in row] for row in array.tolist()]


def shared_settings(args, policy: str, expl_noise: float | None = None,
                    policy_type: str | None = "Deterministic") -> dict:
    """The sharing settings the command lines build the same way (RunConfig.sharing); ``expl_noise``: the
    algorithm's exploration noise where it has one (--kl_div_var matched needs it > 0); ``policy_type``: SAC's
    (None for discrete SAC), whose Gaussian and categorical policies weigh per sample."""
    from .naming import method_of

    method = method_of(policy)
    similarity, kl_div_var = getattr(args, "similarity", "js"), getattr(args, "kl_div_var", 0.1)
    if kl_div_var == "matched":
        if not method.experience:
            raise UsageError(f"--kl_div_var matched: {policy} gives no sharing weights; use it with a DASE_ policy")
        if policy_type == "Gaussian":
            raise UsageError("--kl_div_var matched: a Gaussian SAC policy weighs samples per sample, with no reference "
                             "variance; use --policy_type Deterministic or a number")
        if (expl_noise if expl_noise is not None else 1.0) <= 0:
            raise UsageError("--kl_div_var matched needs --expl_noise > 0 (the reference variance is its square)")
    if not method.experience and (similarity != "js" or kl_div_var != 0.1):
        raise UsageError(f"--similarity/--kl_div_var: {policy} weighs no shared samples; drop these flags (they "
                         "apply to DASE_ policies)")
    precision = getattr(args, "kl_precision", "float64")
    if precision != "float64":
        if not method.experience or similarity == "none":
            raise UsageError(f"--kl_precision {precision}: {policy} with --similarity {similarity} computes no "
                             "sharing weights; use it with a DASE_ policy and --similarity js or kl")
        if policy_type != "Deterministic":
            raise UsageError(f"--kl_precision {precision}: only a deterministic actor's weights fit a Gaussian to the "
                             "action gaps (Gaussian and discrete SAC weigh per sample); use --policy_type "
                             "Deterministic on continuous actions")
    sharing = dict(similarity=similarity, kl_div_var=kl_div_var)
    if precision != "float64":  # only then: runs without it keep the settings (and checkpoints) they always had
        sharing["kl_precision"] = precision
    if method.distils:
        sharing.update(dpd_alpha=args.dpd_alpha, dpd_batch_size=args.dpd_batch_size)
    graph = dict(topology=args.topology, adjacency=read_adjacency(args.adjacency),
                 diffusion_weights=args.diffusion_weights, link_drop=args.link_drop)
    sync_freq, delay = getattr(args, "sync_freq", 0), getattr(args, "message_delay", 1.0)
    if sync_freq < 0:
        raise UsageError(f"--sync_freq {sync_freq}: combines a learner may skip in a row, >= 0 (0: synchronous)")
    if not delay >= 0:
        raise UsageError(f"--message_delay {delay}: a mean delay in updates, >= 0")
    if sync_freq == 0 and delay != 1.0:
        raise UsageError("--message_delay delays the messages of --sync_freq K > 0; give --sync_freq too")
    if sync_freq > 0:
        if not method.diffuses:
            raise UsageError(f"--sync_freq: {policy} combines no parameters; use a DIFF_ policy or --diffusion")
        if args.link_drop > 0:
            raise UsageError("--sync_freq with --link_drop: messages are delayed or dropped, not both; drop one")
        graph.update(sync_freq=sync_freq, message_delay=delay)
    if method.diffuses and graph["topology"] is None and graph["adjacency"] is None:
        graph["topology"] = method.default_topology
    # only what was set: runs without a graph keep the settings (and checkpoints) they always had
    sharing.update({k: v for k, v in graph.items() if v not in (None, "uniform", 0.0) or k == "message_delay"})
    return sharing


def default_agents(args, policy: str) -> int:
    """--num_agents, or the method's default: 2 for DASE_ and DPD_ policies, 4 for DIFF_, 1 for baselines."""
    if args.num_agents is not None:
        return args.num_agents
    from .naming import default_num_agents

    return default_num_agents(policy)


def resolve_device(device: str | None, gpu: int) -> str:
    """--device wins and must exist; otherwise --gpu N picks cuda:N when CUDA is present, else CPU."""
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device is None:
        if count == 0 or gpu < 0:
            return "cpu"
        if gpu >= count:
            raise UsageError(f"--gpu {gpu}: only {count} GPU(s) present; use --gpu 0..{count - 1} or --device cpu")
        return f"cuda:{gpu}"
    if device == "cpu":
        return device
    if device == "cuda" or device.startswith("cuda:"):
        index = 0 if device == "cuda" else device.split(":", 1)[1]
        if count == 0:
            raise UsageError(f"--device {device}: no CUDA GPU is available here; use --device cpu")
        if not str(index).isdigit() or int(index) >= count:
            raise UsageError(f"--device {device}: only {count} GPU(s) present; use cuda:0..cuda:{count - 1}")
        return f"cuda:{index}"
    raise UsageError(f"--device {device!r}: use cpu, cuda or cuda:N")


def resolve_env(env: str, quiet: bool) -> str:
    """The maintained Gymnasium id for --env, with a notice on stderr when it was mapped."""
    from .envs.registry import resolve_env_id

    env_id, notice = resolve_env_id(env)
    if notice and not quiet:
        print(notice, file=sys.stderr)
    return env_id


def train_checked(cfg, names: dict[str, str] | None = None):
    """A command line's run: reject impossible settings (UsageError), the ones that need the environment's sizes
    too (the trainer's own checks), then print the notices about legal but unlikely ones unless --quiet (so a
    refusal stays one line), then train. ``names`` maps RunConfig fields to the script's flag names."""
    from .run import notices, trainer, validate  # the training stack only once the command line is parsed

    validate(cfg, names)
    run = trainer(cfg, validated=True)
    if not cfg.quiet:
        for line in notices(cfg, names):
            print(line, file=sys.stderr)
    return run.run()


def tool_guard(prog: str, body: Callable[[list[str] | None], int], argv: list[str] | None = None) -> int:
    """A tool's command line (benchmarks, plots): a UsageError raised by ``body`` (a flag, an environment, a
    device, a file) becomes one line, '{prog}: error: ...', and exit code 2."""
    try:
        return body(argv)
    except UsageError as e:
        sys.stderr.write(f"{prog}: error: {e}\n")
        return EXIT_USAGE


class ReaderGone:
    """sys.stdout (or sys.stderr) of a command line: when a write or flush finds the reader gone (EPIPE: the output
    piped into ``head``, which has exited), the stream's descriptor is pointed at /dev/null and the run goes on as if
    quiet, writing its files as usual; ``on_gone`` is called once then. Everything else is the stream's own."""

    def __init__(self, stream, on_gone: Callable[[], None] = lambda: None):
        self._stream, self._on_gone, self.gone = stream, on_gone, False

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            self._silence()
            return len(text)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            self._silence()

    def _silence(self) -> None:
        if self.gone:
            return
        self.gone = True
        try:  # what is still buffered, and everything later (Python's own flush at exit included), goes nowhere
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self._stream.fileno())
            os.close(devnull)
            self._stream.flush()
        except (OSError, ValueError, AttributeError):
            pass
        self._on_gone()

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _same_file(a, b) -> bool:
    try:
        x, y = os.fstat(a.fileno()), os.fstat(b.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (x.st_dev, x.st_ino) == (y.st_dev, y.st_ino)


def disk_full_message(exc: BaseException) -> str | None:
    """One line for a write that failed on a full disk or an exceeded quota (anywhere in ``exc``'s chain), naming the
    file: ``utils.io.atomic_write`` left it and every other file of the run as it was. None for other errors."""
    full = disk_full_cause(exc)
    if full is None:
        return None
    why = (full.strerror or os.strerror(full.errno)).rstrip(".")
    where = f"while writing {full.filename}" if full.filename else "while writing a file of the run"
    return (f"{why[:1].lower() + why[1:]} {where}; the run's files are as they were (free space and continue with "
            "--resume)")


def main_guard(run: Callable[[list[str] | None], object], argv: list[str] | None = None) -> int:
    """Run a command line; a UsageError becomes one line on stderr and exit code 2, spelled as argparse's own
    errors are: '{script}: error: ...'. A full disk or an exceeded quota while writing a file is one line too, and
    exit code 4 (``EXIT_DISK_FULL``): every file is written whole or not at all, so the run's files are as they were
    and --resume continues from its last checkpoint. Output whose reader went away (piped into ``head``) is no error:
    the run goes on without its progress lines, says so once on stderr, writes its files and exits as it would."""
    module = getattr(run, "__module__", "")
    script = Path(sys.argv[0]).name if module == "__main__" else f"{module}.py"
    prog = f"{script}: " if module in ("__main__", "DASE_main", "sac_main", "ac_main") else ""
    streams = sys.stdout, sys.stderr
    err = ReaderGone(sys.stderr)
    one_pipe = _same_file(*streams)  # 2>&1 | head: stderr's reader goes with stdout's

    def stdout_gone() -> None:
        if one_pipe:
            err._silence()
        err.write(f"{prog}note: stdout was closed (the program reading it has exited); the run goes on without "
                  "progress lines and writes its files as usual\n")
        err.flush()

    out = ReaderGone(sys.stdout, stdout_gone)
    sys.stdout, sys.stderr = out, err
    try:
        return _guarded(run, argv, prog)
    finally:
        out.flush()
        err.flush()
        sys.stdout, sys.stderr = streams


def _guarded(run: Callable[[list[str] | None], object], argv: list[str] | None, prog: str) -> int:
    try:
        run(argv)
    except UsageError as e:
        sys.stderr.write(f"{prog}error: {e}\n")
        return EXIT_USAGE
    except Interrupted as e:
        sys.stderr.write(f"interrupted by {e}\n")
        return 128 + e.signum
    except NonFinite as e:
        sys.stderr.write(f"{prog}error: {e}\n")
        return 3
    except WorkerDied as e:
        sys.stderr.write(f"{prog}error: {e}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("interrupted: the curves saved so far are complete up to the last evaluation\n")
        return 130
    except Exception as e:
        message = disk_full_message(e)
        if message is None:
            raise
        sys.stderr.write(f"{prog}error: {message}\n")
        return EXIT_DISK_FULL
    return 0


def add_sequence_flags(p: argparse.ArgumentParser) -> None:
    """--seq_encoder and its settings (sac_main.py and DASE_main.py)."""
    p.add_argument("--seq_encoder", type=str, default=None, metavar="{gru,lstm,attn}",
                   help="a recurrent agent: a gru, lstm or attn (causal attention over the episode's last --seq_len "
                        "observations) encoder shared by actor and critics, trained on replayed windows of --seq_len steps with stored states and --burn_in "
                        "(R2D2); for partially observed tasks such as VelocityMaskedPendulum-v1. --batch_size then "
                        "counts windows; files named {policy}_{encoder}_... (default: none, feed-forward)")
    p.add_argument("--seq_len", type=int, default=None,
                   help="--seq_encoder: steps per replayed window, burn-in included (default: 16)")
    p.add_argument("--burn_in", type=int, default=None,
                   help="--seq_encoder: leading steps of a window that only refresh the stored state (default: 0)")
    p.add_argument("--seq_hidden", type=int, default=None,
                   help="--seq_encoder: width of the recurrent state (attn: of the attention); a multiple of 32 keeps "
                        "seeds batched bit-identical to seeds alone on the CPU (default: 64)")
    p.add_argument("--use_prediction", action="store_true",
                   help="--seq_encoder: train ASAC's prediction model beside the agent (a Gaussian over the next "
                        "memory and the reward from the features and the action; its loss added to the critic's, so "
                        "it shapes the encoder) (default: off)")
    p.add_argument("--prev_action", action="store_true",
                   help="--seq_encoder: the encoder also reads the previous action (one-hot, or scaled to [-1, 1]; "
                        "zeros at an episode's start), as recurrent baselines for POMDPs do; files named "
                        "{policy}_{encoder}_prev_... (default: off)")
    p.add_argument("--transition_kl", type=real, default=None,
                   help="--use_prediction: weight of the KL of the predicted transition to N(0, I) (default: 0.8, "
                        "ASAC's)")


SEQUENCE_DEFAULTS = {"seq_len": 16, "burn_in": 0, "seq_hidden": 64}
MAX_SEQ_HIDDEN = 4096  # a GRU of 4096 already holds 100M parameters per agent


def sequence_settings(args, env: str, policy: str, start_steps: int, start_flag: str) -> dict:
    """--seq_encoder and its numbers, checked ({} without it: feed-forward runs keep their records)."""
    from algorithms.replay.sequence import ENCODERS

    from .naming import method_of

    given = [f"--{k}" for k in SEQUENCE_DEFAULTS if getattr(args, k) is not None] \
        + ["--use_prediction"] * bool(args.use_prediction) + ["--prev_action"] * bool(args.prev_action)
    if args.transition_kl is not None and not args.use_prediction:
        raise UsageError("--transition_kl applies with --use_prediction; add it or drop --transition_kl")
    if args.seq_encoder is None:
        if given:
            raise UsageError(f"{'/'.join(given)} apply with --seq_encoder; add it or drop them")
        return {}
    seq = {k: v if getattr(args, k) is None else getattr(args, k) for k, v in SEQUENCE_DEFAULTS.items()}
    length, burn, writers = seq["seq_len"], seq["burn_in"], default_agents(args, policy)
    refusals = [
        (args.seq_encoder not in ENCODERS, f"--seq_encoder {args.seq_encoder!r}: one of {', '.join(ENCODERS)}"),
        (method_of(policy).prefix not in ("", "DASE"), f"--seq_encoder: {policy} is not implemented with sequence "
         "replay (independent and DASE_ agents are)"),
        (getattr(args, "episode_eval", False) or getattr(args, "max_episodes", None) is not None,
         "--seq_encoder: --episode_eval and --max_episodes play the greedy policy without memory here; drop them"),
        (getattr(args, "vtrace", False), "--seq_encoder: --vtrace is not implemented for sequence replay; drop it"),
        (getattr(args, "topology", None) not in (None, "complete") or getattr(args, "adjacency", None) is not None,
         "--seq_encoder: sequence replay samples the whole shared buffer; drop --topology/--adjacency"),
        (length < 1, f"--seq_len must be a positive integer, got {length}"),
        (seq["seq_hidden"] < 1, f"--seq_hidden must be a positive integer, got {seq['seq_hidden']}"),
        (seq["seq_hidden"] > MAX_SEQ_HIDDEN, f"--seq_hidden {seq['seq_hidden']}: at most {MAX_SEQ_HIDDEN}"),
        (not 0 <= burn < length, f"--burn_in {burn} must be in [0, --seq_len {length}): a window needs a step to "
         "train on"),
        (length * writers > args.buffer_size, f"--seq_len {length}: the buffer (--buffer_size {args.buffer_size}) "
         f"cannot hold {length} steps of {writers} agent(s)"),
        (start_steps < length, f"{start_flag} {start_steps}: the first update needs a whole window; give at least "
         f"--seq_len {length}"),
    ]
    kl = 0.8 if args.transition_kl is None else args.transition_kl
    refusals.append((not kl >= 0, f"--transition_kl {kl} must be >= 0"))
    refusals.append((args.n_step > length - burn, f"--n_step {args.n_step}: N-step returns stay inside a window's "
                     f"{length - burn} trained steps (--seq_len {length} - --burn_in {burn})"))
    for refused, message in refusals:
        if refused:
            raise UsageError(message)
    prediction = {"use_prediction": True, "transition_kl": kl} if args.use_prediction else {}
    prev = {"prev_action": True} if args.prev_action else {}
    return {"seq_encoder": args.seq_encoder, **seq, **prediction, **prev}
