"""Environment names, construction and seeding (Gymnasium, MuJoCo -v5, Box2D)."""
from __future__ import annotations

import difflib
import importlib
import re
import sys
import warnings

import gymnasium as gym
import numpy as np

from ..errors import UsageError
from . import pixels, pomdp, variants  # noqa: F401  (register the task-variant ids, RandomExtremePendulum-v1, ..., and the

# partially observed ones, VelocityMaskedPendulum-v1, FlickeringCartPole-v1, ...)

_VERSIONED = re.compile(r"^(?P<name>.+)-v(?P<version>\d+)$")
# MuJoCo >= 3.x deprecates an attribute that Gymnasium's own model files use; it changes nothing for us
_HARMLESS_MUJOCO = ("compiler attribute 'settotalmass' is deprecated",)
_mujoco_seen: set[str] = set()


def _mujoco_warning(message: str) -> None:
    """Print each distinct MuJoCo warning once instead of once per environment built."""
    if message.startswith(_HARMLESS_MUJOCO) or message in _mujoco_seen:
        return
    _mujoco_seen.add(message)
    print(f"mujoco warning: {message}", file=sys.stderr)


def _uses_mujoco(env_id: str) -> bool:
    """Whether building ``env_id`` loads a MuJoCo model (directly, or as the base of a variant or a partially
    observed task)."""
    base = variants.base_of(env_id) or pomdp.base_of(env_id) or pixels.base_of(env_id)
    if base is not None:
        return _uses_mujoco(base)
    spec = gym.registry.get(env_id)
    return spec is not None and "mujoco" in str(spec.entry_point)


def _quiet_mujoco() -> None:
    """Route MuJoCo's warnings through ``_mujoco_warning``; done before the first MuJoCo model is built, not at
    import (importing MuJoCo costs 0.3 s of every start-up, Box2D and classic-control runs included)."""
    global _mujoco_hooked
    if _mujoco_hooked:
        return
    _mujoco_hooked = True
    try:
        import mujoco

        mujoco.set_mju_user_warning(_mujoco_warning)
    except Exception:  # MuJoCo is optional for Box2D and classic-control environments
        pass


_mujoco_hooked = False


# ---- multi-agent tasks (joint.py plays them) ------------------------------------------------------------------
MULTI_AGENT_PACKAGES = {"Foraging": "lbforaging", "rware": "rware"}  # id prefix -> the package that registers it


def package_of(env: str) -> str | None:
    """The package that registers ``env`` (None: not a multi-agent id of a known package)."""
    name = env.split(":", 1)[-1]
    return next((pkg for prefix, pkg in MULTI_AGENT_PACKAGES.items() if name.startswith(prefix)), None)


def register(env: str) -> None:
    """Import the package whose import registers ``env``'s id (a UsageError naming it when it is not installed)."""
    pkg = package_of(env)
    if pkg is None:
        return
    try:
        importlib.import_module(pkg)
    except ImportError:
        raise UsageError(f"--env {env}: multi-agent tasks need the {pkg} package; run: pip install -r requirements.txt") \
            from None


def check_joint(env_id: str, spaces, agents: int | None, who: str) -> None:
    """A UsageError unless every player has the same discrete actions and flat observations of one shape, and
    (``agents`` given) the run has one agent per player."""
    acts, obs = spaces.action_space.spaces, spaces.observation_space
    if not all(isinstance(a, gym.spaces.Discrete) and a.n == acts[0].n for a in acts):
        raise UsageError(f"--env {env_id}: the players' action spaces differ or are not discrete; {who} needs every "
                         "player to have the same discrete actions")
    shapes = {tuple(o.shape or ()) for o in getattr(obs, "spaces", [obs])}
    if len(shapes) != 1 or len(next(iter(shapes))) != 1:
        raise UsageError(f"--env {env_id}: the players' observations must be flat vectors of one shape, got "
                         f"{sorted(shapes)}")
    if agents is not None and agents != len(acts):
        raise UsageError(f"--num_agents {agents}: {env_id} has {len(acts)} players and each agent plays one; "
                         f"use --num_agents {len(acts)}")


def _latest(name: str) -> str | None:
    versions = [s.version for s in gym.registry.values() if s.name == name and s.namespace is None and s.version is not None]
    return f"{name}-v{max(versions)}" if versions else None


