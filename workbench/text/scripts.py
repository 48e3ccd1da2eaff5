"""Which script a query is written in: the unit of the script-invariance report.

A reader types one Pali or Sanskrit term in IAST (``saṅkhārā``), plain ASCII
(``sankhara``), Cyrillic (``санкхара``) or Devanagari (``संस्कार``); the evaluation report
breaks term R@10 down by :func:`script_of` so that a config which serves one of them
and not another shows it.

Rules (by letter, digits and punctuation ignored):

* ``Devanagari``: any letter or mark of the Devanagari block (U+0900–U+097F, U+A8E0–U+A8FF) but its
  digits, dandas and abbreviation sign (``BG २.४७`` is ASCII: its letters are ``BG``);
* ``Cyrillic``: any Cyrillic letter (U+0400–U+052F);
* ``IAST``: Latin letters, at least one outside ASCII (``ā``, ``ṅ``, ``ṃ``: IAST or ISO 15919);
* ``ASCII``: Latin letters, all ASCII (plain ASCII, Harvard-Kyoto, Velthuis);
* ``mixed``: letters of two of the script families above (Latin with Cyrillic, …);
* ``none``: no letter at all (``2.47``, an empty query).
"""

from __future__ import annotations

#: The scripts :func:`script_of` returns, in report order.
SCRIPTS = ("IAST", "ASCII", "Cyrillic", "Devanagari", "mixed", "none")


def _family(ch: str) -> str | None:
    o = ord(ch)
    if 0x0964 <= o <= 0x096F or o == 0x0970:  # danda, double danda, digits, abbreviation sign: not letters
        return None
    if 0x0900 <= o <= 0x097F or 0xA8E0 <= o <= 0xA8FF:
        return "Devanagari"
    if not (ch.isalpha() or (0x0300 <= o <= 0x036F)):
        return None
    if 0x0400 <= o <= 0x052F or 0x1C80 <= o <= 0x1C8F or o == 0x1D2B or 0x2DE0 <= o <= 0x2DFF \
            or 0xA640 <= o <= 0xA69F or 0x1E030 <= o <= 0x1E08F:  # Cyrillic and its supplement, extensions A-D
        return "Cyrillic"
    if o < 0x80:
        return "ASCII"
    if 0x0300 <= o <= 0x036F or o <= 0x024F or 0x1E00 <= o <= 0x1EFF:
        return "IAST"
    return "other"


def script_of(text: str) -> str:
    """The script of ``text``: one of :data:`SCRIPTS` (see the module docstring).

    Latin with and without diacritics is one family (``IAST`` if any letter has one);
    a letter of any other script (Greek, Thai) counts as a second family, so such a
    query is ``mixed``.
    """
    families = {f for f in map(_family, text) if f is not None}
    latin = families & {"ASCII", "IAST"}
    families -= latin
    if latin:
        families.add("IAST" if "IAST" in latin else "ASCII")
    if not families:
        return "none"
    if len(families) > 1:
        return "mixed"
    return families.pop()


#: The first word of a letter's Unicode name → its ISO 15924 code (what :class:`workbench.types.Text` records).
ISO15924 = {"LATIN": "Latn", "CYRILLIC": "Cyrl", "DEVANAGARI": "Deva", "CJK": "Hani", "HIRAGANA": "Hira",
            "KATAKANA": "Kana", "HANGUL": "Hang", "MYANMAR": "Mymr", "THAI": "Thai", "SINHALA": "Sinh",
            "ARABIC": "Arab", "HEBREW": "Hebr", "GREEK": "Grek", "TIBETAN": "Tibt", "BENGALI": "Beng",
            "TAMIL": "Taml", "TELUGU": "Telu", "KHMER": "Khmr", "LAO": "Laoo", "GUJARATI": "Gujr",
            "GURMUKHI": "Guru", "KANNADA": "Knda", "MALAYALAM": "Mlym", "ORIYA": "Orya", "ARMENIAN": "Armn",
            "GEORGIAN": "Geor", "ETHIOPIC": "Ethi"}


def iso15924(text: str, sample: int = 2000) -> str:
    """The ISO 15924 code of the script most letters of ``text`` are written in (its first ``sample`` characters):
    ``Latn``, ``Cyrl``, ``Deva``, ``Hani`` (CJK ideographs), … (:data:`ISO15924`); ``Zyyy`` (common) when it has no
    letter, ``Zzzz`` (unknown) for a script not listed. Never raises on a string."""
    import unicodedata
    from collections import Counter

    seen: Counter[str] = Counter()
    for ch in text[:sample]:
        if ch.isalpha():
            seen[ISO15924.get(unicodedata.name(ch, "").split(" ", 1)[0], "Zzzz")] += 1
    return seen.most_common(1)[0][0] if seen else "Zyyy"
