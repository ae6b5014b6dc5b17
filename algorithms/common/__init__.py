"""What both families build on: batched layers and networks (nets), optimizers with a member dimension (optim),
policies' distributions sampled from the members' own streams (distributions), recurrent cells (cells), and
``Members``: S seeds x N members stacked on one dimension, their streams, checkpoints and model files (members)."""
