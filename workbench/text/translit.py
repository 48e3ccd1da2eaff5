"""Transliteration between the scripts a reader types Pali and Sanskrit in, and the corpus's IAST.

The corpora write Pali and Sanskrit in IAST (bilara, CST4, the gita's ``transliteration_iast``)
and Sanskrit also in Devanagari (the gita's ``root``). A reader types a term in one of:

=============  ===================  ==================  ======================================
script         example              to IAST by           notes
=============  ===================  ==================  ======================================
IAST/ISO 15919 ``saṅkhārā``         (as is)             ``ṃ`` and ``ṁ`` are one letter
plain ASCII    ``sankhara``         (as is)             matched by folded lanes (``wb_fold``)
Harvard-Kyoto  ``saMskAra``         indic-transliteration ``HK``; a word with a capital inside
Velthuis       ``sa.msaara``        indic-transliteration ``VELTHUIS``; ``.`` ``"`` ``~`` or
                                                        a doubled vowel inside a word
Cyrillic       ``санкхара``         Aksharamukha        the Russian reader's spelling, below
                                    ``RussianCyrillic``
Devanagari     ``संस्कार``           indic-transliteration ``DEVANAGARI``
=============  ===================  ==================  ======================================

**The Russian reader's Cyrillic** (Russian Buddhist and Indological usage: ``сатипаттхана``,
``ниббана``, ``анусая``, ``ятха``, ``сатья``, ``Ачьюта``) is Aksharamukha's
``RussianCyrillic`` scheme with its length and retroflex marks dropped, then these rules
(:data:`CYRILLIC_USAGE`; the inverse, :func:`cyrillic_to_iast`, undoes them before
Aksharamukha reads the word back):

=======================  ======================  ============================================
Aksharamukha writes      the reader writes       example
=======================  ======================  ============================================
``й`` + ``а``            ``я`` (``ья`` after a   ``yathā`` → ``ятха``, ``satya`` → ``сатья``
                         consonant)
``й`` + ``у``            ``ю`` (``ью``)          ``acyuta`` → ``ачьюта``
``й`` + ``э``            ``е`` (``ье``)          ``yeva`` → ``ева``
``э`` after a letter     ``е``                   ``mettā`` → ``метта``
``й`` elsewhere          ``й`` (kept: the breve   ``anusaya`` → ``анусая``, ``yoga`` → ``йога``
                         is not a diacritic)
aspirates                digraphs ``кх``         ``dukkha`` → ``дуккха``, ``jhāna`` →
                         ``гх`` ``чх`` ``джх``    ``джхана``
                         ``тх`` ``дх`` ``пх``
                         ``бх``
=======================  ======================  ============================================

Readers also write ``вайшья``, ``майя``, ``джняна``, ``сансара`` for the scheme's ``ваишья``, ``мая``,
``джнана``, ``самсара``: a Cyrillic query is searched in both readings (:data:`CYRILLIC_ALTERNATES`).

Reading Cyrillic back gives IAST without length marks (``анусая`` → ``anusaya``): the
folded lanes and the trigram lane match it against ``anusaya``; the ``simple`` lanes,
which keep diacritics, cannot. ``ш`` reads as ``ṣ``/``ś`` (one letter in Cyrillic), ``ри``
before a consonant also as ``ṛ`` (``кришна`` → ``krisna`` and ``kṛsna``).
"""

from __future__ import annotations

import functools
import re
import unicodedata

#: The Russian reader's usage applied after Aksharamukha's ``RussianCyrillic`` (see the module docstring):
#: (pattern, replacement) in order; ``C`` in a pattern stands for a Cyrillic consonant letter.
CYRILLIC_USAGE = (
    (r"(?<=C)йа", "ья"), (r"(?<=C)йу", "ью"), (r"(?<=C)йэ", "ье"),
    (r"йа", "я"), (r"йу", "ю"), (r"йэ", "е"),
    (r"(?<=[^\W\d_])э", "е"),
)
_CONSONANTS = "бвгджзклмнпрстфхцчшщ"
_USAGE = tuple((re.compile(p.replace("C", f"[{_CONSONANTS}]")), r) for p, r in CYRILLIC_USAGE)

