"""The dashboard's own logic: access, judging pages, launching; the Streamlit pages in ``dashboards/`` draw it.

What it reads (runs, studies, gate reports) and the pure views are the read API, :mod:`workbench.results`:

* :mod:`workbench.results.store` — reading: MLflow runs and their artifacts, the built
  datasets' queries, qrels and documents (files, never a retrieval service).
* :mod:`workbench.results.views` — pure functions from per-query tables and runs to the
  tables and figures the pages show (overview with CIs, comparison, drill-down).
* :mod:`workbench.results.studies` — Optuna studies from their storage and study folders.
* :mod:`workbench.results.gates` — the gate reports ``workbench gate`` saves.
* :mod:`workbench.dashboard.auth` — who may see it: access tokens (stored as sha256 in the
  home, checked in constant time) and the rule that a non-loopback bind needs them.
* :mod:`workbench.dashboard.judging` — what the judging pages show and do (the rater's blind
  view of a pair with the query's words marked, the drill-down's send-to-pool); rater tokens
  and the judgment store's sessions are in :mod:`~workbench.dashboard.auth` and ``ui``.
* :mod:`workbench.dashboard.serving` — the addresses a bind is reached at (what
  ``workbench dashboard`` prints).
"""
