"""What a run will hold in memory, checked before it is allocated: one line instead of an allocator's traceback."""
from __future__ import annotations

import os

from ..errors import UsageError


def human(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if n < 1000 or unit == "PB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1000
    return f"{n:.1f} PB"


def available_bytes(device=None) -> int | None:
    """Memory a run can still take: free GPU memory for a CUDA device, else the host's available memory (Linux
    MemAvailable, or all physical memory elsewhere); None when it cannot be told."""
    if device is not None and getattr(device, "type", str(device)).startswith("cuda"):
        import torch

        try:
            return int(torch.cuda.mem_get_info(device)[0])
        except Exception:
            return None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def total_bytes() -> int | None:
    """The host's physical memory (None when it cannot be told)."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return None


def check_fits(what: str, need: float, device=None, hint: str = "", reserve: float | None = None) -> None:
    """A UsageError (one line) when ``need`` bytes exceed what the machine has available, or when ``reserve``
    bytes (what is allocated at once, of which only ``need`` is ever written) exceed its physical memory."""
    total = total_bytes()
    if reserve is not None and total is not None and reserve > total and not str(device).startswith("cuda"):
        raise UsageError(f"{what} would allocate {human(reserve)}, this machine has {human(total)} in all"
                         f"{'; ' + hint if hint else ''}")
    have = available_bytes(device)
    if have is not None and need > have:
        where = "this GPU has" if device is not None and str(device).startswith("cuda") else "this machine has"
        raise UsageError(f"{what} would fill {human(need)}, {where} {human(have)} available{'; ' + hint if hint else ''}")
