"""Embedders behind one protocol (:class:`workbench.protocols.Embedder`): the packaged models and an
OpenAI-compatible endpoint."""
