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

Completeness: a partial copy of the corpus would load quietly into fewer documents (and
a build from it would replace a good one), so :func:`load_bilara` can check the tree
against :data:`PUBLISHED`, the files the published corpus holds (every root file of each
collection, its English and reference companions, the Russian team files of DN); the
catalog's builds always do. Every segment value must be a string.

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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from workbench.data.loaders._io import json_kind, read_json
from workbench.errors import DataError
from workbench.types import Document, Text

#: collection → (folder under ``sutta/``, PTS collection letter or None, address label)
COLLECTIONS: dict[str, tuple[str, str | None, str]] = {
    "dn": ("dn", "D", "DN"),
    "mn": ("mn", "M", "MN"),
    "sn56": ("sn/sn56", "S", "SN"),
    "dhp": ("kn/dhp", None, "Dhp"),
}

#: Languages of the texts a bilara document can carry (``held_out_languages`` must be among them).
LANGUAGES: tuple[str, ...] = ("pi", "en", "ru")


def _numbered(prefix: str, n: int) -> tuple[str, ...]:
    return tuple(f"{prefix}{i}" for i in range(1, n + 1))


@dataclass(frozen=True)
class Expected:
    """The files a complete corpus holds, as data (see :data:`PUBLISHED`).

    Attributes:
        roots: collection → the uids of its root files (``mn20`` for
            ``mn20_root-pli-ms.json``); each needs its English and reference file too.
        russian: collection → the uids of its ``translation/ru/team`` files.
    """

    roots: Mapping[str, tuple[str, ...]]
    russian: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


#: The published corpus as in ``shared/data`` (see ``suttacentral-bilara/PROVENANCE.md``):
#: DN 34, MN 152, SN 56 109 and Dhp 26 root files, each with its English (Sujato) and
#: reference file, and the 34 Russian team files of DN.
PUBLISHED = Expected(
    roots={
        "dn": _numbered("dn", 34),
        "mn": _numbered("mn", 152),
        "sn56": _numbered("sn56.", 95) + (
            "sn56.96-101", "sn56.102", "sn56.103", "sn56.104", "sn56.105-107", "sn56.108-110",
            "sn56.111-113", "sn56.114-116", "sn56.117-119", "sn56.120-122", "sn56.123-125",
            "sn56.126-128", "sn56.129-130", "sn56.131"),
        "dhp": ("dhp1-20", "dhp21-32", "dhp33-43", "dhp44-59", "dhp60-75", "dhp76-89", "dhp90-99",
                "dhp100-115", "dhp116-128", "dhp129-145", "dhp146-156", "dhp157-166", "dhp167-178",
                "dhp179-196", "dhp197-208", "dhp209-220", "dhp221-234", "dhp235-255", "dhp256-272",
                "dhp273-289", "dhp290-305", "dhp306-319", "dhp320-333", "dhp334-359", "dhp360-382",
                "dhp383-423"),
    },
    russian={"dn": _numbered("dn", 34)},
)

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


def _root_path(base: Path, folder: str, uid: str) -> Path:
    return base / "root" / "pli" / "ms" / "sutta" / folder / f"{uid}_root-pli-ms.json"


def _en_path(base: Path, folder: str, uid: str) -> Path:
    return base / "translation" / "en" / "sujato" / "sutta" / folder / f"{uid}_translation-en-sujato.json"


def _ref_path(base: Path, folder: str, uid: str) -> Path:
    return base / "reference" / "pli" / "ms" / "sutta" / folder / f"{uid}_reference.json"


def _ru_team_path(base: Path, folder: str, uid: str) -> Path:
    return base / "translation" / "ru" / "team" / "sutta" / folder / f"{uid}_translation-ru-team.json"


def _segments(obj: Any, path: Path, uid: str, name: str) -> dict[str, str]:
    """``obj`` if it is a JSON object of segment id → string, else a DataError naming the path (and key)."""
    if not isinstance(obj, dict):
        raise DataError(f"{path}: {uid} {name} file is not a JSON object of segment id → string "
                        f"(it holds a JSON {json_kind(obj)}); restore it from bilara-data")
    for k, v in obj.items():
        if not isinstance(v, str):
            raise DataError(f"{path}: segment {k!r} of the {uid} {name} file is a JSON {json_kind(v)}, "
                            "not a string; restore the file from bilara-data")
    return obj


