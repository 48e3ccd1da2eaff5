"""CST4 / CSCD romanised XML (Chaṭṭha Saṅgāyana): MN and DN mūla, MN aṭṭhakathā, as paragraphs.

Layout (see ``cst4-tipitaka-xml/PROVENANCE.md``): ``<data>/cst4-tipitaka-xml/cscd/`` holds one
file per vagga (MN) or per sutta (DN): ``<book>.mul<N>.xml`` (mūla) and ``<book>.att<N>.xml``
(aṭṭhakathā), ``N`` = 0, 1, 2, … read in *numeric* order (``mul10`` after ``mul9``). The files
are UTF-16 LE with BOM and CRLF; each body is a flat run of ``<p rend="…">``.

Documents (granularity ``paragraph``)
-------------------------------------
* A numbered ``<p n="105">`` (rend ``bodytext``, or ``hangnum``: a bare number whose text is the
  verses after it) starts a document. The unnumbered content paragraphs after it (rend
  ``bodytext``, ``gatha1/2/3``, ``gathalast``, ``centre``, ``indent``, ``unindented``) are
  appended, one line each (joined with ``"\\n"``), until the next numbered paragraph or heading
  (rend ``nikaya``, ``book``, ``chapter``, ``subhead``, ``subsubhead``). So a sutta's closing
  lines (``… niṭṭhitaṃ``) and a vagga's uddāna verses belong to the sutta's last paragraph.
* Unnumbered content with no open document (after a heading, before the next numbered
  paragraph) becomes a document of its own, id ``"{book}:{key}+{k}"``: ``key`` is the id key of
  the book's last numbered paragraph (``0`` before the first), ``k`` = 1, 2, … counts such
  documents since it. This is rare: none in MN mūla, one each in s0102m (``s0102m:242+1``)
  and s0103m (``s0103m:164+1``), 18 in s0201a (``s0201a:0+1``, the opening verses, and
  sections under unnumbered sub-headings), none in s0202a, 6 in s0203a.
* The invocation ``Namo tassa bhagavato arahato sammāsambuddhassa`` (a ``centre`` paragraph
  right before a ``nikaya`` heading, at the head of each volume) is front matter and skipped.
* ``doc_id`` ``"{book}:{n}"`` (``s0201m:105``), ``address`` the sutta and paragraph where the
  paragraph is in a numbered sutta (``MN 10 ¶105``), else ``"CST {book} ¶{n}"`` (:func:`address`),
  ``work_id`` the book code. ``n`` is the XML's ``n`` with leading zeros dropped. The MN and DN mūla books
  number their paragraphs 1, 2, … without gaps or repeats (s0201m 1–513, s0202m 1–486,
  s0203m 1–463, s0101m 1–559, s0102m 1–441, s0103m 1–360). The aṭṭhakathā numbers only the
  paragraphs that comment on a numbered mūla paragraph, with the mūla's number, sometimes a
  range (``380-1`` = 380–381, ``34-40``; kept as written in the id); s0201a repeats one
  number: ``1`` (Nidānakathā, then MN 1's commentary) and a stray ``01`` (inside MN 12's
  commentary, after ¶146). A repeated number gets ``"{book}:{n}.{k}"``, k = 2, 3, …
  (``s0201a:1.2``, ``s0201a:1.3``).

Text and metadata
-----------------
One :class:`~workbench.types.Text` ``(root, pi, Latn, source="cst4")``, one line per ``<p>``:
markup removed, the leading paragraph number (``105.``) removed, ``<note>`` variant readings
removed (kept in ``metadata["notes"]``, in order), whitespace collapsed within a line, NFC;
where a removed marker or note stood between a space and punctuation, the space goes too
(``hoti <pb …/>, uju`` → ``hoti, uju``). The CST spelling (``ṃ``, ``‘‘ … ’’``) is kept as
published. Metadata::

    book        "s0201m"
    n           the XML's n as written ("105", "380-1", "01"), None when unnumbered
    paranum     first paragraph number as int (105; 380 for "380-1"), None when unnumbered
    paranum_end last number of a range (381 for "380-1"), else paranum
    collection  "M" (MN mūla), "D" (DN mūla), "Ps" (Papañcasūdanī, MN aṭṭhakathā)
    vagga       the current chapter heading ("1. Mūlapariyāyavaggo"); for DN, whose
                chapters are suttas, the book heading ("Sīlakkhandhavaggapāḷi")
    title       the current sutta heading ("10. Mahāsatipaṭṭhānasuttaṃ"; in the
                aṭṭhakathā "10. Satipaṭṭhānasuttavaṇṇanā"), None before the first
    section     the current unnumbered sub-heading within it ("Uddeso"), else None
    sutta       "mn1" … "mn152", "dn1" … "dn34" (mūla only; None in the aṭṭhakathā)
    file        "s0201m.mul0.xml", the file the document starts in
    notes       list of the variant-reading notes removed from the text
    bold        list of the ``<hi rend="bold">`` spans, in order, as the text spells them (markers
                dropped, whitespace collapsed, NFC) without the punctuation and quotes at their
                edges (``devā,`` → ``devā``); ``[]`` when none. The aṭṭhakathā bolds the words it
                explains: ``<hi rend="bold">Pajāpati</hi>nti ettha …`` (the span stops before the
                sandhi). The mūla has few: one each in s0202m and s0203m, 4 in s0102m, 239 in s0103m
    bold_lead   the spans of ``bold`` that open a ``<p>`` (nothing but the paragraph number
                before them): the lemmas a commentary line explains (s0201a:5: ``Suta``,
                ``Muta``, ``Viññāta``; ``diṭṭha``, after ``Tattha``, is in ``bold`` only)

The headings (``rend`` ``nikaya``, ``book``, ``chapter``, ``subhead``, ``subsubhead``; CST has no
``<head>``) give ``vagga``, ``title`` and ``section``; no heading holds bold. Keeping the bold spans
leaves the text unchanged.

Sutta headings are the numbered ``subhead``s in MN (``10. …suttaṃ``; the unnumbered ones are
sections) and the ``chapter``s in DN. They are counted across the books of a nikāya: MN
s0201m/s0202m/s0203m hold 50/50/52 suttas (MN 1–50, 51–100, 101–152), DN s0101m/s0102m/
s0103m 13/10/11 (DN 1–13, 14–23, 24–34), so a book loaded alone gets the same numbers.
Notes inside headings (two MN titles carry one) are dropped from the title.

Pages
-----
``<pb ed="X" n="<vol>.<page>"/>`` marks where page ``page`` of volume ``vol`` of edition ``X``
starts: ``P`` PTS, ``V`` VRI, ``M`` Myanmar print (``MYA``), ``T`` Thai (``THAI``; mūla only).
The canonical page ref is ``"{EDITION} {COLLECTION} {vol}.{page}"`` with the page unpadded:
``<pb ed="P" n="1.0056"/>`` in s0201m is ``"PTS M 1.56"`` (PTS M i 56); in the aṭṭhakathā
``P`` is the PTS *commentary* edition, so its refs read ``"PTS Ps 1.56"``.

* ``page_refs``: refs of the pages that *start* inside the document. A marker in a heading, or
  at the very end of a paragraph (no text after it), starts its page in the next content
  paragraph, so it belongs to the document holding that paragraph.
* ``edition_refs``: the same markers in CST notation, ``"P1.56"``, ``"V1.71"``, ``"M1.70"``,
  ``"T1.103"``; ``edition_refs[i]`` is ``page_refs[i]``.
* ``pages``: every page the document lies on: per edition, the page running at its start
  (the last marker of that edition before it *in the same book*, none before the book's
  first marker; left out when a page of that edition starts before the document's first
  word), plus ``page_refs``.

All three are sorted by edition (PTS, VRI, MYA, THAI), volume, page, without repeats. The
markers are used as published: a few skip or repeat a page (Thai mostly: ``T2.426`` twice in
s0202m; ``T1.262`` twice, ``T1.141``/``T1.142`` for 241/242 and ``T1.214`` for 284 in s0101m;
``P3.330`` for 230 in s0103m; ``T2.218`` twice within ``s0102m:265``), so a ref can start in
two documents;
:func:`iter_page_starts` keeps the first. The page running into a book's first words from
the previous book (``PTS M 2.213`` before ``s0203m:1``'s marker) is not recorded, so a book
loads the same alone or with others.
"""

