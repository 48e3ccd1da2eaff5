"""Plain-text comparison tables for ``workbench eval`` (configs × measures, per query type)."""

from __future__ import annotations

import pandas as pd

from workbench.eval.evaluate import latency_or_nan


def qrels_layer(result) -> str:
    """The qrels layer a :class:`~workbench.experiment.runner.JobResult` was evaluated with (``built`` for results
    made before layers existed)."""
    return getattr(result, "qrels_layer", "built") or "built"


def comparison_frame(result) -> pd.DataFrame:
    """One row per (dataset, config): the qrels layer, every measure's mean, query count, latency p50/p95 (ms)."""
    rows = []
    layer = qrels_layer(result)
    for cr in result.configs:
        lat = latency_or_nan(list(cr.latency_ms.values()))
        row = {"dataset": cr.dataset, "config": cr.config.name, "qrels": layer, "n": len(cr.evaluation.per_query)}
        row.update({m: v for m, v in cr.evaluation.overall.items()})
        row.update({"p50 ms": lat["p50"], "p95 ms": lat["p95"]})
        rows.append(row)
    return pd.DataFrame(rows)


def by_type_frame(result, measures: list[str]) -> pd.DataFrame:
    """One row per (dataset, config, query_type) with the given measures and the query count."""
    rows = []
    for cr in result.configs:
        table = cr.evaluation.aggregate("query_type")
        for qtype, r in table.iterrows():
            row = {"dataset": cr.dataset, "config": cr.config.name, "query_type": qtype, "n": int(r["n"])}
            row.update({m: r[m] for m in measures})
            rows.append(row)
    return pd.DataFrame(rows)


def by_language_frame(result, measure: str) -> pd.DataFrame:
    """One row per (dataset, config, query_type, language) for the query types a dataset asks in more than one
    language (gita paraphrases in English and Hindi, references in Latin and Cyrillic): ``measure``'s mean and
    the query count. Empty when no type has several languages."""
    rows = []
    for cr in result.configs:
        per_q = cr.evaluation.per_query
        if per_q.empty or measure not in per_q:
            continue
        langs = per_q.groupby("query_type")["language"].nunique()
        multi = per_q[per_q["query_type"].isin(langs[langs > 1].index)]
        for (qtype, lang), part in multi.groupby(["query_type", "language"], sort=True):
            rows.append({"dataset": cr.dataset, "config": cr.config.name, "query_type": qtype, "language": lang,
                         "n": len(part), measure: float(part[measure].mean())})
    return pd.DataFrame(rows)


def by_script_frame(result, measure: str) -> pd.DataFrame:
    """One row per (dataset, config, script) of the term queries, for datasets whose term queries come in more
    than one script (IAST, ASCII, Cyrillic, Devanagari: :func:`workbench.text.scripts.script_of`): ``measure``'s
    mean and the query count, plus a row ``gap`` per config (best minus worst script mean, higher is a bigger
    dependence on the script typed).

    The scripts' queries need not ask for the same words (IAST holds only words with diacritics), so where
    ``result.datasets`` names each query's group (:attr:`workbench.types.Query.group`, the lemma) a row
    ``gap (same words)`` gives the gap over only the groups asked in every script, its ``n`` the queries
    counted. Empty when no dataset has term queries in several scripts, or for tables without a ``script``
    column."""
    rows = []
    for cr in result.configs:
        per_q = cr.evaluation.per_query
        if per_q.empty or measure not in per_q or "script" not in per_q:
            continue
        terms = per_q[per_q["query_type"] == "term"]
        if terms["script"].nunique() < 2:
            continue
        means = terms.groupby("script", sort=True)[measure].agg(["mean", "size"])
        for script, r in means.iterrows():
            rows.append({"dataset": cr.dataset, "config": cr.config.name, "script": script, "n": int(r["size"]),
                         measure: float(r["mean"])})
        rows.append({"dataset": cr.dataset, "config": cr.config.name, "script": "gap", "n": int(len(terms)),
                     measure: float(means["mean"].max() - means["mean"].min())})
        ds = (getattr(result, "datasets", None) or {}).get(cr.dataset)
        if ds is not None:
            group = {q.query_id: q.group for q in ds.queries}
            g = terms["query_id"].map(group)
            scripts = terms.groupby(g)["script"].nunique()
            common = terms[g.isin(scripts.index[scripts == len(means)])]
            if not common.empty and len(common) < len(terms):
                same = common.groupby("script")[measure].mean()
                rows.append({"dataset": cr.dataset, "config": cr.config.name, "script": "gap (same words)",
                             "n": int(len(common)), measure: float(same.max() - same.min())})
    return pd.DataFrame(rows)


