"""Readers' traffic as the dashboard's Online page shows it: the log sets of a home, what each import read, the
interleaving comparisons, and the traffic query sets' scores beside the built ones. Pure views over files the
``logs`` commands wrote (:mod:`workbench.traffic`); nothing here writes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

#: The prefix of a query drawn from traffic (:attr:`workbench.traffic.sample.TrafficQuery.query_id`).
TRAFFIC_PREFIX = "t-"


def log_sets(home: Path) -> list[str]:
    """The names of the log sets in ``home`` (``<home>/logs/<name>`` with its tables), sorted."""
    root = Path(home) / "logs"
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir()
                  if p.is_dir() and not p.name.startswith(".") and (p / "queries.parquet").is_file())


def import_report(home: Path, name: str) -> dict[str, Any]:
    """What ``logs import`` read into log set ``name`` (its ``import.json``; ``{}`` when missing or unreadable)."""
    try:
        body = json.loads((Path(home) / "logs" / name / "import.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return body if isinstance(body, dict) else {}


def skipped_frame(report: dict[str, Any]) -> pd.DataFrame:
    """The skipped lines of an import report: ``reason, count, examples``."""
    rows = [{"reason": r, "count": v.get("count", 0), "examples": ", ".join(v.get("examples", []))}
            for r, v in (report.get("skipped") or {}).items()]
    return pd.DataFrame(rows, columns=["reason", "count", "examples"])


def interleaving(home: Path, name: str, alpha: float = 0.05) -> pd.DataFrame:
    """One row per interleaved pair of the log set (:func:`workbench.traffic.interleave.compare_log`)."""
    from workbench.traffic.importer import load_log_set
    from workbench.traffic.interleave import compare_log

    queries, events = load_log_set(home, name)
    rows = [r.as_dict() for r in compare_log(queries, events, alpha)]
    return pd.DataFrame(rows)


def cumulative_wins(home: Path, name: str) -> pd.DataFrame:
    """Per interleaved pair, the running count of wins as searches come in: ``pair, search, wins_a, wins_b``
    (the searches with a preference, in time order), for a plot of how the comparison settled."""
    from workbench.traffic.importer import load_log_set
    from workbench.traffic.interleave import interleaved_searches

    out = []
    counts: dict[str, list[int]] = {}
    for (a, b, method), w, _n, _session in interleaved_searches(*load_log_set(home, name)):
        if w == "tie":
            continue
        pair = f"{a} vs {b} ({method})"
        c = counts.setdefault(pair, [0, 0])
        c[0 if w == "A" else 1] += 1
        out.append({"pair": pair, "search": c[0] + c[1], "wins_a": c[0], "wins_b": c[1]})
    return pd.DataFrame(out, columns=["pair", "search", "wins_a", "wins_b"])


def traffic_vs_built(tables: dict[str, pd.DataFrame], measures: list[str]) -> pd.DataFrame:
    """Per config, each measure's mean over the queries drawn from traffic (ids ``t-…``) and over the built ones,
    with the number of each: ``config, set, n, <measures>``; empty when no table holds a traffic query."""
    rows = []
    for label, t in tables.items():
        if "query_id" not in t:
            continue
        traffic = t["query_id"].astype(str).str.startswith(TRAFFIC_PREFIX)
        if not traffic.any():
            continue
        for which, part in (("traffic", t[traffic]), ("built", t[~traffic])):
            row = {"config": label, "set": which, "n": len(part)}
            row.update({m: float(part[m].mean()) if m in part and len(part) else float("nan") for m in measures})
            rows.append(row)
    return pd.DataFrame(rows, columns=["config", "set", "n", *measures])
