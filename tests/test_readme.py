"""README's flag tables list exactly the flags the command lines take (a flag added or renamed in one place
and not the other fails here)."""
import argparse
import re
from pathlib import Path

import pytest

import DASE_main
import sac_main
from utils import plot

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def table_flags(name: str) -> set[str]:
    """The flags in the first column of the table under README's marker ``<!-- flags: NAME -->``."""
    marker = f"<!-- flags: {name} -->"
    assert marker in README, f"README has no {marker}"
    lines = README.split(marker, 1)[1].lstrip("\n").splitlines()
    rows = []
    for line in lines:
        if not line.startswith("|"):
            break
        rows.append(line)
    assert len(rows) > 2, f"no table under {marker}"
    flags = set()
    for row in rows[2:]:
        first = row.split("|")[1]
        flags.update(re.findall(r"`(--[a-z_]+)`", first))
    return flags


def parser_flags(module, argv) -> set[str]:
    """Every long option of the parser ``module.parse`` builds (caught at its parse_args call)."""
    seen = {}
    original = argparse.ArgumentParser.parse_args

    def capture(self, *args, **kwargs):
        seen["parser"] = self
        return original(self, *args, **kwargs)

    argparse.ArgumentParser.parse_args = capture
    try:
        module.parse(argv)
    finally:
        argparse.ArgumentParser.parse_args = original
    return {o for a in seen["parser"]._actions for o in a.option_strings if o.startswith("--") and o != "--help"}


@pytest.mark.parametrize("module,argv,tables", [
    (DASE_main, [], ["common", "DASE_main"]),
    (sac_main, [], ["common", "sac_main"]),
    (plot, ["Learning Curves"], ["plot"]),
], ids=["DASE_main", "sac_main", "plot"])
def test_flag_tables_match_the_parsers(module, argv, tables):
    documented = set().union(*(table_flags(t) for t in tables))
    actual = parser_flags(module, argv)
    assert not actual - documented, f"in --help but not in README's tables: {sorted(actual - documented)}"
    assert not documented - actual, f"in README's tables but not taken: {sorted(documented - actual)}"
