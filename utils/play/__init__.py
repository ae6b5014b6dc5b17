"""Watch a trained agent: play deterministic episodes of a saved model and film them.

    python -m utils.play RUN [--episodes 5] [--gif out.gif | --mp4 out.mp4 [--overwrite]] [--agent i] [--seed S]

RUN is what a run of DASE_main.py, sac_main.py or ac_main.py (A2C, DIFF_A2C, ACER, A3C) left: its JSON record
(``{stem}.json``, the models of ``--save_model`` under its ``--models_dir``), its results folder (the record of
``--seed`` in it, or its only one), or a checkpoint (``{stem}.pt``, also of an unfinished run). The episodes are
the run's own evaluation episodes (the same environment, task and reset seeds, played in lockstep as the evaluation
plays them), so with ``--episodes`` equal to the run's ``--eval_episodes`` the returns printed are exactly those of
the run's evaluation of that model: their mean is the curve's value at the step the model was saved. The film takes
every frame Gymnasium renders (``render_mode="rgb_array"``) of every episode in turn, written by imageio.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import torch

from ..cli import Parser, tool_guard
from ..errors import UsageError
from ..io import folder_problem, output_file_problem, written_whole

PROG = "python -m utils.play"
PLAY_HINT = "play the run's record (its --save_model models) instead"


def recorded_config(settings: dict):
    """The RunConfig of a record's or checkpoint's settings (fields this version does not know left out)."""
    from ..run import RunConfig

    known = {f.name for f in fields(RunConfig)}
    return RunConfig(**{k: v for k, v in settings.items() if k in known})


def has_models(settings: dict, models_dir: str | None) -> bool:
    """Whether the --save_model files of the run with ``settings`` are there (agent 0's, or A3C's one)."""
    cfg = recorded_config(settings)
    folder = Path(models_dir if models_dir is not None else cfg.models_dir)
    return any(is_file(folder / f"{name}.pt") for name in [cfg.stem, *cfg.agent_names()])


def is_file(path: Path) -> bool:
    """Whether a file is there; a name the file system refuses (too long) names none."""
    try:
        return path.is_file()
    except OSError:
        return False


def parse(argv):
    p = Parser(prog=PROG, description=__doc__.split("\n\n")[0])
    p.add_argument("run", help="a run's JSON record, its results folder, or its checkpoint (.pt)")
    p.add_argument("--episodes", type=int, default=5, help="deterministic episodes to play (default: 5)")
    p.add_argument("--agent", type=int, default=0, help="which agent of the run (default: 0)")
    p.add_argument("--seed", type=int, default=None,
                   help="in a results folder with several seeds' runs: which seed's (default: the only one)")
    p.add_argument("--gif", type=str, default=None, help="write the episodes as an animated GIF here")
    p.add_argument("--mp4", type=str, default=None, help="write the episodes as an MP4 video here (imageio-ffmpeg)")
    p.add_argument("--fps", type=int, default=30, help="frames per second of the film (default: 30)")
    p.add_argument("--every", type=int, default=1, help="film every k-th frame, for a smaller file (default: 1)")
    p.add_argument("--scale", type=int, default=1, help="film every k-th pixel row and column (default: 1)")
    p.add_argument("--models_dir", type=str, default=None,
                   help="where the record's models are, if not where it says (its --models_dir)")
    p.add_argument("--overwrite", action="store_true",
                   help="replace the --gif/--mp4 file if it exists (without it, an existing file is refused)")
    args = p.parse_args(argv)
    for flag, value, most in (("--episodes", args.episodes, 1000), ("--fps", args.fps, 240),
                              ("--every", args.every, 1000), ("--scale", args.scale, 64)):
        if not 1 <= value <= most:
            p.error(f"{flag} {value}: give 1 to {most}")
    if args.agent < 0:
        p.error(f"--agent {args.agent}: agents are numbered from 0")
    if args.gif and args.mp4:
        p.error("give --gif or --mp4, not both")
    for flag, path in (("--gif", args.gif), ("--mp4", args.mp4)):
        if path is None:
            continue
        problem = output_file_problem(path)
        if problem and problem.startswith("no folder"):  # a folder still to make: made when the film is written
            problem = folder_problem(Path(path).parent)
        if problem:
            p.error(f"{flag} {path[:60]}: {problem}")
        if Path(path).exists() and not args.overwrite:  # a film someone kept is never replaced unasked
            p.error(f"{flag} {path[:60]}: the file exists; --overwrite replaces it")
    if args.mp4:
        try:
            import imageio_ffmpeg  # noqa: F401
        except ImportError:
            p.error("--mp4 needs imageio-ffmpeg: pip install -r requirements.txt (or use --gif)")
    return args


# ---- what to play ----------------------------------------------------------------------------------------------
def _record(path: Path) -> dict:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as e:
        raise UsageError(f"{path}: cannot read this run record ({type(e).__name__})") from None
    if not isinstance(record, dict) or not isinstance(record.get("config"), dict):
        raise UsageError(f"{path}: not a run record of this program (no 'config')")
    return record


def find_run(run: str, seed: int | None) -> tuple[dict, Path, dict | None]:
    """(the run's settings, the record or checkpoint they came from, the checkpoint's state or None)."""
    from ..run.checkpoint import read_checkpoint

    path = Path(run)
    if not path.exists():
        raise UsageError(f"{run}: no such file or folder")
    if path.is_dir():
        records = sorted(p for p in path.glob("*.json") if "config" in _record(p))
        if seed is not None:
            records = [p for p in records if _record(p)["config"].get("seed") == seed]
        if not records:
            raise UsageError(f"{run}: no run record (*.json){'' if seed is None else f' of seed {seed}'} in this folder")
        if len(records) > 1:
            names = ", ".join(p.name for p in records[:4]) + (", ..." if len(records) > 4 else "")
            if seed is None:
                raise UsageError(f"{run}: {len(records)} runs here ({names}); give one record, or --seed")
            raise UsageError(f"{run}: {len(records)} runs of seed {seed} here ({names}); give one record")
        path = records[0]
    if path.suffix == ".pt":
        state = read_checkpoint(path, PLAY_HINT)
        if not isinstance(state.get("config"), dict):
            raise UsageError(f"{path}: a checkpoint without its settings; give the run's record instead")
        return state["config"], path, state
    record = _record(path)
    if seed is not None and record["config"].get("seed") != seed:
        raise UsageError(f"{path}: the run of seed {record['config'].get('seed')}, not of --seed {seed}")
    return record["config"], path, None


def run_checkpoint(settings: dict, source: Path) -> Path | None:
    """The checkpoint of the run recorded in ``source`` (a run paused with --stop_at, or stopped), where its record
    says, where its settings put it, or in its record's folder; None when there is none."""
    cfg = recorded_config(settings)
    record = _record(source)
    candidates = [Path(record["checkpoint"])] if isinstance(record.get("checkpoint"), str) else []
    candidates += [cfg.checkpoint_path, source.parent / "checkpoints" / f"{cfg.stem}.pt"]
    return next((p for p in candidates if is_file(p)), None)


