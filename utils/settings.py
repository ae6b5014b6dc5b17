"""Typed settings declared once: a dataclass field per setting, its type, default, help, choices and range in one
place, and what is generated from them (the flags of a command line and their --help, the checks of a value, which
algorithms take a flag, the defaults an older record is read with).

    @dataclass
    class A2CSettings(Settings):
        lr: float = setting(7e-4, "learning rate", low=0, low_open=True)

A subclass gives a setting another default with ``again(value)`` (the help, type and range stay the parent's). A flag
shared by several classes is one flag on the command line: its default there is None ("the algorithm's own"), and its
help lists each class's default.
"""
from __future__ import annotations

import argparse
import math
from collections.abc import Callable, Mapping
from dataclasses import MISSING, dataclass, field, fields
from typing import Any

from .errors import UsageError

NUMBER = r"[0-9.]+(?:e[+-]?\d+)?"  # a number as f"{x:g}" writes it (1e-05 included), in a token's pattern


@dataclass(frozen=True)
class Token:
    """How a setting names a run's files ({policy}_{variant}_{env}_{seed}: the variant is its settings' tokens joined
    by _): its place among the tokens (``rank``, ascending), the token it gives from its own value, the run's other
    settings by name (a companion setting: --ensemble_q_sample beside --ensemble_q) and the policy (None: no token),
    and the regular expression of every token it can give (file names are read back with it)."""

    rank: int
    make: Callable[[Any, Mapping[str, Any], str | None], str | None]
    pattern: str


@dataclass(frozen=True)
class Spec:
    """What a setting's field declares besides its default."""
    help: str = ""
    parse: Callable[[str], Any] | None = None  # the command line's parser of the text (None: a switch)
    choices: tuple | None = None
    low: float | None = None  # the range: low <= value (low < value when low_open), value <= high likewise
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    flag: str | None = None  # its flag when not --{name} (e.g. --no_trust_region for trust_region)
    negated: bool = False  # a switch that sets the setting False (--no_...)
    off_flag: str | None = None  # a switch's second flag, which sets it False (e.g. --no_automatic_entropy_tuning)
    default_text: str | None = None  # how --help names a default computed at run time (e.g. "the cores here")
    recorded: str = "always"  # "given": kept in a run's record only when it differs from the default (a setting
    # that applies to one action space only, known once the environment is built)
    again: bool = False  # a redefinition in a subclass: only the default is new
    nargs: str | None = None  # a list of values ("+"), each parsed, checked against the range
    metavar: str | None = None
    internal: bool = False  # known from elsewhere (the policy's method, its agents): no flag, not recorded
    token: Token | None = None  # a setting that names files: its token (utils/run/names.py joins them)


def count(text: str) -> int:
    """An integer flag that also takes integral scientific notation and underscores: 1e6, 1_000_000."""
    try:
        return int(text.replace("_", ""))
    except ValueError:
        pass
    try:
        value = float(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid integer: {text!r}") from None
    if not math.isfinite(value) or value != int(value):
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}")
    return int(value)