from __future__ import annotations

import re
import unicodedata
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

from workbench.errors import DataError
from workbench.types import Document, Text

#: Source folder under the data directory.
SOURCE = "cst4-tipitaka-xml"

#: MN mūla (Mūla-, Majjhima-, Uparipaṇṇāsa) and MN aṭṭhakathā (Papañcasūdanī), in order.
MN_BOOKS: tuple[str, ...] = ("s0201m", "s0202m", "s0203m", "s0201a", "s0202a", "s0203a")

#: DN mūla (Sīlakkhandha-, Mahā-, Pāthikavagga).
DN_BOOKS: tuple[str, ...] = ("s0101m", "s0102m", "s0103m")

#: CST ``ed`` letter → edition code of the canonical page ref.
EDITIONS: dict[str, str] = {"P": "PTS", "V": "VRI", "M": "MYA", "T": "THAI"}

#: Sort order of editions in ``pages`` / ``page_refs``.
EDITION_ORDER: tuple[str, ...] = ("PTS", "VRI", "MYA", "THAI")


@dataclass(frozen=True)
class _Book:
    kind: str  # "mul" or "att"
    collection: str  # page-ref collection: "M", "D", "Ps"
    files: int  # number of text files <book>.<kind>0 … <kind>{files-1}
    sutta_prefix: str | None  # "mn" / "dn" for mūla books
    sutta_offset: int  # suttas in the nikāya's earlier books
    suttas: int  # sutta headings expected in this book (mūla only)


