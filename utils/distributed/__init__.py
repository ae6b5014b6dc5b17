"""One run of a replay learner past one machine (issue 68): Ray actors step environments with copies of their
learner's policy and send blocks of transitions to it; M learners each keep their own replay (a DASE learner's N
agents share theirs, as on one machine); with ``--evolve``, a cross-entropy evolver breeds the learners
(Advanced-Soft-Actor-Critic's). ``python -m utils.distributed --actors K --learners M <flags of sac_main.py or
DASE_main.py>``; docs/distributed.md.
"""
