"""OpenSearch lanes: the third seed's search modes over an index built by :mod:`workbench.engines.os_index`.

One class, :class:`OpenSearchLane`, with a ``mode``:

* ``fuzzy`` — ``match`` on ``content.text`` (ICU-folded) with ``fuzziness`` (default
  ``AUTO``) and ``operator`` (default ``or``): the seed's default mode. Raw score: BM25.
* ``exact`` — the seed's exact mode: a ``term`` on ``content.exact`` (the whole text
  equals the query, case-insensitively; boost 2) or a ``match_phrase`` on
  ``content.words`` (the words in order, diacritics kept: ``metta`` does *not* find
  ``mettā``). Raw score: BM25 (sum of the two clauses).
* ``lemma`` — ``match`` on ``content.lemma``: the query is analysed by the
  ``synonym_graph`` analyser, so any DPD form of a Pali word finds every form of its
  lemma. Raw score: BM25.
* ``page_ref`` — searches ``page_refs`` / ``pages`` only: the query is read with the
  reference grammar (:func:`workbench.text.refs.parse_page_ref`: ``M i 56``, ``MN i 56``,
  ``PTS M 1.56``, CST ``P1.56``) into the indexed canonical key; a ``term`` on
  ``page_refs`` (the page starts in the document, boost 2) or ``pages`` (the document
  lies on it, boost 1), ``constant_score``, so the raw score is 2 or 1 (3 when both).
  A query that is not a page reference is looked up verbatim (whitespace collapsed).
* ``semantic`` — ``knn`` on ``content.vector`` (Lucene HNSW) with ``k`` = the depth and
  ``method_parameters.ef_search`` = ``max(ef_search, k)``. Raw score: **cosine
  similarity** = ``2 * _score - 1`` (the lucene engine's ``cosinesimil`` score is
  ``(1 + cos) / 2``), higher is better. A query's filter goes inside the k-NN query
  (``filter_mode = "efficient"``, the default: the lucene engine returns k admitted neighbours) or after it
  (``"post"``: ``post_filter`` on the k nearest, so a selective filter leaves fewer than k, as mint's design
  does). ``exact = true`` scores every admitted vector with the k-NN score script (``knn_score``,
  ``cosinesimil``, which scores ``(1 + cos) / 2`` as the HNSW does, measured: the same cosines to 1e-5): the
  ground truth the HNSW lane is measured against (:mod:`workbench.eval.ann`).

* ``template`` — the query a team really sends: a JSON file of query DSL (``template = "PATH"``, relative to the
  working folder or the repository) with placeholders as whole JSON string values (:data:`PLACEHOLDERS`):
  ``"{{query_text}}"`` (the cleaned query, at most 256 words), ``"{{k}}"`` (the depth), ``"{{query_vector}}"``
  (the query embedded by the lane's ``embedder``), ``"{{max_expansions}}"`` (the fuzzy mode's
  ``max(1, min(50, 1000 // words))``) and ``"{{ef_search}}"`` (``max(ef_search, k)``). The file holds a query
  (``{"match": …}``) or a body with only ``query``. Raw score: OpenSearch's ``_score``, as returned. A template
  equal to a mode's query returns that mode's run (``tests/integration/engines/test_os_template.py``).
  The template's digest keys the candidate cache, so an edited file is a new lane.

Every mode sorts by ``_score`` then ``doc_id``, so ties are cut deterministically. The
query text is never parsed as query syntax (``match``, ``match_phrase``, ``term`` and
``knn`` take it literally), so ``/ : ( ) " ~ *`` are ordinary characters. Queries
are put in NFC (the index holds NFC), control characters become spaces, and queries
longer than ``max_query_chars`` (default 1,000, at most 10,000) are cut at a word
boundary; text modes send at most 256 words (and fewer, retried by halves, if Lucene's
1,024-clause limit is still hit; see ``last_shortened``); empty queries get an empty
ranking. Depths above 10,000 (OpenSearch's result window) are refused. Hybrid (the seed's
fuzzy + semantic at 7:3) is not a mode: it is the workbench's own weighted fusion of the
``fuzzy`` and ``semantic`` lanes, so it is tuned like every other combination.

**A production index, read only** (``index = { name = "NAME", … }`` on a ``template`` or ``semantic`` lane,
:class:`ProductionIndex`): the lane reads an index the team already runs (an index or an alias, mint's
``content.pali.text`` / ``bold_single`` / ``bold_multi`` with its own analysers) instead of building the
workbench's. It then never creates, writes, refreshes or deletes anything on that cluster (no
:func:`~workbench.engines.os_index.index_dataset`; only ``_search``, ``_mapping``, ``_settings`` and ``_stats``
are read), checks at open that the index exists and logs that it reads it read only. ``url_env`` names the
environment variable that holds the cluster's URL (default: the workbench's own cluster, ``WORKBENCH_OS_URL`` or
the local node); credentials come from ``WORKBENCH_OS_USER`` / ``WORKBENCH_OS_PASSWORD`` /
``WORKBENCH_OS_CA_CERTS`` and are never written. ``id_field`` says where a hit's document id is: ``_id`` (the
default) or a keyword field (mint's ``resource_id``); the id is read from the sort value (ties are cut by it, as by
``doc_id`` on the workbench's index), and must be a ``doc_id`` of the dataset (bring the corpus as a ``files``
dataset with the same ids): a hit whose id is not is dropped and counted as unmapped, as the live lanes do, and
more than ``max_unmapped`` of them (default 0.5) fails the eval naming the lane. Modes: ``template`` (the team's
own query DSL over its own fields) and ``semantic`` with ``vector_field`` (its ``knn_vector`` field); the modes
whose fields are the workbench's own (fuzzy, exact, lemma, page_ref) are refused at load. A query's filter is
applied after the fact (the index has no workbench facets). The candidate cache is keyed by the cluster's URL,
the index and its state (:func:`index_state`): each concrete index's uuid (a re-created index or a swapped
alias is another), the highest sequence number of each primary shard (every index, update and delete takes the
next one, kept across restarts, unlike ``indexing.index_total``, which restarts at 0 with the node, or the docs
count, which an update leaves as it is) and a digest of its mappings and settings (an analyser or inline synonyms
changed without a write). A ``synonyms_path`` file edited on the nodes is invisible there: change ``snapshot``.
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union

from pydantic import Field, field_validator

from workbench.engines import os_index
from workbench.engines.os_client import URL_ENV as _URL_ENV
from workbench.engines.os_client import OpenSearchError, describe
from workbench.engines.os_template import PLACEHOLDERS, fill_template, read_template, template_problem  # noqa: F401
from workbench.errors import ConfigError
from workbench.registry import Params, RetrieverKind
from workbench.run import Hit, Run
from workbench.text import doctext, refs
from workbench.text.query import query_forms
from workbench.text.refs import page_query_key  # noqa: F401  (the page_ref mode's key; tests import it from here)
from workbench.types import Query

MODES = ("fuzzy", "exact", "lemma", "page_ref", "semantic", "template")
#: The modes that search the workbench's own fields: refused on a production index (write a template instead).
OWN_FIELD_MODES = ("fuzzy", "exact", "lemma", "page_ref")
#: The vector field of the workbench's index (the semantic mode's default ``vector_field``).
VECTOR_FIELD = "content.vector"
#: Where the semantic mode applies a query's filter: inside the k-NN query (efficient) or after it (post).
FILTER_MODES = ("efficient", "post")

FUZZINESS = ("AUTO", "0", "1", "2")
EF_SEARCH_MAX = 10000

#: The deepest ranking OpenSearch returns (``index.max_result_window`` and the k-NN ``k`` limit).
K_MAX = 10000

#: Longest query accepted by ``max_query_chars``.
MAX_QUERY_CHARS = 10000

#: Words of a text query sent at most (Lucene's 1,024-clause limit; see ``query_body``).
MAX_QUERY_WORDS = 256

_SCORE_KIND = {
    "fuzzy": "BM25 of match(content.text, fuzziness) , >= 0, higher is better",
    "exact": "BM25 of term(content.exact)^2 + match_phrase(content.words), >= 0, higher is better",
    "lemma": "BM25 of match(content.lemma) through the DPD synonym_graph analyser, >= 0, higher is better",
    "page_ref": "2 = the page starts in the document, 1 = the document lies on the page (3 = both), higher is better",
    "semantic": "cosine similarity = 2 * lucene cosinesimil score - 1, in [-1, 1], higher is better",
    "template": "OpenSearch's _score of the template's query, as the engine returns it; higher is better",
}


class OpenSearchLane:
    """A lane over an OpenSearch index (see the module docstring).

    Args:
        name: lane name.
        es: an ``opensearchpy.OpenSearch`` client.
        index: the index name (:class:`~workbench.engines.os_index.OsIndexInfo` ``.name``).
        mode: one of :data:`MODES`.
        url: the cluster URL, for error messages.
        embedder: for ``semantic``: the embedder the index was built with.
        fuzziness: for ``fuzzy``: ``AUTO``, ``0``, ``1`` or ``2``.
        operator: for ``fuzzy`` and ``lemma``: ``or`` or ``and``.
        ef_search: for ``semantic``: HNSW candidate list size, raised to ``k``.
        max_query_chars: longer queries are cut to this many characters.
        transliterate: for ``fuzzy``, ``exact`` and ``lemma``: also search the query's IAST form
            and Pali variants (:func:`workbench.text.query.query_forms`) in one ``dis_max``
            query, so each document keeps its best score over the forms.
        production: ``index`` is a production index, read only (see the module docstring): the modes of
            :data:`OWN_FIELD_MODES` are refused and a query's filter is not sent (applied after the fact).
        id_field: where a hit's id is, sorted on to cut ties (default: ``doc_id``, the workbench's field; a
            production index: ``_id`` or a keyword field).
        vector_field: the semantic mode's ``knn_vector`` field.
        known_ids: the dataset's doc ids; a hit whose id is not among them is dropped and counted
            (``last_unmapped``). None: every id is kept.

    Attributes:
        last_latencies_ms: per query_id, the request's round trip in ms (plus, for
            ``semantic``, an equal share of the batch's embedding time).
        last_unmapped, last_unmapped_by_query, last_unmapped_ids: the ids of the last batch that named no
            document of ``known_ids`` (count; query_id → (unmapped, read); the first few), as the live lanes report.
        last_shortened: query_ids of the last batch whose text query hit Lucene's
            1,024-clause limit and was sent again with half the words (until it passed).

    Raises:
        ConfigError: an unknown mode or a parameter out of range; ``semantic`` without an embedder.
    """

    def __init__(self, name: str, es, index: str, mode: str, *, url: str = "", embedder: Any = None,
                 fuzziness: str = "AUTO", operator: str = "or", ef_search: int = 100, max_query_chars: int = 1000,
                 transliterate: bool = False, template: Any = None, filter_mode: str = "efficient",
                 exact: bool = False, production: bool = False, id_field: str | None = None,
                 vector_field: str = VECTOR_FIELD, known_ids: Collection[str] | None = None):
        if mode not in MODES:
            raise ConfigError(f"lane {name}: mode must be one of {', '.join(MODES)}, got {mode!r}")
        if production and mode in OWN_FIELD_MODES:
            raise ConfigError(own_fields_problem(name, mode, str(getattr(index, "name", index))))
        if str(fuzziness) not in FUZZINESS:
            raise ConfigError(f"lane {name}: fuzziness must be one of {', '.join(FUZZINESS)}, got {fuzziness!r}")
        if operator not in ("or", "and"):
            raise ConfigError(f"lane {name}: operator must be 'or' or 'and', got {operator!r}")
        if not isinstance(ef_search, int) or isinstance(ef_search, bool) or not 1 <= ef_search <= EF_SEARCH_MAX:
            raise ConfigError(f"lane {name}: ef_search must be an integer in 1..{EF_SEARCH_MAX}, got {ef_search!r}")
        if not isinstance(max_query_chars, int) or isinstance(max_query_chars, bool) or \
                not 1 <= max_query_chars <= MAX_QUERY_CHARS:
            raise ConfigError(f"lane {name}: max_query_chars must be an integer in 1..{MAX_QUERY_CHARS}, "
                              f"got {max_query_chars!r}")
        if mode == "semantic" and embedder is None:
            raise ConfigError(f"lane {name}: mode 'semantic' needs an embedder")
        if filter_mode not in FILTER_MODES:
            raise ConfigError(f"lane {name}: filter_mode must be one of {', '.join(FILTER_MODES)}, got {filter_mode!r}")
        if (filter_mode != "efficient" or exact) and mode != "semantic":
            raise ConfigError(f"lane {name}: filter_mode and exact apply to the semantic mode, not {mode!r}")
        self.filter_mode, self.exact = filter_mode, bool(exact)
        if mode == "template":
            problem = template_problem(template, embedder is not None)
            if problem:
                raise ConfigError(f"lane {name}: {problem}")
        self.template = template
        if transliterate and mode not in ("fuzzy", "exact", "lemma"):
            raise ConfigError(f"lane {name}: transliterate applies to the fuzzy, exact and lemma modes, not {mode!r}")
        self.name, self.es, self.index, self.mode, self.url = name, es, str(getattr(index, "name", index)), mode, url
        self.embedder = embedder
        self.fuzziness, self.operator, self.ef_search = str(fuzziness), operator, ef_search
        self.max_query_chars = max_query_chars
        self.transliterate = bool(transliterate)
        self.score_kind = _SCORE_KIND[mode] + (" (best over the query's forms)" if self.transliterate else "")
        self.production, self.vector_field = bool(production), vector_field
        self.id_field = id_field if id_field else ("_id" if production else None)
        #: The field ties are cut by (ascending), whose sort value is the hit's id.
        self.sort_field = self.id_field or "doc_id"
        self.known_ids = known_ids
        if self.production:
            self.score_kind += f" (production index {self.index}, read only)"
        self.last_latencies_ms: dict[str, float] = {}
        self.last_shortened: set[str] = set()
        self.last_unmapped = 0
        self.last_unmapped_by_query: dict[str, tuple[int, int]] = {}
        self.last_unmapped_ids: list[str] = []

    def config(self) -> dict[str, Any]:
        """Every engine parameter that shapes the ranking (keys the candidate cache)."""
        out: dict[str, Any] = {"kind": "opensearch", "index": self.index, "mode": self.mode,
                               "max_query_chars": self.max_query_chars}
        if self.mode == "fuzzy":
            out.update(fuzziness=self.fuzziness, operator=self.operator)
        if self.mode == "lemma":
            out.update(operator=self.operator)
        if self.mode == "semantic":
            out.update(ef_search=self.ef_search, model_id=self.embedder.model_id, filter_mode=self.filter_mode,
                       exact=self.exact)
        if self.mode == "template":
            import hashlib
            import json

            digest = hashlib.sha256(json.dumps(self.template, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
            out.update(template=digest[:16], ef_search=self.ef_search,
                       model_id=self.embedder.model_id if self.embedder is not None else None)
        if self.transliterate:
            out.update(transliterate=True)
        if self.production:
            out.update(production=True, cluster=self.url, id_field=self.sort_field)
            if self.mode == "semantic":
                out.update(vector_field=self.vector_field)
        return out

    # ------------------------------------------------------------ queries

    def clean(self, text: str) -> str:
        """The query as sent: cleaned by the query normaliser (:func:`workbench.text.query.clean`), whitespace
        collapsed, cut to ``max_query_chars`` at a word boundary (a cut word would defeat the exact mode)."""
        from workbench.text.query import clean, cut

        return cut(" ".join(clean(text).split()), self.max_query_chars)

    def query_body(self, text: str, k: int, vector: Sequence[float] | None = None, *,
                   max_words: int = MAX_QUERY_WORDS, filter: str = "") -> dict[str, Any] | None:
        """The search body for one query text (``None`` when the text is empty after :meth:`clean`).

        Text modes send at most ``max_words`` words; the fuzzy mode lowers
        ``max_expansions`` (default 50) to ``1000 // words`` so that the expanded query
        stays under Lucene's 1,024-clause limit. A ``filter`` (canonical JSON, :mod:`workbench.io.facets`)
        becomes ``bool.filter`` clauses (:func:`workbench.engines.os_index.facets_dsl`); in the semantic mode it
        is the k-NN query's own ``filter`` (the lucene engine's efficient filtering: k filtered neighbours), and
        a template's query is wrapped in ``bool.filter`` as it stands (a k-NN clause in it takes its top k and
        then filters, as such a query does in production).
        """
        from workbench.engines.os_index import facets_dsl
        from workbench.io.facets import parse_filter

        # a production index has no workbench facets: its lanes' filters are applied after the fact
        clauses = facets_dsl(parse_filter(filter)) if filter and not self.production else []
        text = self.clean(text)
        if not text:
            return None
        if self.mode in ("fuzzy", "exact", "lemma"):
            forms = query_forms(text) if self.transliterate else [text]
            forms = [" ".join(f.split()[:max(1, max_words // len(forms))]) for f in forms]
            parts = [self._text_query(f) for f in forms]
            q: dict[str, Any] = parts[0] if len(parts) == 1 else {"dis_max": {"queries": parts, "tie_breaker": 0.0}}
        elif self.mode == "template":
            words = text.split()[:max_words]
            q = fill_template(self.template, {
                "{{query_text}}": " ".join(words), "{{k}}": k, "{{ef_search}}": max(self.ef_search, k),
                "{{max_expansions}}": max(1, min(50, 1000 // len(words))),
                "{{query_vector}}": [float(x) for x in vector] if vector is not None else None})
        elif self.mode == "page_ref":
            key = page_query_key(text)
            q = {"bool": {"should": [{"constant_score": {"filter": {"term": {"page_refs": key}}, "boost": 2.0}},
                                     {"constant_score": {"filter": {"term": {"pages": key}}, "boost": 1.0}}],
                          "minimum_should_match": 1}}
        else:
            vec = [float(x) for x in vector]
            post = None
            if self.exact:  # every admitted vector scored (the k-NN score script): the ground truth of the HNSW
                q = {"script_score": {"query": {"bool": {"filter": clauses}} if clauses else {"match_all": {}},
                                      "script": {"source": "knn_score", "lang": "knn", "params": {
                                          "field": self.vector_field, "query_value": vec,
                                          "space_type": "cosinesimil"}}}}
            else:
                knn: dict[str, Any] = {"vector": vec, "k": k,
                                       "method_parameters": {"ef_search": max(self.ef_search, k)}}
                if clauses and self.filter_mode == "efficient":
                    knn["filter"] = {"bool": {"filter": clauses}}
                elif clauses:  # "post": the k nearest, then the filter (fewer than k may pass)
                    post = {"bool": {"filter": clauses}}
                q = {"knn": {self.vector_field: knn}}
            clauses = []
            body = {"size": k, "query": q, "sort": [{"_score": "desc"}, {self.sort_field: "asc"}],
                    "track_scores": True, "track_total_hits": False, "_source": False}
            if post is not None:
                body["post_filter"] = post
            return body
        if clauses:
            q = {"bool": {"must": [q], "filter": clauses}}
        return {"size": k, "query": q, "sort": [{"_score": "desc"}, {self.sort_field: "asc"}], "track_scores": True,
                "track_total_hits": False, "_source": False}

    def _text_query(self, text: str) -> dict[str, Any]:
        """The query of a text mode for one form of the query."""
        if self.mode == "fuzzy":
            n = len(text.split())
            return {"match": {"content.text": {"query": text, "fuzziness": self.fuzziness, "operator": self.operator,
                                               "max_expansions": max(1, min(50, 1000 // n))}}}
        if self.mode == "exact":
            return {"bool": {"should": [{"term": {"content.exact": {"value": text, "boost": 2.0}}},
                                        {"match_phrase": {"content.words": {"query": text}}}],
                             "minimum_should_match": 1}}
        return {"match": {"content.lemma": {"query": text, "operator": self.operator}}}

    def search(self, queries: Sequence[Query], k: int) -> Run:
        """Top ``k`` documents for every query (empty ranking for an empty query).

        Raises:
            ValueError: ``k`` is not an integer >= 0.
            OpenSearchError: the index is missing or the cluster is unreachable (names the URL and index).
        """
        if not isinstance(k, int) or isinstance(k, bool) or k < 0:
            raise ValueError(f"k must be an integer >= 0, got {k!r}")
        if k > K_MAX:
            raise ConfigError(f"lane {self.name}: depth k = {k} is more than OpenSearch returns ({K_MAX}: "
                              "index.max_result_window and the k-NN limit); use a depth <= 10000")
        self.last_latencies_ms = {}
        self.last_shortened = set()
        self.last_unmapped, self.last_unmapped_by_query, self.last_unmapped_ids = 0, {}, []
        vectors: Any = [None] * len(queries)
        share = 0.0
        if (self.mode == "semantic" or (self.mode == "template" and self.embedder is not None)) and queries and k > 0:
            t0 = time.perf_counter()
            vectors = self.embedder.embed_queries([self.clean(q.text) for q in queries])
            share = (time.perf_counter() - t0) * 1000 / len(queries)
        rows: dict[str, list[Hit]] = {}
        for q, vec in zip(queries, vectors):
            t0 = time.perf_counter()
            hits: list[Hit] = []
            resp = self._search(q, k, vec) if k > 0 else None
            unmapped = read = 0
            if resp is not None:
                for h in resp["hits"]["hits"]:
                    score = float(h["_score"])
                    if self.mode == "semantic":  # back to the cosine: both score (1 + cos) / 2
                        score = 2.0 * score - 1.0
                    hid = h["sort"][1] if len(h.get("sort", [])) > 1 else h["_id"]
                    hid = f"<no {self.sort_field}: _id {h['_id']}>" if hid is None else str(hid)
                    read += 1
                    if self.known_ids is not None and hid not in self.known_ids:
                        unmapped += 1
                        if len(self.last_unmapped_ids) < 5 and hid not in self.last_unmapped_ids:
                            self.last_unmapped_ids.append(hid)
                        continue
                    hits.append(Hit(hid, score))
            if self.known_ids is not None:
                self.last_unmapped += unmapped
                self.last_unmapped_by_query[q.query_id] = (unmapped, read)
            rows[q.query_id] = hits
            self.last_latencies_ms[q.query_id] = (time.perf_counter() - t0) * 1000 + share
        return Run(rows, self.name)

    def _search(self, q: Query, k: int, vec) -> dict | None:
        """One request; on Lucene's clause limit, retried with half the words (recorded in ``last_shortened``)."""
        words = MAX_QUERY_WORDS
        while True:
            body = self.query_body(q.text, k, vec, max_words=words, filter=getattr(q, "filter", ""))
            if body is None:
                return None
            try:
                return self.es.search(index=self.index, body=body)
            except Exception as exc:
                if "too_many_clauses" in describe(exc) or "maxClauseCount" in str(exc):
                    if words > 1:
                        words //= 2
                        self.last_shortened.add(q.query_id)
                        continue
                raise self._error(exc, q) from None

    def _error(self, exc: BaseException, q: Query | None = None) -> OpenSearchError:
        what = describe(exc) + (f" (query {q.query_id}: {q.text[:60]!r})" if q is not None else "")
        if "index_not_found" in what and self.production:
            return OpenSearchError(missing_index_message(self.name, self.index, self.url))
        if "index_not_found" in what:
            return OpenSearchError(f"lane {self.name}: index {self.index} does not exist at {self.url or 'the cluster'}; "
                                   "run `workbench eval` again to build it (indexes are built on a cache miss)")
        return OpenSearchError(f"lane {self.name}: OpenSearch at {self.url or 'the cluster'} failed on index "
                               f"{self.index}: {what}")


