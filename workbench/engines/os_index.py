"""Index a dataset into OpenSearch after the third seed's design (iapt-platform/mint ``search.md``).

**Fields** (:func:`index_body`):

* ``title`` and ``content``, each an object with ``display`` (stored, not searched),
  ``text`` (``wb_text``: ``icu_tokenizer`` + ``icu_folding`` + ``lowercase``, so
  ``metta`` finds ``mettā``), ``exact`` (``keyword``: the whole text, NFC, lower case),
  ``words`` (``wb_words``: ``icu_tokenizer`` + NFKC case folding, diacritics *kept*:
  the exact lane's phrases) and ``lemma`` (``wb_lemma_index`` at index time, which maps
  each Pali form to its DPD lemma with a ``synonym`` filter, and ``wb_lemma_query`` at
  query time, the same rules in a ``synonym_graph`` filter, as the seed specifies); for
  ``content`` also ``vector``, a ``knn_vector`` (``lucene`` engine, ``cosinesimil``,
  HNSW ``m`` / ``ef_construction``) filled by the same embedders as the Postgres lanes;
* ``bold``, ``bold_single``, ``bold_multi`` (the seed's bold fields, which its search boosts:
  ``bold_single^50, bold_multi^10, title^3``): the document's bold spans (CST ``<hi rend="bold">``,
  ``metadata["bold"]``; each span once, in order), and of them the one-word and the
  several-word spans. Each is ``text`` (``wb_text``) with ``exact``, ``words`` and ``lemma``
  sub-fields analysed like ``content``'s; a document without bold indexes empty lists;
* ``title``: the headings the document stands under, innermost last (:func:`headings`: a CST
  paragraph's sutta heading and section heading; a gita verse's chapter name), one value each;
  ``title.display`` holds them joined by `` · ``;
* ``page_refs`` (keyword): the pages that *start* in the document, canonical
  (``PTS M 1.56``) and in CST notation (``P1.56``); ``pages`` (keyword): every page the
  document lies on, likewise;
* ``doc_id``, ``related_id`` (work id and canonical address), ``language`` (every
  language of its texts), ``resource_type`` (``origin_text``), ``granularity``, ``path``
  (``/<dataset>/<work_id>``).

``content`` is :func:`workbench.text.doctext.index_text`, the same body the Postgres lanes
match, so the two engines are compared on the same text. Only ``display`` fields are
kept in ``_source`` (the searchable copies and the vector are excluded).

**Synonyms** (:func:`lemma_rules`): the lemmas of the dataset's Pali words that the
Digital Pāḷi Dictionary (ms-dpd) knows, and for *every* DPD form of those lemmas (so a
query may use a form the corpus lacks) a rule ``form => lemma[, lemma2…]`` (bare
lemmas, homonym numbers stripped), sorted. Rules are analysed by the chain before the
filter (ICU folding, lower case), so ``dhammo``, ``dhammā`` and ``dhamma`` all reduce
to the lemma ``dhamma`` and ASCII queries are covered. Forms that are their own only
lemma need no rule. Datasets without Pali get no rules (``lemma`` then equals ``text``).
Rules are inline in the index settings (about 80,000 rules, 2.4 MB for the MN/DN/SN
corpus), so any cluster can take them; ``lenient`` skips a rule that analysis empties.

**Build.** Bulk requests of :data:`BULK_DOCS` documents, :data:`BULK_THREADS` in flight
(analysis is CPU-bound on the server), refresh off while loading; then one refresh and
a force-merge to one segment, so every search walks one HNSW graph. The bulk threads
interleave documents, so two builds of one index can differ slightly in the graph
(and the semantic lane's ANN results); text lanes are unaffected (BM25 statistics do
not depend on the order; ties are broken by ``doc_id``).

**Name and idempotence.** The index is ``wb-<dataset>-<key[:16]>`` where the key is the
sha256 of the corpus hash, the index body (mapping, settings, rules), the embedder's
``model_id`` and :data:`SCHEMA_VERSION`. Building writes ``_meta.complete = false``,
bulk-loads, refreshes, then sets ``complete = true``; an existing complete index is
reused, an incomplete one (an interrupted build) is deleted and rebuilt.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.engines.os_client import OpenSearchError, describe
from workbench.io.facets import FACETS, facets
from workbench.text.doctext import index_text

#: Bump when the mapping or what is indexed changes: every index gets a new name.
#: 2: the bold fields (``bold``, ``bold_single``, ``bold_multi``) and ``title`` from every heading.
#: 3: ``facets`` (a query's filter reads them).
SCHEMA_VERSION = 3

#: Documents per bulk request.
BULK_DOCS = 200

#: Bulk requests in flight at once.
BULK_THREADS = 2

#: ``ignore_above`` of the ``exact`` keyword fields (characters).
EXACT_MAX_CHARS = 8000

_WORD = re.compile(r"\w+")


@dataclass(frozen=True)
class OsIndexInfo:
    """A built OpenSearch index: its name, key, size, and the build's wall time and embedding share (seconds)."""

    name: str
    key: str
    dataset: str
    model_id: str | None
    dim: int | None
    n_docs: int
    n_rules: int
    reused: bool
    build_s: float
    embed_s: float = 0.0


