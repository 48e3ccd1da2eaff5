"""The engines' clients and indexers: PostgreSQL (pgvector, full text, trigram) and OpenSearch."""
