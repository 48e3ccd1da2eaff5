"""Pure functions from per-query tables and runs to what the dashboard pages show.

Conventions: a per-query table has ``query_id, query_type, split, language, script`` and one
column per ir_measures measure (``R@10``…), higher is better; the comparison page calls
the two configs *baseline* (A) and *candidate* (B), and a delta is ``B − A`` (positive:
the candidate wins that query). Statistics come from :mod:`workbench.eval.stats`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from workbench.eval.evaluate import GROUP_COLUMNS
from workbench.eval.stats import ALL, bootstrap_ci_columns, outcome_counts
from workbench.run import Run
from workbench.text.doctext import display_address
from workbench.types import DEFAULT_SEED

#: Per-query columns that describe a query rather than measure it.
KEY_COLUMNS = ("query_id", *GROUP_COLUMNS)


def measures_of(per_query: pd.DataFrame) -> list[str]:
    """The measure columns of a per-query table, in table order."""
    return [c for c in per_query.columns if c not in KEY_COLUMNS]


def select(per_query: pd.DataFrame, splits: Sequence[str] | None = None,
           query_types: Sequence[str] | None = None) -> pd.DataFrame:
    """Rows of the given splits and query types (``None`` or empty: all)."""
    keep = pd.Series(True, index=per_query.index)
    if splits:
        keep &= per_query["split"].isin(list(splits))
    if query_types:
        keep &= per_query["query_type"].isin(list(query_types))
    return per_query[keep]


def overview(tables: Mapping[str, pd.DataFrame], measures: Sequence[str], *, splits: Sequence[str] | None = None,
             seed: int = DEFAULT_SEED, resamples: int = 2_000) -> pd.DataFrame:
    """Configs × measures with 95% bootstrap CIs, over all queries and per query type.

    Configs are compared on the queries they share (inner join on ``query_id``), and one
    set of resamples serves every config and measure of a stratum
    (:func:`workbench.eval.stats.bootstrap_ci_columns`), so the intervals are paired.

    Args:
        tables: config label → per-query table (same dataset).
        measures: the measures to show (columns missing from a table are skipped).
        splits: keep only these splits (``None``: all).

    Returns:
        long table ``config, stratum, n, measure, mean, ci_low, ci_high``; ``stratum`` is
        :data:`ALL`, a query type, or ``type/script`` (``term/Cyrillic``) for a query type
        asked in several scripts (:func:`script_strata`: script invariance). Empty when no
        query is shared.
    """
    labels = [lab for lab, t in tables.items() if not t.empty]
    if not labels:
        return pd.DataFrame(columns=["config", "stratum", "n", "measure", "mean", "ci_low", "ci_high"])
    head = select(tables[labels[0]], splits)
    first = head[[c for c in KEY_COLUMNS if c in head.columns]].set_index("query_id")
    shared = first.index
    for lab in labels[1:]:
        shared = shared.intersection(tables[lab]["query_id"])
    keys = first.loc[first.index.isin(shared)]
    cols, names = [], []
    for lab in labels:
        t = tables[lab].set_index("query_id").reindex(keys.index)
        for m in measures:
            if m in t.columns:
                cols.append(t[m].to_numpy(dtype=float))
                names.append((lab, m))
    if not cols:
        return pd.DataFrame(columns=["config", "stratum", "n", "measure", "mean", "ci_low", "ci_high"])
    matrix = np.column_stack(cols)
    rows = []
    strata = [(ALL, np.ones(len(keys), dtype=bool))]
    strata += [(t, (keys["query_type"] == t).to_numpy()) for t in sorted(keys["query_type"].unique())]
    strata += [(f"{t}/{s}", ((keys["query_type"] == t) & (keys["script"] == s)).to_numpy())
               for t, s in script_strata(keys)]
    for stratum, mask in strata:
        sub = matrix[mask]
        lo, hi = bootstrap_ci_columns(sub, seed, resamples)
        mean = sub.mean(axis=0) if len(sub) else np.full(len(names), math.nan)
        for j, (lab, m) in enumerate(names):
            rows.append({"config": lab, "stratum": stratum, "n": int(mask.sum()), "measure": m,
                         "mean": float(mean[j]), "ci_low": float(lo[j]), "ci_high": float(hi[j])})
    return pd.DataFrame(rows)


def script_strata(keys: pd.DataFrame) -> list[tuple[str, str]]:
    """``(query_type, script)`` pairs of the query types asked in more than one script (the term queries, typed in
    IAST, ASCII, Cyrillic and Devanagari), sorted; ``[]`` for a table without a ``script`` column."""
    if "script" not in keys.columns:
        return []
    per_type = keys.groupby("query_type")["script"].unique()
    return [(t, s) for t in sorted(per_type.index) if len(per_type[t]) > 1 for s in sorted(per_type[t])
            if t == "term"]


def overview_wide(long: pd.DataFrame, stratum: str = ALL) -> pd.DataFrame:
    """One row per config, one column per measure formatted ``mean [low, high]`` (for a table)."""
    part = long[long["stratum"] == stratum]
    if part.empty:
        return pd.DataFrame()
    text = part.assign(cell=[f"{m:.3f} [{lo:.3f}, {hi:.3f}]" for m, lo, hi in
                             zip(part["mean"], part["ci_low"], part["ci_high"])])
    wide = text.pivot(index="config", columns="measure", values="cell")
    order = list(dict.fromkeys(part["config"]))
    mcols = list(dict.fromkeys(part["measure"]))
    wide = wide.reindex(index=order, columns=mcols)
    wide.insert(0, "n", part.groupby("config")["n"].first().reindex(order))
    return wide


def overview_figure(long: pd.DataFrame, measure: str):
    """Plotly bars: the measure per config, one panel per stratum, 95% CI as error bars."""
    import plotly.express as px

    part = long[long["measure"] == measure].copy()
    part["plus"] = part["ci_high"] - part["mean"]
    part["minus"] = part["mean"] - part["ci_low"]
    fig = px.bar(part, x="mean", y="config", facet_col="stratum", orientation="h", error_x="plus",
                 error_x_minus="minus", labels={"mean": measure, "config": ""},
                 hover_data={"n": True, "ci_low": ":.3f", "ci_high": ":.3f", "plus": False, "minus": False})
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(height=max(260, 28 * part["config"].nunique() + 120), margin=dict(l=10, r=10, t=40, b=10))
    return fig


def query_deltas(baseline: pd.DataFrame, candidate: pd.DataFrame, measure: str) -> pd.DataFrame:
    """Per-query values of one measure for two configs on their shared queries.

    Returns:
        ``query_id, query_type, split, baseline, candidate, delta`` (candidate − baseline),
        sorted by delta ascending (worst losses first).

    Raises:
        KeyError: ``measure`` is not a column of both tables.
    """
    for name, t in (("baseline", baseline), ("candidate", candidate)):
        if measure not in t.columns:
            raise KeyError(f"the {name} run has no per-query {measure}; it has {', '.join(measures_of(t))}")
    j = baseline[["query_id", "query_type", "split", measure]].merge(
        candidate[["query_id", measure]], on="query_id", suffixes=("_a", "_b"))
    out = pd.DataFrame({"query_id": j["query_id"], "query_type": j["query_type"], "split": j["split"],
                        "baseline": j[f"{measure}_a"].astype(float), "candidate": j[f"{measure}_b"].astype(float)})
    out["delta"] = out["candidate"] - out["baseline"]
    return out.sort_values(["delta", "query_id"], kind="stable").reset_index(drop=True)


def outcomes(cmp: pd.DataFrame, eps: float = 1e-12) -> dict[str, int]:
    """Counts of queries the candidate ``wins`` (delta > eps), ``losses`` (< −eps) and ``ties``
    (:func:`workbench.eval.stats.outcome_counts` of the ``delta`` column)."""
    return outcome_counts(cmp["delta"].to_numpy(), eps)


def significance(cmp: pd.DataFrame, seed: int = DEFAULT_SEED) -> pd.DataFrame:
    """Paired statistics per stratum (all queries, then each query type).

    Returns:
        ``stratum, n, baseline, candidate, delta, ci_low, ci_high, p_value, p_adjusted, wins, losses,
        ties``: means, the mean paired difference with its 95% bootstrap CI, the
        two-sided p-value of the paired sign-flip randomisation test
        (:func:`workbench.eval.stats.paired_test`: Smucker et al. 2007) and that p-value adjusted over
        the rows (the strata are read together) by Holm–Bonferroni
        (:func:`workbench.eval.stats.adjust_pvalues`).
    """
    from workbench.eval.stats import paired_comparison

    out = paired_comparison(cmp, {"": ("candidate", "baseline")}, seed=seed)
    out = out[out["n"] > 0].drop(columns="measure").reset_index(drop=True)
    if out.empty:  # no shared query: no strata at all
        return pd.DataFrame()
    return out[["stratum", "n", "baseline", "candidate", "delta", "ci_low", "ci_high", "p_value", "p_adjusted",
                "wins", "losses", "ties"]]


def delta_figure(cmp: pd.DataFrame, measure: str, baseline: str, candidate: str):
    """Plotly bars of every query's delta, sorted, coloured by query type (ties left out)."""
    import plotly.express as px

    part = cmp[cmp["delta"].abs() > 1e-12].sort_values("delta", kind="stable").reset_index(drop=True)
    part["position"] = np.arange(len(part))
    fig = px.bar(part, x="position", y="delta", color="query_type", hover_data=["query_id", "baseline", "candidate"],
                 labels={"delta": f"Δ {measure} ({candidate} − {baseline})", "position": "queries, sorted by Δ"})
    fig.update_traces(marker_line_width=0)
    fig.update_layout(bargap=0, height=360, margin=dict(l=10, r=10, t=30, b=10),
                      title=f"{len(part)} queries differ; {len(cmp) - len(part)} tied")
    return fig


