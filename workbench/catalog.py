"""Dataset definitions, builds with manifests, staleness checks and loading.

A *dataset* is a document collection plus its query set, defined in
``datasets/datasets.toml`` and built into ``<home>/datasets/<name>/``:

* ``documents.jsonl``: the documents to index (held-out texts removed);
* ``queries.tsv`` and ``qrels.txt``: the query set (see :mod:`workbench.formats`);
* ``manifest.json``: the definition, the sha256 of every input file and output file,
  and counts per query type, split and language.

A build is *current* when its manifest's builder version, definition and input hashes
equal what the data directory holds now. :func:`load` refuses a stale or missing build
(:class:`~workbench.errors.StaleError`) instead of silently reusing it; ``workbench data
build`` rebuilds what is stale and skips what is current.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from workbench.errors import ConfigError, DataError, StaleError
from workbench.formats import BINARY_THRESHOLD, read_documents, read_qrels, read_queries, write_documents, write_qrels, write_queries
from workbench.settings import data_dir as _data_dir
from workbench.settings import home_dir
from workbench.types import QUERY_TYPES, Document, Qrel, Query

#: Bump when a builder's output format changes; every build is then stale.
BUILDER_VERSION = 1

#: Modules whose code shapes a build: a change to any of them makes every build stale.
_CODE_MODULES = ("catalog.py", "formats.py", "passages.py", "refs.py", "textnorm.py", "types.py",
                 "loaders", "querysets")


def code_fingerprint() -> str:
    """sha256 over the source of the modules that build datasets (:data:`_CODE_MODULES`)."""
    root = Path(__file__).resolve().parent
    h = hashlib.sha256()
    for name in _CODE_MODULES:
        p = root / name
        for f in sorted(p.rglob("*.py")) if p.is_dir() else [p]:
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()

SOURCES = ("gita", "bilara", "bilara-passages", "cst4")
_SOURCE_KEYS = {
    "gita": {"source", "held_out_translators", "query_types"},
    "bilara": {"source", "collections", "held_out_languages", "query_types"},
    "bilara-passages": {"source", "segments_from", "max_tokens", "overlap"},
    "cst4": {"source", "books", "query_types"},
}
_QUERY_TYPES_OF = {"gita": {"paraphrase", "term", "reference"},
                   "bilara": {"paraphrase", "term", "reference", "page_ref"},
                   "cst4": {"reference", "page_ref"}}


def default_definitions_path() -> Path:
    """``WORKBENCH_DATASETS`` if set, else ``datasets/datasets.toml`` of this checkout."""
    env = os.environ.get("WORKBENCH_DATASETS")
    if env:
        return Path(env).expanduser().resolve()
    return Path(__file__).resolve().parent.parent / "datasets" / "datasets.toml"


@dataclass(frozen=True)
class Definitions:
    """The parsed ``datasets.toml``: global settings and one dict per dataset."""

    path: Path
    seed: int
    splits: tuple[float, float, float]
    max_queries_per_type: int | None
    datasets: dict[str, dict[str, Any]]

    def definition(self, name: str) -> dict[str, Any]:
        """The dataset's section plus the global settings it is built with (what the manifest records)."""
        if name not in self.datasets:
            raise ConfigError(f"unknown dataset {name!r}; {self.path} defines: {', '.join(self.datasets)}")
        return {"name": name, "seed": self.seed, "splits": list(self.splits),
                "max_queries_per_type": self.max_queries_per_type, **self.datasets[name]}


