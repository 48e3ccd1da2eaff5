"""The Digital Pāḷi Dictionary, condensed for the Mahāsaṅgīti corpus (ms-dpd): form → lemma.

Files (see ``ms-dpd/PROVENANCE.md``): ``index.mjs`` maps 131,887 inflected forms as they
occur in the Mahāsaṅgīti texts (``ṁ`` spelling) to headword ids; ``definition-pali.mjs``
gives each id ``pattern|pos|construction|stem|lemma_1``; ``definition-en.mjs`` and
``definition-ru.mjs`` give ``meaning_1|meaning_2|meaning_lit`` in English and Russian.

``lemma_1`` carries a homonym number (``dhamma 1.01``); the *bare lemma* strips it
(`` \\d+(\\.\\d+)*$``). Look-ups normalise the form first (NFC, lower case, ``ṃ``→``ṁ``),
so CST spellings find their entries.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from workbench.data.loaders._io import read_js_object, str_map
from workbench.text.normalize import match_form

_HOMONYM = re.compile(r"\s+\d+(\.\d+)*$")


def bare_lemma(lemma_1: str) -> str:
    """``dhamma 1.01`` → ``dhamma``; a lemma without a homonym number is returned unchanged."""
    return _HOMONYM.sub("", lemma_1.strip())


@dataclass(frozen=True, slots=True)
class Entry:
    """One DPD headword.

    Attributes:
        id: the radix-62 headword id (``EzR``).
        lemma_1: the headword with its homonym number (``satipaṭṭhāna 1``).
        lemma: the bare lemma (``satipaṭṭhāna``).
        pos: part of speech (``masc``, ``pr``, ``adj``…).
        stem, pattern, construction: grammar fields as published.
        meaning_en, meaning_ru: ``meaning_1`` (else ``meaning_2``) in English and Russian
            (the Russian falls back to English for about a quarter of entries, as published).
    """

    id: str
    lemma_1: str
    lemma: str
    pos: str
    stem: str
    pattern: str
    construction: str
    meaning_en: str
    meaning_ru: str


def _meaning(raw: str) -> str:
    parts = raw.split("|")
    return next((p.strip() for p in parts if p.strip()), "")


class Lexicon:
    """Inflected form → DPD entries, and lemma → forms.

    Build it with :func:`load_dpd`. Look-ups never raise: an unknown form gives ``()``.
    """

    def __init__(self, index: dict[str, str], defs: dict[str, str], en: dict[str, str], ru: dict[str, str]):
        self._index = {match_form(f): tuple(i for i in ids.split(",") if i) for f, ids in index.items()}
        self._entries: dict[str, Entry] = {}
        for i, raw in defs.items():
            pattern, pos, construction, stem, lemma_1 = (raw.split("|") + [""] * 5)[:5]
            self._entries[i] = Entry(
                id=i, lemma_1=lemma_1, lemma=bare_lemma(lemma_1), pos=pos, stem=stem, pattern=pattern,
                construction=construction, meaning_en=_meaning(en.get(i, "")), meaning_ru=_meaning(ru.get(i, "")),
            )
        forms: dict[str, set[str]] = {}
        for form, ids in self._index.items():
            for i in ids:
                e = self._entries.get(i)
                if e is not None:
                    forms.setdefault(e.lemma, set()).add(form)
        self._forms = {lemma: tuple(sorted(fs)) for lemma, fs in forms.items()}
        by_lemma: dict[str, list[Entry]] = {}
        for e in self._entries.values():
            by_lemma.setdefault(e.lemma, []).append(e)
        self._by_lemma = {lemma: tuple(sorted(es, key=lambda e: e.lemma_1)) for lemma, es in by_lemma.items()}

    def __len__(self) -> int:
        """Number of inflected forms."""
        return len(self._index)

    @property
    def n_entries(self) -> int:
        """Number of headwords."""
        return len(self._entries)

    def entries(self, form: str) -> tuple[Entry, ...]:
        """DPD entries of an inflected form (normalised first), in the index's order."""
        return tuple(self._entries[i] for i in self._index.get(match_form(form), ()) if i in self._entries)

    def lemmas(self, form: str) -> tuple[str, ...]:
        """Bare lemmas of an inflected form, without duplicates: ``dhammo`` → ``('dhamma',)``."""
        return tuple(dict.fromkeys(e.lemma for e in self.entries(form)))

    def forms_of(self, lemma: str) -> tuple[str, ...]:
        """Every indexed inflected form of a bare lemma, sorted; ``()`` if unknown."""
        return self._forms.get(match_form(lemma), ())

    def all_lemmas(self) -> tuple[str, ...]:
        """Every bare lemma that has at least one indexed form, sorted."""
        return tuple(sorted(self._forms))

    def members(self, lemma: str) -> tuple[str, ...]:
        """The lemmas a compound is made of, recursively, from the DPD's ``construction`` (``kakacūpamasutta`` =
        ``kakacūpama+sutta``, ``kakacūpama`` = ``kakaca+upama`` → ``('kakaca', 'kakacūpama', 'sutta', 'upama')``),
        sorted. Only constructions of whole words count: every part a lemma of the dictionary of 3 or more
        letters, no root (``√``): ``upa+√mā+a`` and ``anu+passa+ī`` are derivations, not compounds. ``()`` for
        a word that is not a compound."""
        return self._members(lemma, frozenset())

    def _members(self, lemma: str, seen: frozenset) -> tuple[str, ...]:
        out: set[str] = set()
        for e in self._by_lemma.get(lemma, ()):
            parts = [p.strip() for p in e.construction.split("+")]
            if len(parts) < 2 or any("√" in p or len(p) < 3 or p not in self._by_lemma for p in parts):
                continue
            for p in parts:
                if p != lemma and p not in seen:
                    out.add(p)
                    out.update(self._members(p, seen | {lemma}))
        return tuple(sorted(out))

    def lemma_entries(self, lemma: str) -> tuple[Entry, ...]:
        """The headwords of a bare lemma (homonyms), ordered by id."""
        return self._by_lemma.get(lemma, ())


def dpd_files(data_dir: Path) -> dict[str, Path]:
    """The four ms-dpd files the lexicon reads, by role."""
    base = data_dir / "ms-dpd"
    return {
        "index": base / "ms-dpd-2.54.0" / "dpd" / "index.mjs",
        "pali": base / "ms-dpd-2.54.0" / "dpd" / "definition-pali.mjs",
        "en": base / "ms-dpd-en-2.53.0" / "definition-en.mjs",
        "ru": base / "ms-dpd-ru-2.53.0" / "definition-ru.mjs",
    }


def load_dpd(data_dir: Path) -> Lexicon:
    """Load the ms-dpd lexicon from ``<data_dir>/ms-dpd``.

    Raises:
        DataError: a file is missing, does not start with its ``export const`` line,
            holds invalid (e.g. truncated) JSON, or its object is not string → string;
            the message names the path (and the first bad key).
    """
    f = dpd_files(data_dir)
    return Lexicon(
        index=str_map(read_js_object(f["index"], "export const INDEX="), f["index"], "inflected form → headword ids"),
        defs=str_map(read_js_object(f["pali"], "export const DEF_PALI="), f["pali"], "headword id → Pali fields"),
        en=str_map(read_js_object(f["en"], "export const DEF_LANG="), f["en"], "headword id → English meanings"),
        ru=str_map(read_js_object(f["ru"], "export const DEF_LANG="), f["ru"], "headword id → Russian meanings"),
    )
