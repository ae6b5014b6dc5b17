"""The on-policy family (ac_main.py): A2C and ACER for N members at once (a2c: ``ActorCriticMembers``, what both
share), continuous ACER, ACER's mathematics (acer_math), A3C's unbatched actor-critic (a3c), the LSTM actor-critic
of --recurrent, the Nature CNN and the frame store of Atari. It imports nothing of the sharing schemes: Diff-DAC's
diffusion acts on its parameters from outside (utils/run/sharing.py)."""