def check_owner(paths: list[Path], source: Path) -> None:
    """The model files must be those of the run recorded in ``source``: a file another run saved (same policy,
    environment and seed, another results folder) is refused, never played in its place. Files older than run
    ids say nothing of their run and are played."""
    from ..run.plan import model_owner

    if source.suffix != ".json":
        return
    record = _record(source)
    for path in paths:
        owner = model_owner(path)
        if owner is None:
            continue
        if record.get("run_id") is not None:
            mine = owner.get("run_id") == record["run_id"]
        else:
            mine = owner.get("record") == str(source.resolve())
        if not mine:
            raise UsageError(f"{path} holds the model of the run recorded in {owner.get('record')}, not of {source}: "
                             "this run's model is not there (give --models_dir where it is)")


def build_config(settings: dict, tmp: str, episodes: int, models_dir: str | None, source: Path):
    """The run's settings for one seed and one process, writing nothing of the run's (results in ``tmp``)."""
    cfg = recorded_config(settings)
    models = models_dir if models_dir is not None else cfg.models_dir
    return replace(cfg, seeds=None, stop_at=None, eval_episodes=episodes, device="cpu", threads=1, env_workers=0, results_dir=tmp,
                   checkpoint_freq=0, checkpoint_dir=None, resume=False, overwrite=False, save_model=False,
                   load_model="", models_dir=models, quiet=True, tensorboard=False, compile=False, cuda_graphs=False)