def lemma_rules(documents: Sequence[Any], lexicon: Any) -> list[str]:
    """Synonym rules ``form => lemma, …`` for the lemmas of the Pali words of ``documents`` (see the module docstring).

    Args:
        documents: :class:`~workbench.types.Document` objects.
        lexicon: a :class:`workbench.data.loaders.dpd.Lexicon` (``lemmas(form)`` → bare lemmas).

    Returns:
        Sorted, unique rules; ``[]`` when no text is Pali.
    """
    vocab: set[str] = set()
    for d in documents:
        for t in d.texts:
            if t.language == "pi":
                vocab.update(w.lower() for w in _WORD.findall(t.text))
    lemmas = {lem for w in vocab for lem in lexicon.lemmas(w)}
    forms = vocab | {f for lem in lemmas for f in lexicon.forms_of(lem)}
    rules = set()
    for w in forms:
        out = [lem for lem in lexicon.lemmas(w) if lem and "," not in lem and "=>" not in lem]
        if out and out != [w]:
            rules.add(f"{w} => {', '.join(out)}")
    return sorted(rules)


def index_body(rules: Sequence[str], dim: int | None, *, m: int = 16, ef_construction: int = 64) -> dict[str, Any]:
    """Settings and mappings of a dataset index (see the module docstring).

    Args:
        rules: lemma synonym rules (:func:`lemma_rules`); empty → ``lemma`` analyses like ``text``.
        dim: vector dimension, or ``None`` for an index without ``content.vector``.
        m, ef_construction: HNSW parameters of the ``lucene`` engine.
    """
    lemma_filters = ["lowercase"]
    filters: dict[str, Any] = {}
    query_filters = ["lowercase"]
    if rules:
        filters = {"wb_pali_lemma": {"type": "synonym", "synonyms": list(rules), "lenient": True},
                   "wb_pali_lemma_graph": {"type": "synonym_graph", "synonyms": list(rules), "lenient": True}}
        lemma_filters = ["lowercase", "wb_pali_lemma"]
        query_filters = ["lowercase", "wb_pali_lemma_graph"]
    analysis = {
        "normalizer": {"wb_exact": {"type": "custom", "filter": ["lowercase"]}},
        "filter": filters,
        "analyzer": {
            "wb_text": {"tokenizer": "icu_tokenizer", "filter": ["icu_folding", "lowercase"]},
            "wb_words": {"tokenizer": "icu_tokenizer", "filter": ["icu_normalizer"]},
            "wb_lemma_index": {"tokenizer": "icu_tokenizer", "filter": ["icu_folding", *lemma_filters]},
            "wb_lemma_query": {"tokenizer": "icu_tokenizer", "filter": ["icu_folding", *query_filters]},
        },
    }

    def text_object(with_vector: bool) -> dict[str, Any]:
        props: dict[str, Any] = {
            "display": {"type": "text", "index": False},
            "text": {"type": "text", "analyzer": "wb_text"},
            "exact": {"type": "keyword", "normalizer": "wb_exact", "ignore_above": EXACT_MAX_CHARS},
            "words": {"type": "text", "analyzer": "wb_words"},
            "lemma": {"type": "text", "analyzer": "wb_lemma_index", "search_analyzer": "wb_lemma_query"},
        }
        if with_vector and dim:
            props["vector"] = {"type": "knn_vector", "dimension": int(dim),
                               "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil",
                                          "parameters": {"m": int(m), "ef_construction": int(ef_construction)}}}
        return {"properties": props}

    def bold_field() -> dict[str, Any]:
        return {"type": "text", "analyzer": "wb_text", "fields": {
            "exact": {"type": "keyword", "normalizer": "wb_exact", "ignore_above": EXACT_MAX_CHARS},
            "words": {"type": "text", "analyzer": "wb_words"},
            "lemma": {"type": "text", "analyzer": "wb_lemma_index", "search_analyzer": "wb_lemma_query"}}}

    return {
        "settings": {"index": {"number_of_shards": 1, "number_of_replicas": 0, "knn": dim is not None,
                               "refresh_interval": "-1"},
                     "analysis": analysis},
        "mappings": {
            "dynamic": "strict",
            "_source": {"excludes": ["title.text", "title.exact", "title.words", "title.lemma", "content.text",
                                     "content.exact", "content.words", "content.lemma", "content.vector"]},
            "_meta": {"complete": False},
            "properties": {
                "doc_id": {"type": "keyword"},
                "address": {"type": "keyword"},
                "title": text_object(False),
                "content": text_object(True),
                "bold": bold_field(),
                "bold_single": bold_field(),
                "bold_multi": bold_field(),
                "page_refs": {"type": "keyword"},
                "pages": {"type": "keyword"},
                "related_id": {"type": "keyword"},
                "language": {"type": "keyword"},
                "resource_type": {"type": "keyword"},
                "granularity": {"type": "keyword"},
                "path": {"type": "keyword"},
                # what a query's filter reads (workbench.io.facets; facets_dsl)
                "facets": {"properties": {f: {"type": "integer" if ordered else "keyword"}
                                          for f, (ordered, _multi) in FACETS.items()}},
            },
        },
    }


