"""A run's file names from its settings. A setting that names files declares a ``Token`` on its field
(utils/settings.py: its rank, the token it gives and the pattern of every token it can give); from them come the
variant of a run ({policy}_{variant}_{env}_{seed}, ``variant_of``) and the pattern every curve file's name is read
back with (``CURVE_NAME``). A new setting that names files is its field's token; nothing here changes.

The fields are those of every settings class of the run's modules (the run's, the sharing scheme's, the replay
options', every algorithm's), found as the subclasses of ``Settings`` once those modules are imported.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from ..naming import ALGORITHMS, METHODS
from ..settings import Settings, Token, spec_of
from . import settings as _run  # noqa: F401  (the modules whose settings classes name files: imported for them)
from . import sharing as _sharing  # noqa: F401
from .onpolicy import settings as _onpolicy  # noqa: F401
from .replay import settings as _replay  # noqa: F401


def _classes(root: type = Settings) -> list[type]:
    out: list[type] = []
    sub: type
    for sub in root.__subclasses__():
        out += [sub, *_classes(sub)]
    return out


def _tokens() -> list[tuple[str, Token]]:
    """(field name, token) of every setting that names files, by rank; a field inherited by several classes once."""
    found: dict[str, Token] = {}
    for cls in _classes():
        for f in fields(cls):
            token = spec_of(cls, f.name).token
            if token is not None:
                if found.setdefault(f.name, token) is not token:
                    raise TypeError(f"{f.name}: two settings classes declare different file-name tokens for it")
    ranks = sorted(t.rank for t in found.values())
    if len(set(ranks)) < len(ranks):
        raise TypeError("two settings that name files share a rank: the order of a file name's tokens is ambiguous")
    return sorted(found.items(), key=lambda item: item[1].rank)


TOKENS = _tokens()


def variant_of(settings: Mapping[str, Any], policy: str | None = None) -> str:
    """The variant a run's settings (or its command line's flags), by name, ask for: the tokens of the settings that
    name files, by rank, joined by _ ('' for the method as published on a complete graph); ``policy``: the default
    --init it is read against."""
    tokens = (token.make(settings.get(name), settings, policy) for name, token in TOKENS)
    return "_".join(t for t in tokens if t)


VARIANT_TOKEN = "(?:" + "|".join(token.pattern for _, token in TOKENS) + ")"
_METHOD_PREFIX = "|".join(sorted((m.prefix for m in METHODS if m.prefix), key=len, reverse=True))
# {method_}{alg}{_variant}_{env}_{seed}{_Agent_i}: the variant is tried before the (lazy) environment id
CURVE_NAME = re.compile(rf"^(?:(?P<method>{_METHOD_PREFIX})_)?(?P<alg>{'|'.join(ALGORITHMS)})"
                        rf"(?:_(?P<variant>{VARIANT_TOKEN}(?:_{VARIANT_TOKEN})*))?"
                        r"_(?P<env>.+?)_(?P<seed>\d+)(?:_Agent_(?P<agent>\d+))?$")