def lanes_for(lane_hits: pd.DataFrame | None, query_id: str, lanes: Sequence[str]) -> dict[str, dict[str, tuple[int, float]]]:
    """doc_id → {lane: (rank, score)} for one query, restricted to the config's lanes."""
    if lane_hits is None:
        return {}
    part = lane_hits[(lane_hits["query_id"] == query_id) & (lane_hits["lane"].isin(list(lanes)))]
    out: dict[str, dict[str, tuple[int, float]]] = {}
    for lane, doc, rank, score in zip(part["lane"], part["doc_id"], part["rank"], part["score"]):
        out.setdefault(doc, {})[lane] = (int(rank), float(score))
    return out


def _lane_text(found: Mapping[str, tuple[int, float]], lanes: Sequence[str]) -> str:
    return " · ".join(f"{lane} #{found[lane][0]} ({found[lane][1]:.3g})" for lane in lanes if lane in found)


def doc_texts(doc: Any, derive_cyrillic: bool = False) -> dict[str, str]:
    """A document's texts grouped for reading: ``original`` (field ``root``), ``transliteration``
    (stored transliterations; for Pali in Latin script with ``derive_cyrillic``, a Cyrillic
    transliteration by :func:`workbench.text.normalize.to_cyrillic`, marked as derived) and
    ``translation`` (each labelled with its language); other fields under ``other``."""
    groups: dict[str, list[str]] = {"original": [], "transliteration": [], "translation": [], "other": []}
    for t in doc.texts:
        if not t.text.strip():
            continue
        if t.field == "root":
            groups["original"].append(t.text)
        elif t.field.startswith("transliteration"):
            groups["transliteration"].append(t.text)
        elif t.field == "translation":
            groups["translation"].append(f"[{t.language}] {t.text}")
        else:
            groups["other"].append(f"[{t.field}] {t.text}")
    if derive_cyrillic and not groups["transliteration"]:
        root = next((t for t in doc.texts if t.field == "root" and t.script == "Latn" and t.text.strip()), None)
        if root is not None:
            from workbench.text.normalize import to_cyrillic

            groups["transliteration"].append("[Cyrillic, derived] " + to_cyrillic(root.text))
    return {k: "\n\n".join(v) for k, v in groups.items()}


