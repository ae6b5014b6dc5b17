"""The replay family (DASE_main.py, sac_main.py): DDPG, TD3, SAC and discrete SAC for N members at once on batches
whose samples carry sharing weights (base: the batch and ``StackedAgents``), and their recurrent forms
(sequence: the encoders; sequence_agents: burn-in, features, the algorithm's own update)."""
