# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # Tuning: an Optuna study
#
# The study's history, parameter importances, the Pareto front of the objective against a cost
# (the candidates fetched per query), and the chosen trial against the baseline on dev and test
# with raw and Holm–Bonferroni-adjusted p-values.

# %%
import os

import optuna
import pandas as pd
import plotly.express as px

from workbench.results import Results

STUDY = os.environ.get("NB_STUDY", "tune-kb")
res = Results()
res.studies()

# %%
study = res.optuna_study(STUDY)
report = res.study_report(STUDY)
print(f"{STUDY}: {len(study.trials)} trials, chosen trial #{report.chosen_trial}")
report.chosen_params  # noqa: B018 - the cell's output

# %%
optuna.visualization.plot_optimization_history(study)

# %%
complete = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
if len({tuple(sorted(t.params)) for t in complete}) and len(complete) >= 2:
    fig = optuna.visualization.plot_param_importances(study)
else:
    fig = None
    print("too few complete trials for importances")
fig  # noqa: B018 - the cell's output

# %% [markdown]
# ## Pareto front: objective against cost
# The cost of a trial is the candidates it fetches per query (the sum of its lanes' depths, or the
# depth × lanes when it tunes no depth); a trial is on the front when no other trial is at least
# as good on both and better on one.

# %%
trials = res.trials(STUDY)
trials = trials[trials["state"] == "COMPLETE"].copy()
depths = [c for c in trials.columns if c.startswith("params_depth.")]
lane_cols = [c for c in trials.columns if c.startswith("params_weights.")]
if depths:
    trials["cost"] = trials[depths].apply(pd.to_numeric, errors="coerce").fillna(100).sum(axis=1)
else:
    trials["cost"] = 100 * max(1, len(lane_cols))
trials = trials.sort_values(["cost", "value"], ascending=[True, False])
best, front = -1.0, []
for r in trials.itertuples():
    front.append(r.value > best)
    best = max(best, r.value)
trials["pareto"] = front
px.scatter(trials, x="cost", y="value", color="pareto", hover_data=["number"],
           title=f"{STUDY}: objective against candidates per query")

# %% [markdown]
# ## The chosen trial against the baseline, dev and test

# %%
res.study_measures(STUDY).round(4)