# ---------------------------------------------------------------- the kind: one parameter model per mode

class _OsParams(Params):
    max_query_chars: int = Field(1000, ge=1, le=MAX_QUERY_CHARS, description="longer queries are cut at a word")


class ProductionIndex(Params):
    """A team's own index, read where it is (``index = { name = … }`` on a ``template`` or ``semantic`` lane): never
    created, written or deleted (see the module docstring)."""

    name: str = Field(min_length=1, description="the existing index or alias to read")
    url_env: Optional[str] = Field(None, pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", description="the environment variable "
                                   "holding the cluster's URL (default: the workbench's own cluster)")
    id_field: str = Field("_id", min_length=1, description="where a hit's doc_id is: _id or a keyword field (the "
                          "dataset's doc ids)")
    max_unmapped: float = Field(0.5, ge=0.0, le=1.0, description="the largest share of returned ids that may name "
                                "no document of the dataset (more fails the eval)")
    snapshot: Optional[str] = Field(None, min_length=1, description="a label keying the candidate cache (change it "
                                    "after editing a synonyms file on the nodes)")
    vector_field: str = Field(VECTOR_FIELD, min_length=1, description="semantic mode: the index's knn_vector field")


class FuzzyParams(_OsParams):
    """``mode = "fuzzy"``: match on the ICU-folded text with edit distance (the seed's default mode)."""

    mode: Literal["fuzzy"]
    fuzziness: Union[str, int] = Field("AUTO", description="edits allowed per term: AUTO or 0, 1, 2")
    operator: Literal["or", "and"] = Field("or", description="whether every query word must match")
    transliterate: bool = Field(False, description="also search the query in IAST (Cyrillic, Devanagari, HK, "
                                "Velthuis) and its Pali spelling variants; best score per document (dis_max)")

    @field_validator("fuzziness", mode="before")
    @classmethod
    def _fuzziness(cls, v: Any) -> Any:
        if type(v) not in (str, int) or v not in (*FUZZINESS, 0, 1, 2):
            raise ValueError('must be "AUTO" or 0, 1, 2 (edits allowed per term)')
        return v