def load_weights(trainer, cfg, state: dict | None, source: Path) -> str:
    """The saved model into the trainer's agents: the checkpoint's, or the record's model files. What was loaded."""
    from ..run.setup import load_models

    if state is not None:
        trainer.learner.load_state_dicts([state])
        return f"checkpoint {source} (step {int(state['t'])})"
    check_owner([Path(cfg.models_dir) / f"{name}.pt" for name in cfg.agent_names()
                 if is_file(Path(cfg.models_dir) / f"{name}.pt")], source)
    try:
        load_models(trainer.learner.agents, replace(cfg, load_model="default"), flag=None)  # no flag named it
    except UsageError as e:
        raise UsageError(f"{source}: {e} -- train with --save_model, or play the run's checkpoint") from None
    return f"models of {source.name} in {cfg.models_dir}"


def a3c_policy(cfg, state: dict | None, source: Path):
    """(A3C's greedy policy obs [1, E, ...] -> actions [1, E(, A)] from the checkpoint ``state`` or the record's
    --save_model file, what was loaded)."""
    from ..run.onpolicy.asynchronous import a3c_model, a3c_spec

    if state is not None:
        model, loaded = a3c_model(a3c_spec(cfg), state["model"]), f"checkpoint {source} (step {int(state['t'])})"
    else:
        path = Path(cfg.models_dir) / f"{cfg.stem}.pt"
        if not is_file(path):
            raise UsageError(f"{source}: no model file {path} -- train with --save_model, or play the run's "
                             "checkpoint")
        check_owner([path], source)
        try:
            saved = torch.load(path, map_location="cpu", weights_only=True)
            model = a3c_model(saved["spec"], saved["model"])
        except Exception as e:
            raise UsageError(f"{path}: not an A3C model file of this program ({type(e).__name__})") from None
        loaded = f"model of {source.name} in {cfg.models_dir} (step {int(saved['t'])})"
    memory = {}

    @torch.no_grad()
    def policy(obs: np.ndarray) -> np.ndarray:
        o = torch.as_tensor(obs[0], dtype=torch.float32)
        if not model.recurrent:
            return model.act(o, greedy=True)[1][None]
        _, actions, memory["state"] = model.act(o, greedy=True, state=memory.get("state") or
                                                model.initial_state(len(o)))
        return actions[None]
    return policy, loaded


# ---- playing -----------------------------------------------------------------------------------------------------
def play(policy, cfg, members: int, agent: int, task, film: bool) -> tuple[list[float], list[int],
                                                                            list[list[np.ndarray]]]:
    """The run's evaluation episodes of ``agent`` (of ``members`` in the run's process, playing ``task``), in
    lockstep as its evaluation plays them: returns, lengths, and each episode's frames (when filming)."""
    from ..envs.registry import make_env
    from ..envs.workers import episode_seeds
    from ..naming import ALGORITHM

    spec = ALGORITHM[cfg.algorithm]
    if film:  # pygame draws off screen: no display, no sound device (SDL complains on stderr otherwise)
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")
        os.environ.setdefault("SDL_AUDIODRIVER", "dummy")
    e = cfg.eval_episodes
    row = agent  # one seed: member index = agent
    games = [make_env(cfg.env, task, actions=spec.actions, who=cfg.algorithm, training=False,
                      render_mode="rgb_array" if film else None) for _ in range(e)]
    try:
        seeds = episode_seeds(cfg.seed + cfg.eval_seed_offset, e)
        first = np.stack([g.reset(seed=s)[0] for g, s in zip(games, seeds)])
        obs = np.zeros((members, e, *first.shape[1:]), dtype=first.dtype)
        obs[:] = first
        returns, lengths, active = np.zeros(e), np.zeros(e, dtype=int), np.ones(e, dtype=bool)
        frames: list[list[np.ndarray]] = [[g.render()] if film else [] for g in games]
        while active.any():
            actions = policy(obs)[row]
            for k in np.nonzero(active)[0]:
                o, r, terminated, truncated, _ = games[k].step(actions[k])
                obs[:, k] = o
                returns[k] += r
                lengths[k] += 1
                active[k] = not (terminated or truncated)
                if film:
                    frames[k].append(games[k].render())
        return returns.tolist(), lengths.tolist(), frames
    finally:
        for g in games:
            g.close()