def ranked_list(run: Run, query_id: str, qrels: Mapping[str, int], found: Mapping[str, Mapping[str, tuple[int, float]]],
                lanes: Sequence[str], documents: Mapping[str, Any], k: int = 10) -> pd.DataFrame:
    """One config's top ``k`` for a query, for the drill-down.

    Returns:
        ``rank, doc_id, address, score`` (the fused score), ``relevance`` (the qrels grade;
        ``None`` for an unjudged document), ``judged`` (``"2"``, ``"1"``, ``"0"`` or
        ``"unjudged"``), ``lanes`` (``vector #3 (0.812) · fts #1 (0.2)``: each of the
        config's lanes that retrieved it, with its rank and raw score), ``snippet``.
    """
    from workbench.text.doctext import snippet

    rows = []
    for rank, h in enumerate(run.get_hits(query_id)[:k], 1):
        doc = documents.get(h.doc_id)
        grade = qrels.get(h.doc_id)
        rows.append({"rank": rank, "doc_id": h.doc_id, "address": display_address(doc) if doc else "(not in the dataset)",
                     "score": float(h.score), "relevance": grade,
                     "judged": "unjudged" if grade is None else str(grade),
                     "lanes": _lane_text(found.get(h.doc_id, {}), lanes), "snippet": snippet(doc, 200) if doc else ""})
    return pd.DataFrame(rows, columns=["rank", "doc_id", "address", "score", "relevance", "judged", "lanes", "snippet"])


