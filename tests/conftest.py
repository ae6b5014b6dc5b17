import sys
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


@pytest.fixture(autouse=True)
def _reset_torch_seed():
    """Tests must not depend on each other's global torch RNG state."""
    torch.manual_seed(0)
    yield
