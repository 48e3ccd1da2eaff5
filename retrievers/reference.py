"""The canonical-reference lane: a query that parses as a reference returns exactly what it addresses.

No database and no guessing: the query is parsed with :func:`workbench.text.refs.parse`; an
unresolvable query (any ordinary text) returns an empty ranking. Raw score:

* ``2.0``: the addressed unit itself — the verse (``BG 2.47``), the heading segments or
  first paragraph of a sutta (``MN 10``), the document where a page starts (``M i 56``);
* ``1.0``: the rest of the addressed chapter, sutta or page.

A document's own address as the workbench shows it (``MN 10 ¶105``, ``CST s0201a ¶1.2``, also pasted
with what is shown beside it: ``MN 10 ¶105 (CST s0201m · PTS M 1.56)``) addresses that document (2.0),
so any address a scholar copies from ``search``, a report or the dashboard reads back.

Within a score, documents keep corpus order (the run's ``tiebreak`` carries it).
CST notation without a collection (``P1.56``) matches every document whose page
reference has that notation, in any collection.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from workbench.registry import Params, RetrieverKind
from workbench.run import Hit, Run
from workbench.text import refs
from workbench.types import Document, Query

_WORK = re.compile(r"^(dn|mn|sn|dhp)(\d+)(?:\.(\d+))?(?:-(\d+))?$")
#: What the workbench shows beside an address (workbench.text.doctext.display_address), dropped when pasted.
_BESIDE = re.compile(r"\s*\((?:CST|PTS|VRI|MYA|THAI)\b[^()]*\)\s*$", re.IGNORECASE)


def address_key(text: str) -> str:
    """The matching key of an address: cleaned (:func:`workbench.text.query.clean`), what is shown beside it
    dropped, case-folded, ``¶ 105`` read as ``¶105``, whitespace collapsed; ``""`` for no address."""
    from workbench.text.query import clean

    t = _BESIDE.sub("", clean(text))
    t = re.sub(r"¶\s+", "¶", t)
    return " ".join(t.casefold().split())


def _text_keys(doc: Document) -> list[tuple]:
    """The text-reference keys a document answers to, e.g. ("MN", 10) or ("BG", 2, 47)."""
    keys = []
    if doc.work_id == "bg":
        c, v = doc.metadata.get("chapter"), doc.metadata.get("verse")
        keys += [("BG", c), ("BG", c, v)]
    if doc.work_id == "sb" or doc.doc_id.startswith("sb"):
        parts = tuple(int(x) for x in doc.address.split()[-1].split(".") if x.isdigit())
        for n in range(1, len(parts) + 1):
            keys.append(("SB",) + parts[:n])
    work = doc.metadata.get("sutta") or doc.work_id
    m = _WORK.match(str(work))
    if m:
        coll, a, b, c = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        if coll == "sn" and b is not None:
            keys.append(("SN", a))
            keys += [("SN", a, n) for n in range(int(b), int(c or b) + 1)]
        elif coll in ("dn", "mn", "dhp"):
            book = {"dn": "DN", "mn": "MN", "dhp": "Dhp"}[coll]
            keys += [(book, n) for n in range(a, int(c or a) + 1)]
    return keys


class ReferenceLane:
    """Exact answers to canonical references over a dataset's documents (see the module docstring).

    Args:
        name: lane name.
        documents: the dataset's documents, in corpus order.
    """

    score_kind = "2 = the addressed unit or page start, 1 = inside the addressed work or page (exact, no guessing)"

    def __init__(self, name: str, documents: Sequence[Document]):
        self.name = name
        self._order = {d.doc_id: i for i, d in enumerate(documents)}
        self._text: dict[tuple, list[tuple[str, float]]] = defaultdict(list)
        self._page_start: dict[str, list[str]] = defaultdict(list)
        self._page_on: dict[str, list[str]] = defaultdict(list)
        self._address: dict[str, list[str]] = defaultdict(list)
        seen_work: set[str] = set()
        has_heading = {d.work_id for d in documents if d.doc_id.partition(":")[2].startswith("0.")}
        for d in documents:
            if d.address and "¶" in d.address:  # a paragraph address (CST): not in the grammar's reach
                self._address[address_key(d.address)].append(d.doc_id)
            work = d.metadata.get("sutta") or d.work_id
            first = work not in seen_work
            seen_work.add(work)
            for key in _text_keys(d):
                exact = (key[0] == "BG" and len(key) == 3) or (key[0] == "SB" and len(key) == 3)
                if not exact and key[0] != "BG" and key[0] != "SB":
                    local = d.doc_id.partition(":")[2]
                    exact = local.startswith("0.") if d.work_id in has_heading else first
                self._text[key].append((d.doc_id, refs.EXACT_SCORE if exact else refs.INSIDE_SCORE))
            for p in d.page_refs:
                self._page_start[p].append(d.doc_id)
                self._page_start[self._cst_key(p)].append(d.doc_id)
            for p in d.pages:
                self._page_on[p].append(d.doc_id)
                self._page_on[self._cst_key(p)].append(d.doc_id)
        self.last_latencies_ms: dict[str, float] = {}

    @staticmethod
    def _cst_key(canonical: str) -> str:
        r = refs.parse(canonical).ref
        return f"cst:{r.cst()}" if isinstance(r, refs.PageRef) else ""

    def config(self) -> dict[str, Any]:
        """Engine parameters: none but the grammar's version (the reference lane has no knobs)."""
        return {"kind": "reference", "grammar": "workbench.text.refs"}

    def resolve(self, text: str) -> list[tuple[str, float]]:
        """``(doc_id, score)`` pairs the reference addresses, ``[]`` when it does not parse or addresses nothing here."""
        own = self._address.get(address_key(text)) if "¶" in text else None
        if own:
            return [(d, refs.EXACT_SCORE) for d in own]
        res = refs.parse(text)
        if not res:
            return []
        r = res.ref
        if isinstance(r, refs.TextRef):
            return list(self._text.get((r.book,) + tuple(r.numbers), []))
        key = r.canonical() if r.collection is not None else f"cst:{r.cst()}"
        starts = set(self._page_start.get(key, []))
        on = self._page_on.get(key, [])
        out = [(d, refs.EXACT_SCORE) for d in self._page_start.get(key, [])]
        out += [(d, refs.INSIDE_SCORE) for d in dict.fromkeys(on) if d not in starts]
        return out

    def search(self, queries: Sequence[Query], k: int) -> Run:
        """Answer each query that is a canonical reference; others get an empty ranking."""
        import time

        if k < 0:
            raise ValueError(f"k must be >= 0, got {k}")
        rows = {}
        for q in queries:
            t0 = time.perf_counter()
            pairs = dict(self.resolve(q.text) if q.text.strip() else [])
            hits = [Hit(d, s, -float(self._order.get(d, 0))) for d, s in pairs.items()]
            hits.sort(key=lambda h: (-h.score, -h.tiebreak, h.doc_id))
            rows[q.query_id] = hits[:k]
            self.last_latencies_ms[q.query_id] = (time.perf_counter() - t0) * 1000
        return Run(rows, self.name)


class ReferenceKind(RetrieverKind):
    """``reference``: canonical references (``BG 2.47``, ``MN 10``, ``Бг 2.20``) read with the reference grammar."""

    kind = "reference"
    summary = "canonical-reference lane (workbench.text.refs grammar); no index, no service"
    Params = Params
    code = (refs,)

    def open(self, name: str, params: Params, ds, res) -> ReferenceLane:
        """The lane over ``ds``'s documents (in memory)."""
        return ReferenceLane(name, ds.documents)
