"""The on-policy family's settings, one typed dataclass per algorithm with the reference codes' defaults: A2C (SB3's
and Diff-DAC's), A3C (A3C-ACER-PyTorch's, ikostrikov/pytorch-a3c's), ACER (OpenAI baselines'), SEAC (Christianos et
al.'s). ac_main.py's flags,
their --help, their checks and which algorithm takes which flag are generated from them (utils/settings.py); a run's
record keeps every setting, and an older record is read with the settings it lacks at their defaults.

A new setting is one field here (and its use in the algorithm's constructor, which receives it by name).
"""
from __future__ import annotations

from dataclasses import dataclass

from ...errors import UsageError
from ...settings import Settings, Token, again, count, real, setting


@dataclass
class ActorCriticSettings(Settings):
    """What every on-policy algorithm takes."""
    lr: float = setting(7e-4, "learning rate: RMSprop for A2C and ACER, shared Adam for A3C, Adam for SEAC", parse=real,
                        low=0, low_open=True)
    gamma: float = setting(0.99, "discount factor", parse=real, low=0, high=1)
    ent_coef: float = setting(0.01, "entropy bonus coefficient", parse=real, low=0)
    max_grad_norm: float = setting(0.5, "clip each agent's gradient to this norm; 0: no clipping", parse=real, low=0)
    hidden_size: int = setting(64, "width of the two hidden layers of the policy and value networks; with "
                                   "--recurrent the width of its linear layer and LSTM on flat observations",
                               parse=count, low=1)
    n_steps: int = setting(5, "rollout length per environment before an update", parse=count, low=1)
    reward_scale: float = setting(1.0, "multiply the rewards the agents learn from by this (curves and "
                                       "training-episode logs keep the environment's rewards), e.g. 0.1 on Pendulum-v1",
                                  parse=real, low=0, low_open=True, high=1e6)


OPTIMIZER_HELP = ("rmsprop (torch's; --rms_alpha, --rms_eps), rmsprop_tf (TensorFlow's, as OpenAI baselines ran A2C "
                  "and ACER, SB3's RMSpropTFLike: square average from 1, eps under the root) or, ACER only, adam "
                  "(A3C-ACER-PyTorch's shared Adam: betas 0.9, 0.999, eps 1e-8; each member its own step count)")


@dataclass
class ValueSettings(ActorCriticSettings):
    """What A2C, A3C and SEAC take: a V head, its loss weighted."""
    vf_coef: float = setting(0.5, "value loss coefficient (ACER: of its Q loss)", parse=real, low=0)


@dataclass
class AdvantageSettings(ValueSettings):
    """What A2C and A3C take (their targets are n-step or GAE returns, the value a V head's)."""
    gae_lambda: float = setting(1.0, "GAE lambda; 1.0 = plain n-step returns R = r + gamma R, as A3C (SB3-zoo often "
                                     "0.95)", parse=real, low=0, high=1)
    recurrent: bool = setting(False, "an LSTM between the encoder and the policy and value heads (flat observations: "
                                     "linear --hidden_size + tanh, LSTM of --hidden_size; Atari: Nature CNN, LSTM of "
                                     "256), its state carried across the n steps and zeroed at episode ends, as the "
                                     "A3C references; files named {policy}_lstm_...",
                          token=Token(160, lambda v, s, p: "lstm" if v else None, "lstm"))


@dataclass
class LockstepSettings(Settings):
    """What A2C, ACER and SEAC take: K environments per member in lockstep."""
    envs_per_agent: int = setting(8, "environments each agent steps in lockstep; --eval_freq and --max_time_steps "
                                     "count all of them and must be multiples", parse=count, low=1)


@dataclass
class RMSpropSettings(Settings):
    """What A2C and ACER take: RMSprop's constants."""
    rms_alpha: float = setting(0.99, "RMSprop smoothing", parse=real, low=0, high=1, low_open=True, high_open=True)
    rms_eps: float = setting(1e-5, "RMSprop epsilon", parse=real, low=0, low_open=True)


@dataclass
class A2CSettings(LockstepSettings, RMSpropSettings, AdvantageSettings):
    optimizer: str = setting("rmsprop", OPTIMIZER_HELP, parse=str, choices=("rmsprop", "rmsprop_tf"))


@dataclass
class A3CSettings(AdvantageSettings):
    lr: float = again(1e-4)
    max_grad_norm: float = again(40.0)
    n_steps: int = again(20)
    num_processes: int = setting(2, "asynchronous worker processes, each with its own environment", parse=count,
                                 low=1, default_text="the cores here")
    encoder: str = setting("nature", "on Atari: the trunk before the heads (and the LSTM): nature, the Nature DQN's 3 "
                                     "convolutions and a layer of 512; a3c, the A3C references' 16 and 32 convolutions "
                                     "(then a layer of 256, or with --recurrent straight into the LSTM of 256)",
                           parse=str, choices=("nature", "a3c"))