class ExactParams(_OsParams):
    """``mode = "exact"``: the whole text or the words in order, diacritics kept."""

    mode: Literal["exact"]
    transliterate: bool = Field(False, description="also search the query in IAST (Cyrillic, Devanagari, HK, "
                                "Velthuis) and its Pali spelling variants; best score per document (dis_max)")


class LemmaParams(_OsParams):
    """``mode = "lemma"``: any DPD form of a Pali word finds every form of its lemma."""

    mode: Literal["lemma"]
    operator: Literal["or", "and"] = Field("or", description="whether every query word must match")
    transliterate: bool = Field(False, description="also search the query in IAST (Cyrillic, Devanagari, HK, "
                                "Velthuis) and its Pali spelling variants; best score per document (dis_max)")


class PageRefParams(_OsParams):
    """``mode = "page_ref"``: PTS / CST page references."""

    mode: Literal["page_ref"]


class SemanticParams(_OsParams):
    """``mode = "semantic"``: Lucene HNSW k-NN over the index's vectors."""

    mode: Literal["semantic"]
    embedder: str = Field(min_length=1, description="the [embedders.NAME] whose vectors the index holds")
    ef_search: int = Field(100, ge=1, le=EF_SEARCH_MAX, description="HNSW candidate list size (raised to the depth)")
    filter_mode: Literal["efficient", "post"] = Field(
        "efficient", description="a query's filter inside the k-NN query (the lucene engine's efficient filtering: "
        "k admitted neighbours) or after it (post_filter: the k nearest, then the filter)")
    exact: bool = Field(False, description="every admitted vector scored by the k-NN score script instead of the "
                        "HNSW graph (the ANN ground truth)")
    index: Optional[ProductionIndex] = Field(None, description="a team's own index, read only (name, url_env, "
                                             "id_field, vector_field …) instead of the workbench's")


