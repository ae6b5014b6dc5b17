"""The replay family's settings, one typed dataclass each with its paper's defaults: TD3 (Fujimoto et al.'s
reference) and DDPG (the DASE paper's, after Lillicrap et al.) for DASE_main.py; SAC on a Box action space and
discrete SAC (Christodoulou's, CleanRL's target entropy) for sac_main.py. The scripts' flags for them, their --help,
their checks and which algorithm takes which flag are generated from these (utils/settings.py); a run's record keeps
every setting, and an older record is read with those it lacks at their defaults.

A new setting is one field here (and its use in the algorithm's constructor, which receives it by name).
"""
from __future__ import annotations

from dataclasses import dataclass

from algorithms.replay.sequence import ENCODERS

from ...errors import UsageError
from ...settings import NUMBER, Settings, Token, again, count, real, setting


def strength(value) -> str:
    """A bonus's factor in a file name: nothing at 1."""
    factor = float(value or 1.0)
    return f"{factor:g}" if factor != 1.0 else ""


def ensemble_token(n: int, m: int) -> str | None:
    """q{N}[m{M}]: N critics, the target the minimum of M (REDQ when M < N); none for the twin critics."""
    return None if (n, m) == (2, 2) else f"q{n}" + (f"m{m}" if m < n else "")


def noisy_token(sigma0: float) -> str:
    return "noisy" + (f"{sigma0:g}" if sigma0 != 0.5 else "")


def rnd_token(settings) -> str:
    k = int(settings.get("rnd_n_sample") or 1)
    return "rnd" + strength(settings.get("rnd_strength")) + (f"k{k}" if k > 1 else "")


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
class EnsembleSettings(Settings):
    """A Q ensemble in place of the twin critics (TD3, SAC; Advanced-Soft-Actor-Critic's ensemble_q_num and
    ensemble_q_sample)."""
    ensemble_q: int = setting(2, "critics per agent, N; 2 with --ensemble_q_sample 2 are the twin critics; files "
                              "named {policy}_q{N}[m{M}]_...", parse=count, low=2, recorded="given",
                              token=Token(80, lambda v, s, p: ensemble_token(int(v or 2), int(s.get("ensemble_q_sample")
                                                                                              or 2)), r"q\d+(?:m\d+)?"))
    ensemble_q_sample: int = setting(2, "M: the target is the minimum over M of the N critics, drawn per update and "
                                     "agent from its own stream (REDQ when M < N: SAC's policy then maximises the "
                                     "mean of all N)", parse=count, low=1, recorded="given")

    def check_together(self) -> None:
        if self.ensemble_q_sample > self.ensemble_q:
            raise UsageError(f"--ensemble_q_sample {self.ensemble_q_sample}: at most --ensemble_q ({self.ensemble_q}) "
                             "critics can be drawn")


@dataclass
class NoisySettings(Settings):
    """Noisy networks (Fortunato et al. 2018) in the policy (TD3, DDPG, SAC) and in discrete SAC's Q networks."""
    noisy: bool = setting(False, "factorised-Gaussian noisy linear layers in the actor (discrete SAC: also in its Q "
                          "networks), noise drawn from each agent's streams before every exploration step and every "
                          "update, off at evaluation; the algorithm's own exploration stays (TD3/DDPG: --expl_noise 0 "
                          "leaves only the layers'); files named {policy}_noisy[S]_...", recorded="given",
                          token=Token(90, lambda v, s, p: noisy_token(float(s.get("noisy_sigma0") or 0.5)) if v
                                      else None, f"noisy(?:{NUMBER})?"))
    noisy_sigma0: float = setting(0.5, "--noisy: sigma_0, the noise scale's start (sigma0 / sqrt(fan_in), the "
                                  "paper's 0.5)", parse=real, low=0, low_open=True, recorded="given")

    def check_together(self) -> None:
        if self.noisy_sigma0 != 0.5 and not self.noisy:
            raise UsageError("--noisy_sigma0 applies with --noisy; add it or drop --noisy_sigma0")


