"""Text normalisation for matching: Unicode, niggahīta, diacritics, romanisation schemes.

Display text is never changed; these functions produce *matching* forms.

* Unicode NFC first, so NFD input (``a`` + U+0304) equals NFC input (``ā``).
* Niggahīta: bilara writes ``ṁ`` (U+1E41), CST4 writes ``ṃ`` (U+1E43); ms-dpd keys
  use ``ṁ``. :func:`match_form` maps ``ṃ`` to ``ṁ``.
* :func:`ascii_fold` drops every combining mark (``satipaṭṭhāna`` → ``satipatthana``).
* :func:`gita_to_iast` turns the gita data's Hindi-oriented romanisation into strict
  IAST (``ṣh``→``ṣ``, ``śh``→``ś``, ``chh``→``ch``, ``ch``→``c``, ``ṛi``→``ṛ``).
* :func:`to_cyrillic` gives the Russian reader's transliteration (``сатипаттхана``, ``анусая``;
  :mod:`workbench.text.translit`).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Sequence

_TOKEN_RE = re.compile(r"[^\W\d_]+", re.UNICODE)


def nfc(text: str) -> str:
    """Return ``text`` in Unicode NFC."""
    return unicodedata.normalize("NFC", text)


#: Characters that stand for an apostrophe (the modifier letter apostrophe some keyboards give for ’ and for the
#: avagraha, the turned comma, the fullwidth apostrophe) → ``’``: Postgres' parser and pg_trgm read U+02BC as a
#: letter, so ``me ʼchyuta`` and ``me ’chyuta`` would be different words.
APOSTROPHES = {"\u02bc": "\u2019", "\u02bb": "\u2019", "\uff07": "\u2019"}
#: Devanagari sequences The Unicode Standard says not to use for an independent vowel (chapter 12, Table 12-1,
#: "Devanagari Vowel Letters"; also HarfBuzz's vowel constraints) → that vowel: अ + ा looks like आ but is
#: another string. (इ + ं is not among them: इंद्र is Hindi as written; र + ् + इ is what looks like ई.)
DEVANAGARI_DO_NOT_USE = {
    "\u0905\u0946": "\u0904", "\u0905\u093e": "\u0906", "\u0930\u094d\u0907": "\u0908",
    "\u0909\u0941": "\u090a", "\u090f\u0945": "\u090d", "\u090f\u0946": "\u090e", "\u090f\u0947": "\u0910",
    "\u0905\u0949": "\u0911", "\u0905\u094a": "\u0912", "\u0905\u094b": "\u0913", "\u0905\u094c": "\u0914",
    "\u0905\u0945": "\u0972", "\u0905\u093a": "\u0973", "\u0905\u093b": "\u0974", "\u0905\u094f": "\u0975",
    "\u0905\u0956": "\u0976", "\u0905\u0957": "\u0977",
}
_APOSTROPHE = str.maketrans(APOSTROPHES)
_DO_NOT_USE = re.compile("|".join(DEVANAGARI_DO_NOT_USE))


def unify(text: str) -> str:
    """``text`` in NFC with the spellings that look alike made one, for matching and indexing (queries:
    :func:`workbench.text.query.clean`; documents: :func:`workbench.text.doctext.index_text`, so both sides
    agree): :data:`APOSTROPHES` → ``’``, :data:`DEVANAGARI_DO_NOT_USE` → the independent vowel.
    ``"me ʼchyuta"`` → ``"me ’chyuta"``; ``"अात्मा"`` → ``"आत्मा"``. Never raises on a string."""
    t = unicodedata.normalize("NFC", text)
    if t.isascii():
        return t
    t = _DO_NOT_USE.sub(lambda m: DEVANAGARI_DO_NOT_USE[m.group(0)], t.translate(_APOSTROPHE))
    return unicodedata.normalize("NFC", t)


def match_form(text: str) -> str:
    """Matching form: NFC, lower case, niggahīta ``ṃ``→``ṁ``, curly apostrophes to ``’``."""
    t = nfc(text).lower()
    return t.replace("ṃ", "ṁ").replace("'", "’")


def tokens(text: str) -> list[str]:
    """Word tokens of ``text`` in matching form: runs of letters (with their combining marks).

    Digits, punctuation and apostrophes split words, so Pali ``bhikkhave’ti`` gives
    ``bhikkhave``, ``ti`` (the quotative *iti*).
    """
    return _TOKEN_RE.findall(match_form(text))


def ascii_fold(text: str) -> str:
    """Remove every combining mark after NFD: ``satipaṭṭhāna`` → ``satipatthana``, ``Бг`` unchanged."""
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFC", "".join(c for c in decomposed if not unicodedata.combining(c)))


_GITA_RULES = (
    ("chh", "\u0000"),  # placeholder so that the later ch→c does not touch it
    ("ch", "c"),
    ("\u0000", "ch"),
    ("ṣh", "ṣ"),
    ("śh", "ś"),
    ("ṛi", "ṛ"),
    ("ṝi", "ṝ"),
)


def gita_to_iast(text: str) -> str:
    """Strict IAST from the gita data's romanisation (see the PROVENANCE of ``gita``).

    The data writes ``ṣh`` for ष, ``śh`` for श, ``ch``/``chh`` for च/छ and ``ṛi`` for ऋ;
    only these digraphs are collapsed (``kadāchana`` → ``kadācana``, ``ichchhā`` →
    ``icchā``). Hyphens, spaces and case are kept; spelling slips in the data (such as
    ``dhṛitarāśhtra`` for धृतराष्ट्र) are kept too, since this maps schemes, not words.
    """
    t = nfc(text)
    for old, new in _GITA_RULES:
        t = t.replace(old, new).replace(old.capitalize(), new.capitalize())
    return t


@functools.lru_cache(maxsize=65536)
def to_cyrillic(iast: str) -> str:
    """Russian-reader Cyrillic for an IAST (Pali or Sanskrit) word: ``anusaya`` → ``анусая``.

    The rules (Aksharamukha's ``RussianCyrillic``, marks dropped but ``й`` kept, ``йа`` → ``я``,
    ``э`` → ``е`` after a letter…) are :mod:`workbench.text.translit`'s, shared with the query
    side, which reads the same spelling back.
    """
    return to_cyrillic_many([iast])[0]


def to_cyrillic_many(words: list[str]) -> list[str]:
    """:func:`to_cyrillic` for many single-line words in one Aksharamukha call (~40x faster).

    Raises:
        ValueError: a word contains a line break.
    """
    from workbench.text.translit import iast_to_cyrillic_many

    return iast_to_cyrillic_many(words)


def prepare_texts(texts: Sequence[str]) -> list[str]:
    """Check ``texts`` and return them in Unicode NFC.

    Lone surrogates (which cannot be encoded as UTF-8) become ``?``.

    Raises:
        TypeError: ``texts`` is a single string, or an item is not a string.
    """
    if isinstance(texts, (str, bytes)):
        raise TypeError("embedders take a list of texts, not a single string: wrap it as [text]")
    out = []
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {i} is a {type(text).__name__}, not a str")
        text = unicodedata.normalize("NFC", text)
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            text = text.encode("utf-8", "replace").decode("utf-8")
        out.append(text)
    return out
