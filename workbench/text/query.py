"""The query-side normaliser: one rule set, declared here, that every lane and the reference grammar read.

**Hygiene** (:func:`clean`, applied by the lane runner to every query of every lane, and by
``workbench search``; query files are read as ``utf-8-sig``, so a byte-order mark is not
part of the first query):

1. Unicode NFC;
2. default-ignorable code points removed (Unicode ``Default_Ignorable_Code_Point``,
   DerivedCoreProperties.txt: soft hyphen U+00AD, zero-width space U+200B, joiners
   U+200C/U+200D, direction marks U+200E/U+200F, U+2060–U+206F, the byte-order mark
   U+FEFF, variation selectors): text pasted from web pages, PDFs and editors carries
   them inside words, where they split a word in two for every lexical engine;
3. control characters (Unicode category ``Cc``: NUL, escape) removed; tab and line
   breaks become spaces;
4. decimal digits of any script become ASCII digits (``२.४७`` → ``2.47``: Devanagari
   verse numbers are read like Latin ones);
5. leading and trailing white space removed;
6. letters that stand for an apostrophe (U+02BC modifier letter apostrophe, U+02BB modifier letter turned
   comma, U+FF07 fullwidth apostrophe; some keyboards type them for the apostrophe and the avagraha) become
   ``’`` (U+2019): to Postgres' parser and pg_trgm they are letters, so ``me ʼchyuta`` found nothing where
   ``me ’chyuta`` finds the verse;
7. Devanagari independent vowels typed as a vowel sign on another independent vowel, the sequences The Unicode
   Standard lists as "do not use" (chapter 12, table 12-1: ``अ`` + ``ा`` for ``आ``, ``ए`` + ``े`` for ``ऐ``,
   …; :data:`workbench.text.normalize.DEVANAGARI_DO_NOT_USE`), become the one letter they look like.

**Forms for lexical lanes** (:func:`query_forms`, used by lanes with ``transliterate =
true``): the cleaned text, then the text with every word in the corpus's IAST
(:mod:`workbench.text.translit`: Cyrillic, Devanagari, Harvard-Kyoto, Velthuis), then the
Pali orthographic variants of that (:data:`PALI_VARIANTS`). A lane searches each form and
keeps each document's best score, so a form never lowers a document's score.

**Pali orthographic equivalences** (:data:`PALI_VARIANTS`; SuttaCentral's bilara text writes
the niggahīta ``ṁ``, CST4 and the DPD's sources ``ṃ``, and both write ``ṅ`` before a velar
where ASCII and older editions have ``ṁ``/``m``: ``saṅkhārā``, ``saṁkhārā``, ``samkhara``):
``ṁ`` ↔ ``ṃ``; ``ṁ``/``ṃ``/``m`` before ``k kh g gh`` → ``ṅ``, and ``ṅ``/``n`` there → ``ṁ``.
Both directions are query forms, so a document written either way is found (the folded
index maps ``ṅ`` to ``n`` and ``ṁ`` to ``m`` itself). The palatal nasal ``ñ``: IAST and the
DPD write ``ñ``, plain ASCII ``n`` (the folded index maps ``ñ`` to ``n``: ``sanna``, ``nana``
find ``saññā``, ``ñāṇa``), and the older English and the Russian renderings ``ny`` / ``нь``
(Nyanatiloka, Nyanaponika; Ньянапоника for Ñāṇapoṇika): ``ny`` before a vowel → ``ñ`` is a query form
(``nyana``, ``ньяна`` find ``ñāṇa``; ``pannya`` finds ``paññā``). Long vowels typed doubled
(``dhammaa``) are Velthuis (:mod:`workbench.text.translit`); doubled consonants are the
texts' own (``dhamma``, ``saññā`` → ``sanna``) and folded like any other letter.
"""

from __future__ import annotations

import functools
import re
import unicodedata

import regex

from workbench.text import translit
from workbench.text.normalize import unify
from workbench.text.scripts import script_of

_IGNORABLE = regex.compile(r"\p{Default_Ignorable_Code_Point}+")
_CYRILLIC = regex.compile(r"\p{Cyrillic}")
#: A Velthuis mark inside a word (``sa.msaara``, ``~na``, ``"sa``).
_VELTHUIS_MARK = regex.compile(r"[A-Za-z][.\"~][A-Za-z]|(?:^|\s)[.\"~][a-z]")
#: Lone surrogates: what Python makes of bytes that are not UTF-8 in an argument or on stdin
#: (``surrogateescape``); no server or encoder accepts them, so they are dropped.
_SURROGATE = regex.compile(r"\p{Cs}+")
_CONTROL = regex.compile(r"[\t\n\r\v\f\x1c-\x1f\x85]|(\p{Cc})")
#: A word: letters with their combining marks (Devanagari vowel signs are marks), Velthuis's ``. " ~`` inside.
_WORD = regex.compile(r"[\p{L}\p{M}]+(?:[.\"~][\p{L}\p{M}]+)*|[.\"~][\p{L}\p{M}]+")

