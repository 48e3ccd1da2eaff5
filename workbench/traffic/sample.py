"""Query sets sampled from traffic: what readers typed, normalised, deduplicated, drawn, split, written as a
queries file any dataset can take (``traffic_queries`` in ``datasets.toml``).

**Normalised and deduplicated.** A search's text is cleaned as every query is (:func:`workbench.text.query.clean`:
NFC, invisible characters and controls dropped), case-folded and its whitespace collapsed; searches with the same
key are one query, shown as the form typed most often (the earliest among equals), with its **frequency** (the
searches) and its distinct clients.

**Its predicted type** (:func:`predict_type`) is what the workbench knows of a query without judgments: a
reference (the reference grammar resolves it to a text, :func:`workbench.text.refs.parse`), a page reference
(it resolves to a page), a term (at most three words and none of them a function word of the reader's
languages) or a paraphrase (the rest: questions and descriptions); its **script** is
:func:`workbench.text.scripts.script_of`'s (IAST, ASCII, Cyrillic, Devanagari, …). The stratum is type × script.

**Drawn** (:func:`draw`), with a seed, ``size`` distinct queries:

* ``random``: uniformly;
* ``pps``: with probability proportional to frequency, without replacement (successive sampling: each draw
  proportional to the frequencies of the queries not yet drawn, numpy's ``Generator.choice`` with ``p``), so
  the set reads like the traffic;
* ``stratified``: per stratum by proportional allocation (largest remainders; every stratum that has queries
  gets at least one while the size allows), uniformly within it, so rare kinds of question are not lost.

**Split** by group hashing as the built-in sets are (:func:`workbench.data.querysets.split.assign_splits`, per
predicted type, the group being the query's id): a query's split is its hash's unless a type of three or more
queries would have an empty split. Query ids are ``t-`` and the first 12 hex digits of the key's sha256: stable
across samples and log sets.
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: The sampling methods of :func:`draw`.
METHODS = ("random", "pps", "stratified")

#: Function words of the readers' languages: a short query holding one is a phrase, not a term.
FUNCTION_WORDS = frozenset("""
a an the of in on at to for from by with and or not is are was be what who how why when where which does do
и в во на с со по к о об от для не что как кто где когда почему ли же это
का की के में है और से को क्या कैसे कौन
""".split())


@dataclass(frozen=True)
class TrafficQuery:
    """A distinct query of a log: ``key`` (normalised), ``text`` (the form typed most often), ``frequency``
    (searches), ``clients`` (distinct), ``query_type`` and ``script`` (predicted)."""

    key: str
    text: str
    frequency: int
    clients: int
    query_type: str
    script: str

    @property
    def stratum(self) -> str:
        """``query_type/script``."""
        return f"{self.query_type}/{self.script}"

    @property
    def query_id(self) -> str:
        """``t-`` + the first 12 hex digits of the key's sha256."""
        return "t-" + hashlib.sha256(self.key.encode("utf-8")).hexdigest()[:12]


def normalise(text: str) -> str:
    """The dedup key of a query text (module docstring); ``""`` for a text with nothing left."""
    from workbench.text.query import clean

    return " ".join(clean(text).casefold().split())


def predict_type(text: str) -> str:
    """``reference``, ``page_ref``, ``term`` or ``paraphrase`` (module docstring)."""
    from workbench.text import refs

    res = refs.parse(text)
    if res:
        return "page_ref" if isinstance(res.ref, refs.PageRef) else "reference"
    words = re.findall(r"\w+", text.casefold())
    if 0 < len(words) <= 3 and not any(w in FUNCTION_WORDS for w in words):
        return "term"
    return "paraphrase"


def distinct(texts: Iterable[str], clients: Iterable[str]) -> list[TrafficQuery]:
    """The distinct queries of searches given as parallel ``texts`` and ``clients`` (in time order), by
    descending frequency then key; texts with nothing left after cleaning are left out."""
    from collections import Counter

    from workbench.text.scripts import script_of

    forms: dict[str, Counter] = {}
    order: dict[str, dict[str, int]] = {}
    who: dict[str, set[str]] = {}
    for i, (text, client) in enumerate(zip(texts, clients, strict=True)):
        key = normalise(text)
        if not key:
            continue
        shown = " ".join(str(text).split())
        forms.setdefault(key, Counter())[shown] += 1
        order.setdefault(key, {}).setdefault(shown, i)
        who.setdefault(key, set()).add(str(client))
    out = []
    for key, counts in forms.items():
        text = min(counts, key=lambda f: (-counts[f], order[key][f]))
        out.append(TrafficQuery(key, text, sum(counts.values()), len(who[key]), predict_type(text), script_of(text)))
    out.sort(key=lambda q: (-q.frequency, q.key))
    return out