def by_filter_frame(result, measure: str) -> pd.DataFrame:
    """The filtered queries (:attr:`workbench.types.Query.filter`) per (dataset, config, selectivity bucket of
    :data:`workbench.io.facets.SELECTIVITY_BUCKETS`): ``n``, ``measure`` under the filter, the same measure of
    the same queries unfiltered (a filtered copy ``<id>~<facet>`` beside ``<id>``, when the dataset has it), the
    difference, and ``short``: how many filtered queries were answered with fewer than ``min(top_k, admitted)``
    documents although the filter admits more (an HNSW scan that stopped before k rows passed the filter). Empty
    when no dataset has filtered queries."""
    from workbench.io.facets import SELECTIVITY_BUCKETS, selectivity_bucket

    rows = []
    for cr in result.configs:
        ds = (getattr(result, "datasets", None) or {}).get(cr.dataset)
        per_q = cr.evaluation.per_query
        if ds is None or per_q.empty or measure not in per_q:
            continue
        filtered = {q.query_id: q for q in ds.queries if q.filter}
        if not filtered:
            continue
        index = ds.facet_index
        value = dict(zip(per_q["query_id"], per_q[measure]))
        n_docs = max(len(ds.documents), 1)
        buckets: dict[str, list] = {}
        for qid, q in filtered.items():
            if qid not in value:
                continue
            admitted = index.admitted(q.filter) or frozenset()
            base = value.get(qid.split("~")[0]) if "~" in qid else None
            short = len(cr.run.get_hits(qid)) < min(cr.config.top_k, len(admitted))
            buckets.setdefault(selectivity_bucket(len(admitted) / n_docs), []).append((value[qid], base, short))
        for _low, label in SELECTIVITY_BUCKETS:
            got = buckets.get(label)
            if not got:
                continue
            pairs = [(v, b) for v, b, _s in got if b is not None]
            row = {"dataset": cr.dataset, "config": cr.config.name, "selectivity": label, "n": len(got),
                   measure: sum(v for v, _b, _s in got) / len(got)}
            row["unfiltered"] = sum(b for _v, b in pairs) / len(pairs) if pairs else float("nan")
            row["delta"] = (sum(v - b for v, b in pairs) / len(pairs)) if pairs else float("nan")
            row["short"] = sum(1 for _v, _b, s in got if s)
            rows.append(row)
    return pd.DataFrame(rows)


def ann_check_frame(result, k: int = 10) -> pd.DataFrame:
    """Per (dataset, approximate lane, selectivity bucket) of the experiment's splits (:mod:`workbench.eval.ann`):
    the lane's search settings (``ef_search``, ``iterative_scan``, ``max_scan_tuples`` where it has them), ``n``,
    the lane's recall@``k`` of its exact twin's top ``k`` (``ann R@k``), the queries it under-returned
    (``short``: fewer rows than the exact scan at the same depth) and its latency p50 / p95 (ms) on those queries.
    Empty when the job measured no exact twin (``ann_check``)."""
    from workbench.eval.ann import ann_frame, ann_summary

    rows = []
    for (dsname, lane), twin in getattr(result, "exact", {}).items():
        ds = result.datasets.get(dsname)
        lr = result.lanes.get((dsname, lane))
        if ds is None or lr is None:
            continue
        queries = [q for q in ds.queries if q.split in result.experiment.splits]
        admitted = {q.query_id: len(ds.facet_index.admitted(q.filter) or ()) for q in queries if q.filter}
        params = result.experiment.lanes[lane].canonical()
        settings = {key: params[key] for key in ("ef_search", "iterative_scan", "max_scan_tuples", "filter_mode")
                    if key in params}
        frame = ann_frame(lr.run, twin.run, queries, admitted, len(ds.documents), k)
        for _i, r in ann_summary(frame, lr.latencies_ms).iterrows():
            rows.append({"dataset": dsname, "lane": lane, **settings, "selectivity": r["selectivity"], "n": r["n"],
                         f"ann R@{k}": r["ann_recall"], "short": r["short"], "short %": 100 * r["short_rate"],
                         "p50 ms": r["p50 ms"], "p95 ms": r["p95 ms"]})
    return pd.DataFrame(rows)


def _with_negatives(result):
    """``(config result, dataset, the queries of the experiment's splits)`` for each config evaluated on a
    dataset whose splits hold unanswerable queries (:data:`workbench.types.UNANSWERABLE_QUERY_TYPES`)."""
    from workbench.types import UNANSWERABLE_QUERY_TYPES

    for cr in result.configs:
        ds = (getattr(result, "datasets", None) or {}).get(cr.dataset)
        if ds is None:
            continue
        queries = [q for q in ds.queries if q.split in result.experiment.splits]
        if any(q.query_type in UNANSWERABLE_QUERY_TYPES for q in queries):
            yield cr, ds, queries


