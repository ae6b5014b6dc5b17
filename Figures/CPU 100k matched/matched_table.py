"""The table of Figures/README.md, "CPU 100k matched": run from the repository root,
    PYTHONPATH=. python "Figures/CPU 100k matched/matched_table.py" > "Figures/CPU 100k matched/matched.md"
"""
import glob, numpy as np
from utils.plot import bootstrap_ci
D = "Learning Curves/CPU 100k/Unlimited_Buffer/TD3/LunarLanderContinuous-v3/"
groups = {"TD3": "TD3_LunarLanderContinuous-v3_[0-9].npy",
          "DASE_TD3 (v = 0.1)": "DASE_TD3_LunarLanderContinuous-v3_[0-9]_Agent_[0-9].npy",
          "DASE_TD3 (matched)": "DASE_TD3_matched_LunarLanderContinuous-v3_[0-9]_Agent_[0-9].npy"}
print("| method | runs | return, mean of the 5 evaluations ending at 50k [95% CI] | the same, ending at 100k [95% CI] | sharing weight after 30k: median over runs [min, max] |")
print("|---|---|---|---|---|")
for name, pat in groups.items():
    files = sorted(glob.glob(D + pat))
    m = np.stack([np.load(f)[:101] for f in files])
    cells = []
    for step in (50, 100):
        x = m[:, step - 4: step + 1].mean(axis=1)
        lo, hi = bootstrap_ci(x, np.mean)
        cells.append(f"{x.mean():.1f} [{lo:.1f}, {hi:.1f}]")
    ws = [np.nanmean(np.load(f.replace(".npy", "_weights.npy"))[31:101]) for f in files] if "DASE" in name else None
    wcell = f"{np.median(ws):.3g} [{min(ws):.2g}, {max(ws):.2g}]" if ws else "-"
    print(f"| {name} | {len(files)} | {cells[0]} | {cells[1]} | {wcell} |")
