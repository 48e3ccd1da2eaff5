"""The text of a document that lanes index and embed.

``index_text`` joins every text of a document (original, translations, transliterations,
word meanings) with newlines, in the document's order. The canonical address is never
part of it: references are answered by the reference lane, so no text lane can match a
query on a verse number alone.
"""

from __future__ import annotations

from workbench.types import Document


def index_text(doc: Document) -> str:
    """All texts of ``doc`` joined by ``\\n`` (empty texts skipped)."""
    return "\n".join(t.text for t in doc.texts if t.text.strip())


def snippet(doc: Document, length: int = 160) -> str:
    """The first ``length`` characters of the document's first text, on one line, with an ellipsis when cut."""
    first = next((t.text for t in doc.texts if t.text.strip()), "")
    flat = " ".join(first.split())
    return flat if len(flat) <= length else flat[: length - 1].rstrip() + "…"
