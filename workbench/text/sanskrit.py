"""Sanskrit nominal stems (dictionary forms) of inflected words, for the gita's lemma lane and its stem queries.

A reader types a Sanskrit noun or adjective in its dictionary form, the stem (``kṣetra``,
``ātman``, ``karman``); the gita's word-by-word glosses hold it inflected (``kṣetre``,
``ātmānam``, ``karmaṇi``). This module relates the two with **generation, not guessing**:

* :func:`declension` is every nominal form of a stem: vidyut's Pāṇinian engine
  (``vidyut.prakriya``, Ambuda; runs offline) derives the stem in the three genders,
  eight cases and three numbers (``kṣetra`` → 28 forms: ``kṣetram``, ``kṣetre``,
  ``kṣetrāṇi``…);
* :func:`stems_of` proposes candidate stems for an inflected word by the endings in
  :data:`ENDINGS` (the textbook nominal endings: Whitney, *Sanskrit Grammar*, §§ 326–450)
  and keeps only the candidates whose declension holds the word. A word can have several
  stems (``karma``: ``karman`` nominative, ``karma`` vocative); all are kept.

Verbs and indeclinables (``eva``, ``ca``) are not stems here: a word no candidate stem
generates has no stem. Compound members in the glosses (``dharma-kṣetre``) are split at the
hyphen; a member is usually the bare stem (``dharma``), which :func:`stems_of` finds as
the stem's own vocative or as itself (:data:`ENDINGS` holds the empty ending).
"""

from __future__ import annotations

import functools
import re
import unicodedata

#: (ending of the inflected word, ending of the stem), tried longest first (IAST). The empty ending maps a
#: word to itself (compound members, vocatives).
ENDINGS = (
    # a-stems (m., n.)
    ("aḥ", "a"), ("am", "a"), ("ena", "a"), ("eṇa", "a"), ("āya", "a"), ("āt", "a"), ("asya", "a"), ("e", "a"),
    ("au", "a"), ("ābhyām", "a"), ("ayoḥ", "a"), ("āḥ", "a"), ("ān", "a"), ("aiḥ", "a"), ("ebhyaḥ", "a"),
    ("ānām", "a"), ("āṇām", "a"), ("eṣu", "a"), ("āni", "a"), ("āṇi", "a"), ("ā", "a"),
    # ā-stems (f.)
    ("ā", "ā"), ("ām", "ā"), ("ayā", "ā"), ("āyai", "ā"), ("āyāḥ", "ā"), ("āyām", "ā"), ("āḥ", "ā"), ("ābhiḥ", "ā"),
    ("āsu", "ā"), ("ānām", "ā"), ("āṇām", "ā"), ("e", "ā"),
    # i-, ī-, u-, ū-stems
    ("iḥ", "i"), ("im", "i"), ("inā", "i"), ("iṇā", "i"), ("aye", "i"), ("eḥ", "i"), ("au", "i"), ("ayaḥ", "i"),
    ("īn", "i"), ("ībhiḥ", "i"), ("ibhiḥ", "i"), ("īnām", "i"), ("īṇām", "i"), ("iṣu", "i"), ("ī", "i"), ("e", "i"),
    ("yā", "i"), ("yai", "i"), ("yāḥ", "i"), ("yām", "i"), ("vā", "u"), ("vai", "u"), ("vāḥ", "u"),
    ("ī", "ī"), ("īm", "ī"), ("yā", "ī"), ("yai", "ī"), ("yāḥ", "ī"), ("yām", "ī"), ("yaḥ", "ī"), ("īḥ", "ī"),
    ("uḥ", "u"), ("um", "u"), ("unā", "u"), ("uṇā", "u"), ("ave", "u"), ("oḥ", "u"), ("avaḥ", "u"), ("ūn", "u"),
    ("ūnām", "u"), ("ūṇām", "u"), ("uṣu", "u"), ("ū", "u"), ("o", "u"), ("ūḥ", "ū"), ("vaḥ", "ū"),
    # an-, man-, in-stems
    ("a", "an"), ("ā", "an"), ("ānam", "an"), ("ānau", "an"), ("ānaḥ", "an"), ("anā", "an"), ("aṇā", "an"), ("ane", "an"),
    ("aṇe", "an"), ("anaḥ", "an"), ("aṇaḥ", "an"), ("ani", "an"), ("aṇi", "an"), ("āni", "an"), ("āṇi", "an"),
    ("abhiḥ", "an"), ("asu", "an"), ("ā", "ā"),
    ("ī", "in"), ("inam", "in"), ("inau", "in"), ("inaḥ", "in"), ("inā", "in"), ("ine", "in"), ("ini", "in"),
    ("inām", "in"), ("ibhiḥ", "in"), ("iṣu", "in"), ("iṇam", "in"), ("iṇaḥ", "in"), ("iṇā", "in"),
    # as-, vat-/mat-, tṛ-stems
    ("āḥ", "as"), ("asā", "as"), ("ase", "as"), ("asaḥ", "as"), ("asi", "as"), ("āṁsi", "as"), ("āṃsi", "as"),
    ("ān", "at"), ("antam", "at"), ("atā", "at"), ("ate", "at"), ("ataḥ", "at"), ("anti", "at"), ("antaḥ", "at"),
    ("āvān", "āvat"), ("āmān", "āmat"),
    ("ā", "ṛ"), ("āram", "ṛ"), ("ṛṇām", "ṛ"), ("uḥ", "ṛ"), ("ārau", "ṛ"), ("āraḥ", "ṛ"),
    ("", ""),
)
_BY_LENGTH = sorted(ENDINGS, key=lambda e: -len(e[0]))


