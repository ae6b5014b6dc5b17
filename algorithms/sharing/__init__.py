"""The sharing schemes' mathematics: DASE's per-sample weights of another agent's transitions (weights), DPD's
distillation (dpd), and agents on a graph averaging parameters with their neighbours (graph)."""
