"""The dictionary lane: a question in Russian or English finds Pali passages through the DPD's meanings.

A reader asks in Russian (``что такое внимательность к телу``); the passages are in Pali
(``kāye kāyānupassī viharati``). The Digital Pāḷi Dictionary gives each headword its
meanings in English and Russian (ms-dpd, ``meaning_1``), and every inflected form its
headword. This lane reads the question through those meanings:

1. the query is cleaned (:func:`workbench.text.query.clean`) and split into words; a
   Cyrillic word is read with the Russian, a Latin one with the English Snowball stemmer
   (``snowballstemmer``), stop words (``stop-words``) left out;
2. each stem looks up the Pali lemmas whose meaning has a word of that stem, among the
   lemmas the dataset holds: ``внимательность`` → ``sati``, ``appamāda``…; of more than
   ``max_lemmas``, those whose meaning names it earliest, then those in the most passages
   (the reader's word is more likely a common one), then in the fewest words, are kept
   (``sati``: "внимательность; присутствие; бдительность" before a rare compound whose
   meaning starts the same way); each of a stem's ``n`` lemmas weighs ``1/n``;
3. documents are ranked by **BM25** over their Pali lemmas (:class:`retrievers._bm25.Bm25Index`;
   a passage's lemmas are its ``root`` words' DPD headwords), each lemma with its weight.

Raw score: weighted BM25, >= 0, higher is better; ties by ``doc_id``. A query with no
known stem (only stop words, a language the lane does not read) gets an empty ranking.
"""

from __future__ import annotations

import functools
import sys
from collections import Counter, defaultdict
from collections.abc import Sequence
from typing import Any, Literal

import regex
from pydantic import Field

from retrievers._bm25 import Bm25Index, Bm25Lane
from workbench.errors import ConfigError
from workbench.registry import Params, RetrieverKind
from workbench.text import query as query_text
from workbench.text.normalize import tokens
from workbench.types import Document

_WORD = regex.compile(r"\p{L}+")
_LANGUAGES = {"ru": "russian", "en": "english"}


@functools.lru_cache(maxsize=4)
def _stemmer(language: str):
    import snowballstemmer

    return snowballstemmer.stemmer(_LANGUAGES[language])


@functools.lru_cache(maxsize=4)
def _stop(language: str) -> frozenset[str]:
    from stop_words import get_stop_words

    return frozenset(get_stop_words(_LANGUAGES[language]))


def _language_of(word: str) -> str:
    return "ru" if any("\u0400" <= c <= "\u04ff" for c in word) else "en"


def meaning_stems(text: str, language: str) -> list[str]:
    """The stems of the content words of ``text`` (a meaning or a query) in ``language`` (``ru`` or ``en``), in
    order, each once: lower case, stop words left out, Snowball-stemmed (``монахи, живущие`` → ``монах``,
    ``живущ``)."""
    stop, stem = _stop(language), _stemmer(language)
    words = [w for w in _WORD.findall(text.lower()) if w not in stop and len(w) > 1
             and _language_of(w) == language]
    return list(dict.fromkeys(stem.stemWords(words)))


