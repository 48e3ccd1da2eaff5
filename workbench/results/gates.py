"""Gate reports for the dashboard: the JSON files ``workbench gate`` saves in ``<home>/gates/``.

Each file is a :class:`workbench.gate.report.GateReport` (read with ``GateReport.load``, written with
``GateReport.save``): ``created``, ``command``, ``exit_code`` and ``results``, one
:class:`~workbench.gate.decide.GateResult` per gated pair or expected-values config, with its checks
(measure × stratum), judged coverage and losses.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from workbench.gate.report import GateReport


def find(home: Path) -> list[Path]:
    """The saved gate reports, newest first (names carry the UTC time)."""
    return sorted((home / "gates").glob("gate-*.json"), reverse=True)


def checks_frame(report: GateReport) -> pd.DataFrame:
    """Every check of every result: ``status, dataset, candidate, baseline, measure, stratum, n,
    candidate_value, baseline_value, diff, ci_low, ci_high, p_value, p_adjusted, note`` (values in the
    measures' units; ``p_adjusted``: Holm–Bonferroni over one result's paired checks, NaN where none)."""
    rows = []
    for r in report.results:
        for c in r.checks:
            rows.append({"status": c.status, "dataset": r.dataset, "candidate": r.candidate, "baseline": r.baseline,
                         "measure": c.measure, "stratum": c.stratum, "n": c.n, "candidate_value": c.candidate,
                         "baseline_value": c.baseline, "diff": c.diff, "ci_low": c.ci_low, "ci_high": c.ci_high,
                         "p_value": c.p_value, "p_adjusted": c.p_adjusted, "note": c.note})
    return pd.DataFrame(rows)


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
