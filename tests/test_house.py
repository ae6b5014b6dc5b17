"""The shape of the house: ``algorithms/`` in rooms by family, each room importing only what its family needs.

Read from the modules' own import statements (the package ``__init__`` files are left out: importing any module of
``algorithms`` runs ``algorithms/__init__.py``, which exports the replay family's classes, so what a module needs
is what its own imports reach)."""
import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ALGORITHMS = ROOT / "algorithms"
ROOMS = {"common", "replay", "onpolicy", "sharing"}


def module_name(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts)


def imports_of(path: Path) -> set[str]:
    """The modules of ``algorithms`` that this file imports (absolute or relative, at any depth in the file)."""
    package = module_name(path).rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("algorithms"):
                for alias in node.names:  # "from .room import module" names a module
                    sub = f"{target}.{alias.name}"
                    found.add(sub if (ROOT / Path(*sub.split("."))).with_suffix(".py").exists() else target)
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("algorithms")}
    return found


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in ALGORITHMS.rglob("*.py") if p.name != "__init__.py"}


def reach(edges: dict[str, set[str]], start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for nxt in edges.get(todo.pop(), ()):
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def test_every_algorithm_module_lives_in_a_room():
    flat = [p.name for p in ALGORITHMS.glob("*.py") if p.name != "__init__.py"]
    assert flat == [], f"modules outside the rooms: {flat}"
    assert {p.name for p in ALGORITHMS.iterdir() if p.is_dir() and p.name != "__pycache__"} == ROOMS
    for room in ROOMS:
        assert (ALGORITHMS / room / "__init__.py").exists()


def test_the_on_policy_family_does_not_reach_the_replay_family_or_dases_weights():
    edges = graph()
    onpolicy = [m for m in edges if m.startswith("algorithms.onpolicy.")]
    assert len(onpolicy) >= 6
    for m in onpolicy:
        reached = reach(edges, m)
        assert "algorithms.sharing.weights" not in reached, m
        assert not any(r.startswith("algorithms.replay.") for r in reached), (m, sorted(reached))


def test_the_common_room_needs_no_family_and_the_sharing_room_no_family():
    edges = graph()
    for m in edges:
        reached = reach(edges, m)
        if m.startswith("algorithms.common."):
            assert all(r.startswith("algorithms.common.") for r in reached), (m, sorted(reached))
        if m.startswith("algorithms.sharing."):
            assert not any(r.startswith(("algorithms.replay.", "algorithms.onpolicy.")) for r in reached), m


def test_the_import_graph_sees_the_imports_it_checks():
    """The checker itself: a2c's own imports are found (a checker that found none would pass the tests above)."""
    edges = graph()
    assert "algorithms.common.members" in edges["algorithms.onpolicy.a2c"]
    assert "algorithms.onpolicy.a2c" in edges["algorithms.onpolicy.acer"]
    assert "algorithms.sharing.weights" in reach(edges, "algorithms.replay.td3")


def _requirement_lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines() if line.strip() and not line.startswith("#")]


def test_pyproject_declares_what_the_requirements_files_install():
    """Users install from requirements*.txt; pyproject.toml's metadata lists the same packages (a dependency added to
    one and not the other fails here)."""
    tomllib = pytest.importorskip("tomllib")  # Python 3.11+; on 3.10 the house's config checks skip

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["dependencies"] == _requirement_lines(ROOT / "requirements.txt")
    extras = project["optional-dependencies"]
    assert extras["cluster"] == _requirement_lines(ROOT / "requirements-cluster.txt")
    assert extras["atari"] == _requirement_lines(ROOT / "requirements-atari.txt")