def load_definitions(path: Path | None = None) -> Definitions:
    """Read and validate dataset definitions.

    Raises:
        ConfigError: the file is missing or invalid TOML, or a dataset has an unknown
            source, an unknown key, an unknown query type, a bad split or a
            ``segments_from`` that names no bilara dataset (the message names the key).
    """
    from workbench.querysets.split import check_ratios

    path = path or default_definitions_path()
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"dataset definitions {path} not found; set WORKBENCH_DATASETS or run from the repository") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    seed = raw.get("seed", 0)
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"{path}: seed must be an integer, got {seed!r}")
    splits = tuple(raw.get("splits", (0.6, 0.2, 0.2)))
    try:
        check_ratios(splits)
    except ValueError as exc:
        raise ConfigError(f"{path}: splits: {exc}") from None
    cap = raw.get("max_queries_per_type")
    if cap is not None and (not isinstance(cap, int) or cap < 1):
        raise ConfigError(f"{path}: max_queries_per_type must be a positive integer, got {cap!r}")
    datasets = raw.get("dataset", {})
    if not datasets:
        raise ConfigError(f"{path} defines no [dataset.NAME] section")
    for name, d in datasets.items():
        src = d.get("source")
        if src not in SOURCES:
            raise ConfigError(f"{path}: dataset.{name}.source must be one of {', '.join(SOURCES)}, got {src!r}")
        extra = set(d) - _SOURCE_KEYS[src]
        if extra:
            raise ConfigError(f"{path}: dataset.{name} has unknown key(s) {sorted(extra)}; allowed: {sorted(_SOURCE_KEYS[src])}")
        bad = set(d.get("query_types", ())) - _QUERY_TYPES_OF.get(src, set())
        if bad:
            raise ConfigError(f"{path}: dataset.{name}.query_types {sorted(bad)} not available for source {src!r}; "
                              f"choose from {sorted(_QUERY_TYPES_OF.get(src, set()))}")
        if src == "bilara-passages":
            parent = datasets.get(d.get("segments_from", ""), {})
            if parent.get("source") != "bilara":
                raise ConfigError(f"{path}: dataset.{name}.segments_from must name a bilara dataset, got {d.get('segments_from')!r}")
    return Definitions(path, seed, splits, cap, datasets)


# ---------------------------------------------------------------- inputs and hashing

def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def input_files(defn: dict[str, Any], defs: Definitions, data: Path) -> list[Path]:
    """Every corpus file a dataset's build reads (sorted), for the manifest's hashes."""
    src = defn["source"]

    def tree(*parts: str) -> list[Path]:
        root = data.joinpath(*parts)
        return sorted(p for p in root.rglob("*") if p.is_file()) if root.is_dir() else []

    if src == "gita":
        return tree("gita")
    if src in ("bilara", "bilara-passages"):
        base = defn if src == "bilara" else defs.definition(defn["segments_from"])
        files = tree("suttacentral-bilara") + tree("suttacentral-bilara-ru-sv")
        if "term" in base.get("query_types", ()):
            files += tree("ms-dpd")
        return files
    if src == "cst4":
        return sorted(p for b in defn["books"] for p in (data / "cst4-tipitaka-xml" / "cscd").glob(f"{b}.*.xml"))
    raise ConfigError(f"unknown source {src!r}")


def hash_inputs(files: list[Path], data: Path) -> dict[str, str]:
    """Relative path → sha256 for each input file."""
    return {str(p.relative_to(data)): _sha256(p) for p in files}


# ---------------------------------------------------------------- building

@dataclass
class Built:
    """What one dataset build produced (before writing)."""

    documents: list[Document]
    queries: list[Query]
    qrels: list[Qrel]
    notes: dict[str, Any]


def _strip_held_out(docs: list[Document], *, translators=(), languages=()) -> list[Document]:
    from dataclasses import replace

    out = []
    for d in docs:
        texts = tuple(t for t in d.texts if t.source not in translators and t.language not in languages)
        out.append(d if len(texts) == len(d.texts) else replace(d, texts=texts))
    return out


def _build_gita(defn: dict, defs: Definitions, data: Path, step: Callable[[str], None]) -> Built:
    from workbench.loaders.gita import load_gita
    from workbench.querysets import builders as b

    step("loading gita")
    corpus = load_gita(data)
    held = list(defn.get("held_out_translators", []))
    types = defn.get("query_types", ["paraphrase", "term", "reference"])
    cands = []
    step("building gita queries")
    if "paraphrase" in types:
        cands += b.gita_paraphrase(corpus, held)
    if "term" in types:
        cands += b.gita_terms(corpus)
    if "reference" in types:
        cands += b.gita_references(corpus, defs.seed)
    qs = b.finalize(cands, "gita", defs.seed, defs.max_queries_per_type, defs.splits)
    docs = _strip_held_out(corpus.documents, translators=set(held))
    return Built(docs, qs.queries, qs.qrels, {"held_out_translators": held})


