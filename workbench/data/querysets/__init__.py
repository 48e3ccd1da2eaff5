"""Query-set builders: queries with graded qrels, deterministic for a seed, split by target."""
