"""Document facets and query filters: what a filtered search may restrict, and the one rule of what a filter admits.

**Facets** (:func:`facets`) are a document's filterable attributes, derived from what the loaders keep:

============== ======================================================= =========================================
facet          value                                                   datasets
============== ======================================================= =========================================
``doc_id``     the document itself (a hand-picked set: ``$in``)        all
``work``       the work it belongs to (``work_id``: ``bg``, ``mn10``)   all
``granularity`` ``verse``, ``passage``, ``paragraph``, ``segment``      all
``language``   the languages of its texts (several: any one matches)   all (``sa``/``hi``/``en``; ``pi``/``en``)
``collection`` the nikāya (``dn``, ``mn``, ``sn``, ``an``, ``kn``)      bilara, CST (``m`` = Majjhima)
``category``   ``mula`` (root text), ``atthakatha`` (commentary),       CST (from the book id's last letter, as
               ``tika`` (sub-commentary)                                mint's ``category`` filter)
``book``       the CST book (``s0201m``)                               CST
``chapter``    the gita's chapter, 1–18 (ordered: ranges allowed)      gita
============== ======================================================= =========================================

**Filters** (:class:`Filter`) use the JSON form of the common vector-store filter languages (Pinecone, Chroma,
Qdrant's Mongo-like payload filters): an object whose keys are facets, every key a clause, all clauses required::

    {"collection": "dn"}                                equality
    {"collection": {"$in": ["dn", "mn"]}}               membership
    {"chapter": {"$gte": 2, "$lte": 6}}                 a range (ordered facets only: ``$gt``, ``$gte``, ``$lt``,
                                                        ``$lte``)
    {"category": "atthakatha", "language": "pi"}        both

A multi-valued facet (``language``) admits a document when any of its values satisfies the clause. A filter is
checked against a dataset's documents when the query set loads (:func:`check_filter`): an unknown facet, an
operator the facet does not allow, or a value no document has is refused, naming the file, line and fix.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: facet → (ordered, multi-valued).
FACETS: dict[str, tuple[bool, bool]] = {
    "doc_id": (False, False), "work": (False, False), "granularity": (False, False), "language": (False, True),
    "collection": (False, False), "category": (False, False), "book": (False, False), "chapter": (True, False),
}
#: Operators: equality and membership for every facet, ranges for ordered ones.
OPERATORS = ("$eq", "$in", "$gt", "$gte", "$lt", "$lte")
RANGE_OPERATORS = ("$gt", "$gte", "$lt", "$lte")
#: CST book ids end in the layer's letter (``s0201m`` mūla, ``s0201a`` aṭṭhakathā, ``s0201t`` ṭīkā).
CST_CATEGORIES = {"m": "mula", "a": "atthakatha", "t": "tika"}


def facets(doc: Any) -> dict[str, Any]:
    """The facets of a :class:`workbench.types.Document` (module docstring): scalars, ``language`` a sorted list;
    a facet the document has no value for is absent."""
    md = doc.metadata or {}
    out: dict[str, Any] = {"doc_id": doc.doc_id, "work": doc.work_id, "granularity": doc.granularity,
                           "language": sorted({t.language for t in doc.texts if t.language})}
    if md.get("collection"):
        out["collection"] = str(md["collection"]).lower()
    book = md.get("book")
    if book:
        out["book"] = str(book)
        layer = CST_CATEGORIES.get(str(book)[-1:])
        if layer:
            out["category"] = layer
    if isinstance(md.get("chapter"), int) and not isinstance(md.get("chapter"), bool):
        out["chapter"] = md["chapter"]
    return out


@dataclass(frozen=True)
class Clause:
    """One facet's condition: ``op`` one of :data:`OPERATORS`, ``values`` the operand(s) (one, or several for
    ``$in``)."""

    facet: str
    op: str
    values: tuple

    def admits(self, value: Any) -> bool:
        """Whether a document's value of the facet (None: it has none; a list: multi-valued) satisfies it."""
        if value is None:
            return False
        if isinstance(value, list):
            return any(self.admits(v) for v in value)
        if self.op in ("$eq", "$in"):
            return value in self.values
        bound = self.values[0]
        return {"$gt": value > bound, "$gte": value >= bound, "$lt": value < bound, "$lte": value <= bound}[self.op]


