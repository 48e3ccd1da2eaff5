"""The text of a document that lanes index and embed.

``index_text`` joins every text of a document with newlines, translations first, then
word meanings, transliterations and the original (:data:`FIELD_ORDER`; within a field,
the document's order). Models with a short input window (all-MiniLM-L6-v2 reads 256
word pieces) thus see the translations, which they understand, before the Devanagari or
Pali, which they mostly turn into unknown tokens; full-text and trigram lanes are
indifferent to the order. The canonical address is never part of it: references are
answered by the reference lane, so no text lane can match a query on a verse number
alone.
"""

from __future__ import annotations

from workbench.text.normalize import unify
from workbench.types import Document

#: Field order in ``index_text``; fields not listed come last, in the document's order.
FIELD_ORDER = ("translation", "word_meanings_iast", "word_meanings", "transliteration_iast", "transliteration",
               "root")


#: Orders of a document's texts for a model with a short window: ``index`` (:data:`FIELD_ORDER`, the document's
#: order within a field) or ``latin-first`` (the same, but within each field the Latin-script texts first: an
#: English cross-encoder's 128 word pieces then hold the gita's English translations, not its Hindi one, which
#: MiniLM's vocabulary splits into ~85 single Devanagari characters).
TEXT_ORDERS: dict[str, tuple[str, ...]] = {"index": (), "latin-first": ("Latn",)}


def index_text(doc: Document, order: str = "index") -> str:
    """All texts of ``doc`` joined by ``\\n``, ordered by :data:`FIELD_ORDER` (empty texts skipped), in the matching
    form queries take (:func:`workbench.text.normalize.unify`: NFC, one apostrophe, Devanagari vowel letters for
    the sequences Unicode says not to use); with
    ``order="latin-first"`` the texts in a :data:`TEXT_ORDERS` script come first within each field.

    Raises:
        ValueError: an ``order`` not in :data:`TEXT_ORDERS`.
    """
    if order not in TEXT_ORDERS:
        raise ValueError(f"text order must be one of {', '.join(TEXT_ORDERS)}, got {order!r}")
    rank = {f: i for i, f in enumerate(FIELD_ORDER)}
    first = TEXT_ORDERS[order]
    texts = sorted((t for t in doc.texts if t.text.strip()),
                   key=lambda t: (rank.get(t.field, len(FIELD_ORDER)), bool(first) and t.script not in first))
    return unify("\n".join(t.text for t in texts))


def snippet(doc: Document, length: int = 160) -> str:
    """The first ``length`` characters of the document's first text, on one line, with an ellipsis when cut."""
    first = next((t.text for t in doc.texts if t.text.strip()), "")
    flat = " ".join(first.split())
    return flat if len(flat) <= length else flat[: length - 1].rstrip() + "…"


def beside(doc: Document) -> str:
    """What a scholar reads beside the address: the CST book where the address names the sutta instead (``CST
    s0201m`` beside ``MN 10 ¶105``; from the ``book`` metadata of CST documents) and its PTS page (the first it
    starts, else the one it lies on; another edition's when no PTS page is known: ``PTS M 1.56``), joined by `` · ``;
    empty when there is neither (a gita verse)."""
    parts = []
    book = doc.metadata.get("book")
    if isinstance(book, str) and book and not doc.address.startswith("CST "):
        parts.append(f"CST {book}")
    refs = [*doc.page_refs, *doc.pages]
    page = next((r for r in refs if r.startswith("PTS ")), None) or next(iter(refs), None)
    if page:
        parts.append(page)
    return " · ".join(parts)


def display_address(doc: Document) -> str:
    """The address with :func:`beside` in brackets: ``MN 10 ¶105 (CST s0201m · PTS M 1.56)``; ``BG 2.47``."""
    extra = beside(doc)
    return f"{doc.address} ({extra})" if extra else doc.address