def _slp1(iast: str) -> str:
    from indic_transliteration import sanscript

    return sanscript.transliterate(iast.replace("ṁ", "ṃ"), sanscript.IAST, sanscript.SLP1)


#: SLP1's letters: one character a sound, so SLP1 → IAST is a character map (:func:`_iast`).
SLP1_LETTERS = "aAiIuUfFxXeEoOMHkKgGNcCjJYwWqQRtTdDnpPbBmyrlvSzsh"
_NOT_SLP1_LETTER = re.compile(f"[^{SLP1_LETTERS}]")


@functools.lru_cache(maxsize=1)
def _slp1_table() -> dict[int, str]:
    """Each SLP1 letter's IAST, as indic_transliteration writes it (``A`` → ``ā``, ``K`` → ``kh``, ``E`` → ``ai``)."""
    from indic_transliteration import sanscript

    return str.maketrans({c: sanscript.transliterate(c, sanscript.SLP1, sanscript.IAST) for c in SLP1_LETTERS})


def _iast(slp1: str) -> str:
    """``slp1`` in IAST (NFC). A word of SLP1 letters only goes through :func:`_slp1_table` (the gita's build
    turns 655,000 declined forms to IAST: 17 s through ``sanscript.transliterate``, 1 s by the map, the same
    text for every one of its 177,879 distinct forms); anything else (accents, avagraha) through indic_transliteration."""
    if not _NOT_SLP1_LETTER.search(slp1):
        return unicodedata.normalize("NFC", slp1.translate(_slp1_table()))
    from indic_transliteration import sanscript

    return unicodedata.normalize("NFC", sanscript.transliterate(slp1, sanscript.SLP1, sanscript.IAST))


@functools.lru_cache(maxsize=1)
def _engine():
    from vidyut.prakriya import Linga, Vacana, Vibhakti, Vyakarana

    return Vyakarana(), Linga.choices(), Vibhakti.choices(), Vacana.choices()