#: Other spellings Russian dictionaries and translations use for the same sounds, and the scheme's spelling
#: each stands for (pattern on the reader's Cyrillic, replacement; ``C`` a consonant letter). A query in
#: Cyrillic is also read with all of them applied (:func:`cyrillic_alternate`; one more form to search).
CYRILLIC_ALTERNATES = (
    (r"(?<=[аеиоуэ])й(?=C)", "и"),   # вайшья → ваишья: ай before a consonant is the diphthong ai (vaiśya)
    (r"йя", "я"), (r"йю", "ю"),      # майя → мая (māyā)
    (r"(?<=C)ня", "на"),              # джняна, яджня → джнана, яджна (jñāna, yajña)
    (r"н(?=[сшз])", "м"),            # сансара → самсара (saṃsāra): the anusvāra before a sibilant
)
_ALTERNATES = tuple((re.compile(p.replace("C", f"[{_CONSONANTS}]")), r) for p, r in CYRILLIC_ALTERNATES)


def cyrillic_alternate(text: str) -> str:
    """``text`` (lower-cased) with every :data:`CYRILLIC_ALTERNATES` rule applied: a common spelling rewritten
    into the scheme's (``вайшья`` → ``ваишья``, ``сансара`` → ``самсара``); unchanged text when none applies."""
    out = text.lower()
    for pattern, repl in _ALTERNATES:
        out = pattern.sub(repl, out)
    return out
_BREVE = "\u0306"  # й = и + breve; ё = е + diaeresis: letters, not diacritics
_KEEP_MARKS = {_BREVE, "\u0308"}

_LATIN_IAST_EXTRA = re.compile(r"[^\x00-\x7f]")
_HK_WORD = re.compile(r"^[a-z]+[A-Z][A-Za-z]*$|^[a-z]*[RMHGJTDNSz][A-Za-z]*$")
_VELTHUIS_WORD = re.compile(r"[a-z](\.[nmtdshrl]|\"[ns]|~n|aa|ii|uu)|^(\.[nmtdshrl]|\"[ns]|~n)")


def _drop_marks(text: str) -> str:
    """Remove combining marks except the breve of ``й`` and the diaeresis of ``ё``."""
    decomposed = unicodedata.normalize("NFD", text)
    return unicodedata.normalize("NFC", "".join(c for c in decomposed
                                                if c in _KEEP_MARKS or not unicodedata.combining(c)))


def _reader_usage(cyr: str) -> str:
    """Aksharamukha's ``RussianCyrillic`` output → the Russian reader's spelling (:data:`CYRILLIC_USAGE`)."""
    out = _drop_marks(cyr)
    for pattern, repl in _USAGE:
        out = pattern.sub(repl, out)
    return out


def iast_to_cyrillic_many(words: list[str]) -> list[str]:
    """The Russian reader's Cyrillic for IAST words (Pali or Sanskrit), one Aksharamukha call for all.

    ``anusaya`` → ``анусая``, ``yathā`` → ``ятха``, ``satipaṭṭhāna`` → ``сатипаттхана``;
    capitals are lowered. See the module docstring for the rules.

    Raises:
        ValueError: a word contains a line break.
    """
    transliterate = _aksharamukha()

    if any("\n" in w or "\r" in w for w in words):
        raise ValueError("iast_to_cyrillic_many takes single-line words")
    if not words:
        return []
    joined = "\n".join(unicodedata.normalize("NFC", w).lower().replace("ṁ", "ṃ") for w in words)
    out = transliterate.process("IAST", "RussianCyrillic", joined).split("\n")
    if len(out) != len(words):
        raise RuntimeError("Aksharamukha changed the number of lines; transliterate words one by one")
    return [_reader_usage(c) for c in out]


