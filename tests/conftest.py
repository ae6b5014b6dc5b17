import os
import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from utils.cli import available_cores  # noqa: E402

# pytest -n W (pytest-xdist): W worker processes share the cores, so each keeps its share of torch threads (two
# workers of two threads each on two cores would spin against each other). Runs in subprocesses set their own.
_WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
if _WORKERS > 1:
    torch.set_num_threads(max(1, available_cores() // _WORKERS))


@pytest.fixture(autouse=True)
def _reset_torch_seed():
    """Tests must not depend on each other's global torch RNG state."""
    torch.manual_seed(0)
    yield


@pytest.fixture
def float64():
    """Numerical checks in float64, so they hold on any x86-64 CPU (float32 rounding differs with the vector width)."""
    old = torch.get_default_dtype()
    torch.set_default_dtype(torch.float64)
    yield
    torch.set_default_dtype(old)