_BOOKS: dict[str, _Book] = {
    "s0201m": _Book("mul", "M", 5, "mn", 0, 50),
    "s0202m": _Book("mul", "M", 5, "mn", 50, 50),
    "s0203m": _Book("mul", "M", 5, "mn", 100, 52),
    "s0201a": _Book("att", "Ps", 6, None, 0, 0),
    "s0202a": _Book("att", "Ps", 5, None, 0, 0),
    "s0203a": _Book("att", "Ps", 5, None, 0, 0),
    "s0101m": _Book("mul", "D", 13, "dn", 0, 13),
    "s0102m": _Book("mul", "D", 10, "dn", 13, 10),
    "s0103m": _Book("mul", "D", 11, "dn", 23, 11),
}

#: Books this loader knows (those present in the data's ``cscd/`` folder).
BOOKS: tuple[str, ...] = tuple(_BOOKS)

_HEADINGS = frozenset({"nikaya", "book", "chapter", "subhead", "subsubhead"})
_CONTENT = frozenset(
    {"bodytext", "hangnum", "gatha1", "gatha2", "gatha3", "gathalast", "centre", "indent", "unindented"}
)
_XML_DECL_RE = re.compile(r"^\s*<\?xml[^>]*\?>")
_PB_N_RE = re.compile(r"^(\d+)\.(\d+)$")
_PARA_N_RE = re.compile(r"^(\d+)(?:-(\d+))?$")
_NUMBERED_HEADING_RE = re.compile(r"^\d+\.\s")
_GAP_BEFORE_PUNCT_RE = re.compile(r"\s*\x00[\s\x00]*(?=[,.;:!?’)])")
_GAP = object()  # where a <note> was removed
#: Stripped from the edges of a bold span (``bold_text``): spaces, punctuation, quotes, dashes.
_EDGE_PUNCT = " \t\n,.;:!?‘’'\"“”()[]–—-…"


