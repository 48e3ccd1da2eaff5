"""The Sanskrit lemma lane: a word in any inflection, or its dictionary form, finds every verse holding any form.

Like the OpenSearch ``lemma`` mode does for Pali with the DPD's inflection tables, this lane
matches the gita on **stems**: each verse's gloss words were mapped to their stems when the
dataset was built (``metadata["stems"]``, :func:`workbench.text.sanskrit.stem_map`, vidyut's
declensions), and a query word is mapped the same way:

1. the query is cleaned and read in IAST (:func:`workbench.text.query.to_iast`: Cyrillic,
   Devanagari, Harvard-Kyoto and Velthuis too), split into words;
2. a word that is a gloss form gives that form's stems (``kṣetre`` → ``kṣetra``); a word
   that is itself a stem of the gita gives itself (``kṣetra``); any other word gives the
   stems vidyut finds for it (:func:`workbench.text.sanskrit.stems_of`) that the gita has.
   Keys are compared without diacritics (``ksetra`` = ``kṣetra``), so an ASCII query works.

Raw score: **BM25** over stems (:class:`retrievers._bm25.Bm25Index`: Robertson & Zaragoza 2009,
idf as Lucene),
``k1`` and ``b`` the lane's parameters, a verse's length its number of gloss stems; each
query stem counts once. >= 0, higher is better; ties by ``doc_id``. A query with no known
stem gets an empty ranking.
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
from workbench.text import sanskrit
from workbench.text.normalize import ascii_fold
from workbench.types import Document

_WORD = regex.compile(r"[\p{L}\p{M}]+")


def _key(word: str) -> str:
    return ascii_fold(word.lower().replace("ṁ", "ṃ"))


class SanskritLemmaLane(Bm25Lane):
    """BM25 over the gita's gloss stems (see the module docstring).

    Args:
        name: lane name.
        documents: the dataset's documents; those with ``metadata["stems"]`` are searched.
        k1, b: BM25 parameters (term-frequency saturation, length normalisation).

    Raises:
        ConfigError: no document has stems (a dataset other than the gita), or ``k1``/``b`` out of range.
    """

    score_kind = "BM25 over Sanskrit stems (gloss words through vidyut's declensions), >= 0, higher is better"

    def __init__(self, name: str, documents: Sequence[Document], k1: float = 1.2, b: float = 0.75):
        if not 0 <= b <= 1 or k1 < 0:
            raise ConfigError(f"lane {name}: need k1 >= 0 and 0 <= b <= 1, got k1 = {k1!r}, b = {b!r}")
        self.name, self.k1, self.b = name, float(k1), float(b)
        self._form: dict[str, set[str]] = defaultdict(set)
        self._tf: dict[str, Counter] = {}
        for d in documents:
            stems = d.metadata.get("stems") if isinstance(d.metadata, dict) else None
            if not stems:
                continue
            tf: Counter = Counter()
            for form, ss in stems.items():
                keys = {_key(s) for s in ss}
                self._form[_key(form)] |= keys
                tf.update(keys)
            self._tf[d.doc_id] = tf
        if not self._tf:
            raise ConfigError(f"lane {name}: no document of this dataset has Sanskrit stems (metadata 'stems', built "
                              "from the gita's word-by-word glosses); use kind 'sanskrit-lemma' on the gita")
        self._bm25 = Bm25Index(self._tf, self.k1, self.b)
        self.last_latencies_ms: dict[str, float] = {}

    def config(self) -> dict[str, Any]:
        """Engine parameters: BM25's k1 and b (the stems come with the dataset)."""
        return {"kind": "sanskrit-lemma", "k1": self.k1, "b": self.b}

    def stems(self, text: str) -> list[str]:
        """The stem keys (diacritics folded) a query asks for, in query order, each once (module docstring, 1–2)."""
        out: list[str] = []
        for typed in _WORD.findall(query_text.to_iast(query_text.clean(text)).lower()):
            found = None
            for word in (typed, *query_text.pali_variants(typed)):  # ahaṃkāra / ahamkara → ahaṅkāra
                key = _key(word)
                found = self._form.get(key)
                if not found and key in self._bm25:
                    found = {key}
                if not found and len(word) >= 3:
                    found = {k for k in map(_key, sanskrit.stems_of(word)) if k in self._bm25}
                if found:
                    break
            for s in sorted(found or ()):
                if s not in out:
                    out.append(s)
        return out

    def query_terms(self, text: str) -> list[tuple[str, float]]:
        """The query's stems, each weighing 1 (:meth:`stems`), for :meth:`retrievers._bm25.Bm25Lane.search`."""
        return [(s, 1.0) for s in self.stems(text)]

class SanskritLemmaParams(Params):
    """Parameters of a ``kind = "sanskrit-lemma"`` lane (see :class:`SanskritLemmaLane`)."""

    k1: float = Field(1.2, ge=0, description="BM25 term-frequency saturation")
    b: float = Field(0.75, ge=0, le=1, description="BM25 length normalisation")


class SanskritLemmaKind(RetrieverKind):
    """``sanskrit-lemma``: the gita's verses by the stems of their gloss words (BM25); no index, no service."""

    kind = "sanskrit-lemma"
    summary = "Sanskrit stems of the gita's glosses (vidyut declensions), BM25; higher is better"
    Params = SanskritLemmaParams
    code = (sys.modules[__name__], sanskrit, query_text, sys.modules["retrievers._bm25"])

    def open(self, name: str, params: SanskritLemmaParams, ds, res) -> SanskritLemmaLane:
        """The lane over ``ds``'s documents (in memory)."""
        return SanskritLemmaLane(name, ds.documents, **params.model_dump())
