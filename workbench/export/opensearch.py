"""A fused config exported as what OpenSearch 2.19.1 runs itself: a ``hybrid`` query and a search pipeline.

:func:`build_opensearch_export` turns a :class:`~workbench.eval.fusion.FusionSpec` over
:class:`~retrievers.opensearch.OpenSearchLane` lanes into an :class:`OpenSearchExport`:

* **the request** (``<name>.search.json``): ``{"size": top_k, "query": {"hybrid": {"pagination_depth": P,
  "queries": [lane 1's query, lane 2's query, ...]}}}``, each sub-query exactly the lane's own
  (:meth:`~retrievers.opensearch.OpenSearchLane.query_body`), in ``spec.lanes`` order, with string
  placeholders where per-query values go (the client replaces those JSON *values*, never text in the JSON):

  - ``"{{query_text}}"``: the query after the lane's :meth:`~retrievers.opensearch.OpenSearchLane.clean`
    (NFC, control characters → spaces, whitespace collapsed, cut at ``max_query_chars``), its first 256 words;
  - ``"{{query_vector}}"`` (in place of the array): the embedding of the cleaned query (the semantic lane's
    embedder, ``embed_queries``);
  - ``"{{max_expansions}}"`` (fuzzy lanes, an integer): ``max(1, min(50, 1000 // words))``;
  - ``"{{page_key}}"`` (page_ref lanes): :func:`~retrievers.opensearch.page_query_key` of the cleaned query.

* **the pipeline** (``<name>.pipeline.json``, the body of ``PUT _search/pipeline/<id>``), its one
  ``phase_results_processors`` entry taken from the neural-search plugin's documentation
  (https://opensearch.org/docs/2.19/search-plugins/search-pipelines/normalization-processor/ and
  .../score-ranker-processor/), checked against the 2.19.1.0 plugin's code:

  - ``weighted`` + ``norm = "minmax"`` → ``normalization-processor`` with ``normalization.technique = min_max``
    (per sub-query ``(s - min) / (max - min)`` over the hits every shard returned for it; a result of 0 becomes
    **0.001**; a sub-query whose hits all score the same gives 1.0) and ``combination.technique =
    arithmetic_mean`` with ``parameters.weights`` = the lane weights divided by their sum ``W`` (2.19 wants
    weights in [0, 1] summing to 1): the fused score is ``Σ_l (w_l / W) · norm_l(d)`` (a sub-query that did
    not return ``d`` adds 0 and its weight stays in the sum), i.e. the workbench's ``Σ_l w_l · norm_l(d)``
    divided by ``W``: the same order, and a ``min_score`` m is ``m / W`` on OpenSearch's scale;
  - ``rrf`` → ``score-ranker-processor`` with ``combination.technique = rrf`` and
    ``combination.parameters.rank_constant = k``: ``Σ_l 1 / (k + rank_l(d))``, ranks from 1 in each
    sub-query's list **on each shard** — Cormack et al.'s formula, as :func:`~workbench.eval.fusion.rrf`.

* ``fusion = "none"`` (one lane): the lane's own request, ``size = top_k``, no pipeline.

Refused (:class:`~workbench.errors.ConfigError`, naming the config, the lane and what to export instead):
``combsum``, ``combmnz`` and the ranx methods (no processor computes them), ``weighted`` with ``norm =
"zscore"`` (2.19.1's normalization-processor knows ``min_max``, ``l2`` and ``rrf`` only), ``rrf`` with a weight
other than 1.0 (2.19.1's RRF combination takes no weights), ``pin_lane``, a lane that is not an
``opensearch`` lane or has ``transliterate = true`` (its query forms are computed in Python), more than five
lanes (the hybrid query's limit), per-lane depths that differ (one ``pagination_depth`` cuts every
sub-query; a k-NN sub-query's ``k`` is per segment, so it does not cut a lane lower inside the hybrid query),
and lanes whose ``max_query_chars`` or embedders differ (one placeholder each).

``min_score`` is applied by the client (:meth:`OpenSearchExport.search`): 2.19 has no processor that drops
fused hits by score, and a request's ``min_score`` acts on the sub-queries' raw scores before normalisation
(observed on 2.19.1: ``min_score = 0.5`` dropped documents whose raw BM25 was 0.43 but fused score 0.5, and kept
one whose raw BM25 was 0.50 but fused score 0.15).

What differs from the workbench's own fusion is listed in ``<name>.opensearch.md``
(:meth:`OpenSearchExport.files`) and :attr:`OpenSearchExport.differences`.

**A production index** (lanes with ``index = { name = … }``, :mod:`retrievers.opensearch`): the request is written against
that index and its fields (the lanes' own templates), ties are cut by the lanes' ``id_field`` and hits read by it
(``docvalue_fields``), and the workbench writes nothing to that cluster, ``--verify`` included: the pipeline is
not installed there but sent inside each request's body (``"search_pipeline": {...}``, a temporary search
pipeline, OpenSearch 2.9+), so the parity is measured on the production index as it is. Installing the named
pipeline is the team's step (the README says how). Hits whose id is not a document of the dataset are dropped
and counted (:attr:`OpenSearchExport.last_unmapped`), as the lanes drop them.
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench._infra.jsonout import dumps as strict_json
from workbench.engines.os_client import describe
from workbench.errors import ConfigError, OpenSearchError
from workbench.eval.fusion import FusionSpec
from workbench.export.names import pipeline_id
from workbench.run import Hit, Run
from workbench.types import Query

#: The OpenSearch version (and neural-search plugin) the export is written for.
TARGET = "OpenSearch 2.19.1 with the neural-search plugin 2.19.1.0"
#: Placeholders of the request template (string values the client replaces; see the module docstring).
TEXT, VECTOR, EXPANSIONS, PAGE_KEY = "{{query_text}}", "{{query_vector}}", "{{max_expansions}}", "{{page_key}}"
#: The hybrid query takes at most this many sub-queries (neural-search 2.19).
MAX_SUBQUERIES = 5
#: Depth per lane when ``spec.depth`` is None: the experiment's default candidate depth (``depth = 100``).
DEFAULT_DEPTH = 100
#: Words of a text query sent at most (as :data:`retrievers.opensearch.MAX_QUERY_WORDS`).
MAX_WORDS = 256
#: neural-search 2.19's min_max maps a score equal to the sub-query's minimum to this, not to 0.
OS_MINMAX_FLOOR = 0.001
#: Another JSON export to name in refusals.
def parity_hints(spec: FusionSpec) -> dict[str, str]:
    """Why OpenSearch's ranking of ``spec`` can differ from the workbench's, by the cause
    :func:`workbench.export.parity.verify_run` finds (see the module docstring)."""
    if spec.method == "weighted" and spec.norm == "raw":
        outside = ("OpenSearch sums every clause over every document it matches, the workbench each lane's cached "
                   "top depth only: a document outside one lane's depth lacks that lane's score in the workbench")
        return {"depth": outside, "scores": outside + "; and OpenSearch's scores are float32",
                "tie": "a tie of float32 sums in OpenSearch, cut by doc_id in both"}
    return {
        "depth": "OpenSearch collects each sub-query's hits per shard and per segment (a k-NN clause's k is per "
                 "segment), not from the lane's top depth",
        "scores": "neural-search's min-max maps a lane's lowest score to 0.001, not 0, and scores are float32",
        "tie": "OpenSearch breaks fused ties by Lucene's internal doc id, the workbench by the tie-break lane, then "
               "doc_id",
    }


INSTEAD = "export it with `--format json` (the workbench's own fusion) instead"


@dataclass
class OpenSearchExport:
    """One fused config as an OpenSearch request template and search pipeline (build it with
    :func:`build_opensearch_export`).

    Attributes:
        name: the config's name (file names, the pipeline id ``wb-<name>``).
        spec: the fusion spec exported.
        lanes: lane name → opened :class:`~retrievers.opensearch.OpenSearchLane`, in ``spec.lanes`` order.
        es: the opensearch-py client; ``index``: the index searched.
        embedder: embeds ``{{query_vector}}`` (None without a semantic lane).
        depths: lane → hits of it that enter the fusion (the sub-query's ``k`` / ``pagination_depth``).
        request: the request template (placeholders as string values).
        pipeline: the pipeline body (None for ``fusion = "none"``); ``pipeline_id`` its id.
        min_score: the threshold on OpenSearch's scores (the config's ``min_score``, divided by the weight
            sum for ``weighted``; None: none), applied by :meth:`search` to the response (2.19 has no
            processor that drops fused hits by score).
        differences: what OpenSearch computes differently from the workbench, one sentence each.
        last_shortened: query_ids of the last :meth:`search` whose text hit Lucene's clause limit and was
            sent again with half the words.
    """

    name: str
    spec: FusionSpec
    lanes: dict[str, Any]
    es: Any
    index: str
    embedder: Any
    depths: dict[str, int]
    request: dict[str, Any]
    pipeline: dict[str, Any] | None
    pipeline_id: str | None
    min_score: float | None
    weight_sum: float
    differences: list[str]
    last_shortened: set[str] = field(default_factory=set)
    #: The lanes read a production index (read only: the pipeline goes in each request's body, nothing is installed).
    production: bool = False
    #: Where a hit's doc_id is (``_id`` or a keyword field of the production index).
    id_field: str = "_id"
    #: The dataset's doc ids (a production index): hits outside them are dropped and counted in ``last_unmapped``.
    known_ids: Any = None
    last_unmapped: int = 0
    _installed: bool = False

    # ------------------------------------------------------------ files

    def files(self, provenance: Mapping[str, Any] | None = None) -> dict[str, str]:
        """File name → text (``provenance``: key → value lines appended to the ``.md``): ``<name>.search.json``
        (the request template), ``<name>.pipeline.json`` (the body of ``PUT _search/pipeline/<pipeline_id>``,
        absent for ``fusion = "none"``) and ``<name>.opensearch.md`` (how to install and call them, the
        formulas, the differences)."""
        from workbench.export.names import comment_text, file_stem

        stem = file_stem(self.name)
        out = {f"{stem}.search.json": strict_json(self.request, indent=2, ensure_ascii=False) + "\n"}
        if self.pipeline is not None:
            out[f"{stem}.pipeline.json"] = strict_json(self.pipeline, indent=2, ensure_ascii=False) + "\n"
        prov = "".join(f"- {comment_text(k)}: {comment_text(v)}\n" for k, v in (provenance or {}).items())
        out[f"{stem}.opensearch.md"] = self._readme() + (f"\n## Provenance\n\n{prov}" if prov else "")
        return out

    def _readme(self) -> str:
        s, lanes = self.spec, list(self.lanes)
        from workbench.export.names import comment_text, file_stem

        stem = file_stem(self.name)
        lines = [f"# {comment_text(self.name)}: engine-native export for {TARGET}", ""]
        if self.production:
            lines += ["## Production index, read only", "",
                      f"Written against your index `{self.index}` and its fields, as the lanes read it. The workbench "
                      "writes nothing to that cluster: no index, no document, no pipeline. "
                      + ("`--verify` sends the pipeline inside each request's body (`\"search_pipeline\": {...}`, a "
                         "temporary search pipeline), so the parity is measured on your index as it stands. Installing "
                         "the named pipeline below is your step (or keep sending it in the body as `search_pipeline`)."
                         if self.pipeline is not None else "`--verify` runs the request on your index as it stands.")
                      + (f" Hits are read by `{self.id_field}` (`docvalue_fields`) and ties cut by it."
                         if self.id_field != "_id" else ""), ""]
        if self.pipeline is not None:
            lines += ["## Install", "",
                      "The cluster needs the k-NN and neural-search plugins (not ml-commons). Create the pipeline once:",
                      "", "```", f"PUT _search/pipeline/{self.pipeline_id}", f"<body: {stem}.pipeline.json>",
                      "```", "", "and send every query with it:", "", "```",
                      f"POST {self.index}/_search?search_pipeline={self.pipeline_id}",
                      f"<body: {stem}.search.json with the placeholders replaced>", "```", ""]
        else:
            lines += ["## Install", "", "Nothing to install: one lane, its own query.", "", "```",
                      f"POST {self.index}/_search", f"<body: {stem}.search.json with the placeholders replaced>",
                      "```", ""]
        lines += ["## Placeholders", "",
                  "Replace these JSON *values* (build the request as an object and set the values; never paste the",
                  "query into the JSON text):", "",
                  f"First clean the query as the workbench does (NFC, control characters to spaces, whitespace "
                  f"collapsed, cut at a word boundary to {self._max_chars()} characters); an empty query gets an "
                  "empty ranking (send nothing).", ""]
        if TEXT in json.dumps(self.request):
            lines.append(f"* `\"{TEXT}\"`: the cleaned query's first {MAX_WORDS} words;")
        if VECTOR in json.dumps(self.request):
            lines.append(f"* `\"{VECTOR}\"` (replaced by the array): the embedding of the cleaned query by "
                         f"`{getattr(self.embedder, 'model_id', '?')}` (its query side);")
        if EXPANSIONS in json.dumps(self.request):
            lines.append(f"* `\"{EXPANSIONS}\"` (an integer): `max(1, min(50, 1000 // words))`, words of the text "
                         "sent (keeps the fuzzy expansion under Lucene's 1,024-clause limit);")
        if PAGE_KEY in json.dumps(self.request):
            lines.append(f"* `\"{PAGE_KEY}\"`: the page key of the cleaned query (canonical `PTS M 1.56`, CST "
                         "`P1.56`, else the query itself).")
        lines += ["", "## Formula", ""]
        if s.method == "rrf":
            lines += [f"`score-ranker-processor`, `combination.technique = rrf`, `rank_constant = {self.spec.k:g}`: "
                      f"score(d) = Σ over the sub-queries 1 / ({self.spec.k:g} + rank(d)), ranks from 1 in each "
                      "sub-query's hits on each shard (Cormack, Clarke and Büttcher, SIGIR 2009). The workbench's "
                      "`rrf` computes the same sum over each lane's top `depth` hits."]
        elif s.method == "weighted":
            w = self._weights()
            lines += ["`normalization-processor`, `normalization.technique = min_max`, `combination.technique = "
                      f"arithmetic_mean`, `weights = {[round(x / self.weight_sum, 12) for x in w]}` (lanes "
                      f"{lanes}: the config's weights {w} divided by their sum W = {self.weight_sum:g}, because "
                      "2.19 requires weights in [0, 1] that sum to 1).",
                      "",
                      "score(d) = Σ_l (w_l / W) · norm_l(d), norm_l = (s − min) / (max − min) over the hits each "
                      "sub-query returned; a sub-query that did not return d adds 0 and keeps its weight in the "
                      "sum. The workbench's `weighted` is Σ_l w_l · norm_l(d): OpenSearch's score is the "
                      f"workbench's divided by W = {self.weight_sum:g}, the same order."]
        else:
            lines += [f"One lane ({lanes[0]}): its own query and score; no pipeline."]
        if self.spec.min_score is not None:
            lines += ["", f"`min_score` = {self.spec.min_score:g} on the workbench's scale is **{self.min_score:g}** on "
                      "OpenSearch's" + (f" (divided by W = {self.weight_sum:g})" if s.method == "weighted" else "")
                      + ". OpenSearch 2.19 cannot drop fused hits by score (a request's `min_score` acts on the "
                      "sub-queries' raw scores, before normalisation, not on the fused score): drop hits below it "
                      "in the client." if s.method != "none" else
                      f"`min_score` = {self.spec.min_score:g} (the lane's scale) is in the request as `min_score` = "
                      f"{self.request.get('min_score'):g} (OpenSearch's `_score`)."]
        if s.method == "none":
            lines += ["", "## Depth", "", f"`size` = {self.request['size']} (top_k, at most the lane's depth "
                      f"{next(iter(self.depths.values()))}), sorted by `_score` then "
                      f"`{next(iter(self.request['sort'][1]))}`, as the lane.", "",
                      "## Differences from the workbench's fusion", ""]
            lines += [f"* {d}" for d in self.differences]
            return "\n".join(lines) + "\n"
        lines += ["", "## Depth", "",
                  "Per lane the fusion reads " + ", ".join(f"{ln}: {d}" for ln, d in self.depths.items())
                  + " hits. In the request the hybrid query's `pagination_depth` = "
                  f"{self.request.get('query', {}).get('hybrid', {}).get('pagination_depth', '-')} is how many hits "
                  "**each shard** collects per sub-query (a k-NN sub-query's `k`, the same number, is per segment "
                  "graph: it does not cut the lane by itself); the normalisation (min-max over those "
                  "hits, from every shard) or the RRF ranks (per shard) then read them. The workbench normalises "
                  "and ranks over the lane's top `depth` hits of the whole index. The two agree on a one-shard "
                  "index (the workbench builds its indexes with one) when no hits tie at the depth cut.", "",
                  "## Differences from the workbench's fusion", ""]
        lines += [f"* {d}" for d in self.differences]
        return "\n".join(lines) + "\n"

    def _max_chars(self) -> int:
        return next(iter(self.lanes.values())).max_query_chars

    def _weights(self) -> list[float]:
        return [float((self.spec.weights or {}).get(ln, 1.0)) for ln in self.lanes]

    # ------------------------------------------------------------ run

    def install(self) -> None:
        """Create (or replace) the search pipeline on the node (``PUT _search/pipeline/<pipeline_id>``).

        Raises:
            OpenSearchError: the node refused it (names the pipeline and the node's reason).
        """
        if self.pipeline is None or self.production:  # a production cluster is never written to
            self._installed = True
            return
        try:
            self.es.transport.perform_request("PUT", f"/_search/pipeline/{self.pipeline_id}", body=self.pipeline)
        except Exception as exc:
            raise OpenSearchError(f"export {self.name}: OpenSearch refused the search pipeline {self.pipeline_id!r} "
                                  f"({json.dumps(self.pipeline, ensure_ascii=False)}): {describe(exc)}") from None
        self._installed = True

    def values(self, text: str, vector: Sequence[float] | None = None, *, max_words: int = MAX_WORDS
               ) -> dict[str, Any] | None:
        """Placeholder → value for one query (None when the cleaned query is empty: an empty ranking)."""
        from workbench.text.refs import page_query_key

        lane = next(iter(self.lanes.values()))
        cleaned = lane.clean(text)
        if not cleaned:
            return None
        words = cleaned.split()[:max(1, max_words)]
        out: dict[str, Any] = {TEXT: " ".join(words), EXPANSIONS: max(1, min(50, 1000 // len(words))),
                               PAGE_KEY: page_query_key(cleaned)}
        if vector is not None:
            out[VECTOR] = [float(x) for x in vector]
        return out

    def fill(self, values: Mapping[str, Any]) -> dict[str, Any]:
        """The request template with each placeholder *value* replaced (a new dict; JSON text is never formatted).

        Raises:
            KeyError: the template holds a placeholder ``values`` lacks.
        """
        def walk(node: Any) -> Any:
            if isinstance(node, dict):
                return {k: walk(v) for k, v in node.items()}
            if isinstance(node, list):
                return [walk(v) for v in node]
            if isinstance(node, str) and node in (TEXT, VECTOR, EXPANSIONS, PAGE_KEY):
                return copy.deepcopy(values[node])
            return node
        return walk(self.request)

    def search(self, queries: Sequence[Query]) -> tuple[Run, dict[str, float]]:
        """Run the exported request (through the pipeline, installed first) for every query.

        Returns:
            the :class:`~workbench.run.Run` (doc_id, OpenSearch's fused score, best first; ``min_score`` and
            ``top_k`` applied; ties re-sorted by doc_id as every Run is) and the latency in ms per query_id
            (the request's round trip plus an equal share of the batch's embedding time).

        Raises:
            OpenSearchError: the pipeline or a request is refused (names the export, the query and the reason).
        """
        if not self._installed:
            self.install()
        self.last_shortened = set()
        lane = next(iter(self.lanes.values()))
        vectors: list[Any] = [None] * len(queries)
        share = 0.0
        if self.embedder is not None and queries:
            t0 = time.perf_counter()
            vectors = list(self.embedder.embed_queries([lane.clean(q.text) for q in queries]))
            share = (time.perf_counter() - t0) * 1000 / len(queries)
        rows: dict[str, list[Hit]] = {}
        latency: dict[str, float] = {}
        params = {"search_pipeline": self.pipeline_id} if self.pipeline_id and not self.production else {}
        self.last_unmapped = 0
        for q, vec in zip(queries, vectors):
            t0 = time.perf_counter()
            resp = self._one(q, vec, params)
            hits: list[Hit] = []
            for h in (resp or {}).get("hits", {}).get("hits", []):
                score = float(h["_score"])
                if self.spec.method == "none" and lane.mode == "semantic":
                    score = 2.0 * score - 1.0  # the lane's own scale: cosine
                hid = self._hit_id(h)
                if self.known_ids is not None and hid not in self.known_ids:
                    self.last_unmapped += 1
                    continue
                if self.min_score is None or score >= self.min_score:
                    hits.append(Hit(hid, score))
            rows[q.query_id] = hits[: self.spec.top_k]
            latency[q.query_id] = (time.perf_counter() - t0) * 1000 + share
        return Run(rows, self.name), latency

    def _hit_id(self, h: Mapping[str, Any]) -> str:
        """A hit's doc_id: its ``_id``, or the value of ``id_field`` (``docvalue_fields``)."""
        if self.id_field == "_id":
            return str(h["_id"])
        got = (h.get("fields") or {}).get(self.id_field) or [None]
        return str(got[0]) if got[0] is not None else f"<no {self.id_field}: _id {h['_id']}>"

    def _one(self, q: Query, vec, params: dict) -> dict | None:
        words = MAX_WORDS
        while True:
            vals = self.values(q.text, vec, max_words=words)
            if vals is None:
                return None
            body = self.fill(vals)
            if self.production and self.pipeline is not None:  # a temporary pipeline: nothing installed there
                body["search_pipeline"] = self.pipeline
            try:
                return self.es.search(index=self.index, body=body, params=params)
            except Exception as exc:
                what = describe(exc)
                if ("too_many_clauses" in what or "maxClauseCount" in str(exc)) and words > 1:
                    words //= 2
                    self.last_shortened.add(q.query_id)
                    continue
                raise OpenSearchError(f"export {self.name}: OpenSearch failed on index {self.index}"
                                      + (f" with pipeline {self.pipeline_id!r}" if self.pipeline_id else "")
                                      + f" for query {q.query_id} ({q.text[:60]!r}): {what}") from None


# ---------------------------------------------------------------- build

def _refuse(name: str, what: str) -> ConfigError:
    return ConfigError(f"config {name}: cannot export to {TARGET}: {what}")


def _depths(name: str, spec: FusionSpec, default: int) -> dict[str, int]:
    out = {}
    for ln in spec.lanes:
        d = spec.depth.get(ln, default) if isinstance(spec.depth, Mapping) else (spec.depth or default)
        if not isinstance(d, int) or isinstance(d, bool) or not 1 <= d <= 10000:
            raise _refuse(name, f"lane {ln}'s depth {d!r} must be an integer in 1..10000 (OpenSearch's result window)")
        out[ln] = d
    return out


def _template(lane, depth: int) -> dict[str, Any]:
    """The lane's query with placeholders where the per-query values go (a ``template`` lane's own file, with the
    depth and ef_search filled in: its text, vector and max_expansions placeholders are the export's)."""
    if lane.mode == "template":
        from workbench.engines.os_template import fill_template

        return fill_template(lane.template, {"{{k}}": depth, "{{ef_search}}": max(lane.ef_search, depth)})
    sentinel = "wbexportplaceholder"
    body = lane.query_body(sentinel, depth, [0.0])
    q = body["query"]

    def walk(node: Any, key: str = "") -> Any:
        if isinstance(node, dict):
            out = {}
            for k, v in node.items():
                if k == "vector" and isinstance(v, list):
                    out[k] = VECTOR
                elif k == "max_expansions" and lane.mode == "fuzzy":
                    out[k] = EXPANSIONS
                else:
                    out[k] = walk(v, k)
            return out
        if isinstance(node, list):
            return [walk(v, key) for v in node]
        if node == sentinel:
            return PAGE_KEY if lane.mode == "page_ref" else TEXT
        return node
    return walk(q)


def build_opensearch_export(name: str, lanes: Mapping[str, Any], spec: FusionSpec, es: Any, index: str,
                            embedder: Any = None, *, depth: int = DEFAULT_DEPTH) -> OpenSearchExport:
    """The OpenSearch export of one fused config (see the module docstring).

    Args:
        name: the config's name.
        lanes: lane name → opened :class:`~retrievers.opensearch.OpenSearchLane`, in ``spec.lanes`` order.
        spec: the config's fusion.
        es: the opensearch-py client the lanes use; ``index``: the index they search.
        embedder: the query embedder of the semantic lanes (default: theirs).
        depth: hits per lane when ``spec.depth`` is None (the experiment's cached depth, default 100).

    Raises:
        ConfigError: what cannot be exported (the module docstring's list), naming the config, the lane
            and what to do instead.
    """
    if spec.lane_min_score:
        raise _refuse(name, f"lane_min_score ({', '.join(spec.lane_min_score)}): a hybrid query cannot drop a "
                            "sub-query's hits by their own score before normalisation; export with --format json "
                            "(the workbench applies it) or drop lane_min_score")
    if list(lanes) != list(spec.lanes):
        raise _refuse(name, f"the lanes given {list(lanes)} are not the config's lanes {list(spec.lanes)} in order")
    for ln, lane in lanes.items():
        if not (hasattr(lane, "query_body") and hasattr(lane, "mode") and hasattr(lane, "index")):  # an OpenSearchLane
            raise _refuse(name, f"lane {ln} is not an opensearch lane ({type(lane).__name__}): every lane must "
                          f"be a query on the one index; {INSTEAD}")
        if lane.transliterate:
            raise _refuse(name, f"lane {ln} has transliterate = true: its query forms (IAST, Pali variants) are "
                          f"computed in Python per query; drop transliterate for the export, or {INSTEAD}")
        if str(getattr(lane.index, "name", lane.index)) != str(getattr(index, "name", index)):
            raise _refuse(name, f"lane {ln} searches index {lane.index}, not {index}: a hybrid query reads one index")
    production = {ln: bool(getattr(lane, "production", False)) for ln, lane in lanes.items()}
    id_fields = {ln: getattr(lane, "sort_field", "doc_id") for ln, lane in lanes.items()}
    if any(production.values()) and (not all(production.values()) or len(set(id_fields.values())) > 1
                                     or len({lane.url for lane in lanes.values()}) > 1):
        raise _refuse(name, f"the lanes read production index {index} in different ways (id_field {id_fields}, "
                      "clusters or production flags differ); give them one url_env and one id_field")
    if spec.pin_lane is not None:
        raise _refuse(name, f"pin_lane = {spec.pin_lane!r} puts a reference lane's answers first, which no "
                      f"search-pipeline processor does; drop pin_lane, or {INSTEAD}")
    if spec.method not in ("rrf", "weighted", "none"):
        raise _refuse(name, f"fusion {spec.method!r} has no OpenSearch processor (2.19.1 has min-max + "
                      f"arithmetic mean and RRF): use fusion = 'weighted' (norm = 'minmax') or 'rrf', or {INSTEAD}")
    if spec.method == "weighted" and spec.norm not in ("minmax", "raw"):
        raise _refuse(name, f"norm = {spec.norm!r}: the normalization-processor of 2.19.1 knows min_max, l2 and "
                      f"rrf, not z_score; use norm = 'minmax' (or 'raw', a bool.should of boosted clauses), or {INSTEAD}")
    if spec.method == "weighted" and spec.norm == "raw":
        sem = [ln for ln, lane in lanes.items() if lane.mode == "semantic"]
        if sem:
            raise _refuse(name, f"lane {sem[0]} is a semantic lane, whose workbench score is the cosine 2·_score − 1, "
                          "while a bool.should adds OpenSearch's _score: put its k-NN clause in a template lane "
                          f"(mode = 'template', raw _score) for norm = 'raw', or {INSTEAD}")
    weights = [float((spec.weights or {}).get(ln, 1.0)) for ln in spec.lanes]
    if spec.method == "rrf" and any(w != 1.0 for w in weights):
        raise _refuse(name, f"rrf with weights {dict(zip(spec.lanes, weights))}: 2.19.1's score-ranker-processor "
                      f"takes rank_constant only, no weights; set every weight to 1.0, or {INSTEAD}")
    if spec.method == "none" and len(lanes) != 1:
        raise _refuse(name, f"fusion 'none' takes one lane, got {list(lanes)}")
    if len(lanes) > MAX_SUBQUERIES:
        raise _refuse(name, f"{len(lanes)} lanes; the hybrid query takes at most {MAX_SUBQUERIES} sub-queries; {INSTEAD}")
    if spec.method == "weighted" and sum(weights) <= 0:
        raise _refuse(name, "every lane's weight is 0")
    chars = {ln: lane.max_query_chars for ln, lane in lanes.items()}
    if len(set(chars.values())) > 1:
        raise _refuse(name, f"the lanes cut queries at different lengths (max_query_chars {chars}); the request "
                      "has one {{query_text}}: give them one max_query_chars")
    semantic = {ln: lane for ln, lane in lanes.items() if lane.embedder is not None}  # semantic, or a k-NN template
    models = {ln: lane.embedder.model_id for ln, lane in semantic.items()}
    if len(set(models.values())) > 1:
        raise _refuse(name, f"the semantic lanes use different embedders {models}; the request has one "
                      "{{query_vector}}: use one embedder")
    if embedder is None and semantic:
        embedder = next(iter(semantic.values())).embedder
    depths = _depths(name, spec, depth)
    if spec.tiebreak_lane is not None and spec.tiebreak_lane not in lanes:
        raise _refuse(name, f"tiebreak_lane {spec.tiebreak_lane!r} is not among the lanes {list(lanes)}")

    pid = None
    pipeline = None
    weight_sum = 1.0
    min_score = spec.min_score
    diffs: list[str] = []
    if spec.method == "none":
        (ln, lane), = lanes.items()
        body = lane.query_body("wbexportplaceholder", depths[ln], [0.0])
        request = {"size": min(spec.top_k, depths[ln]), "query": _template(lane, depths[ln]),
                   "sort": body["sort"], "track_scores": True, "track_total_hits": False, "_source": False}
        diffs.append("none: the lane's own query; ties are cut by doc_id as in the workbench (the request sorts "
                     "by _score, then doc_id).")
        if lane.mode == "semantic":
            diffs.append("the semantic lane's _score is the lucene engine's (1 + cos) / 2; the workbench's score "
                         "(and min_score) is the cosine = 2 * _score - 1.")
    elif spec.method == "weighted" and spec.norm == "raw":
        # Σ w_l · score_l(d) is what a bool.should of the lanes' queries, each boosted by its weight, scores: no
        # pipeline; each clause wrapped in a bool whose boost multiplies its score (any query takes one)
        subs = [{"bool": {"must": [_template(lane, depths[ln])], "boost": w}}
                for (ln, lane), w in zip(lanes.items(), weights) if w > 0]
        request = {"size": spec.top_k, "query": {"bool": {"should": subs, "minimum_should_match": 1}},
                   "sort": [{"_score": "desc"}, {next(iter(id_fields.values())): "asc"}], "track_scores": True,
                   "track_total_hits": False, "_source": False}
        diffs += ["weighted raw: a bool.should of the lanes' queries, each boosted by its weight (the sum of boosted "
                  "clauses the workbench's norm = 'raw' computes); no search pipeline.",
                  "OpenSearch sums every clause over every document it matches; the workbench sums each lane's top "
                  "depth only: a document outside a lane's cached depth gains that lane's score in OpenSearch (a "
                  "constant_score clause matching more documents than the depth is the common case).",
                  "scores are float32 in OpenSearch (the workbench: float64): sums within about 1e-7 relative can "
                  "swap; ties are cut by doc_id in both (the request sorts by _score, then doc_id)."]
        if spec.tiebreak_lane is not None:
            diffs.append(f"tiebreak_lane {spec.tiebreak_lane!r} is NOT applied: OpenSearch cannot break ties by "
                         "another lane's raw score.")
    else:
        pdepth = max(depths.values())
        if len(set(depths.values())) > 1:
            # a k-NN sub-query's k does not cut it either: k is per graph (segment), so inside a hybrid query it
            # brings up to pagination_depth hits (observed on 2.19.1: depth fuzzy 20 / semantic 10 fused ~38
            # documents where the workbench fuses ~29)
            raise _refuse(name, f"per-lane depths {depths}: the hybrid query's one pagination_depth cuts every "
                          "sub-query to the same depth (a k-NN lane's k is per segment and does not cut it); give "
                          f"every lane one depth, or {INSTEAD}")
        subs = [_template(lane, depths[ln]) for ln, lane in lanes.items()]
        request = {"size": spec.top_k, "query": {"hybrid": {"pagination_depth": pdepth, "queries": subs}},
                   "_source": False}
        pid = pipeline_id(name)
        if spec.method == "rrf":
            if not (1 <= spec.k <= 10000 and float(spec.k).is_integer()):
                raise _refuse(name, f"rrf k = {spec.k!r}: the score-ranker-processor's rank_constant is an integer "
                              f"in 1..10000; use such a k, or {INSTEAD}")
            pipeline = {"description": f"workbench config {name}: RRF (k = {int(spec.k)}) of {list(lanes)}",
                        "phase_results_processors": [{"score-ranker-processor": {
                            "combination": {"technique": "rrf", "parameters": {"rank_constant": int(spec.k)}}}}]}
            diffs.append("RRF ranks are counted per shard (each shard's own list per sub-query): on an index of "
                         "several shards a document's rank is not its rank in the whole index as in the workbench.")
        else:
            weight_sum = math.fsum(weights)
            pipeline = {"description": f"workbench config {name}: min-max, weighted arithmetic mean of {list(lanes)}",
                        "phase_results_processors": [{"normalization-processor": {
                            "normalization": {"technique": "min_max"},
                            "combination": {"technique": "arithmetic_mean",
                                            "parameters": {"weights": [w / weight_sum for w in weights]}}}}]}
            if min_score is not None:
                min_score = min_score / weight_sum
            diffs += [f"scores are the workbench's divided by the weight sum W = {weight_sum:g} (arithmetic_mean "
                      "with weights normalised to sum 1); the order is the same.",
                      f"min_max maps a lane's minimum to {OS_MINMAX_FLOOR} (the workbench: 0), so a document at a "
                      f"lane's lowest retrieved score gains {OS_MINMAX_FLOOR}·w_l/W over one the lane did not "
                      "retrieve: fused scores closer than that can swap. A lane whose hits all score the same "
                      "maps to 1.0 in both.",
                      "scores are float32 in OpenSearch (the workbench: float64): fused scores within about 1e-7 "
                      "relative can swap."]
        diffs.append("pagination_depth cuts every sub-query per shard; min-max takes min and max "
                     "over all shards' returned hits of a sub-query. On the workbench's one-shard indexes this is "
                     "the lane's top depth, as in the workbench.")
        diffs.append("within a lane, hits of equal score are ordered by Lucene's internal doc id in OpenSearch and "
                     "by doc_id in the workbench: which of them falls inside the depth cut and (RRF) which rank each "
                     "gets can differ.")
        diffs.append("fused ties: OpenSearch orders them by Lucene's internal doc id; the workbench by "
                     + (f"the raw score of tiebreak_lane {spec.tiebreak_lane!r}, then " if spec.tiebreak_lane else "")
                     + "doc_id. OpenSearch cannot break ties by another lane's raw score: a config's "
                     "tiebreak_lane is not exported" + (" (this one's is NOT applied)." if spec.tiebreak_lane else "."))
    if spec.min_score is not None and spec.method != "none":
        diffs.append("min_score is not applied by OpenSearch (no 2.19 processor drops fused hits by score): the "
                     f"client drops hits below {min_score:g} (OpenSearch's scale).")
    if spec.min_score is not None and spec.method == "none":
        lane = next(iter(lanes.values()))
        engine_min = (spec.min_score + 1.0) / 2.0 if lane.mode == "semantic" else spec.min_score
        request["min_score"] = engine_min
        min_score = spec.min_score
    diffs.append("query preprocessing (cleaning, the 256-word cut, max_expansions, the page key, the embedding) is "
                 "the client's, as the placeholders say; a query over Lucene's 1,024-clause limit is resent with "
                 "half the words, as the lane does.")
    prod = all(production.values())
    id_field = next(iter(id_fields.values())) if prod else "_id"
    if prod:
        if id_field != "_id":
            request["docvalue_fields"] = [id_field]
        diffs.append(f"production index {index}, read only: nothing was installed or written there; the pipeline is "
                     "sent in each request's body (a temporary search pipeline) when verified. Hits whose id is not "
                     "a document of the dataset are dropped in both, counted as unmapped.")
    first = next(iter(lanes.values()))
    return OpenSearchExport(name=name, spec=spec, lanes=dict(lanes), es=es, index=str(getattr(index, "name", index)),
                            embedder=embedder, depths=depths, request=request, pipeline=pipeline, pipeline_id=pid,
                            min_score=min_score, weight_sum=weight_sum, differences=diffs, production=prod,
                            id_field=id_field, known_ids=getattr(first, "known_ids", None) if prod else None)