class TemplateParams(_OsParams):
    """``mode = "template"``: the query DSL a team really sends, from a JSON file with placeholders."""

    mode: Literal["template"]
    template: str = Field(min_length=1, description="JSON file of query DSL with placeholders "
                          "\"{{query_text}}\", \"{{k}}\", \"{{query_vector}}\", \"{{max_expansions}}\", "
                          "\"{{ef_search}}\" (whole string values)")
    embedder: Optional[str] = Field(None, min_length=1, description="the [embedders.NAME] for \"{{query_vector}}\"")
    ef_search: int = Field(100, ge=1, le=EF_SEARCH_MAX, description="\"{{ef_search}}\" = max(ef_search, depth)")
    index: Optional[ProductionIndex] = Field(None, description="a team's own index, read only (name, url_env, "
                                             "id_field …) instead of the workbench's")


class OpenSearchKind(RetrieverKind):
    """``opensearch``: the third seed's modes over a local OpenSearch index (one parameter model per mode)."""

    kind = "opensearch"
    summary = "OpenSearch BM25 / ICU / lemma / page-ref / k-NN modes; scores per mode (higher is better)"
    Params = Annotated[Union[FuzzyParams, ExactParams, LemmaParams, PageRefParams, SemanticParams, TemplateParams],
                       Field(discriminator="mode")]
    code = (os_index, doctext, refs)
    native_filters = True

    @classmethod
    def code_fingerprint(cls) -> str:
        """The modules' sources plus the ICU plugin's Java source (it shapes the index's folding)."""
        import hashlib

        from workbench.services.opensearch import ICU_SOURCE

        return hashlib.sha256(super().code_fingerprint().encode() + ICU_SOURCE.read_bytes()).hexdigest()[:16]

    def embedder_of(self, params) -> str | None:
        """``semantic`` reads an embedder, and a ``template`` with ``"{{query_vector}}"``."""
        return params.embedder if params.mode in ("semantic", "template") else None

    def check(self, params, experiment) -> str:
        """A ``template`` file must exist, parse and use its placeholders right (:func:`template_problem`). (Only
        the template and semantic modes declare ``index``: the others search the workbench's own fields.)"""
        if params.mode != "template":
            return ""
        try:
            return template_problem(read_template(params.template), params.embedder is not None)
        except ConfigError as exc:
            return str(exc)

    def filters_natively(self, params) -> bool:
        """A production index has no workbench facets: its filters are applied after the fact."""
        return getattr(params, "index", None) is None

    def cache_extra(self, params, ds, res) -> dict[str, Any]:
        """``semantic``: the model id and ``[index]``; ``lemma``: the digest of the ms-dpd files behind the synonyms;
        a production index: the cluster's URL and the index's state (:func:`index_state`)."""
        extra = super().cache_extra(params, ds, res)
        idx = getattr(params, "index", None)
        if idx is not None:
            es, url = production_cluster(idx, res)
            extra["production"] = {"cluster": url, "state": index_state(es, url, idx.name), "snapshot": idx.snapshot,
                                   "id_field": idx.id_field, "vector_field": idx.vector_field}
        if params.mode == "lemma":
            extra["dpd"] = dpd_digest()
        if params.mode == "template":
            import hashlib
            import json

            text = json.dumps(read_template(params.template), sort_keys=True, ensure_ascii=False)
            extra["template"] = hashlib.sha256(text.encode()).hexdigest()[:16]
        return extra

    def exact_twin(self, params) -> dict | None:
        """``semantic``: ``exact = true`` (the k-NN score script), with the HNSW settings it ignores at their
        defaults (one cached run per embedder); None for the other modes and an exact lane."""
        if params.mode != "semantic" or params.exact:
            return None
        fields = SemanticParams.model_fields
        return {"exact": True, "ef_search": fields["ef_search"].default, "filter_mode": fields["filter_mode"].default}

    def max_depth(self, params) -> int:
        """OpenSearch returns at most :data:`K_MAX` hits (``index.max_result_window`` and the k-NN limit)."""
        return K_MAX

    def open(self, name: str, params, ds, res) -> OpenSearchLane:
        """The lane on ``ds``'s OpenSearch index (built with the lane's embedder, else the experiment's first); with
        ``index``, on that production index, read only: nothing is built or written, the index must exist."""
        p = params.model_dump(exclude={"mode", "embedder", "index"})
        if "fuzziness" in p:
            p["fuzziness"] = str(p["fuzziness"])
        if params.mode == "template":
            p["template"] = read_template(params.template)
        emb = self.embedder_of(params)
        idx = getattr(params, "index", None)
        if idx is not None:
            es, url = production_cluster(idx, res)
            check_production_index(es, url, idx.name, idx.id_field, name)
            res.log(f"lane {name}: reading production index {idx.name} at {url} read only (the workbench creates, "
                    "writes and deletes nothing there)")
            lane = OpenSearchLane(name, es, idx.name, params.mode, url=url,
                                  embedder=res.embedder(emb) if emb else None, production=True,
                                  id_field=idx.id_field, vector_field=idx.vector_field,
                                  known_ids={d.doc_id for d in ds.documents}, **p)
            lane.params = idx  # type: ignore[attr-defined]  # max_unmapped, read by the runner as for a live lane
            return lane
        info = res.os_index(ds, emb or res.first_embedder())
        es, url = res.opensearch()
        return OpenSearchLane(name, es, info.name, params.mode, url=url,
                              embedder=res.embedder(emb) if emb else None, **p)


