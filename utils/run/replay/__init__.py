"""The replay learners (DASE_main.py, sac_main.py): the batched learner, its shared replay buffer, prioritized
sampling and the CUDA-graph replays of the update."""
