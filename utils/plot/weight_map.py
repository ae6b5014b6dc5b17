"""What the DASE rule gives a peer: the sharing weight against the peer's policy gap, in closed form.

    python -m utils.plot.weight_map [--kl_div_var 0.1|matched] [--expl_noise 0.1] [--similarity js|kl] [--out DIR]

Learner i weighs a peer's samples by w = exp(-D), D the divergence between a Gaussian fitted to the action
gaps d = a_peer - pi_i(s) and the reference R = N(0, v I). A peer acting with exploration noise of standard
deviation sigma (times max_action) around a policy that differs from the learner's by a mean shift m and an
extra spread s per action dimension (both in units of max_action, the same in every dimension) gives gaps
d ~ N(m M, (sigma^2 + s^2) M^2 I), M = max_action, in A action dimensions. With c = (sigma^2 + s^2) M^2 and
mu^2 = m^2 M^2 per dimension, the closed forms are

    KL(N || R) = A/2 (c/v + mu^2/v - 1 + ln(v/c)),    KL(R || N) = A/2 (v/c + mu^2/c - 1 + ln(c/v)),
    js: D = A/4 (c/v + v/c + mu^2/v + mu^2/c - 2),     kl: D = KL(N || R).

So D grows linearly with A, and a peer whose policy agrees with the learner (m = s = 0) gets
D = A/4 (sigma^2 M^2/v + v/(sigma^2 M^2) - 2): with the paper's v = 0.1 and sigma = 0.1, w = exp(-2.025 A)
(M = 1). The weight is 1 only where c = v and m = 0, i.e. when the peer's actions spread like the reference,
about 0.3 max_action around the learner's: the rule trusts a peer most when it acts differently.
``--kl_div_var matched`` sets v = sigma^2 M^2, the variance of the noise itself: then an agreeing peer weighs 1
and the weight falls as the peer drifts away. The batch-level rule in algorithms/sharing/weights.py is what runs;
tests/test_weight_map.py checks these closed forms against it on sampled batches.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

from ..cli import Parser
from ..io import folder_problem
from ..run.sharing import kl_variance

# action dimensions and max_action of the paper's environments
ENVIRONMENTS = {
    "Swimmer / LunarLander": (2, 1.0),
    "Hopper": (3, 1.0),
    "BipedalWalker": (4, 1.0),
    "HalfCheetah / Walker2d": (6, 1.0),
    "Ant": (8, 1.0),
    "Humanoid": (17, 0.4),
}


def divergence(shift, spread, act_dim: int, noise: float, var: float, max_action: float = 1.0,
               similarity: str = "js"):
    """D for a peer ``shift`` and ``spread`` (units of max_action, per dimension) away; arrays broadcast."""
    c = (noise**2 + np.asarray(spread, dtype=float) ** 2) * max_action**2
    mu2 = (np.asarray(shift, dtype=float) * max_action) ** 2
    forward = 0.5 * act_dim * (c / var + mu2 / var - 1.0 + np.log(var / c))
    if similarity == "kl":
        return forward
    reverse = 0.5 * act_dim * (var / c + mu2 / c - 1.0 + np.log(c / var))
    return 0.5 * (forward + reverse)


def weight(shift, spread, act_dim: int, noise: float, var: float, max_action: float = 1.0, similarity: str = "js"):
    return np.exp(-divergence(shift, spread, act_dim, noise, var, max_action, similarity))


def reference_variance(kl_div_var, noise: float, max_action: float) -> float:
    return (noise * max_action) ** 2 if kl_div_var == "matched" else float(kl_div_var)


def table(kl_div_vars, noise: float, similarity: str) -> list[str]:
    """Markdown: the weight of an agreeing peer (m = s = 0) per environment and v."""
    head = "| environment | A | max_action | " + " | ".join(f"w, v = {v}" for v in kl_div_vars) + " |"
    lines = [head, "|" + "---|" * (3 + len(kl_div_vars))]
    for name, (a, m) in ENVIRONMENTS.items():
        cells = [f"{weight(0.0, 0.0, a, noise, reference_variance(v, noise, m), m, similarity):.3g}" for v in kl_div_vars]
        lines.append(f"| {name} | {a} | {m} | " + " | ".join(cells) + " |")
    return lines


def draw(path: Path, kl_div_vars, noise: float, similarity: str) -> None:
    import matplotlib.pyplot as plt

    fig = figure(kl_div_vars, noise, similarity)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=130)
    plt.close(fig)


def figure(kl_div_vars, noise: float, similarity: str):
    """The weight map: one row per reference variance, the weight against the peer's shift (left) and spread
    (right); returned, not saved."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    gaps = np.linspace(0.0, 0.6, 241)
    fig, axes = plt.subplots(len(kl_div_vars), 2, figsize=(10.5, 3.9 * len(kl_div_vars)), sharex="col",
                             squeeze=False)
    colors = plt.get_cmap("viridis")(np.linspace(0.0, 0.9, len(ENVIRONMENTS)))
    for row, v in enumerate(kl_div_vars):
        for col, (label, kind) in enumerate([("mean shift m", "shift"), ("extra spread s", "spread")]):
            ax = axes[row, col]
            for color, (name, (a, m)) in zip(colors, ENVIRONMENTS.items()):
                var = reference_variance(v, noise, m)
                w = weight(gaps, 0.0, a, noise, var, m, similarity) if kind == "shift" \
                    else weight(0.0, gaps, a, noise, var, m, similarity)
                ax.semilogy(gaps, np.maximum(w, 1e-30), color=color, lw=1.6, label=f"{name} (A={a})")
            if kind == "spread" and v != "matched":  # where the gaps' spread equals the reference's
                s_star = math.sqrt(max(float(v) - noise**2, 0.0))
                ax.axvline(s_star, color="0.5", ls=":", lw=1)
                # right of the line, in the panel's empty lower right, on two lines
                ax.text(s_star + 0.01, 1e-27, f"spread of the gaps = v\n(max_action 1): s = {s_star:.2f}",
                        fontsize=7, color="0.3", ha="left", va="bottom")
            ax.set_ylim(1e-30, 3.0)
            ax.grid(alpha=0.3, which="major")
            vtext = "v matched = (sigma max_action)^2" if v == "matched" else f"v = {v}"
            ax.set_title(f"{vtext}\nweight vs the peer's {label}", fontsize=9)  # two lines: neighbours never touch
            if row == len(kl_div_vars) - 1:
                ax.set_xlabel(f"peer's {label} per action dimension (units of max_action)")
            if col == 0:
                ax.set_ylabel("sharing weight w = exp(-D)")
    axes[0, 0].legend(fontsize=7, loc="lower left")
    fig.suptitle(f"DASE sharing weight ({similarity}) given to a peer whose policy differs from the learner's; "
                 f"exploration noise sigma = {noise} max_action", fontsize=10)
    fig.tight_layout()
    return fig