# ---------------------------------------------------------------- a production index, read only

def own_fields_problem(lane: str | None, mode: str, index: str) -> str:
    """Why ``mode`` cannot read production index ``index`` (its fields are the workbench's own)."""
    fields = {"fuzzy": "content.text", "exact": "content.exact, content.words", "lemma": "content.lemma",
              "page_ref": "page_refs, pages"}[mode]
    return ((f"lane {lane}: " if lane else "") + f"mode {mode!r} searches the workbench's own fields ({fields}), "
            f"which production index {index} need not have; write your query as a template (mode = \"template\", "
            "template = \"FILE.json\" with your fields, e.g. content.pali.text)")


def missing_index_message(lane: str, index: str, url: str) -> str:
    """The one line for a production index that is not there."""
    return (f"lane {lane}: production index {index} does not exist at {url}; the workbench reads it and never "
            "creates it: check the lane's index (and url_env)")


def production_cluster(idx: ProductionIndex, res) -> tuple[Any, str]:
    """``(client, url)`` of a production index's cluster: the one ``url_env`` names, else the workbench's own.

    Raises:
        ConfigError: ``url_env``'s variable is unset or not a cluster URL.
        OpenSearchError: the cluster does not answer (names the URL and the fix).
    """
    if not idx.url_env:
        return res.opensearch()
    from workbench.engines.os_client import check_cluster_url, client

    raw = os.environ.get(idx.url_env, "").strip()
    if not raw:
        raise ConfigError(f"index.url_env = {idx.url_env!r}: the variable is not set; export {idx.url_env}="
                          "https://HOST:9200 (the cluster of index " + idx.name + "; credentials in "
                          "WORKBENCH_OS_USER / WORKBENCH_OS_PASSWORD, never in the URL)")
    try:
        url = check_cluster_url(raw)
    except OpenSearchError as exc:
        raise ConfigError(str(exc).replace(_URL_ENV, idx.url_env)) from None
    es = client(url)
    try:
        es.info()
    except Exception as exc:
        raise OpenSearchError(f"cannot reach OpenSearch at {url} ({idx.url_env}): {describe(exc)}; check the "
                              "URL and WORKBENCH_OS_USER / WORKBENCH_OS_PASSWORD / WORKBENCH_OS_CA_CERTS") from None
    return es, url