def real(text: str) -> float:
    """A float flag that must be finite (no inf, no nan)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number: {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text!r}")
    return value


def setting(default, help: str = "", **spec) -> Any:
    """A field of a settings dataclass: its default and its ``Spec``."""
    return field(default=default, metadata={"spec": Spec(help=help, **spec)})


def internal(default) -> Any:
    """A field the settings need that no flag of theirs sets (e.g. the policy's method): not checked, not recorded."""
    return field(default=default, metadata={"spec": Spec(internal=True)})


def flagged(cls) -> list:
    """The fields of ``cls`` that are settings with a flag (not ``internal`` ones)."""
    return [f for f in fields(cls) if not spec_of(cls, f.name).internal]


def again(default) -> Any:
    """A subclass's new default for a setting its parent declares."""
    return field(default=default, metadata={"spec": Spec(again=True)})


def spec_of(cls, name: str) -> Spec:
    """The declaring class's Spec of a setting (a subclass's ``again`` keeps its parent's)."""
    for klass in cls.__mro__:
        f = getattr(klass, "__dataclass_fields__", {}).get(name)
        if f is not None and not f.metadata["spec"].again:
            return f.metadata["spec"]
    raise KeyError(name)


def flag_of(cls, name: str) -> str:
    return spec_of(cls, name).flag or f"--{name}"


def defaults(cls) -> dict:
    return {f.name: f.default for f in flagged(cls) if f.default is not MISSING}


def _number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _shown(value) -> str:
    if isinstance(value, (list, tuple)):
        return " ".join(map(_shown, value))
    return f"{value:g}" if isinstance(value, float) else str(value)


@dataclass
class Settings:
    """A settings dataclass: ``check`` tests every value against its field's declaration, then the class's own
    ``check_together`` (settings that constrain each other)."""

    def check(self) -> None:
        for f in flagged(type(self)):
            value, spec = getattr(self, f.name), spec_of(type(self), f.name)
            flag = flag_of(type(self), f.name)
            if spec.choices is not None and value not in spec.choices and not (value is None and f.default is None):
                raise UsageError(f"{flag} {value!r}: one of {', '.join(map(str, spec.choices))}")
            for one in (value if isinstance(value, (list, tuple)) else [value]):
                if not _number(one):
                    continue
                if not math.isfinite(one):
                    raise UsageError(f"{flag} {one}: must be a finite number")
                low_bad = spec.low is not None and (one <= spec.low if spec.low_open else one < spec.low)
                high_bad = spec.high is not None and (one >= spec.high if spec.high_open else one > spec.high)
                if low_bad or high_bad:
                    raise UsageError(f"{flag} {_shown(one)} must be {describe_range(spec)}")
        mro = type(self).__mro__  # the bases' checks in the order Python resolves them (mixins declare their own),
        for klass in (*mro[1:], mro[0]):  # then the class's own
            own = klass.__dict__.get("check_together")
            if own is not None:
                own(self)

    def check_together(self) -> None:
        """Checks of several settings at once (none by default): each class declares only its own, and ``check``
        runs those of every class the settings derive from, then the class's."""

    def record(self) -> dict:
        """The settings as a run's record keeps them: every one, except the ``recorded="given"`` ones at their
        default."""
        out = {}
        for f in flagged(type(self)):
            value = getattr(self, f.name)
            if spec_of(type(self), f.name).recorded == "given" and value == f.default:
                continue
            out[f.name] = value
        return out


def describe_range(spec: Spec) -> str:
    if spec.low is not None and spec.high is not None:
        return f"in {'(' if spec.low_open else '['}{_shown(spec.low)}, {_shown(spec.high)}{')' if spec.high_open else ']'}"
    if spec.low is not None:
        return f"{'>' if spec.low_open else '>='} {_shown(spec.low)}"
    return f"{'<' if spec.high_open else '<='} {_shown(spec.high)}"


def dest_of(cls, name: str) -> str:
    """The attribute of parsed flags that holds a setting's flag."""
    return flag_of(cls, name)[2:]


def add_flags(parser: argparse.ArgumentParser, classes: dict[str, type], skip: tuple[str, ...] = (),
              parsed_defaults: bool = False) -> None:
    """One flag per setting of ``classes`` (name -> settings class), in declaration order; a flag several classes
    take appears once, default None (each class's own), its help naming each class's default and, when not every
    class takes it, which do; its choices are all of theirs (each class checks its own). ``parsed_defaults`` (one
    class): the parsed flags hold the class's defaults where a flag is not given, as plain argparse would."""
    assert not parsed_defaults or len(classes) == 1
    seen: dict[str, list] = {}
    for owner, cls in classes.items():
        for f in flagged(cls):
            seen.setdefault(flag_of(cls, f.name), []).append((owner, cls, f))
    for flag, owners in seen.items():
        if flag in skip:
            continue
        cls, name = owners[0][1], owners[0][2].name
        spec = spec_of(cls, name)
        by_default: dict[str, list[str]] = {}
        for owner, _c, f in owners:
            meta = f.metadata["spec"]  # a redefinition's default is shown as it is
            shown = (None if meta.again else meta.default_text) or (
                ("on" if f.default else "off") if isinstance(f.default, bool) else _shown(f.default))
            by_default.setdefault(shown, []).append(owner)
        default_text = "; ".join(f"{d} for {' and '.join(o)}" for d, o in by_default.items()) \
            if len(by_default) > 1 else next(iter(by_default))
        takers = [o for o, _, _ in owners]
        who = "" if len(takers) == len(classes) else f"{', '.join(takers)}: "
        text = f"{who}{spec.help}" + ("" if spec.negated else f" (default: {default_text})")
        default = owners[0][2].default if parsed_defaults else None
        if spec.parse is None:  # a switch: given or not
            parser.add_argument(flag, dest=flag[2:], action="store_const", const=True, default=default, help=text)
            if spec.off_flag:  # and its opposite, into the same setting
                parser.add_argument(spec.off_flag, dest=flag[2:], action="store_const", const=False,
                                    help=f"{who}the opposite of {flag}")
            continue
        choices = [c for _, k, f in owners for c in (spec_of(k, f.name).choices or ())]
        extra = {"choices": list(dict.fromkeys(choices))} if choices else {}
        extra.update({k: v for k, v in (("nargs", spec.nargs), ("metavar", spec.metavar)) if v is not None})
        parser.add_argument(flag, dest=flag[2:], type=spec.parse, default=default, help=text, **extra)


def given(args: argparse.Namespace, classes: dict[str, type]) -> set[str]:
    """The flags of ``classes`` given on the command line."""
    return {flag_of(c, f.name) for c in classes.values() for f in flagged(c)
            if getattr(args, dest_of(c, f.name), None) is not None}


def from_flags(args: argparse.Namespace, cls: type, classes: dict[str, type], owner: str, **values) -> Settings:
    """The settings of ``cls`` (algorithm ``owner``) from parsed flags: ``values``, then the flags given, then the
    class's defaults; a flag given that ``cls`` does not take is a UsageError naming the classes that do."""
    own = {flag_of(cls, f.name) for f in flagged(cls)}
    for flag in sorted(given(args, classes) - own):
        takers = [o for o, c in classes.items() if flag in {flag_of(c, f.name) for f in flagged(c)}]
        raise UsageError(f"{flag} applies to {' and '.join(takers)}, not {owner}; drop it")
    for f in flagged(cls):
        raw = getattr(args, dest_of(cls, f.name), None)
        if raw is not None and f.name not in values:
            values[f.name] = (not raw) if spec_of(cls, f.name).negated else raw
    return cls(**values)


def filled(cls: type, record: dict) -> dict:
    """A record's settings with what it does not name read as the class's defaults (records written before a
    setting existed, or without the ``recorded="given"`` ones)."""
    return {**defaults(cls), **record}