def main(argv=None) -> int:
    p = Parser(prog="python -m utils.plot.weight_map", description=__doc__.split("\n\n")[0])
    p.add_argument("--kl_div_var", type=kl_variance, nargs="+", default=[0.1, "matched"],
                   help="reference variances to draw, one row each: numbers or 'matched' (default: 0.1 matched)")
    p.add_argument("--expl_noise", type=float, default=0.1,
                   help="exploration noise std, times max_action (default: 0.1, the paper's TD3/DDPG)")
    p.add_argument("--similarity", choices=["js", "kl"], default="js", help="divergence (default: js, the paper's)")
    p.add_argument("--out", default="Figures/weight_map", help="output folder (default: Figures/weight_map)")
    args = p.parse_args(argv)
    if not (math.isfinite(args.expl_noise) and args.expl_noise > 0):
        print(f"python -m utils.plot.weight_map: error: --expl_noise {args.expl_noise} must be positive", file=sys.stderr)
        return 2
    out = Path(args.out)
    problem = folder_problem(args.out)
    if problem:
        print(f"python -m utils.plot.weight_map: error: --out {args.out[:60]}: {problem}", file=sys.stderr)
        return 2
    lines = table(args.kl_div_var, args.expl_noise, args.similarity)
    print("\n".join(lines))
    draw(out / "weight_map.png", args.kl_div_var, args.expl_noise, args.similarity)
    (out / "agreeing_peer.md").write_text("Weight of a peer whose policy equals the learner's (m = s = 0), "
                                          f"{args.similarity}, sigma = {args.expl_noise}:\n\n" + "\n".join(lines) + "\n")
    print(f"wrote {out / 'weight_map.png'} and {out / 'agreeing_peer.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
