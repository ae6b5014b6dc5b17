"""Task variants: environments whose physics differ from agent to agent, registered as Gymnasium ids.

Two kinds, after the sunblaze generalisation benchmark that Diff-DAC trains on:

* one task per simulator (``RandomExtreme*``, the MuJoCo ``RandomMass*``, ``Windy*``, ``AirWindMass*``):
  the physical parameters are fixed when the environment is built with ``task=`` (``make_env(env_id, task)``,
  the task drawn by ``task_for`` from the agent's seed), and kept for the whole run. Built without a task,
  the environment draws one from its own generator at its first reset and keeps it.
* ``RandomNormal*``: new parameters at every reset, drawn from the environment's own ``np_random`` (so a reset
  seed, or the generator's state that a checkpoint keeps, gives the same parameters again).

Ids and what they change (factors multiply the Gymnasium defaults; one factor per quantity):

==============================================  ====================================================
``RandomNormalPendulum-v1``                     mass ``m``, length ``l``: each x U[0.75, 1.25] at every reset
``RandomExtremePendulum-v1``                    the same quantities x U([0.5, 0.75) U (1.25, 1.5]), once
``RandomNormalAcrobot-v1``, ``...Extreme...``   both links' mass (``LINK_MASS_1``, ``LINK_MASS_2``), both
                                                links' length (``LINK_LENGTH_1``, ``LINK_LENGTH_2``, and the
                                                centres of mass ``LINK_COM_POS_1/2`` with them, as they sit
                                                mid-link), moment of inertia ``LINK_MOI`` (both links)
``RandomNormalCartPole-v1``, ``...Extreme...``  pole mass, pole length, cart mass, force magnitude
``RandomMassHopper-v5``, ``...HalfCheetah-v5``  every body mass x (1 + 1.9 (Beta(0.1, 0.1) - 0.5)), once
``WindyHopper-v5``, ``...HalfCheetah-v5``       x-y wind 30 (Beta(0.4, 0.4) - 0.5) each, once, in an air
                                                medium (viscosity 0.0002, density 1.2): MuJoCo's wind
                                                acts only through the medium, in a vacuum it does nothing
``AirWindMassHopper-v5``, ``...HalfCheetah-v5`` air medium, wind and masses together
==============================================  ====================================================

Acrobot and CartPole have discrete actions: discrete SAC (sac_main.py) and the on-policy family train on them,
DDPG and TD3 refuse them (``make_env``).
"""
from __future__ import annotations

import importlib
import importlib.util
import json
from collections.abc import Mapping
from functools import cache

import gymnasium as gym
import numpy as np
from gymnasium.envs.classic_control.acrobot import AcrobotEnv
from gymnasium.envs.classic_control.cartpole import CartPoleEnv
from gymnasium.envs.classic_control.pendulum import PendulumEnv

NORMAL = (0.75, 1.25)  # RandomNormal factors: U[0.75, 1.25]
EXTREME = ((0.5, 0.75), (1.25, 1.5))  # RandomExtreme factors: U([0.5, 0.75) U (1.25, 1.5])
MASS_SPREAD, MASS_BETA = 1.9, 0.1  # body mass x (1 + 1.9 (Beta(0.1, 0.1) - 0.5))
WIND_SCALE, WIND_BETA = 30.0, 0.4  # wind x and y: 30 (Beta(0.4, 0.4) - 0.5)
AIR = {"density": 1.2, "viscosity": 0.0002}  # the air medium (MuJoCo's model.opt)
TASK_STREAM = 0x7A5C  # tells the task's random stream from the others made from an agent's seed


def normal_factor(rng: np.random.Generator) -> float:
    return float(rng.uniform(*NORMAL))


def extreme_factor(rng: np.random.Generator) -> float:
    """Uniform on [0.5, 0.75) U (1.25, 1.5]: one uniform number of width 0.5, the upper half flipped so that
    both ends are as stated."""
    u = float(rng.uniform(0.0, 0.5))
    return EXTREME[0][0] + u if u < 0.25 else EXTREME[1][1] + 0.25 - u