def _aksharamukha():
    """Aksharamukha's ``transliterate`` module, imported with its own SyntaxWarnings silenced (its
    ``SiddhamRanjana.py`` compares with ``is``: harmless, but the first "Warning" a newcomer's ``make main`` showed)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        from aksharamukha import transliterate
    return transliterate


#: The reader's letters back to Aksharamukha's ``RussianCyrillic`` (the inverse of :data:`CYRILLIC_USAGE`,
#: plus letters Aksharamukha's scheme lacks: ``ы`` as ``и``, ``щ`` as ``шч``, ``ц`` as ``тс``, ``ж`` as ``дж``).
_TO_AKSHARAMUKHA = (
    (re.compile(r"[ьъ](?=[яюеё])"), ""), (re.compile("я"), "йа"), (re.compile("ю"), "йу"),
    (re.compile("ё"), "йо"), (re.compile("е"), "э"), (re.compile("[ьъ]"), ""), (re.compile("ы"), "и"),
    (re.compile("щ"), "шч"), (re.compile("ц"), "тс"), (re.compile("(?<!д)ж"), "дж"),
)


@functools.lru_cache(maxsize=65536)
def cyrillic_to_iast(word: str) -> str:
    """IAST (without length marks) for a Pali or Sanskrit word in the Russian reader's Cyrillic.

    ``анусая`` → ``anusaya``, ``ятха`` → ``yatha``, ``сатипаттхана`` → ``satipatthana``,
    ``ачьюта`` → ``acyuta``. Letters outside Cyrillic are kept; case is lowered.
    """
    transliterate = _aksharamukha()

    w = unicodedata.normalize("NFC", word).lower()
    for pattern, repl in _TO_AKSHARAMUKHA:
        w = pattern.sub(repl, w)
    return unicodedata.normalize("NFC", transliterate.process("RussianCyrillic", "IAST", w))


@functools.lru_cache(maxsize=65536)
def devanagari_to_iast(text: str) -> str:
    """IAST for Devanagari text (indic-transliteration's ``DEVANAGARI`` → ``IAST``): ``संस्कार`` → ``saṃskāra``.

    Devanagari digits become ASCII digits (``२.४७`` → ``2.47``).
    """
    from indic_transliteration import sanscript

    return unicodedata.normalize("NFC", sanscript.transliterate(text, sanscript.DEVANAGARI, sanscript.IAST))


def iast_to_devanagari_many(words: list[str]) -> list[str]:
    """Devanagari for IAST words (indic-transliteration's ``IAST`` → ``DEVANAGARI``; the niggahīta ``ṁ`` is
    read as ``ṃ``, the anusvāra): ``saṅkhārā`` → ``सङ्खारा``, ``dharma`` → ``धर्म``. Capitals are lowered."""
    from indic_transliteration import sanscript

    return [sanscript.transliterate(unicodedata.normalize("NFC", w).lower().replace("ṁ", "ṃ"),
                                    sanscript.IAST, sanscript.DEVANAGARI) for w in words]


def ascii_scheme(word: str) -> str | None:
    """``HK`` or ``VELTHUIS`` when an ASCII word is written in that scheme, else None (plain ASCII).

    Harvard-Kyoto: a capital after the first letter, or a capital in HK's letter set
    (``kRSNa``, ``saMsAra``, ``zAstra``). Velthuis: ``.n`` ``.t`` ``"s`` ``~n`` or a doubled
    vowel inside the word (``k.r.s.na``, ``dhammaa``). A capitalised word (``Krishna``) and
    an abbreviation in capitals (``MN``) are plain ASCII.
    """
    if not word.isascii():
        return None
    if _VELTHUIS_WORD.search(word):
        return "VELTHUIS"
    if _HK_WORD.match(word) and not word.isupper() and not (word[:1].isupper() and word[1:].islower()):
        return "HK"
    return None


def ascii_scheme_to_iast(word: str, scheme: str) -> str:
    """IAST for a Harvard-Kyoto or Velthuis word (indic-transliteration): ``kRSNa`` → ``kṛṣṇa``."""
    from indic_transliteration import sanscript

    src = {"HK": sanscript.HK, "VELTHUIS": sanscript.VELTHUIS}[scheme]
    return unicodedata.normalize("NFC", sanscript.transliterate(word, src, sanscript.IAST))


def is_iast_extended(word: str) -> bool:
    """True when a Latin word has a letter outside ASCII (a diacritic: IAST or ISO 15919)."""
    return bool(_LATIN_IAST_EXTRA.search(word))
