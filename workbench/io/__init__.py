"""Files: queries, qrels, documents and TREC runs; TOML reading with clear errors."""