def page_keys(canonical_refs: Sequence[str]) -> list[str]:
    """Canonical page references plus their CST notation (``PTS M 1.56`` → ``PTS M 1.56``, ``P1.56``), unique, in order."""
    from workbench.text import refs

    out: dict[str, None] = {}
    for p in canonical_refs:
        out[p] = None
        res = refs.parse(p)
        if res and isinstance(res.ref, refs.PageRef):
            out[res.ref.cst()] = None
    return list(out)


def _text_fields(text: str) -> dict[str, str]:
    import unicodedata

    t = unicodedata.normalize("NFC", text)
    return {"display": t, "text": t, "exact": t[:EXACT_MAX_CHARS], "words": t, "lemma": t}


def _title_fields(values: Sequence[str]) -> dict[str, Any]:
    import unicodedata

    vs = [unicodedata.normalize("NFC", v) for v in values]
    return {"display": " · ".join(vs), "text": vs, "exact": [v[:EXACT_MAX_CHARS] for v in vs], "words": vs,
            "lemma": vs}


def headings(doc: Any) -> list[str]:
    """The headings a document stands under, outermost first, each once: a CST paragraph's sutta heading and
    section heading (``metadata["title"]``, ``metadata["section"]``: ``["1. Mūlapariyāyasuttavaṇṇanā",
    "Pathavīvāravaṇṇanā"]``), else a gita verse's ``chapter_name``; ``[]`` when it has none (bilara segments).
    The CST chapter (vagga) heading is left out: a vagga is named after its first sutta, so it would tie every
    paragraph of the vagga to that sutta's name."""
    md = doc.metadata
    out = [str(v) for v in (md.get("title"), md.get("section")) if isinstance(v, str) and v.strip()]
    if not out and isinstance(md.get("chapter_name"), str) and md["chapter_name"].strip():
        out = [md["chapter_name"]]
    return list(dict.fromkeys(out))


def bold_fields(doc: Any) -> dict[str, list[str]]:
    """``bold`` (the document's bold spans, ``metadata["bold"]``, NFC, each once, in order), ``bold_single`` (those
    of one word) and ``bold_multi`` (those of several words); empty lists for a document without bold."""
    import unicodedata

    spans = [unicodedata.normalize("NFC", str(b)) for b in doc.metadata.get("bold") or () if str(b).strip()]
    spans = list(dict.fromkeys(spans))
    return {"bold": spans, "bold_single": [b for b in spans if len(_WORD.findall(b)) == 1],
            "bold_multi": [b for b in spans if len(_WORD.findall(b)) > 1]}


def document_source(dataset: str, doc: Any, vector: Any = None) -> dict[str, Any]:
    """The OpenSearch document for one :class:`~workbench.types.Document` (``vector``: its embedding or None)."""
    src: dict[str, Any] = {
        "doc_id": doc.doc_id, "address": doc.address, "title": _title_fields(headings(doc)),
        "content": _text_fields(index_text(doc)), **bold_fields(doc), "page_refs": page_keys(doc.page_refs),
        "pages": page_keys(doc.pages), "related_id": [doc.work_id, doc.address],
        "language": sorted({t.language for t in doc.texts}), "resource_type": "origin_text",
        "granularity": doc.granularity, "path": f"/{dataset}/{doc.work_id}", "facets": facets(doc),
    }
    if vector is not None:
        src["content"]["vector"] = [float(x) for x in vector]
    return src


