"""A cross-encoder on ONNX Runtime with int8 weights: exported here from the folder's own weights (no hub), cached
in the workbench home under the weights' digest, and used only where it agrees with the torch model.

Why: a cross-encoder scores every (query, candidate) pair a config reranks; on the 2-core machine torch fp32
already runs MiniLM near the CPU's matmul rate, so the lever left is the arithmetic: dynamic int8 (weights
quantised per output channel, activations per batch) does the matrix products in 8-bit integer instructions,
1.5-1.7x faster (``benchmarks/bench_rerank.py``). int8 moves the scores a little, so each trained model is
checked before it is used:

* :func:`export_int8` writes ``model.onnx`` (fp32, the legacy TorchScript exporter, dynamic batch and length) and
  ``model-int8.onnx`` (``onnxruntime.quantization.quantize_dynamic``, per channel, MatMul only: quantised word
  embeddings lose more than they save) into ``<home>/cache/onnx/<digest>/``, written to a temporary folder and
  renamed into place.
* :func:`int8_agreement`: Spearman's rank correlation of the int8 scores with the torch scores over probe pairs of
  the dataset (:func:`probe_pairs`). :data:`MIN_SPEARMAN` (0.99) or more: int8 is used; less: torch. The verdict
  is kept beside the model (``agreement-L<max_length>.json``), so the check runs once per model and window.

The torch path stays the reference: ``backend = "torch"`` in ``[rerankers.NAME]`` forces it, ``"int8"`` forces
ONNX int8 without the check, ``"auto"`` (the default) decides as above.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, cast

import numpy as np

from workbench._infra.jsonout import dumps as strict_json
from workbench.errors import ConfigError, StorageError

#: The least Spearman correlation of int8 with torch pair scores at which int8 is used.
MIN_SPEARMAN = 0.99
#: Probe pairs for the check: queries x candidate texts.
PROBE_QUERIES = 32
PROBE_TEXTS = 8
#: Bump when the export recipe changes (a new folder in the cache).
RECIPE = 1


def cache_dir(home: Path, digest: str) -> Path:
    """``<home>/cache/onnx/<first 16 hex of the folder digest>-r<RECIPE>``."""
    return Path(home) / "cache" / "onnx" / f"{digest[:16]}-r{RECIPE}"


def check_installed() -> None:
    """Raise ConfigError with the pip command when ONNX Runtime is missing."""
    try:
        import onnx  # noqa: F401
        import onnxruntime  # noqa: F401
    except ImportError as exc:
        raise ConfigError(f"the int8 cross-encoder path needs onnxruntime and onnx ({exc}); install them with "
                          "pip install onnxruntime onnx, or set backend = \"torch\" in [rerankers.NAME]") from None


def export_size_estimate(folder: Path) -> int:
    """Bytes :func:`export_int8` of the cross-encoder in ``folder`` needs free at its peak: twice its weights (``model.onnx``
    is their size, and the quantizer writes a shape-inferred copy of it beside it before ``model-int8.onnx``),
    plus 5% and 1 MB."""
    files = [p for p in Path(folder).iterdir() if p.is_file()]
    weights = sum(p.stat().st_size for p in files if p.suffix == ".safetensors") or \
        sum(p.stat().st_size for p in files if p.suffix == ".bin")
    return 2 * weights + weights // 20 + (1 << 20)


def _storage_fault(exc: BaseException | None, folder: Path, dest: Path, needed: int,
                   free: int | None, action: str = "write") -> StorageError | None:
    """The :class:`StorageError` of an export that failed for want of room or permission; None for another failure.

    A full disk is recognised by the file system's error, or, where the exporter hides it (onnx's shape
    inference writes a truncated file, read back as a protobuf ``DecodeError``), by the disk having had
    less than :data:`FULL_DISK_MARGIN` free when the export failed.
    """
    import errno

    from workbench._infra.durable import storage_error, storage_error_in

    err = storage_error_in(exc, dest, action) if exc is not None else None
    full = err is not None and str(err).startswith("disk full")
    if err is None and (exc is None or (free is not None and free < FULL_DISK_MARGIN)):
        full = True
    if full:
        err = storage_error(OSError(errno.ENOSPC, os.strerror(errno.ENOSPC)), dest, needed=needed)
    if err is None:
        return None
    text = str(err)
    fix = "or set backend = \"torch\" in [rerankers.NAME]"
    if full:  # "disk full: cannot write DEST (...); fix...; nothing half-written was kept"
        head, tail = text.split("; ", 1)
        head = head.replace(f"cannot write {dest}", f"cannot write the int8 ONNX export of {folder} to {dest}", 1)
        tail = tail.replace("; nothing half-written was kept", f", {fix}; nothing half-written was kept")
        return StorageError(f"{head}; {tail}")
    return StorageError(f"{text} (the int8 ONNX export of {folder}), {fix}")


#: Free bytes under which a failed export is taken for a full disk (its exporter does not always say so).
FULL_DISK_MARGIN = 16 << 20


def export_int8(folder: Path, dest: Path) -> Path:
    """Export the cross-encoder in ``folder`` to ``dest/model.onnx`` and ``dest/model-int8.onnx``; returns ``dest``.

    Already there: returned as it is. Written into a temporary folder beside ``dest`` and renamed, so a crash
    leaves no half export. A disk with less room than :func:`export_size_estimate` is refused before the export.

    Raises:
        ConfigError: onnxruntime / torch missing, or the model does not export (the message names the folder).
        StorageError: the home cannot hold the export (a full disk, a read-only or foreign folder: names
            ``dest``, the free and the needed space, and the fix); nothing is left behind.
    """
    from workbench._infra.durable import free_bytes, storage_error

    dest = Path(dest)
    if (dest / "model-int8.onnx").is_file():
        return dest
    check_installed()
    needed = export_size_estimate(folder)
    try:
        dest.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a read-only home, a file where a folder should be
        raise _storage_fault(exc, folder, dest, needed, None, "create") or storage_error(
            exc, dest.parent, action="create") from None
    free = free_bytes(dest.parent)
    if free is not None and free < needed:  # before tens of seconds of export, not after
        raise cast(StorageError, _storage_fault(None, folder, dest, needed, free))  # without exc: always an error
    from workbench._infra.locks import FileLock

    # two processes reranking with one model at once (make main's chains) export it once: the second waits, then
    # finds it there, instead of replacing the folder the first is reading
    with FileLock(dest.parent / f".{dest.name}.lock", f"the int8 ONNX export {dest}"):
        if (dest / "model-int8.onnx").is_file():
            return dest
        return _export(folder, dest, needed)


def _export(folder: Path, dest: Path, needed: int) -> Path:
    """:func:`export_int8`'s work, under its lock."""
    from workbench._infra.durable import free_bytes, storage_error

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import logging

    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from workbench.embedding.embedders import quiet_load_bars

    logging.getLogger("root").setLevel(logging.ERROR)  # quantize_dynamic's "consider pre-processing" warning
    quiet_load_bars()  # transformers' "Loading weights" bar is carriage returns in a log
    try:
        tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    except OSError as exc:
        raise _storage_fault(exc, folder, dest, needed, free_bytes(dest.parent), "create") or storage_error(
            exc, dest, action="create") from None
    try:
        model = AutoModelForSequenceClassification.from_pretrained(str(folder), local_files_only=True).eval()
        tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        enc = tok(["a query"] * 2, ["a passage of text", "another one"], padding=True, return_tensors="pt")
        names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in enc]
        axes = {n: {0: "batch", 1: "length"} for n in names} | {"logits": {0: "batch"}}
        import warnings

        with warnings.catch_warnings(), torch.no_grad():
            warnings.simplefilter("ignore")
            torch.onnx.export(model, tuple(enc[n] for n in names), str(tmp / "model.onnx"), input_names=names,
                              output_names=["logits"], dynamic_axes=axes, opset_version=17, dynamo=False)
        quantize_dynamic(str(tmp / "model.onnx"), str(tmp / "model-int8.onnx"), weight_type=QuantType.QInt8,
                         per_channel=True, op_types_to_quantize=["MatMul"])
        if dest.exists():
            shutil.rmtree(dest)
        os.replace(tmp, dest)
    except ConfigError:
        raise
    except Exception as exc:  # noqa: BLE001 - any exporter failure is this model's, but for want of room
        fault = _storage_fault(exc, folder, dest, needed, free_bytes(dest.parent))  # measured before tmp goes
        if fault is not None:
            raise fault from None
        raise ConfigError(f"the cross-encoder in {folder} does not export to ONNX ({type(exc).__name__}: "
                          f"{str(exc).splitlines()[0][:200] if str(exc) else ''}); set backend = \"torch\" in "
                          "[rerankers.NAME]") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return dest