def check_complete(data_dir: Path, collections: Iterable[str], expected: Expected = PUBLISHED) -> None:
    """Check that the bilara tree holds every file ``expected`` names for ``collections``.

    Missing: a root file of the collection, the English or reference companion of any
    root file present, the Russian team folder or a Russian team file. The optional
    ``suttacentral-bilara-ru-sv`` folder is not checked.

    Raises:
        DataError: something is missing; one message lists every missing path (the
            first 12 of them by name) and says to restore the corpus.
    """
    base = data_dir / "suttacentral-bilara"
    missing: list[Path] = []
    short: list[str] = []
    for coll in collections:
        folder = COLLECTIONS[coll][0]
        present = [p.name.split("_")[0] for p in _root_files(base, folder)]
        want = expected.roots.get(coll, ())
        have = set(present)
        lost = [uid for uid in want if uid not in have]
        if lost:
            short.append(f"{coll} has {len(want) - len(lost)} of its {len(want)} root files")
        missing += [_root_path(base, folder, uid) for uid in lost]
        for uid in present:
            missing += [p for p in (_en_path(base, folder, uid), _ref_path(base, folder, uid)) if not p.is_file()]
        ru = expected.russian.get(coll, ())
        ru_dir = base / "translation" / "ru" / "team" / "sutta" / folder
        if ru and not ru_dir.is_dir():
            missing.append(ru_dir)
        else:
            missing += [p for p in (_ru_team_path(base, folder, uid) for uid in ru) if not p.is_file()]
    if missing:
        shown = ", ".join(str(p) for p in missing[:12]) + (f" and {len(missing) - 12} more" if len(missing) > 12 else "")
        raise DataError(f"{base} is incomplete" + (f" ({'; '.join(short)})" if short else "")
                        + f": {len(missing)} file(s) or folder(s) of the published corpus are "
                        f"missing: {shown}; restore suttacentral-bilara from bilara-data (see its PROVENANCE.md)")


def _root_files(base: Path, folder: str) -> list[Path]:
    d = base / "root" / "pli" / "ms" / "sutta" / folder
    if not d.is_dir():
        raise DataError(f"{d} is missing; suttacentral-bilara must hold root/pli/ms/sutta/{folder}/")
    files = sorted(d.glob("*_root-pli-ms.json"), key=lambda p: uid_sort_key(p.name.split("_")[0]))
    if not files:
        raise DataError(f"{d} holds no *_root-pli-ms.json files")
    return files


def load_bilara(data_dir: Path, collections: Iterable[str] = ("dn", "mn", "sn56", "dhp"),
                *, expected: Expected | None = None) -> BilaraCorpus:
    """Load bilara segments of the given collections (keys of :data:`COLLECTIONS`).

    Args:
        data_dir: the workbench data directory (holding ``suttacentral-bilara/``).
        collections: which collections, in output order.
        expected: the files a complete tree holds (:data:`PUBLISHED` for the real
            corpus, as the catalog's builds pass); checked by :func:`check_complete`
            before anything is read. ``None`` (default) loads whatever root files are
            there, for small synthetic trees.

    Returns:
        A :class:`BilaraCorpus`; about 46,900 documents for all four collections.

    Raises:
        DataError: a folder or file is missing (with ``expected``: any file of the
            complete corpus), a JSON file is malformed or not an object of segment id →
            string (names the path and the key).
        ValueError: an unknown collection name.
    """
    collections = list(collections)
    for coll in collections:
        if coll not in COLLECTIONS:
            raise ValueError(f"unknown bilara collection {coll!r}; choose from {', '.join(COLLECTIONS)}")
    if expected is not None:
        check_complete(data_dir, collections, expected)
    base = data_dir / "suttacentral-bilara"
    ru_sv = data_dir / "suttacentral-bilara-ru-sv"
    corpus = BilaraCorpus()
    for coll in collections:
        folder, pts_coll, _label = COLLECTIONS[coll]
        running: str | None = None  # the PTS page running on from earlier segments
        for root_path in _root_files(base, folder):
            uid = root_path.name.split("_")[0]
            root = _segments(read_json(root_path), root_path, uid, "root")
            en_path, ref_path = _en_path(base, folder, uid), _ref_path(base, folder, uid)
            ru_paths = [
                (_ru_team_path(base, folder, uid), "team"),
                (ru_sv / "translation" / "ru" / "sv" / "sutta" / folder / f"{uid}_translation-ru-sv.json", "sv"),
            ]
            en = _segments(read_json(en_path), en_path, uid, "en") if en_path.is_file() else {}
            refs = _segments(read_json(ref_path), ref_path, uid, "reference") if ref_path.is_file() else {}
            corpus.files += [p for p in (root_path, en_path, ref_path) if p.is_file()]
            russian: dict[str, tuple[str, str]] = {}
            for p, src in ru_paths:
                if p.is_file():
                    corpus.files.append(p)
                    for k, v in _segments(read_json(p), p, uid, "ru").items():
                        if _clean(v) and k not in russian:
                            russian[k] = (_clean(v), src)
            corpus.orphans += [("en", k) for k in en if k not in root]
            corpus.orphans += [("ru", k) for k in russian if k not in root]
            for seg_id, pli in root.items():
                pli_t, en_t = _clean(pli), _clean(en.get(seg_id))
                ru = russian.get(seg_id)
                raw_refs = tuple(t.strip() for t in refs.get(seg_id, "").split(",") if t.strip())
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
