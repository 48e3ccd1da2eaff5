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
# # Failure analysis: where config B loses against config A
#
# The queries B loses on R@10, the relevant documents A found and B dropped with the lanes that
# had found them, the unjudged documents in B's top 10, and how different the two rankings are
# where there are no judgments: rank-biased overlap (RBO; Webber, Moffat and Zobel 2010) of the
# two top-10 lists per query.

# %%
import os

import pandas as pd
import plotly.express as px

from workbench.eval.rbo import rbo_by_query
from workbench.results import Results

EXPERIMENT = os.environ.get("NB_EXPERIMENT", "seeds")
A = os.environ.get("NB_BASELINE", "e5-translit-lemma-ref")
B = os.environ.get("NB_CANDIDATE", "e5-translit-ref")
SPLIT = os.environ.get("NB_SPLIT", "test")
MEASURE = "R@10"

res = Results()
row_a, row_b = res.run_row(A, experiment=EXPERIMENT), res.run_row(B, experiment=EXPERIMENT)
dataset = row_b["dataset"]
pa, pb = res.per_query(row_a), res.per_query(row_b)
run_a, run_b = res.run(row_a), res.run(row_b)
qrels = res.qrels(dataset)
queries = res.queries(dataset).set_index("query_id")
relevant = qrels[qrels["relevance"] >= 1].groupby("query_id")["doc_id"].apply(set).to_dict()
judged = set(zip(qrels["query_id"], qrels["doc_id"]))

# %% [markdown]
# ## The queries B loses

# %%
both = pa[["query_id", "query_type", "split", MEASURE]].merge(pb[["query_id", MEASURE]], on="query_id",
                                                              suffixes=("_a", "_b"))
both = both[both["split"] == SPLIT]
both["delta"] = both[f"{MEASURE}_b"] - both[f"{MEASURE}_a"]
lost = both[both["delta"] < 0].sort_values("delta", kind="stable")
print(f"{B} vs {A} on {len(both)} {SPLIT} queries: {len(lost)} lost, {(both['delta'] > 0).sum()} won")
lost.groupby("query_type").size().rename("lost").to_frame()

# %% [markdown]
# ## What B dropped, and which lanes had found it
# Each relevant document in A's top 10 and not in B's, with the lanes of B's eval that had it
# among their candidates (lane:rank).

# %%
lanes = res.lanes(row_b)
found = {}
if lanes is not None:
    for r in lanes.itertuples():
        found.setdefault((r.query_id, r.doc_id), []).append(f"{r.lane}:{r.rank}")
rows = []
for q in lost["query_id"].head(30):
    top_a = [h.doc_id for h in run_a.get_hits(q)[:10]]
    top_b = [h.doc_id for h in run_b.get_hits(q)[:10]]
    for d in top_a:
        if d in relevant.get(q, set()) and d not in top_b:
            rows.append({"query_id": q, "text": queries.loc[q, "text"] if q in queries.index else "",
                         "dropped": d, "rank in A": top_a.index(d) + 1,
                         "lanes of B that had it": ", ".join(found.get((q, d), [])) or "none"})
pd.DataFrame(rows)

# %% [markdown]
# ## Unjudged documents in B's top 10 (what to judge next)

# %%
unjudged = [{"query_id": q, "rank": i, "doc_id": h.doc_id}
            for q in lost["query_id"] for i, h in enumerate(run_b.get_hits(q)[:10], 1)
            if (q, h.doc_id) not in judged]
print(f"{len(unjudged)} unjudged documents in B's top 10 of the {len(lost)} lost queries")
pd.DataFrame(unjudged).head(30)

# %% [markdown]
# ## How different are the two rankings? RBO of the top 10 (p = 0.9)
# 1 = the same list, 0 = nothing in common. It needs no judgments, so it also covers the queries
# nobody judged.

# %%
ids = set(both["query_id"])
overlap = rbo_by_query({q: run_a.get_hits(q) for q in ids}, {q: run_b.get_hits(q) for q in ids}, depth=10)
both["rbo@10"] = both["query_id"].map(overlap)
print(f"mean RBO {both['rbo@10'].mean():.3f}; identical top 10 on "
      f"{(both['rbo@10'] > 0.999).mean():.0%} of the queries")
both.groupby("query_type")["rbo@10"].describe().round(3)

# %%
px.histogram(both, x="rbo@10", color="query_type", nbins=20, barmode="overlay",
             title=f"RBO@10 between {A} and {B} per query")

# %%
px.scatter(both, x="rbo@10", y="delta", color="query_type", hover_data=["query_id"],
           title=f"Δ {MEASURE} ({B} − {A}) against how much the lists differ")