def answers_frame(result) -> pd.DataFrame:
    """Per (dataset, config) with unanswerable queries (:mod:`workbench.eval.answers`): the negatives and answerable
    queries of the experiment's splits, the empty-answer rate on negatives and the false-empty rate as the config
    ran (its own ``min_score``), and the ``min_score`` that maximises the abstention accuracy over the best scores
    with both rates there. Empty when no dataset has negatives."""
    from workbench.eval.answers import answer_rates, best_threshold, min_score_curve

    rows = []
    for cr, ds, queries in _with_negatives(result):
        rates = answer_rates(cr.run, queries, ds.qrels)
        best = best_threshold(min_score_curve(cr.run, queries, ds.qrels)) or {}
        rows.append({"dataset": cr.dataset, "config": cr.config.name, "negatives": rates["negatives"],
                     "empty on negatives": rates["empty_on_negatives"], "false empty": rates["false_empty"],
                     "best min_score": best.get("min_score", float("nan")),
                     "→ empty on negatives": best.get("empty_on_negatives", float("nan")),
                     "→ false empty": best.get("false_empty", float("nan"))})
    return pd.DataFrame(rows)


def min_score_curve_frame(result, points: int = 11) -> pd.DataFrame:
    """Per (dataset, config) with unanswerable queries, the ``min_score`` trade-off curve of the experiment's
    splits (:func:`workbench.eval.answers.min_score_curve` at ``points`` thresholds): ``min_score``,
    ``empty_on_negatives``, ``false_empty``, ``abstention_accuracy``. Empty when no dataset has negatives."""
    from workbench.eval.answers import min_score_curve

    parts = []
    for cr, ds, queries in _with_negatives(result):
        curve = min_score_curve(cr.run, queries, ds.qrels, points)
        if not curve.empty:
            parts.append(curve.assign(dataset=cr.dataset, config=cr.config.name))
    if not parts:
        return pd.DataFrame()
    frame = pd.concat(parts, ignore_index=True)
    return frame[["dataset", "config", "min_score", "empty_on_negatives", "false_empty", "abstention_accuracy"]]


def report_tables(result) -> dict[str, pd.DataFrame]:
    """The report's tables of filtered search and empty answers, by the name the tracking logs them under
    (``reports/<name>.csv`` on an eval's parent run, read by the dashboard's "Filters and empty answers" page):
    ``by_filter`` (of the experiment's first measure), ``ann_check``, ``answers`` and ``min_score_curve``; empty
    tables left out."""
    canonical = list(result.configs[0].evaluation.measures) if result.configs else []
    tables = {"by_filter": by_filter_frame(result, canonical[0]) if canonical else pd.DataFrame(),
              "ann_check": ann_check_frame(result), "answers": answers_frame(result),
              "min_score_curve": min_score_curve_frame(result)}
    return {name: frame for name, frame in tables.items() if not frame.empty}