def _bilara_parts(defn: dict, defs: Definitions, data: Path, step: Callable[[str], None]):
    from workbench.loaders.bilara import load_bilara
    from workbench.querysets import builders as b

    step("loading bilara")
    corpus = load_bilara(data, defn.get("collections", ["dn", "mn", "sn56", "dhp"]))
    types = defn.get("query_types", ["paraphrase", "term", "reference", "page_ref"])
    held_langs = list(defn.get("held_out_languages", []))
    cands = []
    if "paraphrase" in types:
        cands += b.bilara_paraphrase_ru(corpus.documents)
    if "term" in types:
        from workbench.loaders.dpd import load_dpd

        step("loading ms-dpd")
        lexicon = load_dpd(data)
        step("finding Pali lemmas")
        cands += b.pali_terms(corpus.documents, lexicon)
    if "reference" in types:
        cands += b.sutta_references(corpus.documents, defs.seed)
    if "page_ref" in types:
        cands += b.page_ref_candidates(corpus.documents, defs.seed, forms="pts")
    step("numbering bilara queries")
    qs = b.finalize(cands, "bilara", defs.seed, defs.max_queries_per_type, defs.splits)
    docs = _strip_held_out(corpus.documents, languages=set(held_langs))
    notes = {"held_out_languages": held_langs, "orphan_translation_keys": len(corpus.orphans),
             "skipped_empty_segments": len(corpus.skipped_empty)}
    return docs, qs, notes


def _build_bilara(defn: dict, defs: Definitions, data: Path, step: Callable[[str], None]) -> Built:
    docs, qs, notes = _bilara_parts(defn, defs, data, step)
    return Built(docs, qs.queries, qs.qrels, notes)


def _build_passages(defn: dict, defs: Definitions, data: Path, step: Callable[[str], None]) -> Built:
    from workbench.passages import merge_segments
    from workbench.querysets.builders import project_to_passages

    parent = defs.definition(defn["segments_from"])
    segs, qs, notes = _bilara_parts(parent, defs, data, step)
    step("merging passages")
    passages = merge_segments(segs, int(defn.get("max_tokens", 512)), int(defn.get("overlap", 50)))
    qrels = project_to_passages(qs.qrels, passages)
    judged = {r.query_id for r in qrels}
    queries = [q for q in qs.queries if q.query_id in judged]
    return Built(passages, queries, qrels, {**notes, "segments_from": defn["segments_from"]})


def _build_cst4(defn: dict, defs: Definitions, data: Path, step: Callable[[str], None]) -> Built:
    from workbench.loaders.cst4 import load_cst4
    from workbench.querysets import builders as b

    step("loading CST4 XML")
    docs = load_cst4(data, tuple(defn["books"]))
    types = defn.get("query_types", ["reference", "page_ref"])
    mula = [d for d in docs if d.metadata.get("sutta")]
    cands = []
    if "reference" in types:
        cands += b.sutta_references(mula, defs.seed, work_of=lambda d: d.metadata.get("sutta", ""))
    if "page_ref" in types:
        cands += b.page_ref_candidates(docs, defs.seed, forms="cst", forms_per_page=1,
                                       group_of=lambda d: d.metadata.get("sutta") or d.work_id,
                                       issue_for=lambda d: bool(d.metadata.get("sutta")))
    step("numbering CST queries")
    qs = b.finalize(cands, "cst4", defs.seed, defs.max_queries_per_type, defs.splits)
    return Built(docs, qs.queries, qs.qrels, {"books": list(defn["books"])})


_BUILDERS = {"gita": _build_gita, "bilara": _build_bilara, "bilara-passages": _build_passages, "cst4": _build_cst4}


def counts(queries: list[Query], qrels: list[Qrel], n_docs: int) -> dict[str, Any]:
    """Counts for a manifest: documents, queries, judgments, per type / split / language."""
    by_ts = Counter((q.query_type, q.split) for q in queries)
    return {
        "documents": n_docs,
        "queries": len(queries),
        "qrels": len(qrels),
        "relevant_binary": sum(1 for r in qrels if r.relevance >= BINARY_THRESHOLD),
        "by_type": dict(sorted(Counter(q.query_type for q in queries).items())),
        "by_split": dict(sorted(Counter(q.split for q in queries).items())),
        "by_language": dict(sorted(Counter(q.language for q in queries).items())),
        "by_type_split": {t: {s: by_ts[(t, s)] for s in ("train", "dev", "test") if by_ts[(t, s)]}
                          for t in QUERY_TYPES if any(by_ts[(t, s)] for s in ("train", "dev", "test"))},
    }


def dataset_dir(name: str, home: Path | None = None) -> Path:
    """``<home>/datasets/<name>``."""
    return (home or home_dir()) / "datasets" / name


