"""Engine-native export of a fused config, with round-trip parity.

* :mod:`workbench.export.source` — which config is exported: an experiment's ``[configs.NAME]`` or a study's
  chosen trial, resolved into the experiment and its :class:`~workbench.experiment.config.FusedConfig`;
* :mod:`workbench.export.postgres` — one SQL statement (and a function wrapping it) that a production
  PostgreSQL with pgvector and pg_trgm runs: each lane a CTE, the fusion in SQL, parameters bound;
* :mod:`workbench.export.opensearch` — the hybrid query and the search pipeline OpenSearch 2.19 runs;
* :mod:`workbench.export.parity` — the exported artifact run on the real engine for every dev and test query
  and compared with the workbench's own fused ranking: top-k identical, or each difference with its cause.
"""
