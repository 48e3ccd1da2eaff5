"""Canonical references to scripture: parse what a reader writes, never guess.

Two kinds of reference exist:

* :class:`TextRef`: a place in a text by its own numbering: ``BG 2.20`` (chapter.verse),
  ``SB 5.5.3`` (canto.chapter.verse), ``MN 10`` (sutta), ``SN 56.11``
  (saṁyutta.sutta), ``DN 2``, ``Dhp 21`` (verse).
* :class:`PageRef`: a page of a printed edition: the Pali Text Society edition
  (``M i 56``, ``PTS M 1.56``) or, in the CST (Chaṭṭha Saṅgāyana Tipiṭaka) XML
  notation, ``P1.56`` (PTS), ``V1.71`` (VRI), ``M1.70`` (Myanmar print), ``T1.128`` (Thai).

:func:`parse` returns a :class:`Resolution`: the reference, or ``None`` and a sentence
saying why the input cannot be resolved. It never raises on a string.

Grammar (input is NFC-normalised and stripped; book names are matched case-insensitively,
with diacritics optional, ``-``/space/``.`` between name words equivalent, and a trailing
dot optional)::

    reference  := cst | edition-page | roman-page | book-ref
    cst        := ("P"|"V"|"M"|"T") digits "." digits          # no space: "M1.70", "P1.0056"
                | ("P"|"V"|"T") space+ digits "." digits      # "P 1.56" (P/V/T are no book codes)
    edition-page := ("PTS"|"VRI"|"MYA"|"THAI") [collection] (digits "." digits | roman digits)
    roman-page := collection roman digits                      # "M i 56", "SN v 421"
    book-ref   := book [space] number ((":"|".") number)*     # "BG 2.20", "BG2:20", "SB 5.5.3"

Digits are ASCII ``0-9``, at most :data:`MAX_DIGITS` per number; edition letters and
roman volumes (``i``, ``iv``, up to :data:`MAX_ROMAN`; letters i/v/x/l/c only, so
``d``/``m`` stay collection codes) are case-insensitive. Inputs longer than
:data:`MAX_REFERENCE_CHARS` or holding control, format or unassigned characters are
refused.

Ambiguity rules (deliberate decisions, kept in this one place):

1. **"M" is Myanmar only in CST shape.** An edition letter glued to ``vol.page``
   (``M1.70``, ``m1.0070``) is CST notation; ``M`` followed by whitespace is always the
   Majjhima Nikāya: ``M i 56`` is a PTS Majjhima page, ``M 10`` is MN sutta 10.
   ``M10`` (glued, but not ``vol.page``) is MN 10, since CST notation always has a dot.
2. **A dotted pair after an MN or DN name is a PTS volume.page.** MN and DN suttas carry a
   single number, so ``M 1.56``, ``MN 1.56``, ``MN1.56``, ``D 2.290`` and ``DN 2.290`` are
   PTS pages (``M 10.5`` is refused: PTS M has volumes i–iii). Only ``.`` separates
   volume and page here: ``MN 1:56`` looks like a SuttaCentral segment (``MN 10:2.1``),
   which this grammar does not support, so it is refused rather than read as a page.
3. **For SN/S a dotted pair is always a sutta** (``SN 56.11``, ``S 56.11``), never a
   page: SN pages need a roman volume (``S v 421``) or the prefix (``PTS S 5.421``).
4. **P, V and T are no collection codes**, so ``P 1.56`` (with a space) is CST notation
   too; ``P 10`` is refused (CST notation needs ``vol.page``).
5. **The ``collection`` argument is context, not override.** It fills the collection of
   a page reference that names none (``P1.56``, ``PTS 1.56``); a collection written in the
   text wins. Without context the collection stays ``None``: it is never guessed.
6. **No ranges, lists or segments.** ``BG 2.20-22`` is refused with a reason; so is any
   text after the numbers, and a dotted pair after Dhp (its verses carry one number).

Limits are checked against :data:`BOOKS` (chapters, verses, suttas) and, for PTS pages,
:data:`COLLECTIONS` (volumes). Limits no table states (SB verses, suttas inside a
saṁyutta, volumes of VRI/MYA/THAI prints and of PTS Dhp/Ps, every page number) accept
any number >= 1.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

from workbench.text.normalize import ascii_fold, nfc

__all__ = [
    "BOOKS",
    "COLLECTIONS",
    "EDITIONS",
    "MAX_DIGITS",
    "MAX_REFERENCE_CHARS",
    "MAX_ROMAN",
    "Book",
    "Collection",
    "PageRef",
    "Resolution",
    "TextRef",
    "parse",
    "parse_page_ref",
    "parse_text_ref",
    "variants",
]

# --------------------------------------------------------------------------- data


@dataclass(frozen=True, slots=True)
class Book:
    """One book a :class:`TextRef` can point into.

    Attributes:
        code: canonical code (``BG``); the key of :data:`BOOKS`.
        title: display title.
        levels: names of the number levels, outermost first (``("chapter", "verse")``);
            a reference carries 1..len(levels) numbers and its scope is the last level used.
        limits: per level, the highest number: an ``int`` (fixed), a ``tuple`` indexed by
            the previous level's number minus one (verses per chapter), or ``None``
            (unknown: any number >= 1).
        aliases: names a reader writes for the book (matched after :func:`_name_key`).
        forms: ``(written form, language)`` pairs :func:`variants` puts before the numbers,
            in order; every form must also be an alias.
        collection: the :class:`PageRef` collection code of this book's printed pages
            (``M`` for MN), or ``None``.
        pair_is_page: whether a dotted pair after the book name is a PTS volume.page
            (true for MN and DN, whose suttas carry a single number; see rule 2).
        source: where the limits come from.
    """

    code: str
    title: str
    levels: tuple[str, ...]
    limits: tuple[int | tuple[int, ...] | None, ...]
    aliases: tuple[str, ...]
    forms: tuple[tuple[str, str], ...]
    collection: str | None = None
    pair_is_page: bool = False
    source: str = ""


#: The books, keyed by canonical code. The one table of book facts.
BOOKS: dict[str, Book] = {
    b.code: b
    for b in (
        Book(
            code="BG",
            title="Bhagavad-gītā",
            levels=("chapter", "verse"),
            limits=(18, (47, 72, 43, 42, 29, 47, 30, 28, 34, 42, 55, 20, 35, 27, 20, 24, 28, 78)),
            aliases=("BG", "Bg", "gita", "gītā", "Гита", "Бг", "Bhagavad-gita", "Bhagavad Gita",
                     "Bhagavad-gītā", "Bhagavadgita", "Бхагавад-гита", "Бхагавадгита",
                     # the full title as readers paste it (श्रीमद्भगवद्गीता is read in IAST: śrīmadbhagavadgītā)
                     "Srimad Bhagavad Gita", "Śrīmad Bhagavad-gītā", "Srimad Bhagavadgita", "Śrīmadbhagavadgītā",
                     "Шримад Бхагавад-гита", "Шримад Бхагавадгита"),
            forms=(("BG", "en"), ("Bg.", "en"), ("bg", "en"), ("Bhagavad-gita", "en"),
                   ("Бг", "ru"), ("БГ", "ru")),
            source="the 701-verse edition of the gita/gita data (chapter 13 has 35 verses)",
        ),
        Book(
            code="SB",
            title="Śrīmad-Bhāgavatam",
            levels=("canto", "chapter", "verse"),
            limits=(12, (19, 10, 33, 31, 26, 19, 15, 24, 24, 90, 31, 13), None),
            aliases=("SB", "ŚB", "Śrīmad-Bhāgavatam", "Bhagavatam", "ШБ", "Бхагаватам",
                     "Шримад-Бхагаватам"),
            forms=(("SB", "en"), ("ŚB", "en"), ("Śrīmad-Bhāgavatam", "en"), ("ШБ", "ru")),
            source="12 cantos, 335 chapters (Bhaktivedanta edition); verse counts not tabled",
        ),
        Book(
            code="MN",
            title="Majjhima Nikāya",
            levels=("sutta",),
            limits=(152,),
            aliases=("MN", "M", "МН", "Majjhima Nikaya", "Majjhima"),
            forms=(("MN", "en"), ("M", "en"), ("Majjhima Nikaya", "en"), ("МН", "ru")),
            collection="M",
            pair_is_page=True,
            source="152 suttas (SuttaCentral / Mahāsaṅgīti numbering)",
        ),
        Book(
            code="DN",
            title="Dīgha Nikāya",
            levels=("sutta",),
            limits=(34,),
            aliases=("DN", "D", "ДН", "Digha Nikaya", "Digha"),
            forms=(("DN", "en"), ("D", "en"), ("Digha Nikaya", "en"), ("ДН", "ru")),
            collection="D",
            pair_is_page=True,
            source="34 suttas (SuttaCentral / Mahāsaṅgīti numbering)",
        ),
        Book(
            code="SN",
            title="Saṁyutta Nikāya",
            levels=("samyutta", "sutta"),
            limits=(56, None),
            aliases=("SN", "S", "СН", "Samyutta Nikaya", "Saṁyutta Nikāya", "Saṃyutta Nikāya",
                     "Samyutta"),
            forms=(("SN", "en"), ("S", "en"), ("Samyutta Nikaya", "en"), ("СН", "ru")),
            collection="S",
            source="56 saṁyuttas (SuttaCentral numbering); suttas per saṁyutta not tabled",
        ),
        Book(
            code="Dhp",
            title="Dhammapada",
            levels=("verse",),
            limits=(423,),
            aliases=("Dhp", "Dhammapada", "Дхп", "Дхаммапада"),
            forms=(("Dhp", "en"), ("Dhammapada", "en"), ("Дхп", "ru")),
            collection="Dhp",
            source="423 verses",
        ),
    )
}


@dataclass(frozen=True, slots=True)
class Collection:
    """A collection whose printed pages a :class:`PageRef` can point to.

    Attributes:
        code: the code in :class:`PageRef` (``M``); the key of :data:`COLLECTIONS`.
        aliases: extra names for page references; the aliases of the book whose
            ``collection`` is this code count too (``MN``, ``Majjhima`` for ``M``).
        pts_volumes: number of volumes of the PTS edition, or ``None`` when not checked.
        nikaya: the two-letter form readers also put before a roman volume (``MN i 56``),
            or ``""``.
    """

    code: str
    aliases: tuple[str, ...]
    pts_volumes: int | None
    nikaya: str = ""


#: Page collections, keyed by code. PTS volume counts: Dīgha Nikāya 3 (Rhys Davids &
#: Carpenter), Majjhima Nikāya 3 (Trenckner & Chalmers), Saṁyutta Nikāya 5 (Feer; the
#: index volume vi carries no text). Dhp and Ps (Papañcasūdanī) volumes are not checked.
COLLECTIONS: dict[str, Collection] = {
    c.code: c
    for c in (
        Collection("D", ("D",), 3, "DN"),
        Collection("M", ("M",), 3, "MN"),
        Collection("S", ("S",), 5, "SN"),
        Collection("Dhp", ("Dhp",), None),
        Collection("Ps", ("Ps", "Papañcasūdanī"), None),
    )
}

#: Editions: canonical name -> the letter CST notation uses (CST4 XML ``pb`` ``ed``
#: attribute: P = Pali Text Society, V = VRI, M = Myanmar / Chaṭṭha Saṅgāyana print,
#: T = Thai).
EDITIONS: dict[str, str] = {"PTS": "P", "VRI": "V", "MYA": "M", "THAI": "T"}

#: The reference lane's score of the unit a reference addresses (the verse of ``BG 2.47``, a sutta's opening,
#: the document a page starts in) and of the rest of the addressed work or page (:mod:`retrievers.reference`).
EXACT_SCORE = 2.0
INSIDE_SCORE = 1.0

#: The longest input (after stripping) worth parsing. No reference of the grammar is
#: longer than about 30 characters; the cap keeps pathological input cheap. Own choice.
MAX_REFERENCE_CHARS = 80

#: Most digits one number may have (zero-padded CST pages have 4). Own choice; it also
#: keeps ``int()`` away from Python's 4300-digit limit.
MAX_DIGITS = 6

_LETTER_EDITION = {letter: edition for edition, letter in EDITIONS.items()}
_ROMAN_DIGITS = ((100, "c"), (90, "xc"), (50, "l"), (40, "xl"), (10, "x"), (9, "ix"),
                 (5, "v"), (4, "iv"), (1, "i"))
#: Highest volume written in roman numerals; only the letters i, v, x, l, c are read as
#: roman, so that ``d`` and ``m`` stay collection codes. Own choice.
MAX_ROMAN = 399


def _roman(n: int) -> str:
    """Lower-case roman numeral of ``1 <= n <= MAX_ROMAN``; ValueError otherwise."""
    if not 1 <= n <= MAX_ROMAN:
        raise ValueError(f"volume {n} has no roman numeral here (1–{MAX_ROMAN})")
    out = []
    for value, letters in _ROMAN_DIGITS:
        while n >= value:
            out.append(letters)
            n -= value
    return "".join(out)


_ROMAN_VALUES = {_roman(n): n for n in range(1, MAX_ROMAN + 1)}


def _name_key(name: str) -> str:
    """Matching key of a book / collection name: NFC, no diacritics, case-folded,
    words joined by one space (``Bhagavad-gītā.`` -> ``bhagavad gita``)."""
    folded = ascii_fold(nfc(name)).casefold()
    return " ".join(w for w in re.split(r"[\s\-‐'’.]+", folded) if w)


def _build_alias_maps() -> tuple[dict[str, str], dict[str, str]]:
    books: dict[str, str] = {}
    colls: dict[str, str] = {}
    for book in BOOKS.values():
        for alias in (book.code, *book.aliases):
            key = _name_key(alias)
            if books.get(key, book.code) != book.code:
                raise RuntimeError(f"refs.BOOKS: alias {alias!r} names two books")
            books[key] = book.code
            if book.collection is not None:
                colls[key] = book.collection
        for form, _lang in book.forms:
            if books.get(_name_key(form)) != book.code:
                raise RuntimeError(f"refs.BOOKS: form {form!r} of {book.code} is no alias")
    for coll in COLLECTIONS.values():
        for alias in (coll.code, *coll.aliases):
            key = _name_key(alias)
            if colls.get(key, coll.code) != coll.code:
                raise RuntimeError(f"refs.COLLECTIONS: alias {alias!r} names two collections")
            colls[key] = coll.code
    reserved = {"pts", "vri", "mya", "thai", "p", "v", "t"}
    clash = {k for k in (*books, *colls) if k in _ROMAN_VALUES or k in reserved}
    if clash:
        raise RuntimeError(f"refs: aliases {sorted(clash)} clash with roman numerals or editions")
    return books, colls


_BOOK_KEYS, _COLLECTION_KEYS = _build_alias_maps()
_EDITION_KEYS = {e.casefold(): e for e in EDITIONS}

# --------------------------------------------------------------------------- checks


def _is_int(x: object) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _text_problem(book: str, numbers: tuple[int, ...]) -> str:
    """Why ``(book, numbers)`` is no valid text reference, or ``""`` when it is."""
    spec = BOOKS.get(book)
    if spec is None:
        return f"unknown book code {book!r} (known: {', '.join(BOOKS)})"
    n = len(spec.levels)
    if not 1 <= len(numbers) <= n:
        shapes = " or ".join(".".join(spec.levels[: i + 1]) for i in range(n))
        return (f"{book} references take {'1' if n == 1 else f'1 to {n}'} number"
                f"{'' if n == 1 else 's'} ({shapes}), not {len(numbers)}")
    for i, num in enumerate(numbers):
        level = spec.levels[i]
        if num < 1:
            return f"{book} {level} numbers start at 1, not {num}"
        limit = spec.limits[i]
        if isinstance(limit, tuple):
            top = limit[numbers[i - 1] - 1]
            outer = f"{book} {spec.levels[i - 1]} {numbers[i - 1]}"
            if num > top:
                return f"{outer} has {top} {level}s, not {num}"
        elif limit is not None and num > limit:
            return f"{book} has {limit} {level}s, not {num}"
    return ""


def _page_problem(edition: str, collection: str | None, volume: int, page: int) -> str:
    """Why these fields make no valid page reference, or ``""`` when they do."""
    if edition not in EDITIONS:
        return f"unknown edition {edition!r} (known: {', '.join(EDITIONS)})"
    if collection is not None and collection not in COLLECTIONS:
        return f"unknown collection {collection!r} (known: {', '.join(COLLECTIONS)})"
    if volume < 1:
        return f"volume numbers start at 1, not {volume}"
    if page < 1:
        return f"page numbers start at 1, not {page}"
    if edition == "PTS" and collection is not None:
        top = COLLECTIONS[collection].pts_volumes
        if top is not None and volume > top:
            return (f"PTS {collection} has volumes i–{_roman(top)} "
                    f"(1–{top}), not volume {volume}")
    return ""


# --------------------------------------------------------------------------- types


@dataclass(frozen=True, slots=True)
class TextRef:
    """A place in a book by the book's own numbering.

    Attributes:
        book: canonical code, a key of :data:`BOOKS` (``BG``, ``SB``, ``MN``, ``DN``,
            ``SN``, ``Dhp``).
        numbers: BG ``(chapter,)`` or ``(chapter, verse)``; SB ``(canto,)``,
            ``(canto, chapter)`` or ``(canto, chapter, verse)``; MN/DN ``(sutta,)``;
            SN ``(samyutta,)`` or ``(samyutta, sutta)``; Dhp ``(verse,)``.

    Raises:
        TypeError: ``book`` not a str or ``numbers`` not a tuple of ints.
        ValueError: unknown book, wrong count of numbers, or a number out of the
            limits of :data:`BOOKS` (the message says which).
    """

    book: str
    numbers: tuple[int, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.book, str):
            raise TypeError(f"TextRef.book must be a str, not {type(self.book).__name__}")
        if not isinstance(self.numbers, tuple) or not all(_is_int(n) for n in self.numbers):
            raise TypeError(f"TextRef.numbers must be a tuple of ints, not {self.numbers!r}")
        problem = _text_problem(self.book, self.numbers)
        if problem:
            raise ValueError(f"invalid TextRef: {problem}")

    @property
    def scope(self) -> str:
        """What the reference covers: ``verse``, ``chapter``, ``canto``, ``sutta`` or
        ``samyutta`` (the level of its last number, from :data:`BOOKS`)."""
        return BOOKS[self.book].levels[len(self.numbers) - 1]

    def canonical(self) -> str:
        """Canonical form: code, space, numbers joined by dots (``BG 2.20``, ``MN 10``)."""
        return f"{self.book} {'.'.join(str(n) for n in self.numbers)}"


@dataclass(frozen=True, slots=True)
class PageRef:
    """A page of a printed edition.

    Attributes:
        edition: a key of :data:`EDITIONS`: ``PTS``, ``VRI``, ``MYA`` (Myanmar /
            Chaṭṭha Saṅgāyana print) or ``THAI``.
        collection: a key of :data:`COLLECTIONS` (``D``, ``M``, ``S``, ``Dhp``, ``Ps``)
            or ``None`` when unknown (bare CST notation without context).
        volume: volume number, >= 1 (for PTS D/M/S at most the volumes of
            :data:`COLLECTIONS`).
        page: page number, >= 1.

    Raises:
        TypeError: a field of the wrong type.
        ValueError: unknown edition or collection, or a number out of range.
    """

    edition: str
    collection: str | None
    volume: int
    page: int

    def __post_init__(self) -> None:
        if not isinstance(self.edition, str) or not (
            self.collection is None or isinstance(self.collection, str)
        ):
            raise TypeError("PageRef.edition must be a str and collection a str or None")
        if not (_is_int(self.volume) and _is_int(self.page)):
            raise TypeError(f"PageRef volume and page must be ints, not "
                            f"{self.volume!r}, {self.page!r}")
        problem = _page_problem(self.edition, self.collection, self.volume, self.page)
        if problem:
            raise ValueError(f"invalid PageRef: {problem}")

    def canonical(self) -> str:
        """Canonical form ``EDITION [COLLECTION] volume.page``: ``PTS M 1.56``,
        ``VRI Ps 1.71``; ``PTS 1.56`` when the collection is unknown."""
        coll = f" {self.collection}" if self.collection is not None else ""
        return f"{self.edition}{coll} {self.volume}.{self.page}"

    def cst(self) -> str:
        """CST notation: edition letter of :data:`EDITIONS` + ``volume.page``
        (``P1.56``, ``V1.71``, ``M1.70``, ``T1.128``), not zero-padded."""
        return f"{EDITIONS[self.edition]}{self.volume}.{self.page}"

    def pts_roman(self) -> str:
        """Scholarly PTS form: collection, lower-case roman volume, page (``M i 56``).

        Raises:
            ValueError: the edition is not PTS, the collection is unknown, or the volume
                exceeds ``MAX_ROMAN``.
        """
        if self.edition != "PTS" or self.collection is None:
            raise ValueError(f"{self.canonical()} has no PTS roman form: it needs edition "
                             f"PTS and a known collection")
        return f"{self.collection} {_roman(self.volume)} {self.page}"


@dataclass(frozen=True, slots=True)
class Resolution:
    """The outcome of parsing one reference.

    Attributes:
        ref: the reference, or ``None`` when unresolved.
        reason: ``""`` when resolved; otherwise one sentence naming the input and why
            it cannot be resolved.

    Truth value: ``True`` exactly when resolved.

    Raises:
        ValueError: ``ref`` is ``None`` and ``reason`` empty (an unresolved result must
            say why).
    """

    ref: TextRef | PageRef | None
    reason: str = ""

    def __post_init__(self) -> None:
        if self.ref is None and not self.reason:
            raise ValueError("an unresolved Resolution needs a reason")

    def __bool__(self) -> bool:
        return self.ref is not None


# --------------------------------------------------------------------------- parsing

_DIGITS = "0123456789"
_CST_GLUED = re.compile(r"([PVMTpvmt])([0-9]+)\.([0-9]+)")
_CST_SPACED = re.compile(r"([PVTpvt])\s+([0-9]+)\.([0-9]+)")
_NUMBERS = re.compile(r"[0-9]+(?:[.:][0-9]+)*")
_RANGE = re.compile(r"[0-9]+(?:[.:][0-9]+)*\s*[-–—‐]\s*[0-9]+(?:[.:][0-9]+)*")
_NAME = re.compile(r"[^\W\d_]+(?:(?:[\s\-‐'’]+|\.\s*)[^\W\d_]+)*\.?")


def _show(text: str) -> str:
    """The input as quoted in a reason, cut to 40 characters."""
    return repr(text if len(text) <= 40 else text[:40] + "…")


class _Unresolved(Exception):
    """Internal: carries the reason out of nested parsing helpers."""


def _ints(parts: list[str]) -> tuple[int, ...]:
    for p in parts:
        if len(p) > MAX_DIGITS:
            raise _Unresolved(f"the number {p[:12]}{'…' if len(p) > 12 else ''} has more "
                              f"than {MAX_DIGITS} digits")
    return tuple(int(p) for p in parts)


def _numbers(rest: str) -> tuple[tuple[int, ...], str]:
    """Split the number part into ints; also return the separators used."""
    if _RANGE.match(rest):
        raise _Unresolved(f"ranges ({rest!r}) are not supported; cite one reference at a time")
    m = _NUMBERS.match(rest)
    if m is None:  # pragma: no cover - callers pass text starting with a digit
        raise _Unresolved("no number")
    if m.end() != len(rest):
        tail = rest[m.end():].strip()
        raise _Unresolved(f"unexpected text {_show(tail)} after the number {m.group()!r}")
    seps = "".join(c for c in m.group() if c in ".:")
    return _ints(re.split(r"[.:]", m.group())), seps


def _vol_page(rest: str, what: str) -> tuple[int, int]:
    nums, seps = _numbers(rest)
    if len(nums) != 2 or seps != ".":
        raise _Unresolved(f"{what} needs volume.page (like 1.56), not {rest!r}")
    return nums[0], nums[1]


def _single(rest: str, what: str) -> int:
    nums, _ = _numbers(rest)
    if len(nums) != 1:
        raise _Unresolved(f"{what} needs one page number, not {rest!r}")
    return nums[0]


def _page(edition: str, collection: str | None, volume: int, page: int) -> PageRef:
    problem = _page_problem(edition, collection, volume, page)
    if problem:
        raise _Unresolved(problem)
    return PageRef(edition, collection, volume, page)


def _text(book: str, numbers: tuple[int, ...]) -> TextRef:
    problem = _text_problem(book, numbers)
    if problem:
        raise _Unresolved(problem)
    return TextRef(book, numbers)


def _check_context(collection: object) -> str | None:
    if collection is None:
        return None
    if not isinstance(collection, str):
        raise TypeError(f"collection must be a str or None, not {type(collection).__name__}")
    code = _COLLECTION_KEYS.get(_name_key(collection))
    if code is None:
        raise ValueError(f"unknown collection context {collection!r}; "
                         f"use one of {', '.join(COLLECTIONS)} or None")
    return code


def _resolve(t: str, context: str | None) -> TextRef | PageRef:
    """Parse stripped NFC text ``t``; raise :class:`_Unresolved` with the reason."""
    m = _CST_GLUED.fullmatch(t) or _CST_SPACED.fullmatch(t)
    if m:
        volume, page = _ints([m.group(2), m.group(3)])
        return _page(_LETTER_EDITION[m.group(1).upper()], context, volume, page)

    cut = next((i for i, c in enumerate(t) if c in _DIGITS), len(t))
    name, rest = t[:cut].strip(), t[cut:]
    if not name:
        raise _Unresolved("no book code or edition before the number")
    folded = ascii_fold(name)
    if not _NAME.fullmatch(folded):
        stem = folded.rstrip("-‐–—−+ \t")
        if stem != folded and _NAME.fullmatch(stem):
            raise _Unresolved(f"unexpected {folded[len(stem):].strip()!r} before the number "
                              f"(signs and ranges are not references)")
        raise _Unresolved(f"{_show(name)} {_NAME_UNKNOWN}")
    words = _name_key(folded).split(" ")
    key = " ".join(words)

    # Edition prefix: PTS / VRI / MYA / THAI [collection] (vol.page | roman page).
    if words[0] in _EDITION_KEYS:
        edition = _EDITION_KEYS[words[0]]
        more = words[1:]
        roman: int | None = None  # the volume, when written as a roman number
        if more and more[-1] in _ROMAN_VALUES:
            if edition != "PTS":
                raise _Unresolved(f"roman volume numbers are PTS notation, not {edition}")
            roman = _ROMAN_VALUES[more[-1]]
            more = more[:-1]
        collection = context
        if more:
            collection = _COLLECTION_KEYS.get(" ".join(more))
            if collection is None:
                raise _Unresolved(f"unknown collection {' '.join(more)!r} "
                                  f"(known: {', '.join(COLLECTIONS)})")
        if not rest:
            raise _Unresolved(f"no page number after {name!r}")
        if roman is None:
            volume, page = _vol_page(rest, f"{edition} page reference")
        else:
            volume, page = roman, _single(rest, f"{edition} page reference")
        return _page(edition, collection, volume, page)

    # Book name: a text reference, or a PTS page for MN/DN with a dotted pair (rule 2).
    if key in _BOOK_KEYS:
        book = BOOKS[_BOOK_KEYS[key]]
        if not rest:
            example = ".".join(str(i + 1) for i in range(len(book.levels)))
            raise _Unresolved(f"{name!r} has no number (write e.g. {book.code} {example})")
        nums, seps = _numbers(rest)
        if book.pair_is_page and (len(nums) == 2 or ":" in seps):
            if seps != ".":
                raise _Unresolved(f"{book.code} suttas carry one number; a PTS page is written "
                                  f"{book.collection} 1.56 or {book.collection} i 56 "
                                  f"(segment references like MN 10:2.1 are not supported)")
            if book.collection is None:  # pragma: no cover - data invariant
                raise _Unresolved(f"{book.code} has no page collection")
            return _page("PTS", book.collection, nums[0], nums[1])
        return _text(book.code, nums)

    # Collection + roman volume: PTS scholarly page ("M i 56", "SN v 421").
    if len(words) >= 2 and words[-1] in _ROMAN_VALUES:
        head = " ".join(words[:-1])
        collection = _COLLECTION_KEYS.get(head)
        if collection is None:
            if head in _BOOK_KEYS:
                raise _Unresolved(f"{_BOOK_KEYS[head]} has no PTS pages; roman volumes are for "
                                  f"{', '.join(COLLECTIONS)}")
            raise _Unresolved(f"unknown collection {head!r} before the roman volume "
                              f"(known: {', '.join(COLLECTIONS)})")
        if not rest:
            raise _Unresolved(f"no page number after {name!r}")
        page = _single(rest, "a PTS page reference")
        return _page("PTS", collection, _ROMAN_VALUES[words[-1]], page)

    # A lone CST edition letter with something other than vol.page after it.
    if key in ("p", "v", "t"):
        raise _Unresolved(f"{name!r} is a CST edition letter; CST notation is "
                          f"letter + volume.page, like {name.upper()}1.56")

    if key in _COLLECTION_KEYS:
        raise _Unresolved(f"{name!r} is a page collection; write a PTS page like "
                          f"{_COLLECTION_KEYS[key]} i 56 or PTS {_COLLECTION_KEYS[key]} 1.56")
    raise _Unresolved(f"unknown book code {name!r} (known: {', '.join(BOOKS)})")


#: The danda and double danda (U+0964, U+0965): Devanagari's verse and sentence ends.
_DANDAS = "\u0964\u0965"
#: The reason :func:`_resolve` gives for a name that is no book, collection or edition.
_NAME_UNKNOWN = "is no book code, collection or edition"

#: Punctuation a reference pasted from running text brings along, tried without when the whole fails. Not
#: the full stop: ``SB 5.5.`` is an unfinished reference, not ``SB 5.5`` at the end of a sentence.
_PASTED_PUNCTUATION = "()[]{}«»\"'“”„‘’,;:!?"


def parse(text: str, *, collection: str | None = None) -> Resolution:
    """Parse one reference a reader wrote into a :class:`TextRef` or :class:`PageRef`.

    Args:
        text: the reference (any string; NFC/NFD, case and surrounding whitespace do not
            matter; it is cleaned by the query normaliser, :func:`workbench.text.query.clean`,
            so invisible characters, controls and a byte-order mark are ignored and
            Devanagari digits read as ASCII ones; a Devanagari book name is read in IAST,
            ``गीता 2.47`` as ``gītā 2.47``). Grammar and ambiguity rules: see the module docstring.
        collection: context for page references that name no collection (bare CST
            notation ``P1.56`` inside an MN file means ``"M"``): a key of
            :data:`COLLECTIONS` or an alias of it (``"MN"``), or ``None``.

    Returns:
        ``Resolution(ref)`` when resolved, else ``Resolution(None, reason)`` where the
        reason quotes the input and says why. Never raises on a ``str`` ``text``.

    Raises:
        TypeError: ``text`` is not a ``str`` or ``collection`` not a ``str``/``None``.
        ValueError: ``collection`` is not a known collection (a caller's error, not
            the reader's).
    """
    if not isinstance(text, str):
        raise TypeError(f"parse() needs a str, not {type(text).__name__}")
    from workbench.text.query import clean

    context = _check_context(collection)
    t = clean(text)
    if not t:
        return Resolution(None, f"{_show(text)} is an empty reference")
    if len(t) > MAX_REFERENCE_CHARS:
        return Resolution(None, f"{_show(t)} is too long to be a reference ({len(t)} "
                                f"characters; at most {MAX_REFERENCE_CHARS})")
    if any(unicodedata.category(c) in ("Cn", "Co", "Cs") for c in t):
        return Resolution(None, f"{_show(t)} contains unassigned, private-use or surrogate characters")
    try:
        return Resolution(_resolve(t, context))
    except _Unresolved as exc:
        reason = f"{_show(t)} cannot be resolved: {exc}"
    # pasted with its punctuation: "(BG 2.47)", "BG 2.47,", "«Гита 2.47»"
    stripped = t.strip(_PASTED_PUNCTUATION + " ")
    retries = [stripped] if stripped and stripped != t else []
    devanagari = []
    for cand in (t, *retries):
        if any("\u0900" <= c <= "\u097f" for c in cand):  # a Devanagari name (गीता 2.47): read in IAST (gītā 2.47)
            from workbench.text.query import to_iast

            # dandas around it end a verse or sentence (गीता २.४७।, ॥ गीता २.४७ ॥); one inside separates
            # chapter and verse (गीता २।४७)
            inner = cand.strip(_DANDAS + _PASTED_PUNCTUATION + " ")
            devanagari.append(to_iast(re.sub(r"\s*\u0964\s*", ".", inner)))  # गीता २ । ४७ too
    for cand in (*retries, *devanagari):
        try:
            return Resolution(_resolve(cand, context))
        except _Unresolved as exc:
            if cand in devanagari and _NAME_UNKNOWN in reason:
                # the Devanagari name was read (गीता → gītā): say what is wrong after it
                reason = f"{_show(t)} cannot be resolved: read as {_show(cand)}: {exc}"
    return Resolution(None, reason)


def parse_page_ref(text: str, *, collection: str | None = None) -> Resolution:
    """Like :func:`parse`, but only a :class:`PageRef` resolves; a text reference gives
    ``Resolution(None, "... is a text reference (MN 10), not a page reference")``.

    Raises:
        TypeError, ValueError: as :func:`parse`.
    """
    res = parse(text, collection=collection)
    if isinstance(res.ref, TextRef):
        return Resolution(None, f"{_show(nfc(text).strip())} is a text reference "
                                f"({res.ref.canonical()}), not a page reference")
    return res


def parse_text_ref(text: str) -> Resolution:
    """Like :func:`parse`, but only a :class:`TextRef` resolves; a page reference gives
    ``Resolution(None, "... is a page reference (PTS M 1.56), not a text reference")``.

    Raises:
        TypeError: ``text`` is not a ``str``.
    """
    res = parse(text)
    if isinstance(res.ref, PageRef):
        return Resolution(None, f"{_show(nfc(text).strip())} is a page reference "
                                f"({res.ref.canonical()}), not a text reference")
    return res


# --------------------------------------------------------------------------- variants


def variants(ref: TextRef | PageRef) -> list[tuple[str, str]]:
    """The forms a reader writes for ``ref``, as ``(text, language)`` pairs.

    Language is ``"en"`` for Latin script and ``"ru"`` for Cyrillic. The order is fixed
    (canonical first for a TextRef, the PTS roman form first for a PTS page) and has no
    duplicates. Every variant parses back to ``ref`` (with ``ref.collection`` as context
    for a PageRef).

    * TextRef: each of the book's :attr:`Book.forms` followed by the numbers
      (``BG 2.20``, ``Bg. 2.20``, ``bg 2.20``, ``Bhagavad-gita 2.20``, ``Бг 2.20``, ``БГ 2.20``).
    * PTS PageRef with a collection: ``M i 56``, ``MN i 56`` (D/M/S), ``M 1.56`` (D/M,
      rule 2), ``PTS M 1.56``, ``PTS M i 56``, then the CST ``P1.56``.
    * Any other PageRef: the canonical form, then the CST form.

    Raises:
        TypeError: ``ref`` is neither a TextRef nor a PageRef.
    """
    out: list[tuple[str, str]] = []
    if isinstance(ref, TextRef):
        nums = ".".join(str(n) for n in ref.numbers)
        for form, lang in BOOKS[ref.book].forms:
            out.append((f"{form} {nums}", lang))
    elif isinstance(ref, PageRef):
        if ref.edition == "PTS" and ref.collection is not None and ref.volume <= MAX_ROMAN:
            coll = COLLECTIONS[ref.collection]
            roman = _roman(ref.volume)
            out.append((ref.pts_roman(), "en"))
            if coll.nikaya:
                out.append((f"{coll.nikaya} {roman} {ref.page}", "en"))
            if any(b.pair_is_page and b.collection == coll.code for b in BOOKS.values()):
                out.append((f"{coll.code} {ref.volume}.{ref.page}", "en"))
            out.append((ref.canonical(), "en"))
            out.append((f"PTS {coll.code} {roman} {ref.page}", "en"))
        else:
            out.append((ref.canonical(), "en"))
        out.append((ref.cst(), "en"))
    else:
        raise TypeError(f"variants() needs a TextRef or PageRef, not {type(ref).__name__}")
    seen: set[str] = set()
    unique = []
    for text, lang in out:
        if text not in seen:
            seen.add(text)
            unique.append((text, lang))
    return unique


def page_query_key(text: str) -> str:
    """The indexed page key a query asks for: the canonical form (``PTS M 1.56``) of a page
    reference with a collection, the CST form (``P1.56``) of a CST reference, or the query
    itself (whitespace collapsed) when it is not a page reference (the OpenSearch ``page_ref`` mode's key)."""
    res = parse_page_ref(text)
    if res and isinstance(res.ref, PageRef):
        return res.ref.canonical() if res.ref.collection is not None else res.ref.cst()
    return " ".join(text.split())