def resolve_env_id(env: str) -> tuple[str, str | None]:
    """Map a user's environment name to a maintained Gymnasium id; returns (id, notice or None).

    A bare name ("Hopper") takes the newest version. The paper's MuJoCo -v2/-v3 ids need the dead mujoco-py and map
    to -v5; ids no longer registered (LunarLanderContinuous-v2) map to the newest; a version newer than the newest
    (Pendulum-v9) is refused. Atari games (``ALE/Pong-v5``, ``PongNoFrameskip-v4``) are taken as given, once ale-py
    has registered them.
    """
    register(env)  # a multi-agent id (Foraging-..., rware-...): its package registers it on import
    if _atari_name(env):
        from . import atari

        if not atari.available():
            raise UsageError(f"--env {env}: Atari games need ale-py; run: pip install -r requirements.txt")
        if env not in gym.registry:
            raise UsageError(_unknown(env))
        return env, None
    m = _VERSIONED.match(env)
    if m is None:
        latest = _latest(env)
        if latest is None:
            raise UsageError(_unknown(env))
        return latest, None
    name, version = m.group("name"), int(m.group("version"))
    latest = _latest(name)
    if latest is None:
        raise UsageError(_unknown(env))
    spec = gym.registry.get(env)
    mujoco_py = spec is not None and "mujoco" in str(spec.entry_point) and version < 4
    if spec is None and version > int(latest.rsplit("-v", 1)[1]):  # no Gymnasium ever had it: a typo, not an old id
        raise UsageError(f"--env {env}: no such version; the newest {name} is {latest}")
    if spec is None or mujoco_py:
        why = "needs the unmaintained mujoco-py" if mujoco_py else "is no longer in Gymnasium"
        return latest, f"note: {env} {why}; using {latest} instead (results differ from those published on {env})"
    return env, None


def _unknown(env: str) -> str:
    names = sorted({s.id for s in gym.registry.values() if s.namespace is None})
    close = difflib.get_close_matches(env, names, n=3, cutoff=0.5)
    hint = f"did you mean {', '.join(close)}?" if close else "e.g. Hopper-v5, HalfCheetah-v5, Pendulum-v1"
    return f"--env: unknown environment {env!r}; {hint}"


ACTION_KINDS = {"box": "a continuous (Box)", "discrete": "a discrete"}  # what an algorithm may declare it takes


def _atari_name(env_id: str) -> bool:
    return env_id.startswith("ALE/") or "NoFrameskip" in env_id


def _create(env_id: str, task: dict | None = None, training: bool = True,
            render_mode: str | None = None) -> gym.Env:
    """Make one environment, unchecked; a failure to make it is a UsageError (see ``make_env``)."""
    extra = {} if render_mode is None else {"render_mode": render_mode}
    if render_mode is not None:  # a film (utils.play): Pendulum's arrow read once, not at every frame
        pixels.keep_pendulum_arrow()
    if package_of(env_id):  # Gymnasium's checker warns about the multi-agent tasks' list of rewards at every start
        extra["disable_env_checker"] = True
    atari = _atari_name(env_id)
    if not atari and _uses_mujoco(env_id):
        _quiet_mujoco()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if atari:
                from .atari import make_atari

                return make_atari(env_id, training, **extra)
            env = gym.make(env_id, **extra) if task is None else gym.make(env_id, task=task, **extra)
            if isinstance(env.observation_space, gym.spaces.Dict):  # several sensors: one array to move around
                env = pixels.PackedSensors(env)
            return env
    except gym.error.DependencyNotInstalled as e:
        raise UsageError(f"--env {env_id}: a dependency is missing ({e}); run: pip install -r requirements.txt") from None
    except Exception as e:  # e.g. a registered id whose module fails to import
        raise UsageError(f"--env {env_id}: cannot create it ({type(e).__name__}: {e})") from None


def check_spaces(env_id: str, env, actions: tuple[str, ...] = ("box",), who: str = "DASE",
                 joint: bool = False) -> str:
    """A UsageError unless ``env``'s action space is of a kind in ``actions`` (a Box with finite bounds, or
    Discrete) and its observations are flat vectors (Atari's images excepted); the kind, "box" or "discrete".
    ``env``: an environment, or anything with its ``action_space`` and ``observation_space`` (``env_spaces``).
    A multi-agent environment (one action space per player, ``joint.py``) passes only with ``joint`` (the
    synchronous on-policy learners), as "discrete"."""
    space = env.action_space
    if isinstance(space, gym.spaces.Tuple):
        if not joint:
            raise UsageError(f"--env {env_id}: a multi-agent task ({len(space.spaces)} players acting together); "
                             f"{who} cannot play one (A2C, SEAC and ACER on ac_main.py can)")
        check_joint(env_id, env, None, who)
        return "discrete"
    kind = "box" if isinstance(space, gym.spaces.Box) else "discrete" if isinstance(space, gym.spaces.Discrete) \
        else None
    if kind not in actions:
        wanted = " or ".join(ACTION_KINDS[k] for k in actions)
        hint = {"box": "e.g. Pendulum-v1 or LunarLanderContinuous-v3",
                "discrete": "e.g. CartPole-v1 or LunarLander-v3"}[actions[0]]
        other = (" (SAC on sac_main.py, A2C and ACER on ac_main.py take discrete actions)" if "discrete" not in actions
                 else " (TD3, DDPG and SAC take continuous ones)" if "box" not in actions else "")
        raise UsageError(f"--env {env_id}: action space is {type(space).__name__}, {who} needs {wanted} action "
                         f"space; pick {hint}{other}")
    if kind == "box" and not (np.all(np.isfinite(space.low)) and np.all(np.isfinite(space.high))):
        raise UsageError(f"--env {env_id}: action space is unbounded; a tanh policy needs finite bounds")
    if not _atari_name(env_id) and not pixels.base_of(env_id) and len(env.observation_space.shape or ()) != 1:
        raise UsageError(f"--env {env_id}: observations must be flat vectors, got shape {env.observation_space.shape}")
    return kind


