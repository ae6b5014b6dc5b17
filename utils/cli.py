"""Pieces both command lines share: flags, device choice, one-line errors with exit code 2."""
from __future__ import annotations

import argparse
import os
import re
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path

from .errors import Interrupted, NonFinite, UsageError, WorkerDied, disk_full_cause
from .run.cores import available_cores  # noqa: F401  (the command lines' and tools' name for it)
from .settings import add_flags, count, from_flags, real  # noqa: F401  (the command lines' flag types)

EXIT_USAGE = 2
EXIT_DISK_FULL = 4  # a file could not be written: no space left on the device, or the disk quota exceeded


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


def add_common_flags(p: argparse.ArgumentParser, replay: bool = True) -> None:
    """The flags every command line takes (utils/run/settings.py: the run; utils/run/sharing.py: the graph, and for
    the replay scripts, ``replay``, the buffer and DASE's and DPD's sharing), generated from their settings classes;
    the parsed flags hold their defaults."""
    from .run.settings import OnPolicyRunSettings, ReplaySettings, RunSettings
    from .run.sharing import GraphSettings, SharingSettings

    add_flags(p, {"run": RunSettings if replay else OnPolicyRunSettings}, parsed_defaults=True)
    if replay:
        add_flags(p, {"replay": ReplaySettings}, parsed_defaults=True)
    add_flags(p, {"sharing": SharingSettings if replay else GraphSettings}, parsed_defaults=True)


# RunConfig fields of the run's settings classes that are worked out here or by the scripts, not copied from a flag
COMPUTED = ("env", "num_agents", "seed", "seeds", "device", "cuda_graphs", "env_backend")


def run_flags(args) -> dict:
    """RunConfig fields that both command lines take straight from their flags (checked by their classes first):
    every field of the run's settings classes that RunConfig also has, by its name, but those worked out (COMPUTED):
    the seeds, the device, CUDA graphs, prioritized replay's settings."""
    from dataclasses import fields

    from .run.config import RunConfig
    from .run.settings import OnPolicyRunSettings, ReplaySettings, RunSettings
    from .settings import flagged

    from_flags(args, RunSettings, {"run": RunSettings}, "run").check()
    replay = hasattr(args, "batch_size")  # the replay scripts (ACER's own --buffer_size is an algorithm setting)
    if replay:
        from_flags(args, ReplaySettings, {"replay": ReplaySettings}, "replay").check()
    seeds = seed_list(args.seeds) if args.seeds else None
    if seeds and args.seed is not None:
        raise UsageError(f"--seed {args.seed} and --seeds {' '.join(args.seeds)}: give one of them")
    if args.seed is None and not seeds:
        args.seed = 0
    device = resolve_device(args.device, args.gpu)
    graphs = getattr(args, "cuda_graphs", False)
    graphs = graphs if graphs is not None else (device.startswith("cuda") and not args.compile)
    config = {f.name for f in fields(RunConfig)}
    classes = (RunSettings, OnPolicyRunSettings, *((ReplaySettings,) if replay else ()))
    copied = {f.name: getattr(args, f.name) for cls in classes for f in flagged(cls)
              if f.name in config and f.name not in COMPUTED and hasattr(args, f.name)}
    if getattr(args, "prioritized", False):
        steps = args.per_beta_steps if args.per_beta_steps is not None else \
            getattr(args, "max_time_steps", getattr(args, "num_steps", 1))
        copied["per"] = dict(alpha=args.per_alpha, beta=args.per_beta, beta_steps=steps, eps=args.per_eps)
    return dict(copied, seed=seeds[0] if seeds else args.seed, seeds=seeds, cuda_graphs=graphs, device=device,
                flags=vars(args))


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
    """The run's sharing settings from the flags (RunConfig.sharing: utils.run.sharing's classes record them, and
    check them once the run's other settings are checked); ``expl_noise``: the algorithm's exploration noise where it has one (--kl_div_var matched needs it > 0);
    ``policy_type``: SAC's (None for discrete SAC), whose Gaussian and categorical policies weigh per sample."""
    from .naming import method_of
    from .run.sharing import GraphSettings, SharingSettings

    cls = SharingSettings if hasattr(args, "similarity") else GraphSettings
    settings = from_flags(args, cls, {"sharing": cls}, "sharing", method=method_of(policy), policy=policy,
                          num_agents=default_agents(args, policy), adjacency=read_adjacency(args.adjacency))
    if getattr(settings, "kl_div_var", None) == "matched":
        if policy_type == "Gaussian":
            raise UsageError("--kl_div_var matched: a Gaussian SAC policy weighs samples per sample, with no reference "
                             "variance; use --policy_type Deterministic or a number")
        if getattr(args, "action_noise", None) is not None:
            raise UsageError("--kl_div_var matched: --action_noise gives every agent its own exploration noise, so "
                             "there is no one variance to match; give --kl_div_var a number")
        if (expl_noise if expl_noise is not None else 1.0) <= 0:
            raise UsageError("--kl_div_var matched needs --expl_noise > 0 (the reference variance is its square)")
    if getattr(settings, "kl_precision", "float64") != "float64" and policy_type != "Deterministic":
        raise UsageError(f"--kl_precision {settings.kl_precision}: only a deterministic actor's weights fit a Gaussian "
                         "to the action gaps (Gaussian and discrete SAC weigh per sample); use --policy_type "
                         "Deterministic on continuous actions")
    return settings.record()