@dataclass
class NormalizationSettings(Settings):
    """Running observation normalisation (ASAC's use_normalization), for every replay learner."""
    normalize_obs: bool = setting(False, "normalise each agent's observations by its running mean and variance "
                                  "(of every observation it acted on, warm-up included), clipped to [-5, 5]; the "
                                  "statistics are kept in checkpoints and model files and frozen at evaluation; files "
                                  "named {policy}_norm_...", recorded="given",
                                  token=Token(100, lambda v, s, p: "norm" if v else None, "norm"))
    action_noise: tuple | None = setting(
        None, "ASAC's action-noise range: agent k of a seed's N explores at level MIN + (MAX - MIN) k / (N - 1) (MIN "
        "alone when N = 1): TD3/DDPG's Gaussian action noise std (times max action, in place of --expl_noise); SAC: "
        "Gaussian noise of that std added before the tanh (the Gaussian policy's stored behaviour widens to match); "
        "discrete SAC: a uniform random action with that probability (the stored probabilities are the mixture); "
        "files named {policy}_noise{MIN}-{MAX}_...", parse=real, low=0, nargs=2, metavar="LEVEL",
        default_text="off", recorded="given",
        token=Token(110, lambda v, s, p: "noise{:g}-{:g}".format(*map(float, v)) if v else None,
                    f"noise{NUMBER}-{NUMBER}"))

    def check_together(self) -> None:
        if self.action_noise is not None and self.action_noise[0] > self.action_noise[1]:
            low, high = self.action_noise
            raise UsageError(f"--action_noise {low:g} {high:g}: MIN must not exceed MAX")
        if self.action_noise is not None and getattr(self, "expl_noise", 0.1) != 0.1:  # TD3, DDPG
            raise UsageError("--expl_noise and --action_noise both set the exploration noise's std (the range replaces "
                             "--expl_noise); give one of them")


@dataclass
class IntrinsicSettings(Settings):
    """Intrinsic rewards (ASAC's curiosity and use_rnd), for every replay learner."""
    curiosity: str | None = setting(
        None, "an intrinsic reward from Pathak et al.'s curiosity module (an encoder trained by an inverse dynamics "
        "model, a forward model in its features): forward = the forward model's error (ICM's reward), inverse = the "
        "inverse model's error (ASAC's INVERSE); times --curiosity_strength, added to the reward of every sampled "
        "transition (before SAC's --reward_scale); per evaluation the mean bonus and model loss in "
        "{curve}_intrinsic.npy; files named {policy}_icm{mode}[S]_...",
        parse=str, choices=("forward", "inverse"), metavar="{forward,inverse}", default_text="off", recorded="given",
        token=Token(120, lambda v, s, p: f"icm{v}" + strength(s.get("curiosity_strength")) if v else None,
                    f"icm(?:forward|inverse)(?:{NUMBER})?"))
    curiosity_strength: float = setting(1.0, "--curiosity: the bonus's factor", parse=real, low=0, low_open=True,
                                        recorded="given")
    rnd: bool = setting(False, "random network distillation on state-action pairs (ASAC's): the bonus "
                        "--rnd_strength * |predictor(s, a) - fixed random target(s, a)|^2 / width, added to the "
                        "reward (before SAC's --reward_scale); files named {policy}_rnd[S][kK]_...", recorded="given",
                        token=Token(130, lambda v, s, p: rnd_token(s) if v else None, rf"rnd(?:{NUMBER})?(?:k\d+)?"))
    rnd_strength: float = setting(1.0, "--rnd: the bonus's factor", parse=real, low=0, low_open=True,
                                  recorded="given")
    rnd_n_sample: int = setting(1, "--rnd: ASAC's rnd_n_sample, K candidate exploration actions per step of which "
                                "the most novel to the RND predictor is taken (1: the one drawn)", parse=count,
                                low=1, recorded="given")

    def check_together(self) -> None:
        if self.curiosity is None and self.curiosity_strength != 1.0:
            raise UsageError("--curiosity_strength applies with --curiosity; add it or drop --curiosity_strength")
        if not self.rnd and (self.rnd_strength != 1.0 or self.rnd_n_sample != 1):
            raise UsageError("--rnd_strength/--rnd_n_sample apply with --rnd; add it or drop them")


@dataclass
class TD3Settings(DeterministicSettings, EnsembleSettings, NoisySettings, NormalizationSettings, IntrinsicSettings):
    policy_noise: float = setting(0.2, "target policy noise, times max action", parse=real, low=0)
    noise_clip: float = setting(0.5, "target noise clip, times max action", parse=real, low=0)
    policy_freq: int = setting(2, "update actor and targets every this many critic updates", parse=count, low=1)


@dataclass
class DDPGSettings(DeterministicSettings, NoisySettings, NormalizationSettings, IntrinsicSettings):
    tau: float = again(0.001)
    hidden: tuple = again((400, 300))
    actor_lr: float = again(1e-4)
    critic_lr: float = again(1e-3)

    def check_together(self) -> None:
        if len(self.hidden) != 2:
            raise UsageError(f"--hidden_sizes {' '.join(map(str, self.hidden))}: DDPG's critic takes exactly two widths "
                             "(state -> W1, then [features, action] -> W2)")




