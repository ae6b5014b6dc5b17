"""What a training process runs: the settings (config), the loop (loop.Trainer), the batched agents and their
buffers (learner, buffer), the CUDA-graph replay of the update (cuda_graphs), evaluation (evaluation), and one
seed's files, checkpoint and lock (files, checkpoint). Environments live in ``utils.envs``."""
from .checks import validate
from .config import RunConfig, notices
from .loop import Trainer, train, trainer

__all__ = ["RunConfig", "Trainer", "notices", "train", "trainer", "validate"]
