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