def status(name: str, defs: Definitions | None = None, data: Path | None = None, home: Path | None = None) -> str:
    """``current``, ``missing``, or ``stale: <what changed>`` for one dataset."""
    defs = defs or load_definitions()
    defn = defs.definition(name)
    data = data or _data_dir()
    manifest_path = dataset_dir(name, home) / "manifest.json"
    if not manifest_path.is_file():
        return "missing"
    try:
        manifest = json.loads(manifest_path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return "stale: manifest.json is unreadable"
    if manifest.get("builder_version") != BUILDER_VERSION:
        return f"stale: built by builder version {manifest.get('builder_version')}, now {BUILDER_VERSION}"
    if manifest.get("code_sha256") != code_fingerprint():
        return "stale: the workbench's dataset code changed since the build"
    if manifest.get("definition") != defn:
        return f"stale: the definition of {name} in {defs.path.name} changed"
    now = hash_inputs(input_files(defn, defs, data), data)
    before = manifest.get("inputs", {})
    if now != before:
        changed = sorted(k for k in set(now) | set(before) if now.get(k) != before.get(k))
        return f"stale: {len(changed)} input file(s) changed, e.g. {changed[0]}"
    for fname, digest in manifest.get("outputs", {}).items():
        p = manifest_path.parent / fname
        if not p.is_file() or _sha256(p) != digest:
            return f"stale: output {fname} was modified or removed"
    return "current"


def build(name: str, defs: Definitions | None = None, data: Path | None = None, home: Path | None = None,
          *, force: bool = False, step: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Build one dataset unless it is current (or ``force``); return its manifest.

    Files are written to a temporary folder and moved into place at the end, so an
    interrupted build leaves the previous build intact.

    Raises:
        ConfigError, DataError: bad definitions or corpus files.
    """
    import shutil
    import tempfile

    defs = defs or load_definitions()
    defn = defs.definition(name)
    data = data or _data_dir()
    step = step or (lambda _msg: None)
    out = dataset_dir(name, home)
    if not force and status(name, defs, data, home) == "current":
        return json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    step("hashing inputs")
    inputs = hash_inputs(input_files(defn, defs, data), data)
    built = _BUILDERS[defn["source"]](defn, defs, data, step)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=out.parent))
    try:
        step("writing files")
        n_docs = write_documents(tmp / "documents.jsonl", built.documents)
        write_queries(tmp / "queries.tsv", built.queries)
        write_qrels(tmp / "qrels.txt", built.qrels)
        manifest = {
            "name": name,
            "builder_version": BUILDER_VERSION,
            "code_sha256": code_fingerprint(),
            "definition": defn,
            "binary_threshold": BINARY_THRESHOLD,
            "counts": counts(built.queries, built.qrels, n_docs),
            "notes": built.notes,
            "inputs_sha256": hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest(),
            "inputs": inputs,
            "outputs": {f: _sha256(tmp / f) for f in ("documents.jsonl", "queries.tsv", "qrels.txt")},
        }
        (tmp / "manifest.json").write_text(json.dumps(manifest, ensure_ascii=False, indent=1, sort_keys=True) + "\n",
                                           encoding="utf-8")
        if out.exists():
            old = out.with_name(f".{name}-old")
            shutil.rmtree(old, ignore_errors=True)
            out.rename(old)
            tmp.rename(out)
            shutil.rmtree(old, ignore_errors=True)
        else:
            tmp.rename(out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return manifest


@dataclass
class Dataset:
    """A built dataset, loaded: documents, queries, qrels and the manifest."""

    name: str
    documents: list[Document]
    queries: list[Query]
    qrels: list[Qrel]
    manifest: dict[str, Any]


def load(name: str, defs: Definitions | None = None, data: Path | None = None, home: Path | None = None,
         *, check: bool = True) -> Dataset:
    """Load a built dataset, refusing one that is missing or stale.

    Raises:
        StaleError: the build is missing or its inputs / definition changed; the
            message says what and to run ``workbench data build``.
    """
    if check:
        state = status(name, defs, data, home)
        if state != "current":
            raise StaleError(f"dataset {name} is {state}; run `workbench data build` (or `--only {name}`) first")
    d = dataset_dir(name, home)
    manifest = json.loads((d / "manifest.json").read_text(encoding="utf-8"))
    return Dataset(name, read_documents(d / "documents.jsonl"), read_queries(d / "queries.tsv"),
                   read_qrels(d / "qrels.txt"), manifest)


def build_order(defs: Definitions, only: list[str] | None = None) -> list[str]:
    """Dataset names to build, in definition order, checking ``only`` names exist."""
    names = list(defs.datasets)
    if only:
        unknown = [n for n in only if n not in defs.datasets]
        if unknown:
            raise ConfigError(f"unknown dataset(s) {unknown}; {defs.path.name} defines: {', '.join(names)}")
        names = [n for n in names if n in only]
    return names