def render(result, type_measures: tuple[str, ...] = ("R@10", "nDCG@10", "RR@10")) -> str:
    """The comparison as text: per dataset (with the qrels layer it was judged by), configs × measures,
    then per query type."""
    out = []
    comp = comparison_frame(result)
    fmt = {c: "{:.3f}".format for c in comp.columns if c not in ("dataset", "config", "qrels", "n", "p50 ms", "p95 ms")}
    fmt.update({"p50 ms": "{:.1f}".format, "p95 ms": "{:.1f}".format})
    splits = ",".join(result.experiment.splits)
    layers = getattr(result, "qrels", {}) or {}
    for ds, part in comp.groupby("dataset", sort=False):
        lq = layers.get(ds)
        shown = f"{lq.layer} {lq.sha256[:12]}" if lq is not None else qrels_layer(result)
        out.append(f"\n== {ds} (splits: {splits}; qrels: {shown}) ==")
        if lq is not None and lq.layer != "built" and ds in result.datasets:
            out.append(lq.describe([q for q in result.datasets[ds].queries if q.split in result.experiment.splits]))
        out.append(part.drop(columns=["dataset", "qrels"]).to_string(index=False, formatters=fmt))
    canonical = list(result.configs[0].evaluation.measures) if result.configs else []
    measures = [m for m in type_measures if m in canonical] or canonical[:3]
    bt = by_type_frame(result, measures)
    if not bt.empty:
        for ds, part in bt.groupby("dataset", sort=False):
            wide = part.pivot_table(index="config", columns="query_type", values=measures, sort=False)
            wide = wide.reindex([c for c in result.experiment.configs if c in wide.index])
            out.append(f"\n-- {ds}: per query type --")
            out.append(wide.to_string(float_format=lambda v: f"{v:.3f}"))
    if measures:
        bl = by_language_frame(result, measures[0])
        for ds, part in (bl.groupby("dataset", sort=False) if not bl.empty else ()):
            wide = part.pivot_table(index="config", columns=["query_type", "language"], values=measures[0], sort=False)
            wide = wide.reindex([c for c in result.experiment.configs if c in wide.index])
            out.append(f"\n-- {ds}: {measures[0]} per query type and language (types asked in several) --")
            out.append(wide.to_string(float_format=lambda v: f"{v:.3f}"))
        bs = by_script_frame(result, measures[0])
        for ds, part in (bs.groupby("dataset", sort=False) if not bs.empty else ()):
            wide = part.pivot_table(index="config", columns="script", values=measures[0], sort=False)
            wide = wide.reindex([c for c in result.experiment.configs if c in wide.index])
            out.append(f"\n-- {ds}: {measures[0]} of term queries per script (gap: best minus worst) --")
            out.append(wide.to_string(float_format=lambda v: f"{v:.3f}"))
    if measures:
        bf = by_filter_frame(result, measures[0])
        for ds, part in (bf.groupby("dataset", sort=False) if not bf.empty else ()):
            out.append(f"\n-- {ds}: filtered queries by selectivity ({measures[0]}; unfiltered: the same queries "
                       "without their filter; short: answered with fewer than min(top_k, admitted) documents) --")
            out.append(part.drop(columns=["dataset"]).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    ac = ann_check_frame(result)
    for ds, part in (ac.groupby("dataset", sort=False) if not ac.empty else ()):
        out.append(f"\n-- {ds}: approximate lanes against an exact scan by selectivity (ann R@10: share of the "
                   "exact top 10 the lane found; short: fewer rows than the exact scan at the same depth) --")
        out.append(part.drop(columns=["dataset"]).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    ans = answers_frame(result)
    for ds, part in (ans.groupby("dataset", sort=False) if not ans.empty else ()):
        out.append(f"\n-- {ds}: unanswerable queries (empty on negatives: answered with nothing, higher is better; "
                   "false empty: answerable queries answered with nothing; best min_score: the threshold on the "
                   "best score that maximises (empty on negatives + 1 - false empty) / 2) --")
        out.append(part.drop(columns=["dataset"]).to_string(index=False, float_format=lambda v: f"{v:.3f}"))
    curve = min_score_curve_frame(result)
    for ds, part in (curve.groupby("dataset", sort=False) if not curve.empty else ()):
        out.append(f"\n-- {ds}: the min_score trade-off (per config: thresholds on the best score, the 11 quantiles "
                   "of the best scores after -inf; raising it empties more negatives and more answerable queries) --")
        wide = part.assign(at=[f"{e:.2f}/{f:.2f}" for e, f in zip(part["empty_on_negatives"], part["false_empty"])])
        for config, rows in wide.groupby("config", sort=False):
            out.append(f"{config}: " + "  ".join(f"{m:.4g}→{a}" for m, a in zip(rows["min_score"], rows["at"])))
        out.append("(min_score→empty on negatives/false empty; -inf: nothing dropped)")
    lanes = [(d, lane, s) for (d, lane), s in result.lane_latency.items()]
    if lanes:
        out.append("\n-- lane latency (ms per query) --")
        out.append(pd.DataFrame([{"dataset": d, "lane": lane, "p50": s["p50"], "p95": s["p95"],
                                  "cached": result.lanes[(d, lane)].cached} for d, lane, s in lanes])
                   .to_string(index=False, float_format=lambda v: f"{v:.2f}"))
    noted = [(d, lane, note) for (d, lane), r in result.lanes.items() for note in getattr(r, "notes", ())]
    if noted:
        out.append("\n-- lane notes --")
        out.extend(f"{d}/{lane}: {note}" for d, lane, note in noted)
    failed = [(d, lane, r) for (d, lane), r in result.lanes.items()
              if getattr(r, "failures", None) or getattr(r, "unmapped", 0) or getattr(r, "unscored", 0)]
    if failed:
        out.append("\n-- live lanes: failed queries (empty ranking, scored 0, kept in every mean) --")
        out.append(pd.DataFrame([{"dataset": d, "lane": lane, "failed": len(r.failures),
                                  "by class": ", ".join(f"{c} {n}" for c, n in r.failure_classes().items()) or "-",
                                  "unmapped ids": r.unmapped, "unmapped share": f"{r.unmapped_share():.1%}",
                                  "queries with unmapped": sum(1 for u, _n in r.unmapped_by_query.values() if u),
                                  "unscored hits": r.unscored}
                                 for d, lane, r in failed]).to_string(index=False))
        worst = sorted(((u / n, qid, d, lane) for (d, lane), r in result.lanes.items()
                        for qid, (u, n) in getattr(r, "unmapped_by_query", {}).items() if u and n), reverse=True)
        if worst:
            out.append("queries with the largest share of unmapped ids: " + "; ".join(
                f"{d}/{lane} {qid} {share:.0%}" for share, qid, d, lane in worst[:5]))
    return "\n".join(out)