def default_agents(args, policy: str) -> int:
    """--num_agents, or the method's default: 2 for DASE_ and DPD_ policies, 4 for DIFF_, 1 for baselines."""
    if args.num_agents is not None:
        return args.num_agents
    from .naming import default_num_agents

    return default_num_agents(policy)


def resolve_device(device: str | None, gpu: int) -> str:
    """--device wins and must exist; otherwise --gpu N picks cuda:N when CUDA is present, else CPU."""
    import torch

    n_gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if device is None:
        if n_gpus == 0 or gpu < 0:
            return "cpu"
        if gpu >= n_gpus:
            raise UsageError(f"--gpu {gpu}: only {n_gpus} GPU(s) present; use --gpu 0..{n_gpus - 1} or --device cpu")
        return f"cuda:{gpu}"
    if device == "cpu":
        return device
    if device == "cuda" or device.startswith("cuda:"):
        index = 0 if device == "cuda" else device.split(":", 1)[1]
        if n_gpus == 0:
            raise UsageError(f"--device {device}: no CUDA GPU is available here; use --device cpu")
        if not str(index).isdigit() or int(index) >= n_gpus:
            raise UsageError(f"--device {device}: only {n_gpus} GPU(s) present; use cuda:0..cuda:{n_gpus - 1}")
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
    device, a file) becomes one line, '{prog}: error: ...', and exit code 2; a full disk or an exceeded quota while
    writing its files one line too (``tool_disk_full_message``), and exit code 4 (``EXIT_DISK_FULL``)."""
    try:
        return body(argv)
    except UsageError as e:
        sys.stderr.write(f"{prog}: error: {e}\n")
        return EXIT_USAGE
    except Exception as e:
        message = tool_disk_full_message(prog, e)
        if message is None:
            raise
        sys.stderr.write(message + "\n")
        return EXIT_DISK_FULL


def tool_disk_full_message(prog: str, exc: BaseException) -> str | None:
    """One line for a tool's write that failed on a full disk or an exceeded quota (anywhere in ``exc``'s chain),
    naming the file (or the folder of a set of files): the tool writes each file whole under a temporary name and
    renames it (``utils.io.written_whole``, ``written_together``), so no file is left half-written. None for other
    errors."""
    full = disk_full_cause(exc)
    if full is None:
        return None
    why = (full.strerror or os.strerror(full.errno)).rstrip(".")
    where = ""
    if full.filename:  # a folder (a set of files) ends in a separator
        folder = full.filename.endswith(os.sep) or Path(full.filename).is_dir()
        where = f" while writing {'into ' if folder else ''}{full.filename.rstrip(os.sep) or os.sep}"
    return (f"{prog}: error: {why[:1].lower() + why[1:]}{where}; no file was left half-written (free space and run "
            "it again)")


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
    tools = {"utils.distributed.cli": "python -m utils.distributed"}  # a tool that runs as the scripts do
    prog = f"{tools[module]}: " if module in tools else f"{script}: " if module in (
        "__main__", "DASE_main", "sac_main", "ac_main") else ""
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
        # outside the training loop (its signal handler turns Ctrl-C into Interrupted, with a checkpoint): while
        # starting, perhaps before any evaluation, or while ending; files are written whole, never half
        sys.stderr.write(f"{prog}interrupted while starting or ending, outside training: no checkpoint written; the "
                         "files already written (curves, if any evaluation was saved) are whole\n")
        return 130
    except Exception as e:
        message = disk_full_message(e)
        if message is None:
            raise
        sys.stderr.write(f"{prog}error: {message}\n")
        return EXIT_DISK_FULL
    return 0


def add_sequence_flags(p: argparse.ArgumentParser) -> None:
    """--seq_encoder and its settings (sac_main.py and DASE_main.py; utils/run/replay/settings.py)."""
    from .run.replay.settings import SequenceSettings

    add_flags(p, {"sequence": SequenceSettings}, parsed_defaults=True)


def add_image_flags(p: argparse.ArgumentParser) -> None:
    """--image_features, --siamese and --siamese_use_q (sac_main.py and DASE_main.py; utils/run/replay/settings.py)."""
    from .run.replay.settings import ImageSettings

    add_flags(p, {"images": ImageSettings}, parsed_defaults=True)


def image_settings(args, env: str, policy: str) -> dict:
    """The image encoder's settings on an image task, checked with the rest of the run ({} on a vector task, whose
    record names none; its image flags are refused)."""
    from .envs.registry import image_task
    from .naming import method_of
    from .run.replay.settings import ImageSettings

    settings = from_flags(args, ImageSettings, {"images": ImageSettings}, "images")
    settings.check()
    if not image_task(env):
        given = [f"--{k}" for k, v in {"image_features": 50, "siamese": None, "siamese_use_q": False}.items()
                 if getattr(settings, k) != v]
        if given:
            raise UsageError(f"{'/'.join(given)}: --env {env} has no image observations (PixelPendulum-v1 and "
                             "PixelCartPole-v1 have)")
        return {}
    refusals = [
        (method_of(policy).prefix not in ("", "DASE"), f"--env {env}: {policy} is not implemented on images "
         "(independent and DASE_ agents are)"),
        (getattr(args, "seq_encoder", None) is not None, f"--env {env}: --seq_encoder is not implemented on images"),
        (getattr(args, "vtrace", False) or args.n_step > 1, f"--env {env}: image replay samples single steps; drop "
         "--n_step/--vtrace"),
        (getattr(args, "prioritized", False), f"--env {env}: image replay samples uniformly; drop --prioritized"),
        (getattr(args, "normalize_obs", False), f"--env {env}: pixels are not normalised by running statistics; "
         "drop --normalize_obs"),
        (getattr(args, "curiosity", None) is not None or getattr(args, "rnd", False),
         f"--env {env}: intrinsic rewards (--curiosity, --rnd) are not implemented on images; drop them"),
        (getattr(args, "topology", None) not in (None, "complete") or getattr(args, "adjacency", None) is not None,
         f"--env {env}: image replay samples the whole shared buffer; drop --topology/--adjacency"),
        (getattr(args, "cuda_graphs", False), f"--env {env}: --cuda_graphs is not implemented on images; drop it"),
    ]
    for refused, message in refusals:
        if refused:
            raise UsageError(message)
    return settings.record()


def sequence_settings(args, env: str, policy: str, start_steps: int, start_flag: str) -> dict:
    """--seq_encoder and its numbers, checked with the rest of the run ({} without it: feed-forward runs keep their
    records)."""
    from .naming import method_of
    from .run.replay.settings import SequenceSettings

    settings = from_flags(args, SequenceSettings, {"sequence": SequenceSettings}, "sequence")
    settings.check()
    if settings.seq_encoder is None:
        return {}
    length, burn, writers = settings.seq_len, settings.burn_in, default_agents(args, policy)
    refusals = [
        (method_of(policy).prefix not in ("", "DASE"), f"--seq_encoder: {policy} is not implemented with sequence "
         "replay (independent and DASE_ agents are)"),
        (getattr(args, "episode_eval", False) or getattr(args, "max_episodes", None) is not None,
         "--seq_encoder: --episode_eval and --max_episodes play the greedy policy without memory here; drop them"),
        (getattr(args, "vtrace", False), "--seq_encoder: --vtrace is not implemented for sequence replay; drop it"),
        (getattr(args, "normalize_obs", False), "--seq_encoder: --normalize_obs is not implemented for sequence "
         "replay; drop it"),
        (getattr(args, "curiosity", None) is not None or getattr(args, "rnd", False),
         "--seq_encoder: intrinsic rewards (--curiosity, --rnd) are not implemented for sequence replay; drop them"),
        (getattr(args, "topology", None) not in (None, "complete") or getattr(args, "adjacency", None) is not None,
         "--seq_encoder: sequence replay samples the whole shared buffer; drop --topology/--adjacency"),
        (length * writers > args.buffer_size, f"--seq_len {length}: the buffer (--buffer_size {args.buffer_size}) "
         f"cannot hold {length} steps of {writers} agent(s)"),
        (start_steps < length, f"{start_flag} {start_steps}: the first update needs a whole window; give at least "
         f"--seq_len {length}"),
        (args.n_step > length - burn, f"--n_step {args.n_step}: N-step returns stay inside a window's "
         f"{length - burn} trained steps (--seq_len {length} - --burn_in {burn})"),
    ]
    for refused, message in refusals:
        if refused:
            raise UsageError(message)
    return settings.record()
