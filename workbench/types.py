"""Core records: documents, queries and relevance judgments.

Field names follow ir_measures (``query_id, doc_id, score, relevance``).
These types import no database or model library.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: Granularities a document can have.
GRANULARITIES = ("segment", "passage", "paragraph", "verse", "sutta")

#: Query types the builders produce. ``headword``: a bold headword of the CST aṭṭhakathā, answered by the
#: commentary paragraphs that hold it in bold (:func:`workbench.data.querysets.builders.cst_bold_headwords`).
#: ``negative``: a query the corpus holds no answer to by construction (a reference out of range, which the
#: grammar diagnoses: ``BG 19.1``, ``MN 200``); it has no judgments, and is scored by whether the answer is empty
#: (:mod:`workbench.eval.answers`). ``other``: a query of a team's own set (``source = "files"``) whose file gives no
#: type.
QUERY_TYPES = ("paraphrase", "term", "reference", "page_ref", "headword", "negative", "other")
#: Query types with no relevant document by construction (:data:`QUERY_TYPES`).
UNANSWERABLE_QUERY_TYPES = ("negative",)
#: Query types whose built qrels are exact and complete: the reference grammar
#: (:mod:`workbench.text.refs`) resolves the address to the documents it names. Human pools skip
#: them and agreement is also reported without them (:mod:`workbench.judging.pooling`).
EXACT_QUERY_TYPES = ("reference", "page_ref")

#: The workbench's one default seed: pools, agreement and gate bootstraps, studies, the dashboard's CIs
#: (the same seed gives the same pool order, intervals and p-values).
DEFAULT_SEED = 20261129

#: Splits, in order.
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True, slots=True)
class Text:
    """One text of a document: a field in one language and script.

    Attributes:
        field: what the text is: ``root`` (original), ``translation``, ``transliteration``,
            ``transliteration_iast``, ``word_meanings``, ``title``.
        language: ISO 639-1 code where one exists (``pi`` Pali, ``sa`` Sanskrit, ``en``,
            ``ru``, ``hi``).
        script: ISO 15924 code (``Latn``, ``Deva``, ``Cyrl``).
        text: the display text exactly as published (not normalised).
        source: translator or edition (``sujato``, ``Swami Sivananda``, ``ms``, ``cst4``).
    """

    field: str
    language: str
    script: str
    text: str
    source: str = ""

    def to_json(self) -> dict[str, str]:
        return {"field": self.field, "language": self.language, "script": self.script,
                "text": self.text, "source": self.source}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Text:
        return cls(d["field"], d["language"], d["script"], d["text"], d.get("source", ""))


@dataclass(frozen=True, slots=True)
class Document:
    """A retrievable unit with a stable canonical address.

    Attributes:
        doc_id: unique within its dataset, stable across builds (``mn10:2.1``, ``bg2.47``,
            ``mn10#3`` for a passage, ``s0201m:105`` for a CST paragraph).
        address: the canonical address a reader would cite (``MN 10:2.1``, ``BG 2.47``).
        work_id: the work it belongs to (``mn10``, ``bg``, ``s0201m``): a sutta, a book.
        granularity: one of :data:`GRANULARITIES`.
        texts: the document's texts, one per field / language / script / source.
        page_refs: canonical page references (see :mod:`workbench.text.refs`) of the pages
            that *start* inside this document.
        pages: canonical page references of every page the document's text lies on
            (a superset of ``page_refs``: it adds the page running on from before).
        edition_refs: every edition reference token as published (bilara
            ``pts-vp-pli1.56``, ``vri12.71``; CST ``P1.0056``).
        segment_ids: for a passage, the segment ids it holds, in order.
        metadata: anything else (chapter, verse number, translator list, CST ``rend``).
    """

    doc_id: str
    address: str
    work_id: str
    granularity: str
    texts: tuple[Text, ...]
    page_refs: tuple[str, ...] = ()
    pages: tuple[str, ...] = ()
    edition_refs: tuple[str, ...] = ()
    segment_ids: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)

    def text(self, field: str, language: str | None = None, source: str | None = None) -> str:
        """Return the first text with this field (and language / source when given), or ``""``."""
        for t in self.texts:
            if t.field == field and (language is None or t.language == language) and (
                source is None or t.source == source
            ):
                return t.text
        return ""

    def to_json(self) -> dict[str, Any]:
        return {
            "doc_id": self.doc_id,
            "address": self.address,
            "work_id": self.work_id,
            "granularity": self.granularity,
            "texts": [t.to_json() for t in self.texts],
            "page_refs": list(self.page_refs),
            "pages": list(self.pages),
            "edition_refs": list(self.edition_refs),
            "segment_ids": list(self.segment_ids),
            "metadata": self.metadata,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Document:
        return cls(
            doc_id=d["doc_id"],
            address=d["address"],
            work_id=d["work_id"],
            granularity=d["granularity"],
            texts=tuple(Text.from_json(t) for t in d["texts"]),
            page_refs=tuple(d.get("page_refs", ())),
            pages=tuple(d.get("pages", ())),
            edition_refs=tuple(d.get("edition_refs", ())),
            segment_ids=tuple(d.get("segment_ids", ())),
            metadata=dict(d.get("metadata", {})),
        )


@dataclass(frozen=True, slots=True)
class Query:
    """A query of a query set.

    Attributes:
        query_id: unique within the query set (``gita-para-00042``).
        text: the query as a user would type it.
        query_type: one of :data:`QUERY_TYPES`.
        language: ISO 639-1 code of the query text (``en``, ``ru``, ``pi``, ``sa``) or
            ``und`` for language-neutral references.
        split: ``train``, ``dev`` or ``test``.
        group: the target the split was drawn for (a verse, a sutta, a lemma, a page);
            every query with the same group has the same split.
        filter: the query's filter as canonical JSON (``{"collection":"dn"}``), ``""`` for none; its grammar and
            what it admits are :mod:`workbench.io.facets`' (:func:`~workbench.io.facets.parse_filter`).
    """

    query_id: str
    text: str
    query_type: str
    language: str
    split: str
    group: str = ""
    filter: str = ""


@dataclass(frozen=True, slots=True, order=True)
class Qrel:
    """One relevance judgment (TREC qrels row). ``relevance`` is graded: 0 not, 1 relevant, 2 highly."""

    query_id: str
    doc_id: str
    relevance: int
