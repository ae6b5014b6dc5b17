"""The repository stands alone: no code, test or experiment file reads a folder beside the checkout.

The paper's curves once lived in a folder next to CI's checkout (a "shared" folder beside it), so a
fresh clone failed the tests that read them; they are committed under ``Learning Curves/paper`` now, and nothing
may point outside the repository again."""
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAPER = ROOT / "Learning Curves" / "paper"

# spelled in pieces, so that this file does not match itself
OUTSIDE = re.compile("|".join([
    re.escape(".." + "/shared"),  # a relative path out of the checkout
    re.escape("shared" + "/reference"),  # the old folder's path, written out
    r"""["']shared["']\s*/\s*["']reference["']""",  # ... or joined from pieces with pathlib
    r"\bROOT\.parent\b",  # the folder above the repository (every ROOT here is the repository's root)
]))


def tracked_files() -> list[Path]:
    """The repository's files: git's list in a checkout, every file otherwise (an unpacked archive)."""
    try:
        out = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
        return [ROOT / name for name in out.decode().split("\0") if name]
    except (OSError, subprocess.CalledProcessError):
        return [p for p in ROOT.rglob("*") if p.is_file() and ".venv" not in p.parts and ".git" not in p.parts]


def test_no_code_or_experiment_file_reads_a_folder_beside_the_checkout():
    checked, found = 0, []
    for path in tracked_files():
        rel = path.relative_to(ROOT)
        if rel.parts[:2] == ("benchmarks", "results") or not path.is_file():
            continue
        if path.suffix not in (".py", ".yaml", ".yml") and rel != Path(".ci/run"):
            continue
        checked += 1
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
            if OUTSIDE.search(line):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert checked > 50, checked  # the walk found the code
    assert not found, "files that read outside the repository (ship the data instead):\n" + "\n".join(found)


def test_the_papers_curves_are_committed_with_their_license_notice():
    """The published curves the tables and tests read (experiments/step_tables.py,
    tests/test_plot*.py), with the README that names their source and license, in the layout the tools expect."""
    readme = (PAPER / "README.md").read_text()
    assert "MIT License" in readme and "Copyright (c) 2022 baturaysaglam" in readme
    expected = {("TD3", "LunarLanderContinuous-v2"): 40, ("TD3", "Hopper-v2"): 40, ("TD3", "HalfCheetah-v2"): 40,
                ("SAC", "HalfCheetah-v2"): 40, ("SAC", "LunarLanderContinuous-v2"): 40,
                ("DDPG", "LunarLanderContinuous-v2"): 40}
    for (alg, env), n in expected.items():
        folder = PAPER / "Unlimited_Buffer" / alg / env
        assert len(list(folder.glob(f"*_{env}_*.npy"))) == n, folder
    assert (PAPER / "Unlimited_Buffer" / "TD3" / "LunarLanderContinuous-v2" / "TD3_LunarLanderContinuous-v2_0.npy").is_file()
    assert (PAPER / ".reference").is_file()  # utils.plot's walks from "Learning Curves" leave it out
