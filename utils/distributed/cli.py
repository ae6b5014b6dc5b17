"""``python -m utils.distributed --actors K --learners M [--address ADDR] <flags of sac_main.py or DASE_main.py>``:
one run of M learners fed by K actors on Ray (see the package's docstring and docs/distributed.md).

Learner m trains seed ``--seed`` + m and writes that seed's files; actor k feeds learner k mod M. ``ray.init()`` on
this machine by default; ``--address`` joins a running cluster (``ray start --head`` on one machine, ``ray start
--address HEAD:6379`` on the others; every machine needs this repository at the same path and its requirements).
Exit codes as the scripts': 2 for bad input (one line), 0 when every learner finished.
"""
from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import signal
import sys
import time
from pathlib import Path

from ..errors import DiskFull, UsageError, disk_full_cause
from ..naming import SCRIPT_POLICIES, method_of
from .ray_local import init_local, shutdown

ROOT = Path(__file__).resolve().parents[2]


def parse(argv=None) -> tuple[argparse.Namespace, list[str]]:
    from ..cli import Parser

    # one-line errors; no abbreviations (an abbreviated flag of the script's would be taken for one of these)
    p = Parser(prog="python -m utils.distributed", description=__doc__.split("\n\n")[0], add_help=True,
               allow_abbrev=False)
    p.add_argument("--actors", type=int, default=4, help="actors stepping environments (default 4)")
    p.add_argument("--learners", type=int, default=1, help="learners, each with its own replay (default 1)")
    p.add_argument("--address", default=None, help="a running Ray cluster to join (default: Ray on this machine)")
    p.add_argument("--refresh_every", type=int, default=100,
                   help="learner updates between the parameters its actors fetch (ASAC: 100-200; default 100)")
    p.add_argument("--block", type=int, default=50, help="steps an actor sends at once (default 50)")
    p.add_argument("--actor_noise", type=float, default=0.1,
                   help="the last actor's extra exploration level; actor k of K explores at k / (K - 1) of it "
                        "(ASAC's; default 0.1)")
    p.add_argument("--evolve", action="store_true", help="ASAC's evolver: the cross-entropy method over the learners")
    p.add_argument("--evolve_every", type=int, default=5,
                   help="--evolve: evaluations of every learner between selections (default 5; ASAC: 50)")
    p.add_argument("--elite", type=float, default=0.3, help="--evolve: the fraction of learners kept (default 0.3)")
    p.add_argument("--evolve_seconds", type=float, default=180.0,
                   help="--evolve: after this long without a selection, select among the learners with 2 or more "
                        "new evaluations (ASAC: 3 minutes; default 180)")
    p.add_argument("--evolve_lag", type=int, default=4,
                   help="--evolve: remove a learner left out of this many selections in a row (ASAC: 4; default 4)")
    p.add_argument("--script", choices=("sac_main", "DASE_main"), default=None,
                   help="whose flags the rest are (default: the script of --policy)")
    return p.parse_known_args(argv)


# the replay learners a distributed run trains: independent and DASE_ ones (DPD_ and DIFF_ learners exchange more
# than experience)
TRAINED = (*SCRIPT_POLICIES["DASE_main.py"], *SCRIPT_POLICIES["sac_main.py"])
DISTRIBUTED = tuple(p for p in TRAINED if not (method_of(p).distils or method_of(p).diffuses))


def script_of(rest: list[str], chosen: str | None):
    import DASE_main
    import sac_main

    given = [i for i, a in enumerate(rest[:-1]) if a == "--policy"]
    policy = rest[given[-1] + 1] if given else None  # the last one given, as argparse takes it
    if policy is not None and policy not in DISTRIBUTED:  # the scripts' own message would list DPD_/DIFF_ too
        raise UsageError(f"--policy {policy}: the distributed run trains {', '.join(DISTRIBUTED)}"
                         f"{' (DPD_ and DIFF_ learners are not distributed)' if policy in TRAINED else ''}")
    if chosen:
        return {"sac_main": sac_main, "DASE_main": DASE_main}[chosen]
    return DASE_main if policy in SCRIPT_POLICIES["DASE_main.py"] else sac_main