def test_no_tracked_module_edits_the_import_path():
    """The scripts run from the repository root and the tests get it from pyproject.toml's pythonpath: no file puts
    a folder on sys.path by hand."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True).stdout.split("\n")
    offenders = [f for f in filter(None, tracked) if "sys.path.insert" in (ROOT / f).read_text()
                 and f != "tests/test_house.py"]
    assert offenders == []


def test_utils_keeps_few_loose_modules():
    """utils/ holds the tools in packages (compare, distributed, envs, play, plot, run, sweep) and at most six
    modules of its own that every part reads (the command lines, errors, files, numbers, names, settings)."""
    loose = sorted(p.name for p in (ROOT / "utils").glob("*.py") if p.name != "__init__.py")
    assert len(loose) <= 6, loose


def test_the_table_scripts_are_few_and_read_runs_through_utils_compare():
    """experiments/ keeps at most three table scripts (the docs' tables no suite report writes); each reads its runs
    with utils.compare's loading (seed_curves, window_mean, run_finished) and none globs curve files of its own
    (a weight trace beside a curve is not a curve)."""
    scripts = sorted((ROOT / "experiments").glob("*.py"))
    assert len(scripts) <= 3, [p.name for p in scripts]
    for path in scripts:
        text = path.read_text()
        assert "from utils.compare.scores import" in text, path.name
        assert not re.search(r'glob\(f?"[^"]*(?<!_weights)\.npy"', text), path.name  # curves: seed_curves


def test_the_loops_seams_are_declared_types_a_type_checker_holds():
    """The trainer's setup is one declared attribute (no fields copied onto the trainer), typed by the learner and
    environment protocols; resume.py and seed_files.py take the trainer as the RunState protocol (what they read of
    it, declared); mypy checks utils/run against them in CI (pyproject.toml's [tool.mypy], .ci/run)."""
    import inspect
    import typing

    tomllib = pytest.importorskip("tomllib")  # Python 3.11+; on 3.10 the house's config checks skip

    from utils.run import resume, seed_files
    from utils.run.protocol import EnvsProtocol, LearnerProtocol
    from utils.run.setup import Setup
    from utils.run.state import RunState

    hints = typing.get_type_hints(Setup)
    assert hints["learner"] is LearnerProtocol and hints["envs"] is EnvsProtocol
    assert "setattr(" not in (ROOT / "utils" / "run" / "loop.py").read_text()
    for module in (resume, seed_files):
        for name, fn in inspect.getmembers(module, inspect.isfunction):
            if fn.__module__ == module.__name__ and "tr" in inspect.signature(fn).parameters:
                assert typing.get_type_hints(fn)["tr"] is RunState, f"{module.__name__}.{name}"
    mypy = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["mypy"]
    assert "utils/run" in mypy["files"]
    assert "mypy" in (ROOT / ".ci" / "run").read_text().splitlines()


def test_what_a_resume_must_agree_on_is_declared_on_the_run_configs_fields():
    """checkpoint.COMPATIBLE and DEFAULTS are read from RunConfig's fields (agreed(), agreed(older=...)): a field
    a resume must match is declared where the field is, and every field with an older meaning is one of them."""
    from dataclasses import fields

    from utils.run.checkpoint import COMPATIBLE, DEFAULTS
    from utils.run.config import RunConfig

    agreed = [f.name for f in fields(RunConfig) if f.metadata.get("agree")]
    assert list(COMPATIBLE) == agreed and {"policy", "env", "seed", "algo", "sharing", "init"} <= set(agreed)
    assert set(DEFAULTS) <= set(COMPATIBLE) and DEFAULTS["init"] == "separate" and DEFAULTS["per"] == {}
    text = (ROOT / "utils" / "run" / "checkpoint.py").read_text()
    assert '"start_time_steps"' not in text and '"eval_tasks": ' not in text  # no hand-kept list left


def test_one_statistics_module():
    """The interquartile mean and the bootstrap live in utils/plot/stats.py alone (the comparison, the plots and the
    table scripts import them): no other file of the project trims a mean or draws bootstrap percentiles."""
    import subprocess

    tracked = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True).stdout.split("\n")
    found = {f for f in filter(None, tracked) if not f.startswith("tests/")
             and any(k in (ROOT / f).read_text() for k in ("trim_mean", "np.percentile(", "def iqm", "def bootstrap"))}
    assert found == {"utils/plot/stats.py"}


def test_entry_scripts_declare_no_flag_by_hand():
    """Every flag of DASE_main.py, sac_main.py and ac_main.py is a settings field (utils/run/settings.py and the
    families' settings): the scripts themselves call add_argument nowhere."""
    for script in ("DASE_main.py", "sac_main.py", "ac_main.py"):
        assert "add_argument" not in (ROOT / script).read_text(), script


def test_an_on_policy_module_imports_no_replay_module():
    """algorithms/__init__.py imports nothing eagerly: importing the on-policy family leaves the replay family
    unloaded (a fresh interpreter, so no other test's imports count)."""
    import subprocess
    import sys

    code = ("import sys, algorithms.onpolicy.a2c, algorithms.onpolicy.acer, algorithms.onpolicy.seac, "
            "algorithms.onpolicy.a3c; print(sorted(m for m in sys.modules if m.startswith('algorithms.replay')))")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_every_algorithm_is_one_registry_entry_whose_classes_load():
    """utils/naming.py's ALGORITHM_SPECS is the one table of algorithms: each entry's learner and settings load, its
    recurrent and image forms where it names them, the discrete forms of the algorithms that take discrete actions;
    the scripts' settings tables are read from it."""
    from utils.naming import ALGORITHM_SPECS, settings_owners

    for spec in ALGORITHM_SPECS:
        for kind in ("learner", "settings", "recurrent", "image"):
            for discrete in (False, True):
                if spec.has(kind, discrete) and (not discrete or "discrete" in spec.actions):
                    assert isinstance(spec.form(kind, discrete), type), (spec.name, kind, discrete)
        assert spec.has("learner") and spec.has("settings"), spec.name
    for script in ("DASE_main.py", "sac_main.py", "ac_main.py"):
        owners = settings_owners(script)
        assert {o.split(" (")[0] for o in owners} == {s.name for s in ALGORITHM_SPECS if s.script == script}


def test_docs_design_maps_every_module():
    """docs/design.md's map names every module of algorithms/ and utils/ (by its path, or its file name in the
    listing of its folder): a module added without a line there fails here."""
    import re
    import subprocess

    design = (ROOT / "docs" / "design.md").read_text()
    tracked = subprocess.run(["git", "ls-files", "algorithms/*.py", "utils/*.py"], cwd=ROOT, capture_output=True,
                             text=True).stdout.split()
    missing = [f for f in tracked if not f.endswith(("__init__.py", "__main__.py")) and f not in design
               and not re.search(r"(?<![\w/])" + re.escape(f.rsplit("/", 1)[1]) + r"(?!\w)", design)]
    assert missing == []