@dataclass(frozen=True)
class Filter:
    """A query's filter: all :attr:`clauses` must hold (module docstring). Build with :func:`parse_filter`."""

    clauses: tuple[Clause, ...]
    text: str  # the canonical JSON (sorted keys, compact): what queries.tsv and cache keys hold

    def admits(self, doc_facets: Mapping[str, Any]) -> bool:
        """Whether a document with these :func:`facets` passes."""
        return all(c.admits(doc_facets.get(c.facet)) for c in self.clauses)

    def as_json(self) -> dict[str, Any]:
        """The filter as its JSON object (what ``{filters}`` sends to a live system)."""
        return json.loads(self.text)

    def __str__(self) -> str:
        return self.text


class _FilterTextError(ValueError):
    """What the JSON hooks of :func:`parse_filter` refuse (a key twice in one object, NaN or Infinity)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _v in pairs]
    dup = next((k for k in keys if keys.count(k) > 1), None)
    if dup is not None:
        raise _FilterTextError(f"key {dup!r} is given twice in one object (JSON keeps only the last)")
    return dict(pairs)


def _no_constant(name: str) -> Any:
    raise _FilterTextError(f"{name} is not a finite number")


def parse_filter(raw: Any) -> Filter | None:
    """A :class:`Filter` from its JSON text or object; None for ``""``, ``{}`` or None.

    Raises:
        ValueError: not a JSON object, a key given twice in one object, an unknown facet or operator, a range on
            an unordered facet, an empty ``$in``, a value that is not a string or a finite number (NaN and
            Infinity are refused; the message names the fix).
    """
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return None
    if isinstance(raw, str):
        try:
            raw = json.loads(raw, object_pairs_hook=_unique_keys, parse_constant=_no_constant)
        except _FilterTextError as exc:
            raise ValueError(f"filter {raw[:80]!r}: {exc}; write e.g. {{\"chapter\": {{\"$gte\": 2}}}}") from None
        except ValueError as exc:
            # a JSONDecodeError for bad text; a plain ValueError for an integer beyond Python's digit limit
            msg = exc.msg if isinstance(exc, json.JSONDecodeError) else str(exc).split(';')[0]
            raise ValueError(f"filter {raw[:80]!r} is not JSON ({msg}); write e.g. {{\"collection\": \"dn\"}}") \
                from None
        except RecursionError:
            raise ValueError(f"filter {raw[:80]!r} is nested too deeply; a filter is one object of facets, e.g. "
                             "{\"collection\": \"dn\"}") from None
    if not isinstance(raw, Mapping):
        raise ValueError(f"a filter must be a JSON object of facets, got {type(raw).__name__}; "
                         "write e.g. {\"collection\": \"dn\"}")
    if not raw:
        return None
    clauses: list[Clause] = []
    canonical: dict[str, Any] = {}
    for facet in sorted(raw):
        canon: dict[str, Any] = {}
        spec = raw[facet]
        if facet not in FACETS:
            raise ValueError(f"filter facet {facet!r} is not one of {', '.join(FACETS)}")
        ordered, _multi = FACETS[facet]
        conds = spec if isinstance(spec, Mapping) else {"$eq": spec}
        if not conds:
            raise ValueError(f"filter facet {facet!r} has an empty condition; write a value or {{\"$in\": [...]}}")
        for op in sorted(conds):
            value = conds[op]
            if op not in OPERATORS:
                raise ValueError(f"filter facet {facet!r}: operator {op!r} is not one of {', '.join(OPERATORS)}")
            if op in RANGE_OPERATORS and not ordered:
                raise ValueError(f"filter facet {facet!r} is not ordered: use $eq or $in (ranges: "
                                 f"{', '.join(f for f, (o, _m) in FACETS.items() if o)})")
            values = tuple(value) if op == "$in" and isinstance(value, list) else (value,)
            if op == "$in" and (not isinstance(value, list) or not value):
                raise ValueError(f"filter facet {facet!r}: $in takes a non-empty list")
            for v in values:
                if isinstance(v, bool) or not isinstance(v, (str, int, float)) or (ordered and isinstance(v, str)) \
                        or (not ordered and not isinstance(v, str)):
                    kind = "a number" if ordered else "a string"
                    hint = "; for several values write {\"$in\": [...]}" if isinstance(v, list) else ""
                    raise ValueError(f"filter facet {facet!r}: value {v!r} must be {kind}{hint}")
                if isinstance(v, float) and not math.isfinite(v):
                    raise ValueError(f"filter facet {facet!r}: value {v!r} must be a finite number")
            clauses.append(Clause(facet, op, values))
            canon[op] = list(values) if op == "$in" else values[0]
        canonical[facet] = canon["$eq"] if set(canon) == {"$eq"} else canon
    return Filter(tuple(clauses), json.dumps(canonical, ensure_ascii=False, sort_keys=True, separators=(",", ":")))


def facet_values(docs: Iterable[Any]) -> dict[str, set]:
    """Every value each facet takes over ``docs`` (what :func:`check_filter` checks against)."""
    return _values(facets(d) for d in docs)


def _values(of: Iterable[Mapping[str, Any]]) -> dict[str, set]:
    seen: dict[str, set] = {}
    for f in of:
        for facet, value in f.items():
            seen.setdefault(facet, set()).update(value if isinstance(value, list) else [value])
    return seen


def check_filter(flt: Filter, values: Mapping[str, set], dataset: str) -> str:
    """``""`` when every clause of ``flt`` names a facet the dataset's documents have and (for equality and
    membership) values some document has; else what is wrong, naming the fix."""
    for c in flt.clauses:
        have = values.get(c.facet)
        if not have:
            present = ", ".join(sorted(values)) or "none"
            return f"facet {c.facet!r} is not a facet of {dataset}'s documents (it has {present})"
        if c.op in ("$eq", "$in"):
            missing = [v for v in c.values if v not in have]
            if missing:
                sample = ", ".join(repr(v) for v in sorted(have, key=lambda v: (isinstance(v, str), v))[:12])
                return f"{c.facet} = {missing[0]!r}: no document of {dataset} has it (values: {sample}…)"
    return ""


def admitted(flt: Filter | None, docs: Iterable[Any]) -> list[str]:
    """The doc_ids of ``docs`` that ``flt`` admits (all of them for None), in order."""
    return [d.doc_id for d in docs if flt is None or flt.admits(facets(d))]


#: How many filters' admitted document sets a :class:`FacetIndex` keeps (least recently used go first).
ADMITTED_KEPT = 4096


class FacetIndex:
    """The facets of a dataset's documents, the values each facet takes (:attr:`values`) and the documents each
    filter admits (computed once per filter). A loaded dataset keeps one
    (:attr:`workbench.data.catalog.Dataset.facet_index`). The admitted sets are kept for the
    :data:`ADMITTED_KEPT` filters used last (an evaluation has a few hundred; ``workbench serve`` may see any
    number, so the memory stays bounded).

    Args:
        docs: the dataset's :class:`workbench.types.Document` list.
    """

    def __init__(self, docs: Iterable[Any]) -> None:
        from collections import OrderedDict

        self._facets = {d.doc_id: facets(d) for d in docs}
        self._admitted: OrderedDict[str, frozenset[str]] = OrderedDict()
        #: facet → every value it takes (:func:`facet_values`).
        self.values = _values(self._facets.values())

    def admitted(self, filter_text: str) -> frozenset[str] | None:
        """The doc_ids a filter (canonical JSON, :attr:`workbench.types.Query.filter`) admits; None for ``""``."""
        if not filter_text:
            return None
        got = self._admitted.get(filter_text)
        if got is None:
            flt = parse_filter(filter_text)
            got = frozenset(d for d, f in self._facets.items() if flt is None or flt.admits(f))
            self._admitted[filter_text] = got
            if len(self._admitted) > ADMITTED_KEPT:
                self._admitted.popitem(last=False)  # the least recently used
        else:
            self._admitted.move_to_end(filter_text)
        return got


#: Selectivity buckets of a filter (the share of the corpus it admits), widest first: (lower bound, label).
SELECTIVITY_BUCKETS = ((0.25, ">=25%"), (0.05, "5-25%"), (0.01, "1-5%"), (0.0, "<1%"))


def selectivity_bucket(share: float) -> str:
    """The :data:`SELECTIVITY_BUCKETS` label of a filter admitting ``share`` (0..1) of the corpus."""
    return next(label for low, label in SELECTIVITY_BUCKETS if share >= low)
