"""Qrels layers: ``built`` (the labels the query-set builders derive from the corpora), ``human``
(the final grades of human judges), ``merged`` (human over built, pair by pair) and ``implicit`` (grades derived
from readers' clicks by ``workbench logs judge``: :mod:`workbench.judging.implicit`; like ``human`` it evaluates
only the queries it grades).

**The human grade of a pair** (:func:`final_grades`), from each rater's current judgment
(``wb_judge.current_judgments``) and the latest adjudication:

1. an adjudicated grade is final;
2. else, when every rater who graded it gave the same grade, that grade (*agreed*; *single*
   when only one rater has graded it so far);
3. else the mean of their grades rounded down (*mean*: two raters saying 1 and 2 give 1;
   0 and 2 give 1 — such pairs also wait in the adjudication queue).

"Cannot judge" is no grade: a pair only judged that way has no human grade. **A pair left short
by "cannot judge"** — a rater could not judge it and it has fewer usable grades than its pool's
``raters_per_pair`` — has no human grade either, however many grades it has: one rater's "cannot
judge" never makes the other's single grade final. When it happens the store adds a slot for
another rater when one is available (:meth:`~workbench.judging.store.JudgmentStore.judge`); the
pair waits for them, and when no rater is left to ask it goes to the adjudication queue
(:func:`~workbench.judging.agreement.disagreements`, :func:`short_pairs`); an adjudicated grade is
final as always. A judgment or
adjudication made on a document whose text has changed since (its stored
:func:`~workbench.judging.store.document_hash` differs from the built document's) is
*stale*: it is left out until re-judged, and counted in :attr:`FinalGrade.stale`.

**merged** takes the built qrels and, for every pair with a human grade, the human grade
instead — including 0 for a built label a human found not relevant.
"""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from workbench.types import Qrel

#: The qrels layers an experiment, ``eval``, ``tune`` and ``gate`` may use.
LAYERS = ("built", "human", "merged", "implicit")

#: The layer used when none is named.
DEFAULT_LAYER = "built"


@dataclass(frozen=True)
class FinalGrade:
    """The human grade of one (query, document) pair.

    Attributes:
        grade: 0, 1 or 2.
        basis: ``adjudicated``, ``agreed``, ``single`` or ``mean`` (see the module docstring).
        raters: how many raters' current, non-stale grades went into it.
        stale: how many judgments of the pair were left out because the document changed.
    """

    grade: int
    basis: str
    raters: int
    stale: int = 0