@dataclass
class SoftSettings(Settings):
    """What SAC takes on either action space."""
    gamma: float = setting(0.99, "discount factor", parse=real, low=0, high=1)
    tau: float = setting(0.005, "target critic update rate", parse=real, low=0, low_open=True, high=1)
    lr: float = setting(3e-4, "Adam learning rate of every network", parse=real, low=0, low_open=True)
    alpha: float = setting(0.2, "entropy temperature (initial value when tuned); kept as log(alpha), so > 0",
                           parse=real, low=0, low_open=True)
    automatic_entropy_tuning: bool = setting(
        False, "learn alpha towards a target entropy: -|A| for a Gaussian policy (a deterministic one has no entropy), "
               "--target_entropy_scale * log|A| for discrete actions; --no_automatic_entropy_tuning keeps alpha fixed "
               "at --alpha", off_flag="--no_automatic_entropy_tuning")
    reward_scale: float = setting(5.0, "reward multiplier in the critic target", parse=real, low=0, low_open=True,
                                  default_text="5; 20 for Humanoid")
    hidden_size: int = setting(256, "width of the two hidden layers", parse=count, low=1)
    target_update_interval: int = setting(1, "soft-update the target critics every this many updates", parse=count,
                                          low=1)


DETERMINISTIC_NOISES = ("per_sample", "paper_code")


@dataclass
class SACSettings(SoftSettings, EnsembleSettings, NoisySettings, NormalizationSettings, IntrinsicSettings):
    policy_type: str = setting("Deterministic", "policy family on a continuous action space", parse=str,
                               choices=("Deterministic", "Gaussian"))
    deterministic_noise: str = setting(
        "per_sample", "how the Deterministic policy's noise, N(0, 0.1) clipped at 0.25, is drawn and used: per_sample, "
        "one draw per sample and action dimension, the noisy action clipped to the bounds; paper_code, as the DASE "
        "paper's SAC code: one draw per call shared by the whole batch (the target's next actions, the actor loss, "
        "and DASE's weights, taken against pi(s) plus such a draw), noisy actions never clipped to the bounds "
        "(exploration sends and stores actions up to 0.25 outside them); files named {policy}_papernoise_...",
        parse=str, choices=DETERMINISTIC_NOISES, recorded="given",
        token=Token(115, lambda v, s, p: "papernoise" if v == "paper_code" else None, "papernoise"))

    def check_together(self) -> None:
        if self.deterministic_noise != "per_sample" and self.policy_type != "Deterministic":
            raise UsageError(f"--deterministic_noise {self.deterministic_noise}: only the Deterministic policy adds "
                             "this noise; drop it or use --policy_type Deterministic")


@dataclass
class DiscreteSACSettings(SoftSettings, NoisySettings, NormalizationSettings, IntrinsicSettings):
    automatic_entropy_tuning: bool = again(True)
    reward_scale: float = again(1.0)
    target_entropy_scale: float = setting(
        0.89, "alpha is tuned towards entropy target_entropy_scale * log|A|. Christodoulou's 0.98 makes alpha grow "
              "without bound for 2 actions (CartPole), as reported on p-christ's discrete SAC; CleanRL uses 0.89",
        parse=real, low=0, low_open=True, high=1)

    def check_together(self) -> None:
        if self.action_noise is not None and self.action_noise[1] > 1:
            raise UsageError(f"--action_noise {self.action_noise[0]:g} {self.action_noise[1]:g}: on discrete actions "
                             "the levels are probabilities of a random action, at most 1")




@dataclass
class VtraceSettings(Settings):
    """V-trace corrections of SAC's N-step targets (ASAC's), on a Gaussian policy whose stored behaviour gives the
    importance ratios. Recorded in the algorithm's settings as ``vtrace: [rho_bar, c_bar, lambda]`` when on."""
    vtrace: bool = setting(False, "V-trace corrections of the N-step targets (needs --n_step > 1 and --policy_type "
                           "Gaussian: the stored behaviour Gaussian gives the importance ratios)")
    vtrace_rho: float = setting(1.0, "--vtrace: rho_bar, the clip of rho", parse=real, low=0, low_open=True)
    vtrace_c: float = setting(1.0, "--vtrace: c_bar, the clip of the traces", parse=real, low=0, low_open=True)
    vtrace_lambda: float = setting(1.0, "--vtrace: lambda of the traces", parse=real, low=0, low_open=True, high=1)

    def check_together(self) -> None:
        if not self.vtrace and (self.vtrace_rho, self.vtrace_c, self.vtrace_lambda) != (1.0, 1.0, 1.0):
            raise UsageError("--vtrace_rho/--vtrace_c/--vtrace_lambda apply with --vtrace; add it or drop them")

    def record(self) -> dict:
        return {"vtrace": [self.vtrace_rho, self.vtrace_c, self.vtrace_lambda]} if self.vtrace else {}


MAX_SEQ_HIDDEN = 4096  # a GRU of 4096 already holds 100M parameters per agent