def check_production_index(es, url: str, index: str, id_field: str, lane: str) -> None:
    """That ``index`` exists at ``url`` and ``id_field`` is ``_id`` or a field ties can be sorted on (read only:
    ``GET <index>/_mapping``).

    Raises:
        OpenSearchError: the index is missing, or ``id_field`` is not mapped as keyword or a number (one line each).
    """
    try:
        mappings = es.indices.get_mapping(index=index)
    except Exception as exc:
        if "index_not_found" in describe(exc):
            raise OpenSearchError(missing_index_message(lane, index, url)) from None
        raise OpenSearchError(f"lane {lane}: OpenSearch at {url} refused the mapping of index {index}: "
                              f"{describe(exc)}") from None
    if id_field == "_id":
        return
    for name, m in mappings.items():
        node: Any = m.get("mappings", {})
        for part in id_field.split("."):  # content.id, or a keyword sub-field: resource_id.keyword
            props = {**node.get("properties", {}), **node.get("fields", {})}
            node = props.get(part)
            if node is None:
                break
        kind = (node or {}).get("type")
        if kind not in ("keyword", "long", "integer", "short", "byte", "unsigned_long"):
            raise OpenSearchError(f"lane {lane}: id_field {id_field!r} of index {name} at {url} is "
                                  + (f"a {kind} field" if node else "not mapped")
                                  + "; name _id or a keyword field holding the documents' ids (a keyword sub-field "
                                  "such as NAME.keyword)")


