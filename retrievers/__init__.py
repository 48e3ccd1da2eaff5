"""Retriever adapters (lanes): one batch-first protocol, :class:`workbench.protocols.Retriever`."""
