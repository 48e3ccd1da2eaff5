"""The workbench: evaluation and relevance tuning for hybrid retrieval over scripture corpora."""

__version__ = "0.1.0"