# --------------------------------------------------------------------------- page refs


def page_ref(edition: str, collection: str, vol: int, page: int) -> str:
    """Canonical page ref: ``page_ref("PTS", "M", 1, 56)`` → ``"PTS M 1.56"``."""
    return f"{edition} {collection} {vol}.{page}"


def page_ref_sort_key(ref: str) -> tuple:
    """Sort key of a canonical page ref: edition (PTS, VRI, MYA, THAI), collection, volume, page.

    Refs that do not parse sort last, by their text.
    """
    parts = ref.split(" ")
    if len(parts) == 3:
        vol, _, page = parts[2].partition(".")
        if parts[0] in EDITION_ORDER and vol.isdigit() and page.isdigit():
            return (0, EDITION_ORDER.index(parts[0]), parts[1], int(vol), int(page), "")
    return (1, 0, "", 0, 0, ref)


@dataclass(frozen=True)
class _Marker:
    ed: str  # "P", "V", "M", "T"
    vol: int
    page: int

    def ref(self, collection: str) -> str:
        return page_ref(EDITIONS[self.ed], collection, self.vol, self.page)

    @property
    def raw(self) -> str:
        return f"{self.ed}{self.vol}.{self.page}"


# --------------------------------------------------------------------------- XML reading


def _book_files(cscd: Path, book: str) -> list[Path]:
    spec = _BOOKS[book]
    return [cscd / f"{book}.{spec.kind}{i}.xml" for i in range(spec.files)]


