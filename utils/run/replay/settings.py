"""The replay family's settings, one typed dataclass each with its paper's defaults: TD3 (Fujimoto et al.'s
reference) and DDPG (the DASE paper's, after Lillicrap et al.) for DASE_main.py; SAC on a Box action space and
discrete SAC (Christodoulou's, CleanRL's target entropy) for sac_main.py. The scripts' flags for them, their --help,
their checks and which algorithm takes which flag are generated from these (utils/settings.py); a run's record keeps
every setting, and an older record is read with those it lacks at their defaults.

A new setting is one field here (and its use in the algorithm's constructor, which receives it by name).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import UsageError
from ...settings import Settings, again, count, real, setting


@dataclass
class DeterministicSettings(Settings):
    """What TD3 and DDPG take."""
    discount: float = setting(0.99, "discount factor", parse=real, low=0, high=1)
    tau: float = setting(0.005, "target network update rate", parse=real, low=0, low_open=True, high=1)
    expl_noise: float = setting(0.1, "std of the Gaussian exploration noise, times max action", parse=real, low=0)
    hidden: tuple = setting((256, 256), "hidden layer widths of actor and critics, e.g. 400 300 (DDPG: two widths)",
                            parse=count, low=1, nargs="+", metavar="WIDTH", flag="--hidden_sizes")
    actor_lr: float = setting(3e-4, "actor's Adam learning rate", parse=real, low=0, low_open=True)
    critic_lr: float = setting(3e-4, "critics' Adam learning rate", parse=real, low=0, low_open=True)


@dataclass
class TD3Settings(DeterministicSettings):
    policy_noise: float = setting(0.2, "target policy noise, times max action", parse=real, low=0)
    noise_clip: float = setting(0.5, "target noise clip, times max action", parse=real, low=0)
    policy_freq: int = setting(2, "update actor and targets every this many critic updates", parse=count, low=1)


@dataclass
class DDPGSettings(DeterministicSettings):
    tau: float = again(0.001)
    hidden: tuple = again((400, 300))
    actor_lr: float = again(1e-4)
    critic_lr: float = again(1e-3)

    def check_together(self) -> None:
        if len(self.hidden) != 2:
            raise UsageError(f"--hidden_sizes {' '.join(map(str, self.hidden))}: DDPG's critic takes exactly two widths "
                             "(state -> W1, then [features, action] -> W2)")


ALGORITHM_SETTINGS = {"TD3": TD3Settings, "DDPG": DDPGSettings}


@dataclass
class SoftSettings(Settings):
    """What SAC takes on either action space."""
    gamma: float = setting(0.99, "discount factor", parse=real, low=0, high=1)
    tau: float = setting(0.005, "target critic update rate", parse=real, low=0, low_open=True, high=1)
    lr: float = setting(3e-4, "Adam learning rate of every network", parse=real, low=0, low_open=True)
    alpha: float = setting(0.2, "entropy temperature (initial value when tuned)", parse=real, low=0)
    automatic_entropy_tuning: bool = setting(
        False, "learn alpha towards a target entropy: -|A| for a Gaussian policy (a deterministic one has no entropy), "
               "--target_entropy_scale * log|A| for discrete actions; --no_automatic_entropy_tuning keeps alpha fixed "
               "at --alpha", off_flag="--no_automatic_entropy_tuning")
    reward_scale: float = setting(5.0, "reward multiplier in the critic target", parse=real, low=0, low_open=True,
                                  default_text="5; 20 for Humanoid")
    hidden_size: int = setting(256, "width of the two hidden layers", parse=count, low=1)
    target_update_interval: int = setting(1, "soft-update the target critics every this many updates", parse=count,
                                          low=1)

    def check_together(self) -> None:
        if self.automatic_entropy_tuning and self.alpha == 0:
            raise UsageError("--automatic_entropy_tuning needs --alpha > 0")


@dataclass
class SACSettings(SoftSettings):
    policy_type: str = setting("Deterministic", "policy family on a continuous action space", parse=str,
                               choices=("Deterministic", "Gaussian"))


@dataclass
class DiscreteSACSettings(SoftSettings):
    automatic_entropy_tuning: bool = again(True)
    reward_scale: float = again(1.0)
    target_entropy_scale: float = setting(
        0.89, "alpha is tuned towards entropy target_entropy_scale * log|A|. Christodoulou's 0.98 makes alpha grow "
              "without bound for 2 actions (CartPole), as reported on p-christ's discrete SAC; CleanRL uses 0.89",
        parse=real, low=0, low_open=True, high=1)


SAC_SETTINGS = {"SAC (continuous actions)": SACSettings, "SAC (discrete actions)": DiscreteSACSettings}