@functools.lru_cache(maxsize=200_000)
def declension(stem: str) -> frozenset[str]:
    """Every nominal form of the IAST stem ``stem`` in 3 genders × 8 cases × 3 numbers (vidyut), in IAST;
    ``ṁ`` in the stem is read as ``ṃ``. Empty for a stem vidyut derives nothing from (or that is not a word:
    empty, with a space or a character IAST lacks)."""
    from vidyut.prakriya import Pada, Pratipadika  # type: ignore[attr-defined]  # in vidyut, not in its prakriya.pyi

    stem = unicodedata.normalize("NFC", stem).lower()
    if len(stem) < 2 or not stem.isalpha():
        return frozenset()
    try:
        base = Pratipadika.basic(_slp1(stem))
    except (ValueError, TypeError):
        return frozenset()
    vyakarana, lingas, vibhaktis, vacanas = _engine()
    forms: set[str] = set()
    for linga in lingas:
        for vibhakti in vibhaktis:
            for vacana in vacanas:
                try:
                    for p in vyakarana.derive(Pada.Subanta(base, linga, vibhakti, vacana)):
                        forms.add(_iast(p.text))
                except (ValueError, TypeError):
                    continue
    return frozenset(forms)


#: The longest word :func:`stems_of` declines (the gita's longest gloss word has 30 letters).
MAX_WORD = 60


@functools.lru_cache(maxsize=200_000)
def stems_of(word: str) -> tuple[str, ...]:
    """The stems (IAST, sorted) whose declension holds ``word`` (an IAST word, lower case; ``ṁ`` read as ``ṃ``):
    ``kṣetre`` → ``('kṣetra', 'kṣetrā', 'kṣetri')`` (loc. sg. n./m., voc. sg. f., …); ``ca`` → ``()`` when
    no candidate of :data:`ENDINGS` generates it. Words of fewer than 3 letters, or more than
    :data:`MAX_WORD`, have none (declining a candidate costs time in its length: a pasted 10,000-letter
    "word" took 21 s)."""
    w = unicodedata.normalize("NFC", word).lower().replace("ṁ", "ṃ")
    if not 3 <= len(w) <= MAX_WORD or not w.isalpha():
        return ()
    found = set()
    for ending, stem_end in _BY_LENGTH:
        if ending and not w.endswith(ending):
            continue
        stem = w[: len(w) - len(ending)] + stem_end
        if len(stem) >= 2 and stem not in found and w in declension(stem):
            found.add(stem)
    return tuple(sorted(found))


def gloss_words(gloss_iast: str) -> list[str]:
    """The Sanskrit words of a gita gloss in IAST (``dharma-kṣetre—the land of dharma; …``), lower case, compound
    members split at hyphens, in order (repeats kept); English meanings and non-letters left out."""
    words: list[str] = []
    for part in gloss_iast.split(";"):
        word, sep, _meaning = part.partition("—")
        if not sep:
            continue
        for member in word.replace("-", " ").split():
            w = unicodedata.normalize("NFC", member).lower().strip("’'‘")
            if w.isalpha():
                words.append(w)
    return words


def stem_map(words) -> dict[str, tuple[str, ...]]:
    """Each word's stems, chosen across a vocabulary (the gita's gloss words): of the candidates of
    :func:`stems_of` (stems ending in ``ḥ`` or ``ṃ`` dropped: case endings, not stems), those that explain
    the most distinct words of the vocabulary (``kṣetra`` explains ``kṣetre``, ``kṣetram``, ``kṣetrāṇi``…;
    ``kṣetri`` only ``kṣetre``); on a tie all are kept, the word itself only when it is the sole candidate.
    Words with no stem are left out."""
    from collections import Counter

    cands = {}
    for w in sorted(set(words)):
        cands[w] = [s for s in stems_of(w) if not s.endswith(("ḥ", "ṃ", "ṁ"))]
    support = Counter(s for ss in cands.values() for s in set(ss))
    out: dict[str, tuple[str, ...]] = {}
    for w, ss in cands.items():
        if not ss:
            continue
        best = max(support[s] for s in ss)
        chosen = [s for s in ss if support[s] == best]
        if len(chosen) > 1 and w in chosen:
            chosen.remove(w)
        out[w] = tuple(sorted(chosen))
    return out