class OnnxCrossEncoder:
    """The exported cross-encoder on ONNX Runtime's CPU provider: ``score`` as :class:`~workbench.reranking.scorers.
    CrossEncoderScorer`'s (sigmoid of the one logit, a probability in [0, 1]).

    Args:
        onnx_path: ``model-int8.onnx`` (or ``model.onnx``) written by :func:`export_int8`.
        folder: the model folder (its tokenizer).
        max_length: word pieces per pair (longer pairs are truncated, longest first, as sentence-transformers does).
        batch_size: pairs per run.
        threads: intra-op threads; fixed when given. By default one per free core, re-decided before each call
            (:class:`workbench._infra.threads.ThreadGovernor`): an ONNX Runtime session's pool is fixed when it is
            made, so one session is kept per count the governor has chosen (two at most on two cores; the int8
            model is 20 MB).
        spin: let the pool's threads spin-wait between operators (ONNX Runtime's default). Off by default: a
            spinning thread whose core another process takes burns the time the other thread needs (issue #40).
    """

    def __init__(self, onnx_path: Path, folder: Path, *, max_length: int, batch_size: int = 32,
                 threads: int | None = None, spin: bool = False) -> None:
        check_installed()
        from transformers import AutoTokenizer

        from workbench._infra.threads import ThreadGovernor

        self.onnx_path = Path(onnx_path)
        self.spin = spin
        self._sessions: dict[int, Any] = {}
        self.governor = ThreadGovernor(threads)
        self.inputs = {i.name for i in self._session(self.governor.threads).get_inputs()}
        self.tokenizer = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
        self.max_length = max_length
        self.batch_size = batch_size

    def _session(self, threads: int) -> Any:
        """The session whose pool has ``threads`` intra-op threads (made on first use)."""
        if threads not in self._sessions:
            import onnxruntime as ort

            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            opts.inter_op_num_threads = 1
            opts.add_session_config_entry("session.intra_op.allow_spinning", "1" if self.spin else "0")
            opts.log_severity_level = 3
            self._sessions[threads] = ort.InferenceSession(str(self.onnx_path), opts, providers=["CPUExecutionProvider"])
        return self._sessions[threads]

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """Sigmoid scores of ``(query, text)``: float32 ``(len(texts),)``."""
        out = np.zeros(len(texts), np.float32)
        session = self._session(self.governor.next())
        for start in range(0, len(texts), self.batch_size):
            part = list(texts[start:start + self.batch_size])
            enc = self.tokenizer([query] * len(part), part, padding=True, truncation=True, max_length=self.max_length,
                                 return_tensors="np")
            feed = {k: np.asarray(v, dtype=np.int64) for k, v in enc.items() if k in self.inputs}
            logits = session.run(None, feed)[0].reshape(len(part))
            out[start:start + len(part)] = 1.0 / (1.0 + np.exp(-logits.astype(np.float64)))
        return out