#: Pali orthographic equivalences as (pattern, replacement) over a lower-case IAST word (module docstring).
PALI_VARIANTS = (
    (r"[ṁṃm](?=[kg])", "ṅ"),
    (r"[ṅn](?=[kg])", "ṁ"),
    (r"ṁ", "ṃ"),
    (r"ṃ", "ṁ"),
    (r"ny(?=[aeiouāīū])", "ñ"),
)
_PALI = tuple((re.compile(p), r) for p, r in PALI_VARIANTS)



def _control(m: regex.Match) -> str:
    return "" if m.group(1) else " "


def clean(text: str) -> str:
    """The query as the lanes see it (see the module docstring, hygiene 1–7).

    ``"\\ufeffBG 2.47"`` → ``"BG 2.47"``; ``"sam\\u00adkhara"`` → ``"samkhara"``;
    ``"BG २.४७"`` → ``"BG 2.47"``; ``"a\\x00b"`` → ``"ab"``; ``"kar\\udcffma"`` (a byte that was not UTF-8) →
    ``"karma"``; ``"me ʼchyuta"`` → ``"me ’chyuta"``; ``"अात्मा"`` → ``"आत्मा"``. The result is NFC. Never raises on a string.
    """
    t = _SURROGATE.sub("", text)
    t = unicodedata.normalize("NFC", t)
    t = _IGNORABLE.sub("", t)
    t = _CONTROL.sub(_control, t)
    if not t.isascii():
        t = "".join(str(unicodedata.decimal(c)) if c.isdecimal() and not c.isascii() else c for c in t)
        t = unify(t)  # apostrophes, Devanagari "do not use" sequences; NFC again (a removed character may have
        # parted a letter from its mark)
    return t.strip()


#: Queries with fewer letters and digits than this are too short for trigrams: pg_trgm's only trigrams of
#: ``a`` or ``BG`` are its padded edges, so every document holding it as a word ties at 1.0 (the trigram lane,
#: :mod:`retrievers.trigram`, and its export, :func:`workbench.export.postgres.trigram_part`, answer nothing).
MIN_TRIGRAM_CHARS = 3
#: The characters :func:`trigram_chars` does not count, as a PostgreSQL bracket expression: ASCII space and
#: punctuation (the exported statement applies the same rule).
ASCII_NON_ALNUM_SQL = "[ -/:-@\\[-`{-~]"


def trigram_chars(text: str) -> int:
    """The characters of a cleaned query that pg_trgm can make trigrams of: ASCII letters and digits, and every
    character outside ASCII (a Devanagari vowel sign counts as a letter does). ``"BG 2.47"`` → 5, ``"भोग"`` → 3,
    ``"अथ"`` → 2, ``"a"`` → 1. A rule PostgreSQL computes identically whatever its locale
    (:data:`ASCII_NON_ALNUM_SQL`), so the exported statement answers the same queries."""
    return sum(1 for c in text if not c.isascii() or c.isalnum())


