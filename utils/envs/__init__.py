"""Environments: ids and construction (registry: the paper's -v2 ids map to maintained ones), the training
environments and evaluation episodes in this process or in worker processes (workers), the exact rebuild of
an environment from a checkpoint (replay), and the Atari games with the DeepMind preprocessing (atari)."""