@dataclass
class SequenceSettings(Settings):
    """A recurrent agent trained on replayed windows (R2D2's stored states and burn-in; ASAC's prediction model).
    Recorded in the algorithm's settings only with --seq_encoder (a feed-forward run's record names none)."""
    seq_encoder: str | None = setting(
        None, "a recurrent agent: a gru, lstm or attn (causal attention over the episode's last --seq_len "
        "observations) encoder shared by actor and critics, trained on replayed windows of --seq_len steps with "
        "stored states and --burn_in (R2D2); for partially observed tasks such as VelocityMaskedPendulum-v1. "
        "--batch_size then counts windows; files named {policy}_{encoder}_...", parse=str, choices=ENCODERS,
        metavar="{gru,lstm,attn}", default_text="none, feed-forward",
        token=Token(170, lambda v, s, p: str(v) if v else None, "|".join(ENCODERS)))
    seq_len: int = setting(16, "--seq_encoder: steps per replayed window, burn-in included", parse=int, low=1)
    burn_in: int = setting(0, "--seq_encoder: leading steps of a window that only refresh the stored state",
                           parse=int, low=0)
    seq_hidden: int = setting(64, "--seq_encoder: width of the recurrent state (attn: of the attention); a multiple "
                              "of 32 keeps seeds batched bit-identical to seeds alone on the CPU", parse=int, low=1,
                              high=MAX_SEQ_HIDDEN)
    use_prediction: bool = setting(
        False, "--seq_encoder: train ASAC's prediction model beside the agent (a Gaussian over the next memory and "
        "the reward from the features and the action; its loss added to the critic's, so it shapes the encoder)",
        token=Token(190, lambda v, s, p: "pred" if v else None, "pred"))
    prev_action: bool = setting(
        False, "--seq_encoder: the encoder also reads the previous action (one-hot, or scaled to [-1, 1]; zeros at "
        "an episode's start), as recurrent baselines for POMDPs do; files named {policy}_{encoder}_prev_...",
        token=Token(180, lambda v, s, p: "prev" if v else None, "prev"))
    transition_kl: float = setting(0.8, "--use_prediction: weight of the KL of the predicted transition to N(0, I) "
                                   "(ASAC's)", parse=real, low=0)

    def check_together(self) -> None:
        if self.transition_kl != 0.8 and not self.use_prediction:
            raise UsageError("--transition_kl applies with --use_prediction; add it or drop --transition_kl")
        if self.seq_encoder is None:
            changed = [f"--{k}" for k, v in {"seq_len": 16, "burn_in": 0, "seq_hidden": 64, "use_prediction": False,
                                              "prev_action": False}.items() if getattr(self, k) != v]
            if changed:
                raise UsageError(f"{'/'.join(changed)} apply with --seq_encoder; add it or drop them")
            return
        if not self.burn_in < self.seq_len:
            raise UsageError(f"--burn_in {self.burn_in} must be in [0, --seq_len {self.seq_len}): a window needs a "
                             "step to train on")

    def record(self) -> dict:
        if self.seq_encoder is None:
            return {}
        out = {k: getattr(self, k) for k in ("seq_encoder", "seq_len", "burn_in", "seq_hidden")}
        if self.use_prediction:
            out.update(use_prediction=True, transition_kl=self.transition_kl)
        if self.prev_action:
            out["prev_action"] = True
        return out


@dataclass
class ImageSettings(Settings):
    """Replay learners on image observations (a Pixel* task): the convolutional encoder and ASAC's siamese losses.
    Recorded in the algorithm's settings only on an image task (a vector task's record names none)."""
    image_features: int = setting(50, "on image observations: the width of each agent's encoder output (the Nature "
                                  "CNN, then this many features for actor and critics)", parse=count, low=1)
    siamese: str | None = setting(
        None, "on image observations: ASAC's self-supervised auxiliary loss on the encoder, atc (augmented temporal "
        "contrast with a momentum encoder) or byol (two augmented views, online prediction vs target projection); "
        "its loss is added to the critic's; per evaluation its mean in {curve}_siamese.npy; files named "
        "{policy}_{atc|byol}[q]_...", parse=str, choices=("atc", "byol"), metavar="{atc,byol}", default_text="off",
        token=Token(200, lambda v, s, p: str(v) + ("q" if s.get("siamese_use_q") else "") if v else None,
                    "atcq?|byolq?"))
    siamese_use_q: bool = setting(False, "--siamese: the critics' Q-values of the stored action must also agree "
                                  "between two augmented views (ASAC's contrastive Q, our reading)")

    def check_together(self) -> None:
        if self.siamese_use_q and self.siamese is None:
            raise UsageError("--siamese_use_q applies with --siamese; add it or drop --siamese_use_q")

    def record(self) -> dict:
        out: dict[str, object] = {"image_features": self.image_features}
        if self.siamese:
            out.update(siamese=self.siamese, siamese_use_q=self.siamese_use_q)
        return out