class DictionaryLane(Bm25Lane):
    """Russian and English questions → DPD meanings → Pali lemmas → passages (see the module docstring).

    Args:
        name: lane name.
        documents: the dataset's documents (their ``root`` Pali texts are read).
        lexicon: the ms-dpd :class:`~workbench.data.loaders.dpd.Lexicon`.
        languages: the meaning languages read (``ru``, ``en``).
        max_lemmas: a query stem reaches at most this many lemmas (naming it earliest, in the most passages).
        k1, b: BM25 parameters.

    Raises:
        ConfigError: no document has a Pali text with a DPD form, or a bad parameter.
    """

    score_kind = "BM25 over Pali lemmas reached through DPD meanings (weighted), >= 0, higher is better"

    def __init__(self, name: str, documents: Sequence[Document], lexicon, *, languages=("ru", "en"),
                 max_lemmas: int = 30, k1: float = 1.2, b: float = 0.75):
        bad = [lang for lang in languages if lang not in _LANGUAGES]
        if bad or not languages:
            raise ConfigError(f"lane {name}: languages must be some of {', '.join(_LANGUAGES)}, got {list(languages)}")
        if max_lemmas < 1:
            raise ConfigError(f"lane {name}: max_lemmas must be >= 1, got {max_lemmas}")
        self.name, self.languages, self.max_lemmas = name, tuple(languages), int(max_lemmas)
        self.k1, self.b = float(k1), float(b)
        docs: dict[str, Counter] = {}
        for d in documents:
            root = d.text("root", "pi")
            tf: Counter = Counter()
            for tok in tokens(root):
                tf.update(lexicon.lemmas(tok))
            if tf:
                docs[d.doc_id] = tf
        if not docs:
            raise ConfigError(f"lane {name}: no document of this dataset has a Pali text the DPD knows; use kind "
                              "'dictionary' on a Pali dataset (bilara-passages, bilara-segments, cst4-mn)")
        self._bm25 = Bm25Index(docs, self.k1, self.b)
        ranked: dict[tuple[str, str], dict[str, tuple[int, int]]] = defaultdict(dict)
        for lemma in self._bm25.postings:
            for e in lexicon.lemma_entries(lemma):
                for lang in self.languages:
                    stems = meaning_stems(e.meaning_ru if lang == "ru" else e.meaning_en, lang)
                    for pos, s in enumerate(stems):
                        old = ranked[(lang, s)].get(lemma)
                        if old is None or (pos, len(stems)) < old:
                            ranked[(lang, s)][lemma] = (pos, len(stems))
        df = {lemma: len(p) for lemma, p in self._bm25.postings.items()}
        self._meaning = {key: [lemma for lemma, _ in sorted(by.items(), key=lambda kv: (kv[1][0], -df[kv[0]], kv[1][1],
                                                                                          kv[0]))][: self.max_lemmas]
                         for key, by in ranked.items()}
        self.last_latencies_ms: dict[str, float] = {}

    def config(self) -> dict[str, Any]:
        """Engine parameters (the lexicon comes from the data: its digest keys the cache)."""
        return {"kind": "dictionary", "languages": list(self.languages), "max_lemmas": self.max_lemmas,
                "k1": self.k1, "b": self.b}

    def lemmas(self, text: str) -> list[tuple[str, float]]:
        """``(lemma, weight)`` pairs a query asks for (module docstring, 1–2); a lemma reached twice adds up."""
        weights: dict[str, float] = defaultdict(float)
        clean = query_text.clean(text)
        for lang in self.languages:
            for s in meaning_stems(clean, lang):
                found = self._meaning.get((lang, s), ())
                for lemma in found:
                    weights[lemma] += 1.0 / len(found)
        return sorted(weights.items())

    def query_terms(self, text: str) -> list[tuple[str, float]]:
        """The query's weighted lemmas (:meth:`lemmas`), for :meth:`retrievers._bm25.Bm25Lane.search`."""
        return self.lemmas(text)

class DictionaryParams(Params):
    """Parameters of a ``kind = "dictionary"`` lane (see :class:`DictionaryLane`)."""

    languages: list[Literal["ru", "en"]] = Field(["ru", "en"], min_length=1, description="meaning languages read")
    max_lemmas: int = Field(30, ge=1, description="lemmas a query stem reaches at most (the most specific)")
    k1: float = Field(1.2, ge=0, description="BM25 term-frequency saturation")
    b: float = Field(0.75, ge=0, le=1, description="BM25 length normalisation")


class DictionaryKind(RetrieverKind):
    """``dictionary``: Russian/English questions to Pali passages through the DPD's meanings (BM25 over lemmas)."""

    kind = "dictionary"
    summary = "DPD meanings (ru, en) -> Pali lemmas -> passages, weighted BM25; higher is better"
    Params = DictionaryParams
    code = (sys.modules[__name__], query_text, sys.modules["retrievers._bm25"])

    def cache_extra(self, params, ds, res) -> dict[str, Any]:
        """The digest of the ms-dpd files the meanings and lemmas come from."""
        from retrievers.opensearch import dpd_digest

        return {**super().cache_extra(params, ds, res), "dpd": dpd_digest()}

    def open(self, name: str, params: DictionaryParams, ds, res) -> DictionaryLane:
        """The lane over ``ds``'s documents with the home's ms-dpd lexicon (in memory)."""
        return DictionaryLane(name, ds.documents, res.lexicon(), languages=tuple(params.languages),
                              max_lemmas=params.max_lemmas, k1=params.k1, b=params.b)
