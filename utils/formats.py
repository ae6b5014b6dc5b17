"""How the project shows numbers: the decimals of returns in progress lines and tables."""
from __future__ import annotations

import math


def decimals(*values: float) -> int:
    """Decimals to show returns with: 3 when every one lies within +-2 (Level-Based Foraging's per-agent returns, at
    most about 1), else 1 (returns of tens and more)."""
    finite = [abs(v) for v in values if not math.isnan(v)]
    return 3 if finite and max(finite) < 2 else 1
