"""Retriever adapters (lanes): one batch-first protocol, :class:`retrievers.base.Retriever`."""
