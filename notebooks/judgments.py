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
# # Judgments: pool coverage, agreement, Judged@10 before and after
#
# What the scholars' judging (issue #9) has covered: pooled pairs per query and how many are
# judged, inter-rater agreement (Krippendorff's alpha, ordinal, with bootstrap CIs; Krippendorff
# 2011) by query type and by rater, and Judged@10 of a config with the built qrels against the
# built qrels plus every human judgment (the `merged` layer's pairs).

# %%
import os

import pandas as pd
import plotly.express as px
from IPython.display import display

from workbench.results import Results

EXPERIMENT = os.environ.get("NB_EXPERIMENT", "seeds")
CONFIG = os.environ.get("NB_CONFIG", "aicharya-rrf60-ref")
res = Results()
dataset = res.run_row(CONFIG, experiment=EXPERIMENT)["dataset"]
judgments = res.judgments(dataset)
print(f"{dataset}: {len(judgments)} current judgments by {judgments['rater'].nunique()} raters")

# %% [markdown]
# ## Pool coverage

# %%
coverage = res.pool_coverage(dataset)
if coverage.empty:
    print("no pool yet: `workbench judge pool` makes one")
else:
    queries = res.queries(dataset).set_index("query_id")
    coverage["query_type"] = coverage["query_id"].map(queries["query_type"])
    print(f"{int(coverage['judged'].sum())} of {int(coverage['pooled'].sum())} pooled pairs judged")
    display(coverage.groupby("query_type")[["pooled", "judged"]].sum())

# %% [markdown]
# ## Agreement

# %%
if judgments.empty:
    agreement = None
    print("no judgments yet")
else:
    agreement = res.agreement(dataset)
    alpha = agreement["alpha"]
    print(f"Krippendorff's alpha {alpha['value']} [{alpha['low']}, {alpha['high']}] on {alpha['units']} pairs")
    by_type = pd.DataFrame(agreement["by_type"]).T
    by_rater = pd.DataFrame({r: {"grades": v["grades"], "alpha": v["alpha"]["value"],
                                 "mean_kappa": v["mean_kappa"]["value"]}
                             for r, v in agreement["by_rater"].items()}).T
    display(by_type, by_rater)

# %% [markdown]
# ## Judged@10 before and after the human judgments

# %%
run = res.run(CONFIG, experiment=EXPERIMENT)
built = res.qrels(dataset)
before = set(zip(built["query_id"], built["doc_id"]))
human = set() if judgments.empty else set(zip(judgments["query_id"], judgments["doc_id"]))
after = before | human
rows = []
for q in run:
    top = [h.doc_id for h in run.get_hits(q)[:10]]
    if top:
        rows.append({"query_id": q, "before": sum((q, d) in before for d in top) / len(top),
                     "after": sum((q, d) in after for d in top) / len(top)})
judged = pd.DataFrame(rows)
queries = res.queries(dataset).set_index("query_id")
judged["query_type"] = judged["query_id"].map(queries["query_type"])
summary = judged.groupby("query_type")[["before", "after"]].mean()
summary.loc["all"] = judged[["before", "after"]].mean()
summary.round(3)

# %%
px.bar(summary.reset_index().melt(id_vars="query_type", var_name="qrels", value_name="Judged@10"),
       x="query_type", y="Judged@10", color="qrels", barmode="group",
       title=f"Judged@10 of {CONFIG}: built qrels vs built + human judgments")
