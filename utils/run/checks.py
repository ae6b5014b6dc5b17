"""``validate``: every check before a run creates or writes anything. A3C's own limits (one shared model, CPU
workers: ``asynchronous.check_a3c``) come first, then the checks of every run (``config.check_settings``). It sits
above both, so that the settings module needs nothing of the asynchronous trainer."""
from __future__ import annotations

from ..naming import parse_policy
from .config import RunConfig, check_settings


def validate(cfg: RunConfig, names: dict[str, str] | None = None) -> None:
    """Reject impossible settings before anything is created or written (``names``: RunConfig field -> the
    calling command line's flag name)."""
    if parse_policy(cfg.policy) is not None and cfg.algorithm == "A3C":
        from .onpolicy.asynchronous import check_a3c

        check_a3c(cfg)
    check_settings(cfg, names)
