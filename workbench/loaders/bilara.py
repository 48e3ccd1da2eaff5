"""SuttaCentral bilara-data: DN, MN, SN 56 and the Dhammapada as segment documents.

Layout (see ``suttacentral-bilara/PROVENANCE.md``): per sutta file one flat JSON object
segment id → string, for the Pali root (``root/pli/ms``), Sujato's English
(``translation/en/sujato``), the edition references (``reference/pli/ms``) and, for a
few DN suttas, Russian (``translation/ru/team``; the optional sibling folder
``suttacentral-bilara-ru-sv`` adds two SN 56 files).

One document per root segment (``mn10:2.1``); segments whose every text is empty are
skipped. Texts are kept as published except that the trailing space bilara puts on
most strings is removed. English keys with no root segment (55 on ``published``) are
left out and counted in :attr:`BilaraCorpus.orphans`.

PTS page references: ``pts-vp-pli<vol>.<page>`` becomes the canonical
``PTS <coll> <vol>.<page>`` with coll ``D``, ``M`` or ``S`` (``pts-vp-pli1.56`` in MN is
``PTS M 1.56``, written M i 56). The marker sits on the segment where the page starts;
the page runs on through the following segments (across sutta files, in sutta order)
until the next marker, and ``Document.pages`` records that running page. Bilara gives
no position inside a segment, so a page is taken to start at the start of its segment.
Dhp's ``pts-vp-pli1ed<n>`` tokens are PTS *verse* numbers, not pages: they are kept in
``edition_refs`` only.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable

from workbench.errors import DataError
from workbench.loaders._io import read_json
from workbench.types import Document, Text

#: collection → (folder under ``sutta/``, PTS collection letter or None, address label)
COLLECTIONS: dict[str, tuple[str, str | None, str]] = {
    "dn": ("dn", "D", "DN"),
    "mn": ("mn", "M", "MN"),
    "sn56": ("sn/sn56", "S", "SN"),
    "dhp": ("kn/dhp", None, "Dhp"),
}

_PTS_RE = re.compile(r"^pts-vp-pli(\d+)\.(\d+)$")
_NUM_RE = re.compile(r"\d+")


def uid_sort_key(uid: str) -> tuple:
    """Natural order of bilara uids: ``mn2`` < ``mn10``; ``sn56.2`` < ``sn56.11`` < ``sn56.105-107``."""
    prefix = _NUM_RE.split(uid, maxsplit=1)[0]
    return (prefix, tuple(int(n) for n in _NUM_RE.findall(uid)))


def segment_sort_key(seg_id: str) -> tuple:
    """Natural order of segment ids within the corpus (uid, then section numbers)."""
    uid, _, rest = seg_id.partition(":")
    return (uid_sort_key(uid), tuple(int(n) for n in _NUM_RE.findall(rest)))


def address_of(seg_id: str) -> str:
    """Reader's address of a segment id: ``mn10:2.1`` → ``MN 10:2.1``, ``sn56.11:1.1`` → ``SN 56.11:1.1``."""
    uid, _, rest = seg_id.partition(":")
    m = re.match(r"^([a-z]+)(.*)$", uid)
    if not m:
        return seg_id
    label = {"dn": "DN", "mn": "MN", "sn": "SN", "dhp": "Dhp"}.get(m.group(1), m.group(1).upper())
    return f"{label} {m.group(2)}:{rest}" if rest else f"{label} {m.group(2)}"


@dataclass
class BilaraCorpus:
    """The loaded segments and what was left out.

    Attributes:
        documents: segment documents in corpus order (collection, sutta, segment).
        orphans: translation keys with no root segment, as ``(lang, seg_id)``.
        skipped_empty: root segment ids with no text in any language.
        files: every file read (for the manifest's sha256 list).
    """

    documents: list[Document] = field(default_factory=list)
    orphans: list[tuple[str, str]] = field(default_factory=list)
    skipped_empty: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)


def _clean(s: object) -> str:
    return s.rstrip() if isinstance(s, str) else ""