def final_grades(judgments: Iterable[Mapping], adjudications: Iterable[Mapping] = (),
                 doc_hashes: Mapping[str, str] | None = None) -> dict[tuple[str, str], FinalGrade]:
    """The human grade of every pair (see the module docstring).

    Args:
        judgments: each rater's current judgment: mappings with ``query_id``, ``doc_id``,
            ``grade`` (None for cannot judge), ``cannot_judge`` and ``doc_sha256`` (as
            :meth:`~workbench.judging.store.JudgmentStore.current` returns them).
        adjudications: the latest adjudication per pair (``query_id``, ``doc_id``, ``grade``,
            ``doc_sha256``).
        doc_hashes: doc_id → the built document's current hash; None: nothing is stale.

    Returns:
        ``{(query_id, doc_id): FinalGrade}`` for every pair with at least one usable grade.
    """

    def fresh(row: Mapping) -> bool:
        if doc_hashes is None or row.get("doc_sha256") is None:
            return True
        return doc_hashes.get(row["doc_id"]) == row["doc_sha256"]

    judgments = list(judgments)
    short = short_pairs(judgments, doc_hashes)
    grades: dict[tuple[str, str], list[int]] = defaultdict(list)
    stale: dict[tuple[str, str], int] = defaultdict(int)
    for j in judgments:
        key = (j["query_id"], j["doc_id"])
        if j.get("cannot_judge") or j.get("grade") is None:
            continue
        if not fresh(j):
            stale[key] += 1
            continue
        grades[key].append(int(j["grade"]))
    out: dict[tuple[str, str], FinalGrade] = {}
    for key, gs in grades.items():
        if key in short:
            continue  # waits for another rater, or the adjudicator
        if len(gs) == 1:
            out[key] = FinalGrade(gs[0], "single", 1, stale.get(key, 0))
        elif len(set(gs)) == 1:
            out[key] = FinalGrade(gs[0], "agreed", len(gs), stale.get(key, 0))
        else:
            out[key] = FinalGrade(sum(gs) // len(gs), "mean", len(gs), stale.get(key, 0))
    for a in adjudications:
        key = (a["query_id"], a["doc_id"])
        if not fresh(a):
            stale[key] += 1
            continue
        n = out[key].raters if key in out else 0
        out[key] = FinalGrade(int(a["grade"]), "adjudicated", n, stale.get(key, 0))
    return out


def is_stale(row: Mapping, doc_hashes: Mapping[str, str] | None) -> bool:
    """Whether a judgment or adjudication row was made on another text of the document than the
    built one (its ``doc_sha256`` differs from ``doc_hashes[doc_id]``; a row without a hash, or no
    ``doc_hashes``, is never stale) — the rule of :func:`final_grades`."""
    if doc_hashes is None or row.get("doc_sha256") is None:
        return False
    return doc_hashes.get(row["doc_id"]) != row["doc_sha256"]


def short_pairs(judgments: Iterable[Mapping], doc_hashes: Mapping[str, str] | None = None
                ) -> dict[tuple[str, str], dict]:
    """The pairs left short by "cannot judge" (see the module docstring): some rater's current, non-stale
    judgment is "cannot judge" and the pair has fewer current, non-stale grades than ``raters_per_pair``.

    Args:
        judgments: as :func:`final_grades` takes them; a row's ``raters_per_pair`` and ``open_slots`` (of its
            pair, as :meth:`~workbench.judging.store.JudgmentStore.current` gives them) are read; a pair whose
            rows lack ``raters_per_pair`` (in no pool: imported) is never short.
        doc_hashes: doc_id → the built document's hash; None: nothing is stale.

    Returns:
        ``{(query_id, doc_id): {"grades": n, "cannot_judge": n, "raters_per_pair": n, "open_slots": n}}``;
        ``open_slots`` 0 means no other rater is left to ask: the pair waits for an adjudicator.
    """

    seen: dict[tuple[str, str], dict] = {}
    for j in judgments:
        key = (j["query_id"], j["doc_id"])
        s = seen.setdefault(key, {"grades": 0, "cannot_judge": 0, "raters_per_pair": None, "open_slots": 0})
        if j.get("raters_per_pair") is not None:
            s["raters_per_pair"] = int(j["raters_per_pair"])
            s["open_slots"] = int(j.get("open_slots") or 0)
        if is_stale(j, doc_hashes):
            continue
        if j.get("cannot_judge") or j.get("grade") is None:
            s["cannot_judge"] += 1
        else:
            s["grades"] += 1
    return {k: s for k, s in seen.items()
            if s["cannot_judge"] and s["raters_per_pair"] is not None and s["grades"] < s["raters_per_pair"]}


def human_qrels(final: Mapping[tuple[str, str], FinalGrade]) -> list[Qrel]:
    """The ``human`` layer: one qrel per pair with a human grade (grade 0 included), sorted."""
    return sorted(Qrel(q, d, g.grade) for (q, d), g in final.items())


def merged_qrels(built: Iterable[Qrel], final: Mapping[tuple[str, str], FinalGrade]) -> list[Qrel]:
    """The ``merged`` layer: the built qrels with every humanly graded pair replaced (or added) by its human grade."""
    out = {(r.query_id, r.doc_id): r.relevance for r in built}
    out.update({key: g.grade for key, g in final.items()})
    return sorted(Qrel(q, d, rel) for (q, d), rel in out.items())


def qrels_sha256(qrels: Iterable[Qrel]) -> str:
    """sha256 hex of qrels as sorted TREC lines (what MLflow logs beside the layer's name)."""
    h = hashlib.sha256()
    for r in sorted(qrels):
        h.update(f"{r.query_id} 0 {r.doc_id} {r.relevance}\n".encode())
    return h.hexdigest()


# ---------------------------------------------------------------- choosing and loading a layer

def check_layer(value, where: str) -> str:
    """``value`` if it names a layer, else :class:`~workbench.errors.ConfigError` naming ``where`` (a file and
    key, or a command-line option) and the layers.

    Raises:
        ConfigError: ``value`` is not one of :data:`LAYERS`.
    """
    from workbench.errors import ConfigError

    if isinstance(value, str) and value in LAYERS:
        return value
    raise ConfigError(f"{where} must be one of {', '.join(LAYERS)} (built: the corpus-derived labels; human: the "
                      f"scholars' final grades; merged: human over built; implicit: grades from readers' clicks, "
                      f"workbench logs judge), got {value!r}")


@dataclass(frozen=True)
class LayerQrels:
    """The qrels of one layer for one dataset, with what an evaluation should say about them.

    Attributes:
        layer: ``built``, ``human`` or ``merged``.
        dataset: the dataset's name.
        qrels: the layer's qrels, sorted (``human``: grade-0 pairs included).
        sha256: :func:`qrels_sha256` of ``qrels`` (what MLflow logs beside the layer).
        human_pairs: pairs with a usable human grade (0 for ``built``).
        overridden: built pairs whose grade a human changed (``merged``; 0 otherwise).
        added: pairs a human graded that the built qrels lack (``merged``; 0 otherwise).
        stale: judgments and adjudications left out because the document's text changed since
            (see :func:`stale_count`).
        human_queries: the query ids with at least one human grade (empty for ``built``).
    """

    layer: str
    dataset: str
    qrels: tuple[Qrel, ...]
    sha256: str
    human_pairs: int = 0
    overridden: int = 0
    added: int = 0
    stale: int = 0
    human_queries: frozenset = frozenset()

    def evaluated(self, queries: Iterable) -> list:
        """The queries this layer evaluates, of ``queries`` (:class:`~workbench.types.Query` rows): every one
        for ``built`` and ``merged``; for ``human`` only those with a human grade (grade 0 included), since a
        query nobody judged has no human answer to score against."""
        queries = list(queries)
        if self.layer not in ("human", "implicit"):
            return queries
        return [q for q in queries if q.query_id in self.human_queries]

    def left_out(self, queries: Iterable) -> int:
        """How many of ``queries`` this layer does not evaluate (only ``human`` and ``implicit`` leave any out)."""
        queries = list(queries)
        return len(queries) - len(self.evaluated(queries))

    def describe(self, queries: Iterable | None = None) -> str:
        """One line for the console: the layer, its hash and counts, and (given the evaluated ``queries``)
        how many queries ``human`` left out."""
        parts = [f"qrels {self.layer} on {self.dataset} (sha256 {self.sha256[:12]}, {len(self.qrels)} pairs"]
        if self.layer == "merged":
            parts.append(f"; {self.human_pairs} human grades: {self.overridden} override a built label, "
                         f"{self.added} added")
        elif self.layer == "human":
            parts.append(f"; {self.human_pairs} human grades on {len(self.human_queries)} queries")
        elif self.layer == "implicit":
            parts.append(f"; {self.human_pairs} grades from clicks on {len(self.human_queries)} queries")
        parts.append(")")
        if self.stale:
            parts.append(f"; {self.stale} stale judgment(s) left out (the document changed since; re-judge them)")
        if queries is not None and self.layer in ("human", "implicit"):
            queries = list(queries)
            n = self.left_out(queries)
            parts.append(f"; {n} of {len(queries)} queries have no {self.layer} grade and are not evaluated")
        return "".join(parts)


def stale_count(judgments: Iterable[Mapping], adjudications: Iterable[Mapping] = (),
                doc_hashes: Mapping[str, str] | None = None) -> int:
    """How many current judgments (with a grade or cannot-judge) and latest adjudications were made on a
    document text that has changed since: their ``doc_sha256`` is set and differs from ``doc_hashes``
    (a document no longer in the dataset counts as changed). The same test as :func:`final_grades`'s."""
    if doc_hashes is None:
        return 0
    n = 0
    for row in (*judgments, *adjudications):
        sha = row.get("doc_sha256")
        if sha is not None and doc_hashes.get(row["doc_id"]) != sha:
            n += 1
    return n


def built_layer(ds) -> LayerQrels:
    """The ``built`` layer of a loaded dataset (:class:`~workbench.data.catalog.Dataset`); touches no database."""
    qrels = tuple(sorted(ds.qrels))
    return LayerQrels("built", ds.name, qrels, qrels_sha256(qrels))


def human_layers(ds, store) -> tuple[LayerQrels, LayerQrels]:
    """The ``human`` and ``merged`` layers of a loaded dataset from the judgment store, read as of one
    moment (:meth:`~workbench.judging.store.JudgmentStore.snapshot`).

    Document hashes are those of the built dataset's documents
    (:func:`~workbench.judging.store.document_hash`, computed for the judged documents only); a
    judgment made on another text is stale (:func:`final_grades`, :func:`stale_count`).

    Args:
        ds: the built dataset (:class:`~workbench.data.catalog.Dataset`).
        store: a :class:`~workbench.judging.store.JudgmentStore`.

    Raises:
        PgError: the store's server cannot be reached.
    """
    from workbench.judging.store import document_hash

    with store.snapshot():  # one moment: an adjudication never without the judgments it resolved
        judgments = store.current(ds.name)
        adjudications = store.adjudications(ds.name)
    wanted = {r["doc_id"] for r in (*judgments, *adjudications)}
    hashes = {d.doc_id: document_hash(d) for d in ds.documents if d.doc_id in wanted}
    final = final_grades(judgments, adjudications, hashes)
    stale = stale_count(judgments, adjudications, hashes)
    built = {(r.query_id, r.doc_id): r.relevance for r in ds.qrels}
    human = tuple(human_qrels(final))
    merged = tuple(merged_qrels(ds.qrels, final))
    overridden = sum(1 for key, g in final.items() if key in built and built[key] != g.grade)
    added = sum(1 for key in final if key not in built)
    queries = frozenset(q for q, _d in final)
    common: dict[str, Any] = dict(human_pairs=len(final), stale=stale, human_queries=queries)
    return (LayerQrels("human", ds.name, human, qrels_sha256(human), **common),
            LayerQrels("merged", ds.name, merged, qrels_sha256(merged), overridden=overridden, added=added, **common))


def implicit_layer(ds, home=None) -> LayerQrels:
    """The ``implicit`` layer of a loaded dataset: the grades ``workbench logs judge`` derived from clicks, kept
    for the dataset's queries and documents (:mod:`workbench.judging.implicit`).

    Raises:
        ConfigError: the dataset has no implicit qrels (names the command that derives them).
    """
    from workbench.judging import implicit
    from workbench.settings import home_dir

    rows, _provenance = implicit.read(home if home is not None else home_dir(), ds.name)
    queries = {q.query_id for q in ds.queries}
    docs = {d.doc_id for d in ds.documents}
    qrels = tuple(sorted(r for r in rows if r.query_id in queries and r.doc_id in docs))
    return LayerQrels("implicit", ds.name, qrels, qrels_sha256(qrels), human_pairs=len(qrels),
                      human_queries=frozenset(r.query_id for r in qrels))


def load_layer(layer: str, ds, *, store=None, home=None) -> LayerQrels:
    """The qrels of ``layer`` for a loaded dataset.

    ``built`` reads nothing else; ``implicit`` reads the home's implicit qrels file; ``human`` and ``merged``
    read the judgment store (``store``, else the home's: :meth:`~workbench.judging.store.JudgmentStore.open`,
    closed again).

    Raises:
        ConfigError: ``layer`` is not one of :data:`LAYERS`.
        PgError: the store's server cannot be reached.
    """
    check_layer(layer, "the qrels layer")
    if layer == "built":
        return built_layer(ds)
    if layer == "implicit":
        return implicit_layer(ds, home)
    own = store is None
    if own:
        from workbench.judging.store import JudgmentStore

        store = JudgmentStore.open(home)
    try:
        human, merged = human_layers(ds, store)
    finally:
        if own:
            store.close()
    return human if layer == "human" else merged


def evaluation_view(ds, lq: LayerQrels, splits: Iterable[str] | None = None):
    """The dataset as an evaluation under ``lq`` sees it: the layer's qrels, and the queries it evaluates
    (:meth:`LayerQrels.evaluated`). Lanes must still run on ``ds`` itself (every query: the candidate
    cache is keyed by the full query set).

    Args:
        ds: the built dataset.
        lq: a layer of the same dataset.
        splits: when given, the view must have at least one query of these splits.

    Raises:
        JudgeError: ``human`` and no query of ``splits`` has a human grade (names the dataset and the fix).
    """
    from dataclasses import replace

    queries = lq.evaluated(ds.queries)
    if splits is not None and lq.layer == "human":
        wanted = set(splits)
        if not any(q.split in wanted for q in queries):
            from workbench.judging.store import JudgeError

            raise JudgeError(f"no {'/'.join(sorted(wanted))} query of dataset {ds.name} has a human grade yet, so the "
                             "human layer has nothing to evaluate; judge a pool first (`workbench judge pool -e "
                             f"EXPERIMENT -d {ds.name}`, then the dashboard's Judge page) or use --qrels merged")
    return replace(ds, qrels=list(lq.qrels), queries=queries)