@dataclass
class ACERSettings(LockstepSettings, RMSpropSettings, ActorCriticSettings):
    n_steps: int = again(20)
    max_grad_norm: float = again(10.0)
    q_coef: float = setting(0.5, "value loss coefficient (ACER: of its Q loss)", parse=real, low=0, flag="--vf_coef")
    optimizer: str = setting("rmsprop", OPTIMIZER_HELP, parse=str, choices=("rmsprop", "rmsprop_tf", "adam"))
    buffer_size: int = setting(100_000, "replay capacity per agent in transitions, kept as whole rollouts",
                               parse=count, low=1)
    replay_ratio: float = setting(4.0, "mean of the Poisson number of replay updates after each on-policy one",
                                  parse=real, low=0)
    replay_start: int = setting(1000, "transitions an agent's replay holds before replay updates begin",
                                parse=count, low=0)
    trace_max: float = setting(10.0, "c, the truncation of the importance weights min(c, rho)", parse=real, low=0,
                               low_open=True)
    trust_region: bool = setting(True, "plain truncated importance-sampling updates, without the trust region",
                                 flag="--no_trust_region", negated=True)
    trust_region_decay: float = setting(0.99, "Polyak rate of the average policy network", parse=real, low=0,
                                        high=1, high_open=True)
    trust_region_threshold: float = setting(1.0, "delta, the trust region's bound on k^T z", parse=real, low=0,
                                            low_open=True)
    replay_only: bool = setting(False, "no on-policy update; each fresh rollout is only stored, and every update is a "
                                       "replay update (Wang et al. 2017's continuous ACER, 'entirely off-policy')")
    trust_region_entropy: bool = setting(False, "discrete ACER: project the entropy bonus's gradient with the policy "
                                                "gradient (OpenAI baselines, A3C-ACER-PyTorch; off: the bonus is added "
                                                "after the trust region)")
    prob_eps: float = setting(0.0, "discrete ACER: eps added where the update divides by or takes the log of a "
                                   "probability (rho = pi / (mu + eps), log(pi + eps), c / (rho + eps), k = -pi_avg / "
                                   "(pi + eps), the trust region's |k|^2 + eps), as OpenAI baselines and "
                                   "A3C-ACER-PyTorch (1e-6); keeps the update finite where a probability underflowed "
                                   "to 0 (0: the exact formulas)", parse=real, low=0, high=0.1)
    action_std: float = setting(0.3, "on a Box action space: the Gaussian policy's fixed standard deviation, as a "
                                     "fraction of half the action range per dimension", parse=real, low=0,
                                low_open=True, high=10, recorded="given")
    sdn_samples: int = setting(5, "on a Box action space: n, the actions sampled for the stochastic dueling network's "
                                  "mean advantage", parse=count, low=1, high=1000, recorded="given")

    def check_together(self) -> None:
        if self.buffer_size < self.n_steps * self.envs_per_agent:
            raise UsageError(f"--buffer_size {self.buffer_size} cannot hold one rollout of --n_steps {self.n_steps} x "
                             f"--envs_per_agent {self.envs_per_agent} transitions")
        if self.replay_only and self.replay_ratio == 0:
            raise UsageError("--replay_only with --replay_ratio 0 would never update; give a ratio > 0")
        if self.trust_region_entropy and not self.trust_region:
            raise UsageError("--trust_region_entropy projects the entropy's gradient onto the trust region; drop it "
                             "or --no_trust_region")


@dataclass
class SEACSettings(LockstepSettings, ValueSettings):
    """Christianos et al.'s SEAC (their code's defaults): A2C agents with separate 2 x 64 ReLU actor and critic,
    orthogonal initialisation, Adam, plain 5-step returns, each also learning from its peers' rollouts."""
    lr: float = again(3e-4)
    envs_per_agent: int = again(4)
    adam_eps: float = setting(1e-3, "SEAC: Adam's epsilon", parse=real, low=0, low_open=True)
    seac_lambda: float = setting(1.0, "SEAC: lambda, the weight of the loss on the peers' rollouts (importance-weighted "
                                      "policy gradient and value loss; 0: independent A2C learners with SEAC's "
                                      "settings)", parse=real, low=0,
                                  token=Token(140, lambda v, s, p: None if v is None or float(v) == 1.0
                                              else f"lambda{float(v):g}", "lambda[0-9.e-]+"))
    shared_network: bool = setting(False, "SEAC: the SNAC baseline, every agent of a seed the same network, trained "
                                          "on all of their rollouts (the mean of their A2C gradients); needs "
                                          "--seac_lambda 0",
                                  token=Token(150, lambda v, s, p: "snac" if v else None, "snac"))

    def check_together(self) -> None:
        if self.shared_network and self.seac_lambda != 0:
            raise UsageError("--shared_network trains one network on every agent's rollout as its own (SNAC); "
                             "give --seac_lambda 0 with it")