def _root_files(base: Path, folder: str) -> list[Path]:
    d = base / "root" / "pli" / "ms" / "sutta" / folder
    if not d.is_dir():
        raise DataError(f"{d} is missing; suttacentral-bilara must hold root/pli/ms/sutta/{folder}/")
    files = sorted(d.glob("*_root-pli-ms.json"), key=lambda p: uid_sort_key(p.name.split("_")[0]))
    if not files:
        raise DataError(f"{d} holds no *_root-pli-ms.json files")
    return files


def load_bilara(data_dir: Path, collections: Iterable[str] = ("dn", "mn", "sn56", "dhp")) -> BilaraCorpus:
    """Load bilara segments of the given collections (keys of :data:`COLLECTIONS`).

    Args:
        data_dir: the workbench data directory (holding ``suttacentral-bilara/``).
        collections: which collections, in output order.

    Returns:
        A :class:`BilaraCorpus`; about 46,900 documents for all four collections.

    Raises:
        DataError: a folder or file is missing or a JSON file is malformed (names the path).
        ValueError: an unknown collection name.
    """
    base = data_dir / "suttacentral-bilara"
    ru_sv = data_dir / "suttacentral-bilara-ru-sv"
    corpus = BilaraCorpus()
    for coll in collections:
        if coll not in COLLECTIONS:
            raise ValueError(f"unknown bilara collection {coll!r}; choose from {', '.join(COLLECTIONS)}")
        folder, pts_coll, _label = COLLECTIONS[coll]
        running: str | None = None  # the PTS page running on from earlier segments
        for root_path in _root_files(base, folder):
            uid = root_path.name.split("_")[0]
            root = read_json(root_path)
            en_path = base / "translation" / "en" / "sujato" / "sutta" / folder / f"{uid}_translation-en-sujato.json"
            ref_path = base / "reference" / "pli" / "ms" / "sutta" / folder / f"{uid}_reference.json"
            ru_paths = [
                (base / "translation" / "ru" / "team" / "sutta" / folder / f"{uid}_translation-ru-team.json", "team"),
                (ru_sv / "translation" / "ru" / "sv" / "sutta" / folder / f"{uid}_translation-ru-sv.json", "sv"),
            ]
            en = read_json(en_path) if en_path.is_file() else {}
            refs = read_json(ref_path) if ref_path.is_file() else {}
            corpus.files += [p for p in (root_path, en_path, ref_path) if p.is_file()]
            russian: dict[str, tuple[str, str]] = {}
            for p, src in ru_paths:
                if p.is_file():
                    corpus.files.append(p)
                    for k, v in read_json(p).items():
                        if _clean(v) and k not in russian:
                            russian[k] = (_clean(v), src)
            for name, obj in (("root", root), ("en", en), ("reference", refs)):
                if not isinstance(obj, dict):
                    raise DataError(f"{uid} {name} file is not a JSON object of segment id → string")
            corpus.orphans += [("en", k) for k in en if k not in root]
            corpus.orphans += [("ru", k) for k in russian if k not in root]
            for seg_id, pli in root.items():
                pli_t, en_t = _clean(pli), _clean(en.get(seg_id))
                ru = russian.get(seg_id)
                raw_refs = tuple(t.strip() for t in str(refs.get(seg_id, "")).split(",") if t.strip())
                starts = []
                if pts_coll:
                    for tok in raw_refs:
                        m = _PTS_RE.match(tok)
                        if m:
                            starts.append(f"PTS {pts_coll} {int(m.group(1))}.{int(m.group(2))}")
                pages = tuple(starts) if starts else ((running,) if running else ())
                if starts:
                    running = starts[-1]
                if not (pli_t or en_t or ru):
                    corpus.skipped_empty.append(seg_id)
                    continue
                texts = []
                if pli_t:
                    texts.append(Text("root", "pi", "Latn", pli_t, "ms"))
                if en_t:
                    texts.append(Text("translation", "en", "Latn", en_t, "sujato"))
                if ru:
                    texts.append(Text("translation", "ru", "Cyrl", ru[0], ru[1]))
                work = seg_id.partition(":")[0]
                corpus.documents.append(
                    Document(
                        doc_id=seg_id,
                        address=address_of(seg_id),
                        work_id=work,
                        granularity="segment",
                        texts=tuple(texts),
                        page_refs=tuple(starts),
                        pages=pages,
                        edition_refs=raw_refs,
                        metadata={"collection": coll, "file_uid": uid},
                    )
                )
    return corpus
