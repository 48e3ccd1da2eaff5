"""Tuning: the study file and its search space, studies with Optuna, choice, export."""