def make_env(env_id: str, task: dict | None = None, actions: tuple[str, ...] = ("box",), who: str = "DASE",
             training: bool = True, render_mode: str | None = None) -> gym.Env:
    """Create one environment and check its action space is of a kind the algorithm takes (``actions``: "box",
    a bounded continuous space, and/or "discrete"; ``who`` names the algorithm in the error).

    ``task``: a task variant's task (``variants.task_for``), None for other ids (and for a variant that draws
    its own). Atari games get the DeepMind preprocessing (``atari.make_atari``): image observations (4, 84, 84),
    and with ``training`` one learner episode per life and clipped rewards (evaluation plays whole games).
    ``render_mode``: Gymnasium's (``"rgb_array"`` for frames to film); None: no rendering, as in training."""
    env = _create(env_id, task, training, render_mode)
    try:
        check_spaces(env_id, env, actions, who)
    except UsageError:
        env.close()
        raise
    return env


_spaces: dict[str, object] = {}  # env id -> its spaces (a SimpleNamespace), or the UsageError making it raised


def env_spaces(env_id: str):
    """What the checks of a run need to know of ``env_id`` without running it: ``action_space``,
    ``observation_space`` and ``spec`` (its time limit), from an environment made and closed once per id and
    process (a sweep checks many runs of few environments); a failure to make it is a UsageError, every time."""
    if env_id not in _spaces:
        from types import SimpleNamespace

        try:
            env = _create(env_id)
        except UsageError as e:
            _spaces[env_id] = e
        else:
            _spaces[env_id] = SimpleNamespace(action_space=env.action_space, observation_space=env.observation_space,
                                              spec=env.spec, layout=pixels.layout_of(env_id, env))
            env.close()
    known = _spaces[env_id]
    if isinstance(known, UsageError):
        raise UsageError(str(known))
    return known


def check_env(env_id: str, actions: tuple[str, ...] = ("box",), who: str = "DASE", joint: bool = False):
    """``make_env``'s checks of ``env_id`` on its cached spaces (``env_spaces``); the spaces."""
    spaces = env_spaces(env_id)
    check_spaces(env_id, spaces, actions, who, joint)
    return spaces


def action_kind(env_id: str, who: str) -> str:
    """"box" or "discrete": the action space of ``env_id``, for a replay learner that takes both (sac_main.py asks
    before it builds a run). The environment's spaces are ``env_spaces``'s; anything ``make_env`` refuses, and
    Atari games, is a UsageError."""
    if _atari_name(env_id):
        raise UsageError(f"--env {env_id}: Atari games are played by A2C, A3C and ACER on ac_main.py; {who} plays "
                         "vector tasks and the pixel tasks (PixelPendulum-v1, PixelCartPole-v1)")
    return check_spaces(env_id, env_spaces(env_id), actions=("box", "discrete"), who=who)


def image_task(env_id: str) -> bool:
    """Whether ``env_id``'s observations hold images the replay learners encode (the pixel tasks' frame stacks, the
    Dict observations of several sensors)."""
    return sensor_layout(env_id) is not None


def sensor_layout(env_id: str):
    """The parts of ``env_id``'s observations (``pixels.layout_of``), None for vector tasks (and Atari, which the
    replay learners do not play); from the cached spaces."""
    if _atari_name(env_id):
        return None
    return env_spaces(env_id).layout


def seeded_envs(env_id: str, seeds, tasks=None, **kinds) -> tuple[list[gym.Env], np.ndarray]:
    """One environment per seed (playing the task beside it in ``tasks``, if given), reset with that seed; its
    action-space sampler seeded too. ``kinds``: ``make_env``'s ``actions`` and ``who``."""
    envs, obs = [], []
    for s, task in zip(seeds, tasks if tasks is not None else [None] * len(seeds)):
        env = make_env(env_id, task, **kinds)
        o, _ = env.reset(seed=int(s))
        env.action_space.seed(int(s))
        envs.append(env)
        obs.append(o)
    return envs, np.stack(obs)
