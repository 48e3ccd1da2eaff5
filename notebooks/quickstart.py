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
# # Quickstart: the main job's results
#
# Loads what `make main` left in the workbench home (`WORKBENCH_HOME`, default `~/.workbench`)
# through the public read API `workbench.results`, the same readers the dashboard uses:
# the per-query-type table with 95% bootstrap confidence intervals, plots, and a ranx comparison
# report of several configs with a paired randomization test and a Holm–Bonferroni correction.
#
# The parameters below name the main job's `seeds` experiment; set the `NB_*` environment
# variables (or edit the cell) to read another.

# %%
import os

import pandas as pd
import plotly.express as px

from workbench.eval.stats import bootstrap_ci
from workbench.results import Results, compare

EXPERIMENT = os.environ.get("NB_EXPERIMENT", "seeds")
CONFIGS = os.environ.get("NB_CONFIGS", "aicharya-rrf60-ref,e5-translit-ref,e5-translit-lemma-ref").split(",")
SPLIT = os.environ.get("NB_SPLIT", "test")
MEASURES = ["R@10", "nDCG@10", "RR@10"]

res = Results()
res  # noqa: B018 - the cell's output

# %% [markdown]
# ## Every config of the experiment (the newest run of each)

# %%
runs = res.runs(experiment=EXPERIMENT)
metric_cols = [c for c in ("metric.recall_at_10", "metric.ndcg_cut_10", "metric.recip_rank_cut_10")
               if c in runs.columns]
runs[["dataset", "config", "started", *metric_cols]]

# %% [markdown]
# ## R@10 per query type on the chosen split, with 95% bootstrap CIs
# Efron and Tibshirani 1993, percentile method, the seed fixed: the same numbers as `workbench eval`.

# %%
rows = []
for config in CONFIGS:
    pq = res.per_query(config, experiment=EXPERIMENT)
    pq = pq[pq["split"] == SPLIT]
    for qtype, part in [("all", pq), *pq.groupby("query_type")]:
        values = part["R@10"].to_numpy(float)
        low, high = bootstrap_ci(values, seed=20261201)
        rows.append({"config": config, "query_type": qtype, "n": len(values), "R@10": values.mean(),
                     "low": low, "high": high})
table = pd.DataFrame(rows)
table.pivot(index="config", columns="query_type", values="R@10").round(3)

# %%
fig = px.bar(table, x="query_type", y="R@10", color="config", barmode="group",
             error_y=table["high"] - table["R@10"], error_y_minus=table["R@10"] - table["low"],
             title=f"R@10 by query type, {SPLIT} split, 95% CI")
fig  # noqa: B018 - the cell's output

# %% [markdown]
# ## A ranx comparison report
# Every pair of configs on the same queries, Fisher's randomization test (paired, two-sided),
# and the p-values adjusted for reading them together (Holm–Bonferroni): a letter in ranx's table
# marks a config significantly better than the config of that letter (raw p < 0.05); read the
# adjusted column below before believing one.

# %%
dataset = res.run_row(CONFIGS[0], experiment=EXPERIMENT)["dataset"]
pq = res.per_query(CONFIGS[0], experiment=EXPERIMENT)
ids = pq.loc[pq["split"] == SPLIT, "query_id"]
cmp = compare({c: res.run(c, experiment=EXPERIMENT) for c in CONFIGS}, res.qrels(dataset), MEASURES,
              query_ids=ids)
print(f"{cmp.queries} queries, test: {cmp.test}, correction: {cmp.adjustment}")
print(cmp.report)

# %%
cmp.pvalues.round(4)

# %%
px.imshow(cmp.pvalues.pivot_table(index=["run_a", "run_b"], columns="measure", values="p_adjusted")
          .rename(index=lambda x: x), text_auto=".3f", color_continuous_scale="Blues_r",
          title=f"{cmp.adjustment}-adjusted p-values")
