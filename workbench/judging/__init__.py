"""Human relevance judgments: the store in PostgreSQL, pooling, agreement, adjudication and qrels layers.

* :mod:`workbench.judging.store` — raters, pools, assignments handed out with row locks,
  append-only judgments and adjudications (schema ``wb_judge``, versioned migrations);
* :mod:`workbench.judging.pooling` — TREC depth-k pools from the candidate cache;
* :mod:`workbench.judging.agreement` — Cohen's kappa, Krippendorff's alpha, confusion tables;
* :mod:`workbench.judging.layers` — the ``built``, ``human`` and ``merged`` qrels layers;
* :mod:`workbench.judging.trecio` — export to and import from TREC qrels and CSV.
"""
