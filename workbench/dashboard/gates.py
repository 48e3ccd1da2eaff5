"""Gate reports for the dashboard: the JSON files ``workbench gate`` saves in ``<home>/gates/``.

Each file (:func:`workbench.gate.save_report`) holds ``created``, ``command``,
``exit_code`` and ``results``: one :class:`~workbench.gate.GateResult` per gated pair or
expected-values config, with its checks (measure × stratum), judged coverage and losses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.errors import DataError


#: Keys every check of a report has (:class:`workbench.gate.Check`).
CHECK_KEYS = ("measure", "stratum", "n", "candidate", "baseline", "diff", "ci_low", "ci_high", "status")


def find(home: Path) -> list[Path]:
    """The saved gate reports, newest first (names carry the UTC time)."""
    return sorted((home / "gates").glob("gate-*.json"), reverse=True)


def load(path: Path) -> dict[str, Any]:
    """One saved report.

    Raises:
        DataError: unreadable or not a gate report (names the file).
    """
    try:
        body = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise DataError(f"cannot read the gate report {path}: {exc}") from None
    if not isinstance(body, dict) or not isinstance(body.get("results"), list) or not body["results"]:
        raise DataError(f"{path} is not a gate report (no 'results' list); `workbench gate` writes them")
    try:
        int(body.get("exit_code", 0))
        for r in body["results"]:
            for key in ("dataset", "candidate", "baseline", "margin", "checks"):
                r[key]  # noqa: B018 - presence check
            float(r["margin"])
            for c in r["checks"]:
                for key in CHECK_KEYS:
                    c[key]  # noqa: B018
    except (TypeError, KeyError, ValueError) as exc:
        raise DataError(f"{path} is not a complete gate report ({type(exc).__name__}: {exc}); `workbench gate` "
                        "writes them") from None
    return body


def checks_frame(body: dict[str, Any]) -> pd.DataFrame:
    """Every check of every result: ``status, dataset, candidate, baseline, measure, stratum, n,
    candidate_value, baseline_value, diff, ci_low, ci_high, note``."""
    rows = []
    for r in body["results"]:
        for c in r.get("checks", []):
            rows.append({"status": c["status"], "dataset": r["dataset"], "candidate": r["candidate"],
                         "baseline": r["baseline"], "measure": c["measure"], "stratum": c["stratum"], "n": c["n"],
                         "candidate_value": c["candidate"], "baseline_value": c["baseline"], "diff": c["diff"],
                         "ci_low": c["ci_low"], "ci_high": c["ci_high"], "note": c.get("note", "")})
    return pd.DataFrame(rows)


def verdict(body: dict[str, Any]) -> str:
    """``pass`` or ``regression`` (the gate's exit code 0 or 1)."""
    return "regression" if int(body.get("exit_code", 0)) else "pass"


def figure(checks: pd.DataFrame, margin: float):
    """Plotly: each check's difference (candidate − baseline or − expected) with its 95% CI where
    paired, against the fail line at −margin; colour = status."""
    import plotly.express as px

    part = checks.assign(check=[f"{c} · {m} · {s}" for c, m, s in
                                zip(checks["candidate"], checks["measure"], checks["stratum"])])
    part["plus"] = (part["ci_high"] - part["diff"]).fillna(0.0)
    part["minus"] = (part["diff"] - part["ci_low"]).fillna(0.0)
    colours = {"pass": "#2e7d32", "fail": "#c62828", "inconclusive": "#f9a825", "too-few": "#9e9e9e"}
    fig = px.scatter(part, x="diff", y="check", color="status", error_x="plus", error_x_minus="minus",
                     color_discrete_map=colours, labels={"diff": "Δ (candidate − baseline)", "check": ""})
    fig.add_vline(x=-margin, line_dash="dash", line_color="#c62828", annotation_text=f"−δ = {-margin:g}")
    fig.add_vline(x=0, line_color="#9e9e9e")
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(height=max(240, 26 * len(part) + 100), margin=dict(l=10, r=10, t=30, b=10))
    return fig