def build(argv=None):
    """The distributed settings and each learner's run config, checked; a UsageError for bad input."""
    args, rest = parse(argv)
    for name in ("actors", "learners", "refresh_every", "block", "evolve_every", "evolve_lag"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} {getattr(args, name)}: at least 1")
    if not 0 < args.elite <= 1:
        raise UsageError(f"--elite {args.elite:g}: a fraction in (0, 1]")
    if args.actor_noise < 0:
        raise UsageError(f"--actor_noise {args.actor_noise:g}: at least 0")
    if args.evolve_seconds < 0:
        raise UsageError(f"--evolve_seconds {args.evolve_seconds:g}: at least 0")
    if args.actors < args.learners:
        raise UsageError(f"--actors {args.actors} < --learners {args.learners}: every learner needs an actor "
                         "(actor k feeds learner k mod M)")
    if args.evolve and args.learners < 2:
        raise UsageError("--evolve breeds several learners: give --learners 2 or more")
    script = script_of(rest, args.script)
    cfg = script.build_config(script.parse(rest))
    from ..naming import ALGORITHM
    from ..run import validate

    refusals = [
        (ALGORITHM[cfg.algorithm].family != "replay", f"{cfg.policy}: the distributed run trains the replay "
         "learners (sac_main.py, DASE_main.py)"),
        (len(cfg.seed_list()) > 1, "--seeds: learner m trains --seed + m; give --seed and --learners"),
        (cfg.method.distils or cfg.method.diffuses, f"{cfg.policy}: DPD_ and DIFF_ learners are not distributed; "
         "independent and DASE_ ones are"),
        (getattr(cfg.algo_settings().own, "rnd_n_sample", 1) > 1, "--rnd_n_sample: the actors hold no RND model to pick novel "
         "actions with; the bonus itself (--rnd) is distributed"),
        (cfg.device != "cpu" and cfg.cuda_graphs, "--cuda_graphs: the distributed learner takes no CUDA graphs"),
        (cfg.episode_eval or cfg.max_episodes is not None or cfg.solved_at is not None,
         "--episode_eval/--max_episodes/--solved_at: the distributed learner counts the steps it stores"),
    ]
    for refused, message in refusals:
        if refused:
            raise UsageError(message)
    learners = []
    for m in range(args.learners):
        one = dataclasses.replace(cfg.for_seed(cfg.seed_list()[0] + m), env_workers=0, threads=cfg.threads or 1,
                                  cuda_graphs=False)
        one = dataclasses.replace(one, results_dir=str(Path(one.results_dir).resolve()),
                                  checkpoint_dir=str(Path(one.checkpoint_dir).resolve()) if one.checkpoint_dir else
                                  one.checkpoint_dir, models_dir=str(Path(one.models_dir).resolve()))
        validate(one, getattr(script, "FLAG_NAMES", None))
        check_files(one)
        learners.append(one)
    return args, learners


def check_files(cfg) -> None:
    """What the scripts refuse of a seed's existing files (a run there and neither --resume nor --overwrite, a model
    of another run in the way, a finished run asked to go on), refused here before Ray starts; a checkpoint to
    resume is read and checked by its learner."""
    from ..run.files import RunFiles
    from ..run.plan import seed_plan

    files = RunFiles(cfg)
    if not (cfg.resume and files.checkpoint.exists()):
        seed_plan(files)


def import_ray():
    try:
        import ray
    except ImportError:
        raise UsageError("Ray is not installed: pip install -r requirements-cluster.txt") from None
    return ray


def reachable(address: str, timeout: float = 5.0) -> str | None:
    """None if something listens at a HOST:PORT address (a cluster's GCS), else why not ("auto" and ray:// addresses
    are left to Ray)."""
    import socket

    if address == "auto" or "://" in address:
        return None
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        return "not HOST:PORT"
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        return e.strerror or type(e).__name__
    return None