def cut(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` characters at a word boundary (the last space within the limit, trailing
    spaces dropped); a first word longer than ``limit`` is cut inside it. A half word would match other words
    (``karmayo`` for ``karmayoga``), so the lanes that cap a query's length cut it here. ``limit`` >= 1."""
    if len(text) <= limit:
        return text
    head = text[: limit + 1]
    return head.rsplit(" ", 1)[0].rstrip() if " " in head.strip() else text[:limit]


def clean_queries(queries: list) -> list:
    """``queries`` (:class:`~workbench.types.Query`) with every text :func:`clean` (unchanged ones kept as they are)."""
    import dataclasses

    out = []
    for q in queries:
        text = clean(q.text or "")
        out.append(q if text == q.text else dataclasses.replace(q, text=text))
    return out


@functools.lru_cache(maxsize=1)
def fingerprint() -> str:
    """sha256 (16 hex) of this module's and :mod:`workbench.text.translit`'s source: what the lanes see of a
    query depends on them, so the candidate cache keys on it."""
    import hashlib
    import inspect
    import sys

    h = hashlib.sha256()
    for mod in (sys.modules[__name__], translit):
        h.update(inspect.getsource(mod).encode())
    return h.hexdigest()[:16]


def _word_iast(word: str) -> str:
    """One word in the corpus's IAST, or the word itself when it is IAST or plain ASCII already."""
    script = script_of(word)
    if script == "Cyrillic":
        return translit.cyrillic_to_iast(word)
    if script == "Devanagari":
        return translit.devanagari_to_iast(word)
    if script == "ASCII":
        scheme = translit.ascii_scheme(word)
        if scheme is not None:
            return translit.ascii_scheme_to_iast(word, scheme)
    return word


def to_iast(text: str) -> str:
    """``text`` with every Cyrillic, Devanagari, Harvard-Kyoto or Velthuis word in IAST; the rest unchanged.

    ``анусая`` → ``anusaya``; ``कर्म`` → ``karma``; ``kRSNa`` → ``kṛṣṇa``; ``BG 2.47`` unchanged.
    """
    return _WORD.sub(lambda m: _word_iast(m.group(0)), text)


def pali_variants(text: str) -> list[str]:
    """The orthographic variants of ``text`` (:data:`PALI_VARIANTS`), each rule applied to the whole text
    on its own, the unchanged text left out: ``saṅkhārā`` → ``[saṁkhārā]``; ``samkhara`` → ``[saṅkhara]``."""
    low = text.lower()
    out: list[str] = []
    for pattern, repl in _PALI:
        v = pattern.sub(repl, low)
        if v != low and v not in out:
            out.append(v)
    return out


def _one_devanagari_word(text: str) -> bool:
    """Whether ``text`` is one word, in Devanagari (what a reader types for a Sanskrit or Pali term)."""
    words = _WORD.findall(text)
    return len(words) == 1 and words[0] == text and script_of(text) == "Devanagari"


def query_forms(text: str) -> list[str]:
    """The forms a lexical lane with ``transliterate = true`` searches: the cleaned text first (not when it is
    Velthuis: its dots split words into fragments; not when it is one Devanagari word, see below), then its
    IAST form, then the Pali variants of both (duplicates and empty forms left out).

    One Devanagari word is searched in IAST only: it is a term typed in Devanagari, and its own form is often
    also a Hindi word the gita's Hindi translations use (अग्नि, भोग, प्राप्त), which matched 11–100 verses in
    the full-text lanes against 0–5 for its IAST form and pushed the verses holding the Sanskrit word down
    (gita term R@10 in Devanagari, dev 0.994 → 1.000, test 0.943 → 0.985). A sentence in Devanagari (a Hindi
    question) keeps its own form; a one-word Hindi question is left to the vector lane.

    ``"анусая"`` → ``["анусая", "anusaya"]``; ``"вайшья"`` → ``["вайшья", "vayṣya", "vaiṣya"]`` (the common
    spelling also read as the scheme's, :data:`~workbench.text.translit.CYRILLIC_ALTERNATES`);
    ``"saṁkhārā"`` → ``["saṁkhārā", "saṅkhārā", "saṃkhārā"]``;
    ``""`` → ``[]``.
    """
    first = clean(text)
    if not first:
        return []
    forms = [first]
    iast = to_iast(first)
    if iast != first:
        forms.append(iast)
    if iast != first and _VELTHUIS_MARK.search(first):
        forms = [iast]  # sa.mkhaaraa: its own form splits at the dots into fragments (``sa``) that match anything
    if iast.strip() and _one_devanagari_word(first):
        forms = [iast]  # a term: its Devanagari form is often also a Hindi word (अग्नि, भोग) that translations use
    alt = translit.cyrillic_alternate(first) if _CYRILLIC.search(first) else first
    if alt != first.lower() and (alt_iast := to_iast(alt)) not in forms:
        forms.append(alt_iast)  # вайшья → vaiśya (the scheme's ваишья), сансара → samsara
    forms = [f for f in forms if f.strip()]  # a lone virama (्) reads as nothing in IAST
    for base in list(forms):
        forms.extend(v for v in pali_variants(base) if v not in forms)
    # Cyrillic ри before a consonant may stand for the vowel ṛ (кришна → kṛsna)
    if iast != first:
        r_vowel = re.sub(r"ri(?=[bcdghjklmnprstvyṣśṇṭḍ])", "ṛ", iast)
        if r_vowel != iast and r_vowel not in forms:
            forms.append(r_vowel)
    return forms