def probe_pairs(ds: Any, order: str = "index", queries: int = PROBE_QUERIES,
                texts: int = PROBE_TEXTS) -> list[tuple[str, list[str]]]:
    """Probe pairs for :func:`int8_agreement`: ``queries`` queries spread over the dataset (every n-th, in its order),
    each with its judged-relevant documents and others drawn with a fixed seed, ``texts`` in all (so the scores
    span relevant and not); the documents' texts in ``order`` (the one the model was trained on)."""
    from workbench.text.doctext import index_text

    docs = {d.doc_id: d for d in ds.documents}
    ids = list(docs)
    relevant: dict[str, list[str]] = {}
    for r in ds.qrels:
        if r.relevance > 0 and r.doc_id in docs:
            relevant.setdefault(r.query_id, []).append(r.doc_id)
    step = max(1, len(ds.queries) // max(1, queries))
    rng = np.random.default_rng(0)
    out = []
    for q in ds.queries[::step][:queries]:
        chosen = list(dict.fromkeys(relevant.get(q.query_id, [])[: texts // 2]))
        while len(chosen) < min(texts, len(ids)):
            d = ids[int(rng.integers(len(ids)))]
            if d not in chosen:
                chosen.append(d)
        out.append((q.text, [index_text(docs[d], order) for d in chosen]))
    return out


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    """Spearman's rank correlation of two score lists (scipy's ``spearmanr``; 1.0 when both are constant)."""
    from scipy.stats import spearmanr

    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if np.ptp(x) == 0 and np.ptp(y) == 0:
        return 1.0
    return float(spearmanr(x, y).statistic)


def int8_agreement(reference: Any, candidate: Any, probe: Sequence[tuple[str, Sequence[str]]]) -> dict[str, Any]:
    """How closely ``candidate`` (int8) scores ``probe`` as ``reference`` (torch) does, and how fast each was.

    Returns:
        ``{"pairs", "spearman", "max_abs_diff", "reference_pairs_per_s", "candidate_pairs_per_s", "agrees"}``;
        ``agrees`` is ``spearman >= MIN_SPEARMAN``.
    """
    ref, cand, t_ref, t_cand = [], [], 0.0, 0.0
    for query, texts in probe:
        t = time.perf_counter()
        ref.extend(np.asarray(reference.score(query, list(texts)), dtype=np.float64).tolist())
        t_ref += time.perf_counter() - t
        t = time.perf_counter()
        cand.extend(np.asarray(candidate.score(query, list(texts)), dtype=np.float64).tolist())
        t_cand += time.perf_counter() - t
    rho = spearman(ref, cand)
    return {"pairs": len(ref), "spearman": round(rho, 5),
            "max_abs_diff": round(float(np.max(np.abs(np.subtract(ref, cand)))) if ref else 0.0, 5),
            "reference_pairs_per_s": round(len(ref) / t_ref, 1) if t_ref else None,
            "candidate_pairs_per_s": round(len(cand) / t_cand, 1) if t_cand else None,
            "min_spearman": MIN_SPEARMAN, "agrees": bool(rho >= MIN_SPEARMAN)}


def read_verdict(dest: Path, max_length: int) -> dict[str, Any] | None:
    """The kept :func:`int8_agreement` of the export in ``dest`` at ``max_length`` (None: not checked yet)."""
    try:
        return json.loads((Path(dest) / f"agreement-L{max_length}.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_verdict(dest: Path, max_length: int, verdict: dict[str, Any]) -> None:
    """Keep ``verdict`` beside the export (atomically)."""
    from workbench._infra.durable import atomic_write_text

    atomic_write_text(Path(dest) / f"agreement-L{max_length}.json", strict_json(verdict, indent=2) + "\n")