def _parse_file(path: Path) -> ET.Element:
    """Read one UTF-16 CST file and return its ``<body>``; every failure is a DataError naming the path."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise DataError(f"{path} is missing; check WORKBENCH_DATA points at a full copy of {SOURCE}") from exc
    except OSError as exc:
        raise DataError(f"cannot read {path}: {exc}") from exc
    try:
        text = raw.decode("utf-16")
    except UnicodeDecodeError as exc:
        raise DataError(
            f"{path} is not valid UTF-16 ({exc}); the file may be truncated: restore it from its source"
        ) from exc
    text = _XML_DECL_RE.sub("", text.lstrip("\ufeff"), count=1)
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise DataError(
            f"{path} is not well-formed XML ({exc}); the file may be truncated: restore it from its source"
        ) from exc
    body = root.find("text/body")
    if body is None:
        raise DataError(f"{path} has no <text><body>; it is not a CST4 text file")
    return body


def _walk(elem: ET.Element, out: list, notes: list[str], path: Path,
          bold: list[tuple[str, bool]] | None = None) -> None:
    """Flatten a ``<p>`` into text strings and :class:`_Marker`s; notes go to ``notes``.

    Each ``<hi rend="bold">`` span goes to ``bold`` (when given) as ``(text, leads)``: its text
    (:func:`bold_text`; spans that hold no letter are left out) and whether it opens the line
    (no word before it in ``out``). The span's text stays in ``out`` as well: the line is the same
    with or without ``bold``.
    """
    if elem.text:
        out.append(elem.text)
    for child in elem:
        if child.tag == "pb":
            out.append(_marker(child, path))
        elif child.tag == "note":
            out.append(_GAP)
            note = _collapse("".join(child.itertext()))
            if note:
                notes.append(note)
        elif child.tag == "hi" and child.get("rend") in ("paranum", "dot"):
            pass
        elif child.tag == "hi" and child.get("rend") == "bold" and bold is not None:
            leads = not any(isinstance(x, str) and x.strip() for x in out)
            inner: list = []
            _walk(child, inner, notes, path)
            out.extend(inner)
            text = bold_text(inner)
            if text:
                bold.append((text, leads))
        else:
            _walk(child, out, notes, path, bold)
        if child.tail:
            out.append(child.tail)


def bold_text(pieces: list) -> str:
    """The text of a bold span as the body text spells it (:func:`_line`: markers dropped, whitespace
    collapsed, NFC), without the punctuation and quotes at its edges (``devā,`` → ``devā``; ``‘‘Evaṃ``
    → ``Evaṃ``; inner punctuation stays: ``yopi so, bhikkhave, bhikkhu sekkho``); ``""`` when no
    letter is left."""
    text = _line(pieces).strip(_EDGE_PUNCT)
    return text if any(c.isalpha() for c in text) else ""


def _marker(pb: ET.Element, path: Path) -> _Marker:
    ed, n = pb.get("ed", ""), pb.get("n", "")
    m = _PB_N_RE.match(n)
    if ed not in EDITIONS or m is None:
        raise DataError(f"{path}: page marker <pb ed={ed!r} n={n!r}/> is not of the form ed=P|V|M|T n=vol.page")
    return _Marker(ed, int(m.group(1)), int(m.group(2)))


def _collapse(s: str) -> str:
    return unicodedata.normalize("NFC", " ".join(s.split()))


def _line(pieces: list) -> str:
    """The text of flattened pieces: markers and notes dropped with the space before them when
    punctuation follows (``hoti <pb …/>, uju`` → ``hoti, uju``), whitespace collapsed, NFC."""
    s = "".join(x if isinstance(x, str) else "\x00" for x in pieces)
    s = _GAP_BEFORE_PUNCT_RE.sub("", s)
    return _collapse(s.replace("\x00", ""))


def _parse_paranum(n: str, path: Path) -> tuple[str, int, int]:
    """``"01"`` → ("1", 1, 1); ``"380-1"`` → ("380-1", 380, 381); ``"34-40"`` → ("34-40", 34, 40)."""
    m = _PARA_N_RE.match(n.strip())
    if m is None:
        raise DataError(f"{path}: paragraph number n={n!r} is neither a number nor a range like 380-1")
    first = int(m.group(1))
    if m.group(2) is None:
        return str(first), first, first
    tail = m.group(2)
    start = str(first)
    end = int(start[: max(len(start) - len(tail), 0)] + tail) if len(tail) < len(start) else int(tail)
    return f"{first}-{int(tail)}", first, end


# --------------------------------------------------------------------------- building documents


@dataclass
class _Open:
    key: str
    n: str | None
    paranum: int | None
    paranum_end: int | None
    running: dict[str, _Marker]
    meta: dict
    lines: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    bold: list[str] = field(default_factory=list)
    bold_lead: list[str] = field(default_factory=list)
    starts: list[_Marker] = field(default_factory=list)
    has_text: bool = False


def address(book: str, key: str, sutta: str | None) -> str:
    """The address a scholar reads: the sutta and the CST paragraph (``MN 10 ¶105``) where the paragraph is in a
    numbered sutta of the mūla, else the CST book and paragraph (``CST s0201a ¶1.2``: the aṭṭhakathā, front
    matter). The CST book is in ``work_id`` and the page references beside it (``search`` shows both)."""
    m = re.fullmatch(r"(mn|dn)(\d+)", sutta or "")
    if m:
        return f"{m.group(1).upper()} {int(m.group(2))} ¶{key}"
    return f"CST {book} ¶{key}"


def _finish(book: str, spec: _Book, doc: _Open) -> Document:
    coll = spec.collection
    start_refs = {m.ref(coll): m.raw for m in doc.starts}
    page_refs = sorted(start_refs, key=page_ref_sort_key)
    pages = set(page_refs) | {m.ref(coll) for m in doc.running.values()}
    metadata = {
        "book": book,
        "n": doc.n,
        "paranum": doc.paranum,
        "paranum_end": doc.paranum_end,
        "collection": coll,
        **doc.meta,
        "notes": doc.notes,
        "bold": doc.bold,
        "bold_lead": doc.bold_lead,
    }
    return Document(
        doc_id=f"{book}:{doc.key}",
        address=address(book, doc.key, doc.meta.get("sutta")),
        work_id=book,
        granularity="paragraph",
        texts=(Text(field="root", language="pi", script="Latn", text="\n".join(doc.lines), source="cst4"),),
        page_refs=tuple(page_refs),
        pages=tuple(sorted(pages, key=page_ref_sort_key)),
        edition_refs=tuple(start_refs[r] for r in page_refs),
        metadata=metadata,
    )


def _load_book(cscd: Path, book: str) -> list[Document]:
    """All documents of one book, its files read in numeric order (see the module docstring)."""
    spec = _BOOKS[book]
    files = _book_files(cscd, book)
    missing = [p for p in files if not p.is_file()]
    if missing:
        raise DataError(
            f"{missing[0]} is missing ({len(missing)} of {len(files)} files of {book} missing); "
            f"check WORKBENCH_DATA points at a full copy of {SOURCE}"
        )
    docs: list[Document] = []
    running: dict[str, _Marker] = {}  # ed → page running at this point of the book
    pending: list[_Marker] = []  # markers whose page starts at the next content paragraph
    seen_keys: dict[str, int] = {}
    last_key, unnumbered_since = "0", 0
    ctx: dict[str, str | None] = {"vagga": None, "title": None, "section": None, "sutta": None}
    suttas = 0
    cur: _Open | None = None

    def close() -> None:
        nonlocal cur
        if cur is not None:
            docs.append(_finish(book, spec, cur))
            cur = None

    def add_marker(m: _Marker) -> None:
        # The page starts inside ``cur``; if no word of it precedes the marker, the page
        # running before does not reach into it.
        doc = cast(_Open, cur)  # every call is made with a paragraph open
        if not doc.has_text:
            doc.running.pop(m.ed, None)
        doc.starts.append(m)
        running[m.ed] = m

    for path in files:
        body = _parse_file(path)
        paras = list(body)
        for i, p in enumerate(paras):
            if p.tag != "p":
                continue
            rend = p.get("rend", "")
            pieces: list = []
            notes: list[str] = []
            bold: list[tuple[str, bool]] = []
            _walk(p, pieces, notes, path, bold)
            if rend in _HEADINGS:
                close()
                pending.extend(x for x in pieces if isinstance(x, _Marker))
                text = _line(pieces)
                if rend == "book":
                    if spec.collection == "D":
                        ctx["vagga"] = text
                elif rend == "chapter":
                    if spec.collection == "D" and _NUMBERED_HEADING_RE.match(text):
                        suttas += 1
                        ctx.update(title=text, section=None, sutta=f"dn{spec.sutta_offset + suttas}")
                    else:
                        ctx.update(vagga=text, title=None, section=None)
                elif rend == "subhead" and spec.collection != "D" and _NUMBERED_HEADING_RE.match(text):
                    ctx.update(title=text, section=None)
                    if spec.sutta_prefix:
                        suttas += 1
                        ctx["sutta"] = f"{spec.sutta_prefix}{spec.sutta_offset + suttas}"
                elif rend in ("subhead", "subsubhead"):
                    ctx["section"] = text
                continue
            if rend not in _CONTENT:
                raise DataError(f"{path}: paragraph with unknown rend={rend!r}; this loader knows "
                                + ", ".join(sorted(_HEADINGS | _CONTENT)))
            if (rend == "centre" and i + 1 < len(paras) and paras[i + 1].get("rend") == "nikaya"
                    and not any(isinstance(x, _Marker) for x in pieces)):
                continue  # the invocation "Namo tassa …" at the head of a volume
            n = p.get("n")
            if n is not None or cur is None:
                close()
                if n is not None:
                    key, first, end = _parse_paranum(n, path)
                    seen_keys[key] = seen_keys.get(key, 0) + 1
                    if seen_keys[key] > 1:
                        key = f"{key}.{seen_keys[key]}"
                    last_key, unnumbered_since = key, 0
                else:
                    unnumbered_since += 1
                    key, first, end = f"{last_key}+{unnumbered_since}", None, None
                meta = {
                    "vagga": ctx["vagga"],
                    "title": ctx["title"],
                    "section": ctx["section"],
                    "sutta": ctx["sutta"],
                    "file": path.name,
                }
                cur = _Open(key, n, first, end, dict(running), meta)
            # Markers after the paragraph's last word start their page in the next paragraph.
            last_text = max((j for j, x in enumerate(pieces) if isinstance(x, str) and x.strip()), default=-1)
            for m in pending:
                add_marker(m)
            pending = []
            for j, x in enumerate(pieces):
                if isinstance(x, _Marker):
                    if j > last_text:
                        pending.append(x)
                    else:
                        add_marker(x)
                elif isinstance(x, str) and x.strip():
                    cur.has_text = True
            line = _line(pieces)
            if line:
                cur.lines.append(line)
            cur.notes.extend(notes)
            cur.bold.extend(t for t, _ in bold)
            cur.bold_lead.extend(t for t, leads in bold if leads)
    if cur is not None:
        for m in pending:  # markers after the book's last word: keep them on its last document
            add_marker(m)
        close()
    if spec.sutta_prefix and suttas != spec.suttas:
        raise DataError(
            f"{cscd}/{book}.{spec.kind}*.xml hold {suttas} sutta headings, expected {spec.suttas}; "
            "the files are not the CST4 edition this loader was written for"
        )
    return docs


def load_cst4(data_dir: Path, books: Sequence[str] = MN_BOOKS) -> list[Document]:
    """Load CST4 books as paragraph documents, in book order then text order.

    Args:
        data_dir: the workbench data directory (:func:`workbench.settings.data_dir`); the files
            are read from ``data_dir / "cst4-tipitaka-xml" / "cscd"``.
        books: book codes from :data:`BOOKS`, e.g. :data:`MN_BOOKS` (default) or :data:`DN_BOOKS`.

    Returns:
        One :class:`~workbench.types.Document` per paragraph (see the module docstring for ids,
        texts, metadata and the page fields ``page_refs`` / ``pages`` / ``edition_refs``).

    Raises:
        ValueError: a book code is not one of :data:`BOOKS`.
        DataError: the ``cscd`` folder or a book file is missing, a file does not decode as
            UTF-16 or does not parse as XML (e.g. truncated), or its structure is not the
            expected one; the message names the path.
    """
    if isinstance(books, str):
        raise ValueError(f"books must be a sequence of book codes, not the string {books!r}; e.g. ({books!r},)")
    unknown = [b for b in books if b not in _BOOKS]
    if unknown:
        raise ValueError(f"unknown CST4 book code(s) {unknown}; known: {', '.join(BOOKS)}")
    cscd = Path(data_dir) / SOURCE / "cscd"
    if not cscd.is_dir():
        raise DataError(f"{cscd} does not exist; set WORKBENCH_DATA to the folder holding {SOURCE}/")
    docs: list[Document] = []
    for book in books:
        docs.extend(_load_book(cscd, book))
    return docs


# --------------------------------------------------------------------------- page indexes


def iter_page_starts(docs: Iterable[Document]) -> dict[str, str]:
    """Map each canonical page ref to the ``doc_id`` of the document where the page starts.

    A ref is a page of one edition (``"PTS M 1.56"``); the first document (in the given order)
    whose ``page_refs`` hold it wins, so a marker the data repeats keeps its first place.
    """
    out: dict[str, str] = {}
    for doc in docs:
        for ref in doc.page_refs:
            out.setdefault(ref, doc.doc_id)
    return out


def docs_on_page(docs: Iterable[Document]) -> dict[str, list[str]]:
    """Map each canonical page ref to the ``doc_id``s whose text lies on that page, in document order.

    Built from ``Document.pages`` (the page running at a document's start plus the pages
    starting inside it), so a long paragraph appears under every page it spans.
    """
    out: dict[str, list[str]] = {}
    for doc in docs:
        for ref in doc.pages:
            ids = out.setdefault(ref, [])
            if not ids or ids[-1] != doc.doc_id:
                ids.append(doc.doc_id)
    return out