def facets_dsl(flt: Any) -> list[dict[str, Any]]:
    """A :class:`workbench.io.facets.Filter` as OpenSearch filter clauses on the ``facets`` fields (``term``,
    ``terms``, ``range``), for a ``bool.filter`` or a k-NN query's ``filter``; ``[]`` for None. A multi-valued
    keyword field matches when any of its values does, as the filter's rule says."""
    if flt is None:
        return []
    out: list[dict[str, Any]] = []
    for c in flt.clauses:
        field = f"facets.{c.facet}"
        if c.op == "$eq":
            out.append({"term": {field: c.values[0]}})
        elif c.op == "$in":
            out.append({"terms": {field: list(c.values)}})
        else:
            out.append({"range": {field: {c.op[1:]: c.values[0]}}})
    return out


def index_name(dataset: str, key: str) -> str:
    """``wb-<dataset>-<key[:16]>`` (lower case, as OpenSearch requires)."""
    return f"wb-{re.sub(r'[^a-z0-9_-]', '-', dataset.lower())}-{key[:16]}"


def index_key(corpus: str, body: dict[str, Any], model_id: str | None) -> str:
    """sha256 hex of the corpus hash, the index body, the model id and :data:`SCHEMA_VERSION`."""
    from workbench.engines.pg_index import body_fingerprint

    parts = {"corpus": corpus, "body": body, "model_id": model_id, "schema": SCHEMA_VERSION,
             "text": body_fingerprint()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def index_dataset(es, url: str, dataset: Any, embedder: Any | None, *, lexicon: Any | None = None, m: int = 16,
                  ef_construction: int = 64, progress: bool = False) -> OsIndexInfo:
    """Build (or reuse) the OpenSearch index of ``dataset`` (see the module docstring).

    Args:
        es: an ``opensearchpy.OpenSearch`` client; ``url`` names it in errors.
        dataset: a :class:`workbench.data.catalog.Dataset` (``name``, ``documents``, ``manifest``).
        embedder: fills ``content.vector`` (``embed_passages``), or ``None`` for no vector field.
        lexicon: the ms-dpd lexicon for the lemma rules (``None``: no rules).
        m, ef_construction: HNSW parameters.
        progress: a progress bar on stderr.

    Raises:
        OpenSearchError: the cluster refuses the index or a bulk request (names the URL and the reason).
    """
    from workbench.engines.pg_index import corpus_sha256

    t0 = time.perf_counter()
    rules = lemma_rules(dataset.documents, lexicon) if lexicon is not None else []
    dim = int(embedder.dim) if embedder is not None else None
    model_id = embedder.model_id if embedder is not None else None
    body = index_body(rules, dim, m=m, ef_construction=ef_construction)
    key = index_key(corpus_sha256(dataset), body, model_id)
    name = index_name(dataset.name, key)
    try:
        if es.indices.exists(index=name):
            meta = es.indices.get_mapping(index=name)[name]["mappings"].get("_meta", {})
            if meta.get("complete"):
                return OsIndexInfo(name, key, dataset.name, model_id, dim, len(dataset.documents), len(rules), True,
                                   time.perf_counter() - t0)
            es.indices.delete(index=name)  # an interrupted build
        heap_warning(es, url, len(dataset.documents))
        es.indices.create(index=name, body=body)
        embed_s = _bulk(es, name, dataset, embedder, progress)
        es.indices.put_settings(index=name, body={"index": {"refresh_interval": "1s"}})
        es.indices.refresh(index=name)
        es.indices.forcemerge(index=name, max_num_segments=1, request_timeout=600)
        count = es.count(index=name)["count"]
        if count != len(dataset.documents):
            raise OpenSearchError(f"index {name} at {url} holds {count} documents, expected {len(dataset.documents)}")
        es.indices.put_mapping(index=name, body={"_meta": {"complete": True, "dataset": dataset.name,
                                                           "model_id": model_id, "rules": len(rules)}})
    except OpenSearchError:
        raise
    except Exception as exc:
        what = describe(exc)
        if "circuit_breaking_exception" in what:  # measured: 1,000,000 documents with 32-dim vectors on a 512m heap
            what = (what.split(", real usage")[0] + "; the node's heap is too small for this index: stop it "
                    "(workbench services down opensearch) and start it with more, e.g. WORKBENCH_OS_HEAP=2g "
                    "(at most half the machine's memory), then run again")
        raise OpenSearchError(f"cannot build index {name} at {url}: {what}") from None
    return OsIndexInfo(name, key, dataset.name, model_id, dim, len(dataset.documents), len(rules), False,
                       time.perf_counter() - t0, embed_s)


#: Old-generation heap a node needed per document while indexing (measured: 762 MB at its peak for 1,000,000
#: documents with 32-dim vectors and two texts each, docs/measured; the 512 MB default failed there).
HEAP_BYTES_PER_DOC = 800


def heap_advice(heap_bytes: int, documents: int, url: str) -> str | None:
    """The line to say before bulk-loading ``documents`` into a cluster whose smallest node heap is ``heap_bytes``,
    when more than three quarters of it would be taken at :data:`HEAP_BYTES_PER_DOC`, with the heap to give; None
    when it fits."""
    need = documents * HEAP_BYTES_PER_DOC
    if need <= 0.75 * heap_bytes:
        return None
    suggest = max(1, math.ceil(need / 0.75 / 2**30))
    return (f"[workbench] indexing {documents:,} documents at {url}, whose node has a {heap_bytes / 2**20:,.0f} MB "
            f"heap: a corpus this size needed about {need / 2**20:,.0f} MB of it (docs/measured); if the node refuses "
            f"with a circuit_breaking_exception, restart the local one with WORKBENCH_OS_HEAP={suggest}g "
            f"(workbench services down opensearch first)")


def heap_warning(es, url: str, documents: int) -> str | None:
    """:func:`heap_advice` for the cluster's smallest node heap, said on stderr before a long bulk load; the line
    said, or None. A cluster that does not answer the stats is not second-guessed."""
    try:
        heap = min(int(n["jvm"]["mem"]["heap_max_in_bytes"]) for n in es.nodes.stats(metric="jvm")["nodes"].values())
    except Exception:  # noqa: BLE001 - a courtesy: the index is built either way
        return None
    line = heap_advice(heap, documents, url)
    if line:
        print(line, file=sys.stderr, flush=True)
    return line


def _batches(seq: Sequence, size: int) -> Iterator[Sequence]:
    for i in range(0, len(seq), size):
        yield seq[i:i + size]


def _bulk(es, name: str, dataset: Any, embedder: Any | None, progress: bool) -> float:
    """Send the documents in bulk requests of :data:`BULK_DOCS`, :data:`BULK_THREADS` at a time
    (analysis is CPU-bound on the server; two requests keep two cores busy); return the
    seconds spent embedding (in this thread, batch by batch)."""
    from opensearchpy.helpers import BulkIndexError, parallel_bulk

    from workbench._infra.progress import bar as progress_bar

    embed_s = 0.0

    def actions():
        nonlocal embed_s
        for batch in _batches(dataset.documents, BULK_DOCS):
            t0 = time.perf_counter()
            vectors = (embedder.embed_passages([index_text(d) for d in batch]) if embedder is not None
                       else [None] * len(batch))
            embed_s += time.perf_counter() - t0
            for d, v in zip(batch, vectors):
                yield {"_index": name, "_id": d.doc_id, "_source": document_source(dataset.name, d, v)}

    bar = progress_bar(len(dataset.documents), f"opensearch {dataset.name}", "doc", enabled=progress, leave=False)
    try:
        for _ok, _item in parallel_bulk(es, actions(), thread_count=BULK_THREADS, chunk_size=BULK_DOCS,
                                      max_chunk_bytes=50 * 1024 * 1024, raise_on_error=True):
            bar.update(1)
    except BulkIndexError as exc:
        first = exc.errors[0].get("index", {}) if exc.errors else {}
        raise OpenSearchError(f"bulk indexing into {name} failed for {first.get('_id')}: "
                              f"{(first.get('error') or {}).get('reason')}") from None
    finally:
        bar.close()
    return embed_s


def find_built(es, dataset_name: str) -> list[str]:
    """Names of complete workbench indexes of a dataset on the cluster (for ``workbench services status``)."""
    got = es.indices.get(index=f"wb-{dataset_name}-*", ignore_unavailable=True, allow_no_indices=True)
    return sorted(n for n, v in got.items() if v.get("mappings", {}).get("_meta", {}).get("complete"))