def qrels_table(qrels: Mapping[str, int], runs: Mapping[str, Run], query_id: str,
                documents: Mapping[str, Any]) -> pd.DataFrame:
    """The query's judged documents, best grade first, with each config's rank of each (``<NA>``: not retrieved)."""
    ranks = {lab: {h.doc_id: i for i, h in enumerate(r.get_hits(query_id), 1)} for lab, r in runs.items()}
    rows = []
    for doc_id, grade in sorted(qrels.items(), key=lambda kv: (-kv[1], kv[0])):
        doc = documents.get(doc_id)
        row: dict[str, Any] = {"doc_id": doc_id, "address": display_address(doc) if doc else "(not in the dataset)",
                               "relevance": grade}
        row.update({f"rank in {lab}": ranks[lab].get(doc_id) for lab in runs})
        rows.append(row)
    out = pd.DataFrame(rows, columns=["doc_id", "address", "relevance", *(f"rank in {lab}" for lab in runs)])
    for lab in runs:
        out[f"rank in {lab}"] = out[f"rank in {lab}"].astype("Int64")
    return out


def ann_figure(ann: pd.DataFrame, k: int = 10):
    """Plotly lines, one per approximate lane (:func:`workbench.experiment.report.ann_check_frame`): its recall of
    the exact top ``k`` (left) and its share of under-returned queries (right) per selectivity bucket: the
    unfiltered queries first, then the buckets from the widest filter to the narrowest."""
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    from workbench.eval.ann import UNFILTERED
    from workbench.io.facets import SELECTIVITY_BUCKETS

    order = [UNFILTERED] + [label for _low, label in SELECTIVITY_BUCKETS]
    fig = make_subplots(rows=1, cols=2, subplot_titles=(f"ann R@{k} (share of the exact top {k} found)",
                                                        "short % (fewer rows than the exact scan)"))
    for lane, part in ann.groupby("lane", sort=False):
        part = part.set_index("selectivity").reindex([b for b in order if b in set(part["selectivity"])])
        hover = [f"n {int(n)}, p50 {p:.1f} ms" for n, p in zip(part["n"], part["p50 ms"])]
        fig.add_trace(go.Scatter(x=list(part.index), y=part[f"ann R@{k}"], name=lane, legendgroup=lane,
                                 mode="lines+markers", text=hover), row=1, col=1)
        fig.add_trace(go.Scatter(x=list(part.index), y=part["short %"], name=lane, legendgroup=lane,
                                 showlegend=False, mode="lines+markers", text=hover), row=1, col=2)
    fig.update_yaxes(range=[0, 1.02], row=1, col=1)
    fig.update_yaxes(range=[0, 102], row=1, col=2)
    fig.update_layout(height=380, margin=dict(l=10, r=10, t=40, b=10))
    return fig


def min_score_figure(curve: pd.DataFrame, chosen: Mapping[str, tuple[float, float]] | None = None):
    """Plotly lines, one per config (:func:`workbench.experiment.report.min_score_curve_frame`): the empty-answer
    rate on negatives against the false-empty rate as ``min_score`` rises (hover: the threshold); ``chosen``
    (config → its ``empty on negatives``/``false empty`` as it ran) marked as points."""
    import plotly.graph_objects as go

    fig = go.Figure()
    for config, part in curve.groupby("config", sort=False):
        fig.add_trace(go.Scatter(x=part["false_empty"], y=part["empty_on_negatives"], mode="lines+markers",
                                 name=config, text=[f"min_score {m:.4g}" for m in part["min_score"]]))
    for config, (empty, false_empty) in (chosen or {}).items():
        fig.add_trace(go.Scatter(x=[false_empty], y=[empty], mode="markers", marker_symbol="star", marker_size=14,
                                 name=f"{config} as it ran"))
    fig.update_layout(height=420, xaxis_title="false empty (answerable queries answered with nothing)",
                      yaxis_title="empty on negatives", xaxis_range=[-0.02, 1.02], yaxis_range=[-0.02, 1.02],
                      margin=dict(l=10, r=10, t=20, b=10))
    return fig