def write_film(path: str, frames: list[np.ndarray], fps: int, mp4: bool) -> int:
    """Write the frames as an MP4 or an animated GIF; returns how many images the file stores (a GIF merges
    identical consecutive frames into one image shown for their summed time: a lander at rest is one image). The
    film is written under a temporary name and renamed once whole (``utils.io.written_whole``): a writer that
    fails (ffmpeg's exit code, a full disk: ``DiskFull``) leaves no film, or the one that was there."""
    with written_whole(path) as tmp:
        if mp4:  # H.264 wants sides in multiples of 16: pad with the edge pixels instead of letting ffmpeg resize
            video = np.stack(frames)
            h, w = video.shape[1:3]
            video = np.pad(video, ((0, 0), (0, -h % 16), (0, -w % 16), (0, 0)), mode="edge")
            encode_mp4(tmp, video, fps)
        else:  # as imageio writes one, by Pillow itself: imageio's writer, failed, would write again when collected
            from PIL import Image

            images = [Image.fromarray(f) for f in frames]
            more = {"save_all": True, "append_images": images[1:]} if len(images) > 1 else {}
            images[0].save(tmp, format="GIF", duration=1000 / fps, loop=0, **more)
        return len(frames) if mp4 else gif_images(tmp)


def encode_mp4(path: Path, video: np.ndarray, fps: int) -> None:
    """H.264 of ``video`` [frames, height, width(, RGB/RGBA)] (uint8) by imageio-ffmpeg's ffmpeg, as imageio writes
    one, but with ffmpeg's exit code checked and its messages kept off the terminal (imageio reports neither: a film
    whose trailer a full disk stopped was "written"): a full disk or an exceeded quota is an OSError of its errno,
    any other failure a RuntimeError with ffmpeg's last line."""
    import errno
    import subprocess

    import imageio_ffmpeg

    try:
        from imageio_ffmpeg._io import get_first_available_h264_encoder
        codec = get_first_available_h264_encoder()
    except (ImportError, RuntimeError):
        codec = "libx264"
    video = np.ascontiguousarray(video, dtype=np.uint8)
    pix_fmt = "gray" if video.ndim == 3 else {3: "rgb24", 4: "rgba"}[video.shape[-1]]
    cmd = [imageio_ffmpeg.get_ffmpeg_exe(), "-y", "-v", "error", "-f", "rawvideo", "-vcodec", "rawvideo", "-s",
           f"{video.shape[2]}x{video.shape[1]}", "-pix_fmt", pix_fmt, "-r", str(fps), "-i", "-", "-an", "-vcodec",
           codec, "-pix_fmt", "yuv420p", *(["-crf", "25"] if codec == "libx264" else []), "-f", "mp4", str(path)]
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    said = proc.communicate(memoryview(video.reshape(-1)))[1].decode(errors="replace")  # EPIPE: ffmpeg ended early
    if proc.returncode == 0:
        return
    for code in (errno.ENOSPC, getattr(errno, "EDQUOT", errno.ENOSPC)):
        if os.strerror(code) in said:
            raise OSError(code, os.strerror(code), str(path))
    last = (said.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
    raise RuntimeError(f"ffmpeg could not write the film: {last}")


def gif_images(path: Path) -> int:
    """The images an animated GIF stores."""
    from PIL import Image

    with Image.open(path) as im:
        return int(getattr(im, "n_frames", 1))


def watch(args) -> dict:
    """Play (and film) what ``args`` name; returns the episodes' returns and lengths, their frames, the run's
    settings and what was loaded."""
    settings, source, state = find_run(args.run, args.seed)
    from ..naming import ALGORITHM
    from ..run import Trainer
    from ..run.checkpoint import read_checkpoint

    if state is None and not has_models(settings, args.models_dir):
        # no --save_model files: a run paused with --stop_at (or stopped) plays from its checkpoint
        checkpoint = run_checkpoint(settings, source)
        if checkpoint is not None:
            source, state = checkpoint, read_checkpoint(checkpoint, PLAY_HINT)

    film = bool(args.gif or args.mp4)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = build_config(settings, tmp, args.episodes, args.models_dir, source)
        from ..envs.registry import package_of

        if package_of(cfg.env):
            raise UsageError(f"{cfg.env} is a multi-agent task, whose agents act together; utils.play does not play "
                             "one yet (the run's curves hold its evaluations)")
        if args.agent >= cfg.num_agents:
            raise UsageError(f"--agent {args.agent}: the run has {cfg.num_agents} agent(s), 0 to {cfg.num_agents - 1}")
        torch.set_num_threads(1)
        if ALGORITHM[cfg.algorithm].family == "async":  # A3C: one shared model, played as its evaluation plays it
            from ..envs.variants import task_for

            policy, loaded = a3c_policy(cfg, state, source)
            returns, lengths, frames = play(policy, cfg, 1, 0, task_for(cfg.env, cfg.seed), film)
        else:
            trainer = Trainer(cfg)
            try:
                loaded = load_weights(trainer, cfg, state, source)
                # the agent's own task (task variants; None otherwise), as its curve is evaluated
                # --eval_policy sample: the draws of the evaluation at the model's step (a checkpoint's, else the
                # run's last)
                step = int(state["t"]) if state is not None else cfg.max_time_steps
                returns, lengths, frames = play(trainer.learner.snapshot(step), cfg, len(trainer.setup.member_seeds),
                                                args.agent, trainer.setup.tasks[args.agent], film)
            finally:
                trainer.close()
    return {"returns": returns, "lengths": lengths, "frames": frames, "cfg": cfg, "loaded": loaded}


def _main(argv=None) -> int:
    args = parse(argv)
    out = watch(args)
    cfg, returns = out["cfg"], out["returns"]
    print(f"{cfg.policy} on {cfg.env}, seed {cfg.seed}, agent {args.agent}: {out['loaded']}")
    for k, (ret, n) in enumerate(zip(returns, out["lengths"])):
        print(f"episode {k + 1}: return {ret:.2f} ({n} steps)")
    print(f"mean return over {len(returns)} episode(s): {np.mean(returns):.2f}")
    if args.gif or args.mp4:
        kept = [f[::args.scale, ::args.scale] for episode in out["frames"] for f in episode[::args.every]]
        earlier = Path(args.gif or args.mp4).exists()  # only with --overwrite (checked with the arguments)
        stored = write_film(args.gif or args.mp4, kept, args.fps, bool(args.mp4))
        merged = "" if stored == len(kept) else \
            f"; the GIF stores {stored} images, identical consecutive frames merged into one shown as long"
        print(f"{'replaced' if earlier else 'wrote'} {args.gif or args.mp4} ({len(kept)} frames at {args.fps} fps, "
              f"{len(kept) / args.fps:.1f} s{merged})")
    sys.stdout.flush()
    return 0


def main(argv=None) -> int:
    return tool_guard(PROG, _main, argv)