def index_state(es, url: str, index: str) -> dict[str, Any]:
    """What changes when production index ``index`` (or each index of an alias) changes, to key the candidate
    cache: its uuid, the highest sequence number of each primary shard, the docs count and a digest of its
    mappings and settings (see the module docstring; read only: ``_stats``, ``_settings``, ``_mapping``).

    Raises:
        OpenSearchError: the index is missing, or the cluster refuses the requests (names the privilege).
    """
    import hashlib
    import json

    try:
        stats = es.indices.stats(index=index, level="shards", metric="docs")
        settings = es.indices.get_settings(index=index)
        mappings = es.indices.get_mapping(index=index)
    except Exception as exc:
        what = describe(exc)
        if "index_not_found" in what:
            raise OpenSearchError(f"production index {index} does not exist at {url}; the workbench reads it and "
                                  "never creates it: check the lane's index (and url_env)") from None
        if "index_closed" in what:
            raise OpenSearchError(f"production index {index} at {url} is closed ({what}); the workbench reads it and "
                                  f"never opens it: open it (POST {index}/_open) or name an open index") from None
        if not any(s in what for s in ("security_exception", "authoriz", "403", "401")):
            raise OpenSearchError(f"OpenSearch at {url} refused the state of index {index} ({what})") from None
        raise OpenSearchError(f"OpenSearch at {url} refused the state of index {index} ({what}); the lane needs to "
                              "read its _stats, _settings and _mapping (the monitor and view_index_metadata "
                              "privileges) to key its cache") from None
    out: dict[str, Any] = {}
    for name in sorted(settings):
        shards = stats.get("indices", {}).get(name, {}).get("shards", {})
        seq = {sid: max(c.get("seq_no", {}).get("max_seq_no", -1) for c in copies if c["routing"]["primary"])
               for sid, copies in sorted(shards.items(), key=lambda kv: int(kv[0]))
               if any(c["routing"]["primary"] for c in copies)}
        schema = json.dumps({"settings": settings[name], "mappings": mappings.get(name)}, sort_keys=True)
        out[name] = {"uuid": settings[name]["settings"]["index"].get("uuid"), "max_seq_no": seq,
                     "docs": stats.get("indices", {}).get(name, {}).get("primaries", {}).get("docs", {}).get("count"),
                     "schema": hashlib.sha256(schema.encode()).hexdigest()[:16]}
    return out


def dpd_digest() -> str:
    """sha256 (16 hex) of the ms-dpd files behind the OpenSearch lemma synonyms (form index, headwords)."""
    from workbench.settings import data_dir

    return _dpd_digest(data_dir(sources=("ms-dpd",)))


@functools.lru_cache(maxsize=4)
def _dpd_digest(data: Path) -> str:
    import hashlib

    from workbench.data.loaders.dpd import dpd_files

    files = dpd_files(data)
    h = hashlib.sha256()
    for role in ("index", "pali"):
        h.update(files[role].read_bytes())
    return h.hexdigest()[:16]
