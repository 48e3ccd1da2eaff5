"""Evaluation: measures (ir_measures), fusion, the rerank stage, fast in-memory evaluation, statistics."""