def allocate(sizes: dict[str, int], n: int) -> dict[str, int]:
    """Proportional allocation of ``n`` draws over strata of ``sizes`` (largest remainders, ties by name), at most
    a stratum's size, and at least one per non-empty stratum while ``n`` allows."""
    total = sum(sizes.values())
    n = min(n, total)
    if n <= 0:
        return {s: 0 for s in sizes}
    quota = {s: n * c / total for s, c in sizes.items()}
    got = {s: min(c, math.floor(quota[s])) for s, c in sizes.items()}
    nonempty = sorted((s for s in sizes if sizes[s] > 0), key=lambda s: (-sizes[s], s))
    for s in nonempty[:n]:  # one each (the largest strata when there are more strata than draws)
        got[s] = max(got[s], 1)
    while sum(got.values()) > n:  # the minimums took too many: take back where the most is above its quota
        s = max((s for s in got if got[s] > 1), key=lambda s: (got[s] - quota[s], got[s], s))
        got[s] -= 1
    for s in sorted(sizes, key=lambda s: (-(quota[s] - math.floor(quota[s])), s)):
        if sum(got.values()) >= n:
            break
        if got[s] < sizes[s]:
            got[s] += 1
    while sum(got.values()) < n:  # remainders exhausted by full strata: fill where there is room
        s = next(s for s in sorted(sizes) if got[s] < sizes[s])
        got[s] += 1
    return got


def draw(queries: Sequence[TrafficQuery], size: int, method: str, seed: int) -> list[TrafficQuery]:
    """``size`` of ``queries`` (all of them when fewer) by ``method`` (module docstring), in the order of
    ``queries``.

    Raises:
        ValueError: an unknown method, or ``size`` below 1.
    """
    import numpy as np

    if method not in METHODS:
        raise ValueError(f"method {method!r} is not one of {', '.join(METHODS)}")
    if size < 1:
        raise ValueError(f"size must be >= 1, got {size!r}")
    rng = np.random.default_rng(seed)
    n = len(queries)
    if size >= n:
        return list(queries)
    if method == "random":
        picked = set(rng.choice(n, size=size, replace=False).tolist())
    elif method == "pps":
        freq = np.array([q.frequency for q in queries], dtype=float)
        picked = set(rng.choice(n, size=size, replace=False, p=freq / freq.sum()).tolist())
    else:
        strata: dict[str, list[int]] = {}
        for i, q in enumerate(queries):
            strata.setdefault(q.stratum, []).append(i)
        alloc = allocate({s: len(ix) for s, ix in strata.items()}, size)
        picked = set()
        for s in sorted(strata):
            if alloc[s]:
                picked.update(rng.choice(strata[s], size=alloc[s], replace=False).tolist())
    return [q for i, q in enumerate(queries) if i in picked]


def rows(sampled: Sequence[TrafficQuery], seed: int,
         ratios: tuple[float, float, float] | None = None) -> list[dict[str, str | int]]:
    """The queries file's rows: ``query_id``, ``text``, ``query_type``, ``split``, ``group``, ``frequency``,
    ``clients``, ``script`` (the split by group hashing per type, the group the key's id)."""
    from workbench.data.querysets.split import DEFAULT_RATIOS, assign_splits

    groups: dict[str, list[str]] = {}
    for q in sampled:
        groups.setdefault(q.query_type, []).append(q.query_id)
    split = assign_splits(groups, seed, ratios or DEFAULT_RATIOS) if groups else {}
    return [{"query_id": q.query_id, "text": q.text, "query_type": q.query_type, "split": split[q.query_id],
             "group": q.query_id, "frequency": q.frequency, "clients": q.clients, "script": q.script}
            for q in sampled]
