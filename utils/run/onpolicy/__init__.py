"""The actor-critic family (ac_main.py): the batched rollout learner (A2C, DIFF_A2C, ACER) and the asynchronous
actor-learners of A3C, with the rules only A3C has."""
