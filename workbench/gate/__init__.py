"""The regression gate: gate files, sources, paired non-inferiority decisions, reports.

``policy`` (:class:`~workbench.gate.policy.GatePolicy`, gate files) → ``sources`` (rankings from
experiments, exported configs, TREC runs) → ``decide`` (paired and expected-value checks, Judged@k,
the gate of one candidate) → ``report`` (``GateReport``, JUnit, Markdown) → ``runner`` (what
``workbench gate`` runs).
"""