def start_ray(ray, address: str | None, cpus: int) -> None:
    env = {"env_vars": {"PYTHONPATH": str(ROOT)}}
    problem = None if address is None else reachable(address)
    if problem is not None:  # Ray would retry for minutes
        raise UsageError(f"--address {address}: cannot reach a Ray cluster there ({problem})")
    try:
        if address is None:
            # a SIGTERM to the whole process group (timeout, Slurm) reaches the driver alone, which stops every
            # learner with a checkpoint (utils/distributed/ray_local.py)
            init_local(ray, num_cpus=cpus, include_dashboard=False, runtime_env=env, log_to_driver=False,
                       logging_level=logging.ERROR)
        else:
            ray.init(address=address, runtime_env=env, log_to_driver=False, logging_level=logging.ERROR)
    except Exception as e:  # ConnectionError, ValueError, RuntimeError: Ray's own words
        first = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise UsageError(f"--address {address}: cannot reach a Ray cluster there ({first})") from None


def train(args, learners) -> list[list[list[float]]]:
    """Start the learners and actors, run the evolver if asked, wait for the learners; every learner's curves.
    SIGINT or SIGTERM (Ctrl-C) stops every learner at the end of its step with a checkpoint, then raises
    Interrupted with their stop reports (exit code 128 + signal; ``--resume`` continues)."""
    ray = import_ray()
    from ray.util.queue import Queue

    from ..errors import Interrupted, WorkerDied
    from ..run.progress import StopSignals
    from .actor import EnvActor
    from .learner import LearnerActor

    k, m = args.actors, args.learners
    # Ctrl-C while a local Ray starts is held (blocked, pending) until the stop handlers are in place, then delivered
    # to them: let through, it was lost at times somewhere in Ray's start (CI, twice under load: no exit 300 s after
    # it, the learners training on). A cluster joined with --address is not held: reaching it may take long.
    held = hold(signal.SIGINT) if args.address is None else None
    try:  # Ctrl-C while Ray starts too: nothing Ray started here outlives the command (utils/distributed/ray_local.py)
        start_ray(ray, args.address, cpus=max(os.cpu_count() or 1, k + m))
        # a block in flight per actor: a full queue holds the actors back (a longer one only adds policy lag)
        queues = [Queue(maxsize=max(1, k // m)) for _ in range(m)]
        remote_learner = ray.remote(num_cpus=1, max_concurrency=4)(LearnerActor)
        remote_actor = ray.remote(num_cpus=1, max_restarts=-1, max_task_retries=-1)(EnvActor)
        handles = [remote_learner.remote(cfg, q, args.refresh_every, -(-k // m)) for cfg, q in zip(learners, queues)]
        actors = [remote_actor.remote(learners[i % m], i // m, -(-k // m), args.actor_noise, args.block,
                                      learners[i % m].seed) for i in range(k)]
        runs = [h.run.remote() for h in handles]
        feed = lambda i: actors[i].run.remote(handles[i % m], queues[i % m])  # noqa: E731
        feeding = [feed(i) for i in range(k)]
        failed = None

        def watch():
            check_learners(ray, runs)
            check_actors(ray, feeding, runs, feed)
            print_said(ray, handles)

        with StopSignals() as stop:
            held = release(held)  # a Ctrl-C held so far reaches the handlers now: every learner stops at step 1
            try:
                args.selections = evolve(ray, handles, runs, args, stop, watch=watch) if args.evolve else 0
                while not stop.signum and len(ray.wait(runs, num_returns=len(runs), timeout=1.0)[0]) < len(runs):
                    watch()
            except WorkerDied as e:  # an actor's own error: stop every learner with a checkpoint, then say so
                failed = e
            if stop.signum or failed:
                for h in handles:
                    h.stop.remote(stop.signum or signal.SIGTERM)
            results = learner_results(ray, runs)
            print_said(ray, handles)
        if failed:
            note_in_records(args, learners, args.argv)
            raise failed
        finish_actors(ray, feeding, queues)
        for m, r in enumerate(results):
            if "removed" in r:
                print(f"{learners[m].name}: removed by the evolver at selection {args.removed.get(m)} (left out of "
                      f"{args.evolve_lag} in a row); {r['message']}", file=sys.stderr)
        stopped = [r for r in results if "interrupted" in r]
        if stopped:
            args.interrupted = True
            note_in_records(args, learners, args.argv)
            raise Interrupted(stopped[0]["interrupted"], "; ".join(r["message"] for r in stopped))
        return [r.get("curves") for r in results]
    finally:
        shutdown(ray)
        release(held)  # stopped before the handlers: a Ctrl-C held is a KeyboardInterrupt now, once Ray is shut down


def hold(signum: int):
    """Block ``signum`` in this thread (it stays pending, not lost); the mask to restore, or None where there are no
    signal masks (Windows)."""
    return signal.pthread_sigmask(signal.SIG_BLOCK, {signum}) if hasattr(signal, "pthread_sigmask") else None


def release(mask) -> None:
    """Restore the mask ``hold`` returned (a signal held meanwhile is delivered now); nothing for None."""
    if mask is not None:
        signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def learner_results(ray, runs: list) -> list:
    """The learners' results; a learner that refused its files or settings as it started (a checkpoint of other
    settings, say) raises its UsageError alone, one line as the scripts say it (Ray's error would carry the
    learner's traceback); so does a learner whose file found the disk full (its DiskFull: one line, exit code 4)."""
    try:
        return ray.get(runs)
    except ray.exceptions.RayTaskError as e:
        if isinstance(e.cause, UsageError):
            raise UsageError(str(e.cause)) from None
        full = disk_full_cause(e.cause)
        if full is not None:
            raise DiskFull(full.errno, full.strerror or os.strerror(full.errno), full.filename) from None
        raise


def print_said(ray, handles: list) -> None:
    """What the learners printed since the last call (a line per evaluation, as the scripts print), in order."""
    for ref in [h.said.remote() for h in handles]:  # asked all at once
        try:
            lines = ray.get(ref)
        except ray.exceptions.RayError:  # a learner whose process died: the run says so otherwise
            continue
        for line in lines:
            print(line, flush=True)


def check_learners(ray, runs: list) -> None:
    """``learner_results`` of the learners that ended so far (the run stops at the first one that refused)."""
    learner_results(ray, ray.wait(runs, num_returns=len(runs), timeout=0)[0])


def check_actors(ray, feeding: list, runs: list, feed) -> None:
    """An actor's task that ended while its learner trains: an error of its own (Ray restarts an actor that dies,
    not one whose code raised) ends the run as WorkerDied (one line; its learner would wait for blocks forever);
    one that ended without an error is started again (``feed(i)``)."""
    from ..errors import WorkerDied

    ended, _ = ray.wait(feeding, num_returns=len(feeding), timeout=0)
    m = len(runs)
    for ref in ended:
        i = feeding.index(ref)
        if ray.wait([runs[i % m]], num_returns=1, timeout=0)[0]:  # its learner is done: so is it
            continue
        try:
            ray.get(ref)
        except Exception as e:  # RayTaskError: the actor's exception, its traceback in the text
            lines = [x for x in str(e).strip().splitlines() if x.strip()]
            raise WorkerDied(f"actor {i} (feeding learner {i % m}) failed: {lines[-1] if lines else type(e).__name__}; "
                             "every learner stopped with a checkpoint (--resume continues)") from None
        feeding[i] = feed(i)


def finish_actors(ray, feeding, queues, timeout: float = 30.0) -> None:
    """Let the actors end on their own once the learners are done: an actor blocked on a full queue is freed by
    emptying it, then sees the learner done at its next refresh (killed at shutdown instead, Ray would log an error
    for each of its tasks)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for q in queues:
            if q.qsize():
                q.get_nowait_batch(q.qsize())
        if len(ray.wait(feeding, num_returns=len(feeding), timeout=0.5)[0]) == len(feeding):
            return


def evolve(ray, handles, runs, args, stop, clock=time.monotonic, watch=lambda: None) -> int:
    """ASAC's evolver while the learners train (``Schedule``: when, who, whom to remove): the cross-entropy step over
    the parameters of the learners taking part, ranked by the mean of their new evaluations (at most
    ``evolve_every`` of them), every learner still training receiving a draw; a lagging learner is stopped with a
    checkpoint (``LearnerActor.remove``). Returns the selections made; ``args.removed``: {learner: selection}."""
    import torch

    from .evolver import Schedule, cem_step

    generator = torch.Generator().manual_seed(12345)
    schedule = Schedule(len(handles), args.evolve_every, args.evolve_seconds, args.evolve_lag, start=clock())
    args.removed = {}
    while True:
        finished, _ = ray.wait(runs, num_returns=len(runs), timeout=1.0)
        watch()
        if len(finished) == len(runs) or stop.signum:
            return schedule.selections
        alive = [m for m in schedule.alive if runs[m] not in finished]
        if len(alive) < 2:
            return schedule.selections
        schedule.alive = alive
        curves = ray.get([handles[m].evaluations.remote() for m in range(len(handles))])
        counts = [len(c) for c in curves]
        taking_part = schedule.ready(counts, clock())
        if taking_part is None:
            continue
        recent = [min(args.evolve_every, counts[m] - schedule.since[m]) for m in taking_part]
        scores = [float(sum(curves[m][-k:]) / k) for m, k in zip(taking_part, recent)]
        params = ray.get([handles[m].parameters.remote() for m in taking_part])
        stacked = {name: torch.stack([p[name] for p in params]) for name in params[0]}
        removed = schedule.select(taking_part, counts, clock())
        new, _ = cem_step(stacked, scores, generator, elite=args.elite, draws=len(schedule.alive))
        for i, m in enumerate(schedule.alive):
            handles[m].set_parameters.remote({name: v[i] for name, v in new.items()})
        for m in removed:
            handles[m].remove.remote()
            args.removed[m] = schedule.selections


def run(argv=None) -> int:
    args, learners = build(argv)
    import_ray()
    start = time.perf_counter()
    args.argv = sys.argv[1:] if argv is None else list(argv)
    curves = train(args, learners)
    note_in_records(args, learners, args.argv)
    if not learners[0].quiet:
        for cfg, c in zip(learners, curves):
            if c is not None:
                print(f"{cfg.name}: {len(c[0])} evaluations, last {[round(x[-1], 1) for x in c]}")
        print(f"{len(learners)} learner(s), {args.actors} actor(s): {time.perf_counter() - start:.0f} s")
    return 0


def note_in_records(args, learners, argv: list[str]) -> None:
    """Each learner's record says how it was fed (the run's command line is the driver's)."""
    import json

    from ..io import save_json

    for cfg in learners:
        path = Path(cfg.results_dir) / f"{cfg.stem}.json"
        if path.exists():
            record = json.loads(path.read_text())
            record["distributed"] = {"actors": args.actors, "learners": args.learners, "learner": learners.index(cfg),
                                     "refresh_every": args.refresh_every, "block": args.block,
                                     "actor_noise": args.actor_noise, "evolve": args.evolve,
                                     "evolve_every": args.evolve_every if args.evolve else None,
                                     "elite": args.elite if args.evolve else None, "address": args.address,
                                     "evolve_seconds": args.evolve_seconds if args.evolve else None,
                                     "evolve_lag": args.evolve_lag if args.evolve else None,
                                     "removed_at_selection": getattr(args, "removed", {}).get(learners.index(cfg)),
                                     "selections": getattr(args, "selections", 0),
                                     "command": ["python", "-m", "utils.distributed", *argv]}
            save_json(path, record)


def main(argv=None) -> int:
    from ..cli import main_guard

    return main_guard(run, argv)
