"""The systems that ship, read and served: the ``openai`` embedder (an OpenAI-compatible embeddings API), the
live lanes' shared machinery (request templates, JSON paths, id mapping, the snapshot-keyed candidate store), and
``workbench serve`` (any config as an HTTP search API and an MCP ``search`` tool)."""