class TaskVariant:
    """What every variant adds to its Gymnasium environment: a task (a dict of physical parameters, JSON-able)
    set at construction or drawn at reset. Subclasses say how to draw and apply one."""

    REDRAW = False  # True: RandomNormal, new parameters at every reset

    def __init__(self, *args, task: dict | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.nominal = self.current()
        self.task: dict | None = None
        if task is not None:
            if self.REDRAW:
                if json.loads(json.dumps(task)) != self.describe():
                    raise ValueError(f"{type(self).__name__} draws its parameters at every reset; its task is "
                                     f"{self.describe()}, not {task}")
            else:
                self.set_task(task)

    # ---- what subclasses define ----
    def current(self) -> dict:
        """The parameters the environment has now (at construction: the nominal ones)."""
        raise NotImplementedError

    @classmethod
    def draw(cls, nominal: dict, rng: np.random.Generator) -> dict:
        """A task: parameters drawn with ``rng`` around ``nominal``."""
        raise NotImplementedError

    def apply(self, params: dict) -> None:
        raise NotImplementedError

    @classmethod
    def describe(cls) -> dict:
        """RandomNormal variants: the distribution their parameters come from (their "task")."""
        raise NotImplementedError

    # ---- shared ----
    def set_task(self, params: dict) -> None:
        if set(params) != set(self.nominal):
            raise ValueError(f"{type(self).__name__}: a task sets {sorted(self.nominal)}, got {sorted(params)}")
        self.apply(params)
        self.task = dict(params)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = super().reset(seed=seed, options=options)
        if self.REDRAW or self.task is None:  # the parameters are drawn after the state: the episode plays them
            self.set_task(self.draw(self.nominal, self.np_random))
        return obs, {**info, "task": self.task}


class ClassicVariant(TaskVariant):
    """A classic-control variant: ``QUANTITIES`` maps each quantity (one factor each) to the public attributes
    it scales."""

    QUANTITIES: dict[str, tuple[str, ...]] = {}

    def current(self) -> dict:
        return {a: float(getattr(self, a)) for attrs in self.QUANTITIES.values() for a in attrs}

    @classmethod
    def draw(cls, nominal: dict, rng: np.random.Generator) -> dict:
        factor = normal_factor if cls.REDRAW else extreme_factor
        params = {}
        for attrs in cls.QUANTITIES.values():
            k = factor(rng)
            params.update({a: nominal[a] * k for a in attrs})
        return params

    def apply(self, params: dict) -> None:
        for name, value in params.items():
            setattr(self, name, float(value))

    @classmethod
    def describe(cls) -> dict:
        return {"redrawn": "at every reset", "factor": {"low": NORMAL[0], "high": NORMAL[1]},
                "quantities": {q: list(attrs) for q, attrs in cls.QUANTITIES.items()}}


class _Pendulum(ClassicVariant, PendulumEnv):
    QUANTITIES = {"mass": ("m",), "length": ("l",)}


class _Acrobot(ClassicVariant, AcrobotEnv):
    QUANTITIES = {"mass": ("LINK_MASS_1", "LINK_MASS_2"),
                  "length": ("LINK_LENGTH_1", "LINK_LENGTH_2", "LINK_COM_POS_1", "LINK_COM_POS_2"),
                  "inertia": ("LINK_MOI",)}


class _CartPole(ClassicVariant, CartPoleEnv):
    QUANTITIES = {"pole_mass": ("masspole",), "pole_length": ("length",), "cart_mass": ("masscart",),
                  "force": ("force_mag",)}

    def apply(self, params: dict) -> None:
        super().apply(params)
        self.total_mass = self.masspole + self.masscart  # the quantities CartPole derives from them
        self.polemass_length = self.masspole * self.length


class RandomNormalPendulum(_Pendulum):
    REDRAW = True


class RandomExtremePendulum(_Pendulum):
    pass


class RandomNormalAcrobot(_Acrobot):
    REDRAW = True


class RandomExtremeAcrobot(_Acrobot):
    pass


class RandomNormalCartPole(_CartPole):
    REDRAW = True


class RandomExtremeCartPole(_CartPole):
    pass


class MujocoVariant(TaskVariant):
    """A MuJoCo variant, one task per simulator: body masses, wind and medium in ``model``."""

    MASS = WIND = MEDIUM = False

    def current(self) -> dict:
        model, params = self.model, {}
        if self.MASS:
            params["body_mass"] = [float(m) for m in model.body_mass]
        if self.WIND:
            params["wind"] = [float(w) for w in model.opt.wind]
        if self.MEDIUM:
            params.update(density=float(model.opt.density), viscosity=float(model.opt.viscosity))
        return params

    @classmethod
    def draw(cls, nominal: dict, rng: np.random.Generator) -> dict:
        params = {}
        if cls.MASS:
            params["body_mass"] = [m * (1.0 + MASS_SPREAD * (float(rng.beta(MASS_BETA, MASS_BETA)) - 0.5))
                                   for m in nominal["body_mass"]]
        if cls.WIND:
            xy = [WIND_SCALE * (float(rng.beta(WIND_BETA, WIND_BETA)) - 0.5) for _ in range(2)]
            params["wind"] = [*xy, nominal["wind"][2]]
        if cls.MEDIUM:
            params.update(AIR)
        return params

    def apply(self, params: dict) -> None:
        import mujoco

        model = self.model
        if "body_mass" in params:
            model.body_mass[:] = params["body_mass"]
        if "wind" in params:
            model.opt.wind[:] = params["wind"]
        for name in ("density", "viscosity"):
            if name in params:
                setattr(model.opt, name, float(params[name]))
        # the constants MuJoCo derives from the masses (subtree masses, inverse weights); a scratch MjData, as
        # mj_setConst overwrites the state of the one it is given
        mujoco.mj_setConst(model, mujoco.MjData(model))


_CLASSIC = {
    "RandomNormalPendulum-v1": (RandomNormalPendulum, "Pendulum-v1"),
    "RandomExtremePendulum-v1": (RandomExtremePendulum, "Pendulum-v1"),
    "RandomNormalAcrobot-v1": (RandomNormalAcrobot, "Acrobot-v1"),
    "RandomExtremeAcrobot-v1": (RandomExtremeAcrobot, "Acrobot-v1"),
    "RandomNormalCartPole-v1": (RandomNormalCartPole, "CartPole-v1"),
    "RandomExtremeCartPole-v1": (RandomExtremeCartPole, "CartPole-v1"),
}
# The MuJoCo variants' classes are built on first use (their bases import MuJoCo: 0.3 s of every start-up otherwise)
_MUJOCO_KINDS = {"RandomMass": (True, False, False), "Windy": (False, True, True), "AirWindMass": (True, True, True)}
_MUJOCO_BASES = {"Hopper": "hopper_v5:HopperEnv", "HalfCheetah": "half_cheetah_v5:HalfCheetahEnv"}


def _mujoco_class(name: str) -> type:
    """The class of the MuJoCo variant ``name`` (e.g. WindyHopper), built once; also this module's attribute of
    that name, which Gymnasium's entry point "utils.envs.variants:NAME" and pickle look up."""
    if name not in globals():
        prefix = next(p for p in _MUJOCO_KINDS if name.startswith(p))
        module, cls_name = _MUJOCO_BASES[name[len(prefix):]].split(":")
        env_class = getattr(importlib.import_module(f"gymnasium.envs.mujoco.{module}"), cls_name)
        mass, wind, medium = _MUJOCO_KINDS[prefix]
        globals()[name] = type(name, (MujocoVariant, env_class), {"MASS": mass, "WIND": wind, "MEDIUM": medium,
                                                                  "__module__": __name__})
    return globals()[name]


def __getattr__(name: str):  # module attribute on demand (PEP 562): the MuJoCo variant classes
    if any(name.startswith(p) and name[len(p):] in _MUJOCO_BASES for p in _MUJOCO_KINDS):
        return _mujoco_class(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _mujoco_names() -> dict[str, tuple[str, str]]:
    """Variant id -> (class name, base id) of the MuJoCo variants (none when MuJoCo is not installed)."""
    if importlib.util.find_spec("mujoco") is None:  # MuJoCo is optional
        return {}
    return {f"{p}{base}-v5": (f"{p}{base}", f"{base}-v5") for base in _MUJOCO_BASES for p in _MUJOCO_KINDS}


class _Variants(Mapping):
    """Every registered variant id -> its class; a MuJoCo variant's class is built when it is first asked for."""

    def __init__(self) -> None:
        self._names = {env_id: cls.__name__ for env_id, (cls, _) in _CLASSIC.items()}
        self._names.update({env_id: name for env_id, (name, _) in _MUJOCO_IDS.items()})

    def __getitem__(self, env_id: str) -> type:
        name = self._names[env_id]
        return globals()[name] if name in globals() else _mujoco_class(name)

    def __contains__(self, env_id) -> bool:  # Mapping's would build the class
        return env_id in self._names

    def __iter__(self):
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


_MUJOCO_IDS = _mujoco_names()
VARIANTS = _Variants()
_BASES: dict[str, str] = {k: base for k, (_, base) in {**_CLASSIC, **_MUJOCO_IDS}.items()}  # id -> the id it varies


def _register() -> None:
    for env_id, name in VARIANTS._names.items():
        if env_id in gym.registry:
            continue
        spec = gym.spec(_BASES[env_id])
        gym.register(env_id, entry_point=f"{__name__}:{name}", max_episode_steps=spec.max_episode_steps,
                     reward_threshold=spec.reward_threshold)


_register()


def has_variants(env_id: str) -> bool:
    """Whether ``env_id`` is a task variant (its agents can play different tasks)."""
    return env_id in VARIANTS


def redraws(env_id: str) -> bool:
    """Whether ``env_id`` is a RandomNormal variant (new parameters at every reset, no task of its own)."""
    return env_id in VARIANTS and VARIANTS[env_id].REDRAW


def base_of(env_id: str) -> str | None:
    """The Gymnasium id a variant varies (None for other ids)."""
    return _BASES.get(env_id)


@cache
def _nominal(env_id: str) -> str:
    env = VARIANTS[env_id]()
    try:
        return json.dumps(env.nominal)
    finally:
        env.close()


def task_for(env_id: str, agent_seed: int) -> dict | None:
    """The task of the agent with seed ``agent_seed``: its physical parameters (one task per simulator), the
    distribution its parameters are redrawn from at every reset (RandomNormal), or None (not a variant)."""
    cls = VARIANTS.get(env_id)
    if cls is None:
        return None
    if cls.REDRAW:
        return cls.describe()
    rng = np.random.default_rng(np.random.SeedSequence(int(agent_seed), spawn_key=(TASK_STREAM,)))
    return cls.draw(json.loads(_nominal(env_id)), rng)
