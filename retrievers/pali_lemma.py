"""The Pali lemma lane (in memory): any form of a word, in any script, finds every passage holding any form of
its DPD lemma, and, with ``compounds``, the passages where it is a member of a compound or a sutta title.

Each document's Pali words (``root`` texts) are looked up in the ms-dpd form index
(:meth:`~workbench.data.loaders.dpd.Lexicon.lemmas`); with ``compounds = true`` every compound
lemma also counts its members, recursively, from the DPD's construction data
(:meth:`~workbench.data.loaders.dpd.Lexicon.members`: ``kakacūpamasutta`` holds ``kakacūpama``,
``kakaca``, ``upama``, ``sutta``), so ``kakaca`` (only in MN 21's title and simile) finds MN 21.

A query is cleaned and read in IAST (:func:`workbench.text.query.to_iast`: Cyrillic, Devanagari,
Harvard-Kyoto, Velthuis), and each word gives its lemmas: by the form index; else, for a word
typed without diacritics, by the folded form index (``satipatthana`` → ``satipaṭṭhāna``);
each lemma a word gives weighs ``1/n`` of its ``n``. Raw score: weighted BM25 over lemmas
(:class:`retrievers._bm25.Bm25Index`), >= 0, higher is better; ties by ``doc_id``.
"""

from __future__ import annotations

import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any

import regex
from pydantic import Field

from retrievers._bm25 import Bm25Index, Bm25Lane
from workbench.errors import ConfigError
from workbench.registry import Params, RetrieverKind
from workbench.text import query as query_text
from workbench.text.normalize import ascii_fold, match_form, tokens
from workbench.types import Document

_WORD = regex.compile(r"[\p{L}\p{M}]+")


class PaliLemmaLane(Bm25Lane):
    """BM25 over the DPD lemmas (and compound members) of each document (see the module docstring).

    Args:
        name: lane name.
        documents: the dataset's documents (``root`` Pali texts).
        lexicon: the ms-dpd :class:`~workbench.data.loaders.dpd.Lexicon`.
        compounds: count the members of compound lemmas too.
        k1, b: BM25 parameters.

    Raises:
        ConfigError: no document has a Pali word the DPD knows.
    """

    score_kind = "BM25 over DPD lemmas (and compound members), weighted per query word, >= 0, higher is better"

    def __init__(self, name: str, documents: Sequence[Document], lexicon, *, compounds: bool = True,
                 k1: float = 1.2, b: float = 0.75):
        self.name, self.compounds, self.k1, self.b = name, bool(compounds), float(k1), float(b)
        self._lexicon = lexicon
        seen: dict[str, tuple[str, ...]] = {}
        own: dict[str, tuple[str, ...]] = {}
        docs: dict[str, Counter] = {}
        for d in documents:
            tf: Counter = Counter()
            for tok in tokens(d.text("root", "pi")):
                if tok not in seen:
                    lemmas = own[tok] = lexicon.lemmas(tok)
                    if self.compounds:
                        lemmas = tuple(dict.fromkeys((*lemmas, *(m for lem in lemmas for m in lexicon.members(lem)))))
                    seen[tok] = lemmas
                tf.update(seen[tok])
            if tf:
                docs[d.doc_id] = tf
        if not docs:
            raise ConfigError(f"lane {name}: no document of this dataset has a Pali text the DPD knows; use kind "
                              "'pali-lemma' on a Pali dataset (bilara-passages, bilara-segments, cst4-mn)")
        self._bm25 = Bm25Index(docs, self.k1, self.b)
        self._folded: dict[str, set[str]] = defaultdict(set)
        for tok, lemmas in own.items():
            self._folded[ascii_fold(tok)].update(lemmas)
        for lemma in self._bm25.postings:
            self._folded[ascii_fold(lemma)].add(lemma)
        self.last_latencies_ms: dict[str, float] = {}

    def config(self) -> dict[str, Any]:
        """Engine parameters (the lexicon comes from the data: its digest keys the cache)."""
        return {"kind": "pali-lemma", "compounds": self.compounds, "k1": self.k1, "b": self.b}

    def query_terms(self, text: str) -> list[tuple[str, float]]:
        """``(lemma, weight)`` pairs of the query's words (module docstring); a lemma reached twice adds up."""
        weights: dict[str, float] = defaultdict(float)
        for typed in _WORD.findall(query_text.to_iast(query_text.clean(text))):
            lemmas: list[str] = []
            for word in (typed, *query_text.pali_variants(typed)):  # saṃgha / samgha → saṅgha
                w = match_form(word)
                lemmas = [lem for lem in self._lexicon.lemmas(w) if lem in self._bm25]
                if w in self._bm25 and w not in lemmas:
                    lemmas.append(w)
                if not lemmas:
                    lemmas = sorted(lem for lem in self._folded.get(ascii_fold(w), ()) if lem in self._bm25)
                if lemmas:
                    break
            for lemma in lemmas:
                weights[lemma] += 1.0 / len(lemmas)
        return sorted(weights.items())


class PaliLemmaParams(Params):
    """Parameters of a ``kind = "pali-lemma"`` lane (see :class:`PaliLemmaLane`)."""

    compounds: bool = Field(True, description="count compound members (DPD construction) in each document")
    k1: float = Field(1.2, ge=0, description="BM25 term-frequency saturation")
    b: float = Field(0.75, ge=0, le=1, description="BM25 length normalisation")


class PaliLemmaKind(RetrieverKind):
    """``pali-lemma``: documents by the DPD lemmas of their words and of their compounds' members (BM25)."""

    kind = "pali-lemma"
    summary = "DPD lemmas and compound members of Pali texts, BM25 (in memory); higher is better"
    Params = PaliLemmaParams
    code = (sys.modules[__name__], query_text, sys.modules["retrievers._bm25"])

    def cache_extra(self, params, ds, res) -> dict[str, Any]:
        """The digest of the ms-dpd files the lemmas come from."""
        from retrievers.opensearch import dpd_digest

        return {**super().cache_extra(params, ds, res), "dpd": dpd_digest()}

    def open(self, name: str, params: PaliLemmaParams, ds, res) -> PaliLemmaLane:
        """The lane over ``ds``'s documents with the home's ms-dpd lexicon (in memory)."""
        return PaliLemmaLane(name, ds.documents, res.lexicon(), compounds=params.compounds, k1=params.k1, b=params.b)
