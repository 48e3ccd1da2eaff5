"""Dataset definitions, builds with manifests, staleness checks and loading.

A *dataset* is a document collection plus its query set, defined in
``datasets/datasets.toml`` and built into ``<home>/datasets/<name>/``:

* ``documents.jsonl``: the documents to index (held-out texts removed);
* ``queries.tsv`` and ``qrels.txt``: the query set (see :mod:`workbench.io.formats`);
* ``manifest.json``: the definition, the sha256 of every input file and output file,
  and counts per query type, split and language.

A build is *current* when its manifest's builder version, definition and input hashes
equal what the data directory holds now. :func:`load` refuses a stale or missing build
(:class:`~workbench.errors.StaleError`) instead of silently reusing it; ``workbench data
build`` rebuilds what is stale and skips what is current.

A build holds its dataset's lock (:func:`workbench.locks.dataset_lock`) from its last
status check to the swap, so two builds of one dataset queue instead of colliding; it
writes into a temporary folder (every file ``fsync``-ed through :mod:`workbench.durable`)
that is renamed into place at the end, so a crash, a full disk or a read-only home leaves
the previous build whole, and says so in one :class:`~workbench.errors.StorageError` line.
"""

from __future__ import annotations

import hashlib
import sys
import json
import os
import re
import time
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from workbench import durable
from workbench.errors import ConfigError, DataError, StaleError, StorageError
from workbench.procs import pid_exists
from workbench.io.formats import BINARY_THRESHOLD, read_documents, read_qrels, read_queries, write_documents, write_qrels, write_queries
from workbench.settings import data_dir as _data_dir
from workbench.settings import home_dir
from workbench.types import QUERY_TYPES, Document, Qrel, Query
from workbench.settings import PROJECT_ROOT

#: Bump when a builder's output format changes; every build is then stale.
BUILDER_VERSION = 1

def _code_modules() -> tuple:
    """The modules whose code shapes a build (module objects: moving a file moves its entry with it)."""
    from workbench.io import formats
    from workbench.data import loaders, querysets
    from workbench.text import passages, refs, normalize as textnorm
    from workbench import types

    return (sys.modules[__name__], formats, passages, refs, textnorm, types, loaders, querysets)


def code_fingerprint() -> str:
    """sha256 over the source of the modules that build datasets (:func:`_code_modules`; a package counts
    with every ``.py`` file under it): a change to any of them makes every build stale."""
    h = hashlib.sha256()
    for mod in _code_modules():
        path = Path(mod.__file__)
        files = sorted(path.parent.rglob("*.py")) if path.name == "__init__.py" else [path]
        for f in files:
            h.update(mod.__name__.encode() + b"\0" + f.relative_to(path.parent).as_posix().encode() + b"\0"
                     + f.read_bytes())
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
#: Query types built when a definition names none, per source (in build order).
_DEFAULT_QUERY_TYPES = {"gita": ("paraphrase", "term", "reference"),
                        "bilara": ("paraphrase", "term", "reference", "page_ref"),
                        "cst4": ("reference", "page_ref")}
#: Keys a definition must have, per source.
_REQUIRED_KEYS = {"bilara-passages": ("segments_from",), "cst4": ("books",)}
_TOP_KEYS = ("seed", "splits", "max_queries_per_type", "dataset")
#: A dataset name is a folder name under ``<home>/datasets``.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_DEFAULT_PASSAGE_SIZE = (512, 50)


def default_definitions_path() -> Path:
    """``WORKBENCH_DATASETS`` if set, else ``datasets/datasets.toml`` of this checkout."""
    env = os.environ.get("WORKBENCH_DATASETS")
    if env:
        return Path(env).expanduser().resolve()
    return PROJECT_ROOT / "datasets" / "datasets.toml"


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


_EXAMPLE_LIST = '["..."]'


def _show(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages."""
    r = repr(value)
    return r if len(r) <= limit else r[: limit - 1] + "…"


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _str_list(path: Path, key: str, value: object, *, known: tuple[str, ...] | None = None,
              nonempty: bool = False, example: str = "", suggest: tuple[str, ...] | None = None) -> list[str]:
    """Check that a definition value is a list of non-empty strings (from ``known``, no repeats).

    ``suggest`` names the choices in messages where the caller checks membership itself.
    """
    choices = f"; choose from {', '.join(known or suggest)}" if known or suggest else ""
    if isinstance(value, str) and value.strip():
        raise ConfigError(f"{path}: {key} must be a list of strings, not a single string: write "
                          f"{key.rsplit('.', 1)[-1]} = {json.dumps([value], ensure_ascii=False)}{choices}")
    if not isinstance(value, list) or not all(isinstance(x, str) and x.strip() for x in value):
        raise ConfigError(f"{path}: {key} must be a list of non-empty strings like {example or _EXAMPLE_LIST}, "
                          f"got {_show(value)}{choices}")
    if nonempty and not value:
        options = known or suggest
        raise ConfigError(f"{path}: {key} is empty; list at least one " + (f"of {', '.join(options)}" if options else "value"))
    if known is not None:
        bad = [x for x in value if x not in known]
        if bad:
            raise ConfigError(f"{path}: {key} holds unknown value(s) {bad}{choices}")
    twice = sorted({x for x in value if value.count(x) > 1})
    if twice:
        raise ConfigError(f"{path}: {key} lists {twice} more than once; list each once")
    return value


def query_types_of(defn: dict[str, Any]) -> tuple[str, ...]:
    """The query types a dataset section builds (its ``query_types``, else the source's default)."""
    return tuple(defn.get("query_types", _DEFAULT_QUERY_TYPES.get(defn["source"], ())))


def _check_dataset(path: Path, name: str, d: object, datasets: dict[str, Any]) -> None:
    """Validate one ``[dataset.NAME]`` section (see :func:`load_definitions`)."""
    from workbench.data.loaders.bilara import COLLECTIONS, LANGUAGES
    from workbench.data.loaders.cst4 import BOOKS

    where = f"dataset.{name}"
    if not _NAME_RE.match(name):
        raise ConfigError(f"{path}: dataset name {_show(name)} is not a plain folder name; use letters, digits, '-', '_' "
                          "and '.' (starting with a letter or digit)")
    if not isinstance(d, dict):
        raise ConfigError(f"{path}: {where} must be a table ([{where}] with source = ...), got {_show(d)}")
    src = d.get("source")
    if not isinstance(src, str) or src not in SOURCES:
        raise ConfigError(f"{path}: {where}.source must be one of {', '.join(SOURCES)}, got {_show(src)}")
    extra = set(d) - _SOURCE_KEYS[src]
    if extra:
        raise ConfigError(f"{path}: {where} has unknown key(s) {sorted(extra)}; allowed: {sorted(_SOURCE_KEYS[src])}")
    absent = [k for k in _REQUIRED_KEYS.get(src, ()) if k not in d]
    if absent:
        raise ConfigError(f"{path}: {where} lacks the required key(s) {absent} for source {_show(src)}; add them")
    if "query_types" in d:
        known = tuple(sorted(_QUERY_TYPES_OF[src]))
        types = _str_list(path, f"{where}.query_types", d["query_types"], nonempty=True, example=f'["{known[0]}"]',
                          suggest=known)
        bad = sorted(set(types) - set(known))
        if bad:
            raise ConfigError(f"{path}: {where}.query_types {bad} not available for source {_show(src)}; "
                              f"choose from {list(known)}")
    if "held_out_translators" in d:
        _str_list(path, f"{where}.held_out_translators", d["held_out_translators"],
                  example='["Shri Purohit Swami"]')
    if "held_out_languages" in d:
        _str_list(path, f"{where}.held_out_languages", d["held_out_languages"], known=LANGUAGES, example='["ru"]')
    if "collections" in d:
        _str_list(path, f"{where}.collections", d["collections"], known=tuple(COLLECTIONS), nonempty=True,
                  example='["dn", "mn"]')
    if "books" in d:
        _str_list(path, f"{where}.books", d["books"], known=BOOKS, nonempty=True, example='["s0201m"]')
    if src == "bilara-passages":
        parent_name = d["segments_from"]
        parent = datasets.get(parent_name) if isinstance(parent_name, str) else None
        if not isinstance(parent, dict) or parent.get("source") != "bilara":
            bilaras = [n for n, x in datasets.items() if isinstance(x, dict) and x.get("source") == "bilara"]
            raise ConfigError(f"{path}: {where}.segments_from must name a bilara dataset "
                              f"({', '.join(bilaras) or 'none is defined'}), got {_show(parent_name)}")
        size, overlap = d.get("max_tokens", _DEFAULT_PASSAGE_SIZE[0]), d.get("overlap", _DEFAULT_PASSAGE_SIZE[1])
        if not _is_int(size) or size < 1:
            raise ConfigError(f"{path}: {where}.max_tokens must be a positive integer, got {_show(size)}")
        if not _is_int(overlap) or not 0 <= overlap < size:
            raise ConfigError(f"{path}: {where}.overlap must be an integer with 0 <= overlap < max_tokens ({size}), "
                              f"got {_show(overlap)}")


def load_definitions(path: Path | None = None, *, option: str | None = None) -> Definitions:
    """Read and validate dataset definitions.

    Args:
        path: the TOML file; default :func:`default_definitions_path`.
        option: how the caller named ``path`` (``"--definitions"``), for messages.

    Raises:
        ConfigError: the file is missing, unreadable or invalid TOML, or a setting is
            wrong: an unknown top-level key; a seed, split ratios (three finite
            non-negative numbers summing to 1) or cap of the wrong type; a dataset with
            a bad name, an unknown source or key, a missing required key (``books``
            for cst4, ``segments_from`` for passages), a list (``query_types``,
            ``collections``, ``books``, ``held_out_*``) that is not a list of strings or
            holds unknown values, ``max_tokens`` / ``overlap`` that are not integers with
            0 <= overlap < max_tokens, or a ``segments_from`` that names no bilara
            dataset. The message names the file and the key.
    """
    from workbench.data.querysets.split import check_ratios

    if path is None:
        path = default_definitions_path()
        how = ("fix WORKBENCH_DATASETS or unset it" if os.environ.get("WORKBENCH_DATASETS")
               else "set WORKBENCH_DATASETS or run from the repository")
    else:
        path = Path(path)
        how = f"check the path given to {option}" if option else "check the path given"
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError(f"dataset definitions {path} not found; {how}") from None
    except IsADirectoryError:
        raise ConfigError(f"dataset definitions {path} is a folder, not a TOML file; {how}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"dataset definitions {path} are not UTF-8 text ({exc.reason} at byte {exc.start}); "
                          "save the file as UTF-8") from None
    except OSError as exc:
        raise ConfigError(f"dataset definitions {path} cannot be read ({exc.strerror or exc}); {how}") from None
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from None
    extra = sorted(set(raw) - set(_TOP_KEYS))
    if extra:
        raise ConfigError(f"{path}: unknown top-level key(s) {extra}; allowed: {', '.join(_TOP_KEYS)} "
                          "(dataset settings go under [dataset.NAME])")
    seed = raw.get("seed", 0)
    if not _is_int(seed):
        raise ConfigError(f"{path}: seed must be an integer, got {_show(seed)}")
    splits = raw.get("splits", [0.6, 0.2, 0.2])
    if not isinstance(splits, list):
        raise ConfigError(f"{path}: splits must be a list of three ratios like [0.6, 0.2, 0.2], got {_show(splits)}")
    splits = tuple(splits)
    try:
        check_ratios(splits)
    except ValueError as exc:
        raise ConfigError(f"{path}: splits: {exc}") from None
    cap = raw.get("max_queries_per_type")
    if cap is not None and (not _is_int(cap) or cap < 1):
        raise ConfigError(f"{path}: max_queries_per_type must be a positive integer, got {_show(cap)}")
    datasets = raw.get("dataset", {})
    if not isinstance(datasets, dict):
        raise ConfigError(f"{path}: dataset must be a table of [dataset.NAME] sections, got {_show(datasets)}")
    if not datasets:
        raise ConfigError(f"{path} defines no [dataset.NAME] section")
    for name, d in datasets.items():
        _check_dataset(path, name, d, datasets)
    return Definitions(path, seed, splits, cap, datasets)


def required_sources(defn: dict[str, Any], defs: Definitions) -> tuple[str, ...]:
    """The data sources (folders under the data directory) a dataset's build reads.

    gita → ``gita``; bilara and bilara-passages → ``suttacentral-bilara``, plus ``ms-dpd``
    when the term query type is built; cst4 → ``cst4-tipitaka-xml``. Optional sources
    (``suttacentral-bilara-ru-sv``) are not listed.
    """
    src = defn["source"]
    if src == "gita":
        return ("gita",)
    if src in ("bilara", "bilara-passages"):
        base = defn if src == "bilara" else defs.definition(defn["segments_from"])
        return ("suttacentral-bilara",) + (("ms-dpd",) if "term" in query_types_of(base) else ())
    if src == "cst4":
        return ("cst4-tipitaka-xml",)
    raise ConfigError(f"unknown source {src!r}")


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
        if "term" in query_types_of(base):
            files += tree("ms-dpd")
        return files
    if src == "cst4":
        return sorted(p for b in defn["books"] for p in (data / "cst4-tipitaka-xml" / "cscd").glob(f"{b}.*.xml"))
    raise ConfigError(f"unknown source {src!r}")


def hash_inputs(files: list[Path], data: Path) -> dict[str, str]:
    """Relative path → sha256 for each input file.

    Raises:
        DataError: an input file cannot be read (names it).
    """
    out = {}
    for p in files:
        try:
            out[str(p.relative_to(data))] = _sha256(p)
        except OSError as exc:
            raise DataError(f"corpus file {p} cannot be read ({exc.strerror or exc}); make it readable "
                            "or restore it from its source") from exc
    return out


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
    from workbench.data.loaders.gita import load_gita
    from workbench.data.querysets import builders as b

    step("loading gita")
    corpus = load_gita(data)
    held = list(defn.get("held_out_translators", []))
    types = query_types_of(defn)
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
    from workbench.data.loaders import bilara
    from workbench.data.querysets import builders as b

    step("loading bilara")
    # Checked against the published corpus: a partial copy fails instead of building fewer documents.
    corpus = bilara.load_bilara(data, defn.get("collections", ["dn", "mn", "sn56", "dhp"]), expected=bilara.PUBLISHED)
    types = query_types_of(defn)
    held_langs = list(defn.get("held_out_languages", []))
    cands = []
    if "paraphrase" in types:
        cands += b.bilara_paraphrase_ru(corpus.documents)
    if "term" in types:
        from workbench.data.loaders.dpd import load_dpd

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
    from workbench.text.passages import merge_segments
    from workbench.data.querysets.builders import project_to_passages

    parent = defs.definition(defn["segments_from"])
    segs, qs, notes = _bilara_parts(parent, defs, data, step)
    step("merging passages")
    passages = merge_segments(segs, defn.get("max_tokens", _DEFAULT_PASSAGE_SIZE[0]),
                              defn.get("overlap", _DEFAULT_PASSAGE_SIZE[1]))
    qrels = project_to_passages(qs.qrels, passages)
    judged = {r.query_id for r in qrels}
    queries = [q for q in qs.queries if q.query_id in judged]
    return Built(passages, queries, qrels, {**notes, "segments_from": defn["segments_from"]})


def _build_cst4(defn: dict, defs: Definitions, data: Path, step: Callable[[str], None]) -> Built:
    from workbench.data.loaders.cst4 import load_cst4
    from workbench.data.querysets import builders as b

    step("loading CST4 XML")
    docs = load_cst4(data, tuple(defn["books"]))
    types = query_types_of(defn)
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




def valid_counts(c: object) -> bool:
    """Whether a manifest's ``counts`` has the fields ``workbench data list`` / ``build`` print, of the right types."""
    def count(v: object) -> bool:
        return isinstance(v, int) and not isinstance(v, bool)

    def counts_by(v: object) -> bool:
        return isinstance(v, dict) and all(isinstance(k, str) and count(n) for k, n in v.items())

    if not isinstance(c, dict) or not all(count(c.get(k)) for k in ("documents", "queries", "qrels")):
        return False
    by_ts = c.get("by_type_split")
    return (counts_by(c.get("by_type")) and counts_by(c.get("by_language")) and isinstance(by_ts, dict)
            and all(counts_by(v) for v in by_ts.values()))


def read_manifest(name: str, home: Path | None = None) -> dict[str, Any] | None:
    """A build's ``manifest.json`` as a dict, or ``None`` when it is missing, unreadable or not a JSON object."""
    path = dataset_dir(name, home) / "manifest.json"
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return manifest if isinstance(manifest, dict) else None


def status(name: str, defs: Definitions | None = None, data: Path | None = None, home: Path | None = None) -> str:
    """``current``, ``missing``, or ``stale: <what changed>`` for one dataset.

    A manifest that cannot be read (not UTF-8, not JSON, not an object) is ``stale:
    manifest.json is unreadable``; one without valid counts is stale too, so that
    ``workbench data build`` rebuilds it.
    """
    defs = defs or load_definitions()
    defn = defs.definition(name)
    data = data or _data_dir(sources=required_sources(defn, defs))
    manifest_path = dataset_dir(name, home) / "manifest.json"
    if not manifest_path.is_file():
        return "missing"
    manifest = read_manifest(name, home)
    if manifest is None:
        return "stale: manifest.json is unreadable"
    if manifest.get("builder_version") != BUILDER_VERSION:
        return f"stale: built by builder version {manifest.get('builder_version')}, now {BUILDER_VERSION}"
    if manifest.get("code_sha256") != code_fingerprint():
        return "stale: the workbench's dataset code changed since the build"
    if manifest.get("definition") != defn:
        return f"stale: the definition of {name} in {defs.path.name} changed"
    if not valid_counts(manifest.get("counts")):
        return "stale: manifest.json lacks valid counts"
    now = hash_inputs(input_files(defn, defs, data), data)
    before = manifest.get("inputs", {})
    if now != before:
        before = before if isinstance(before, dict) else {}
        changed = sorted(k for k in set(now) | set(before) if now.get(k) != before.get(k))
        return f"stale: {len(changed)} input file(s) changed, e.g. {changed[0] if changed else 'manifest.json inputs'}"
    changed = modified_outputs(name, home, manifest)
    if changed == ("manifest.json",):
        return "stale: manifest.json is unreadable"
    if changed:
        return f"stale: output {changed[0]} was modified or removed"
    return "current"


#: The files a build writes beside its manifest (hashed into ``manifest["outputs"]``).
OUTPUTS = ("documents.jsonl", "queries.tsv", "qrels.txt")


def modified_outputs(name: str, home: Path | None = None, manifest: dict | None = None) -> tuple[str, ...]:
    """The output files of a build whose sha256 differs from its manifest's ``outputs`` (edited,
    replaced or removed after the build), in :data:`OUTPUTS` order; ``("manifest.json",)`` when
    the manifest is missing or unreadable; empty when the build is intact.

    Reads only the build (not the corpora), so it works on a copy of a home without them.
    """
    manifest = manifest if manifest is not None else read_manifest(name, home)
    outputs = manifest.get("outputs") if isinstance(manifest, dict) else None
    if not isinstance(outputs, dict):
        return ("manifest.json",)
    folder = dataset_dir(name, home)
    return tuple(f for f in OUTPUTS if not (folder / f).is_file() or _sha256(folder / f) != outputs.get(f))


_HOME_HINT = "set WORKBENCH_HOME (or [paths] home in workbench.toml) to a writable folder"


def _prepare_home(out: Path) -> None:
    """Make ``out``'s parent (``<home>/datasets``) and check it is writable, before any work.

    Raises:
        ConfigError: the folder cannot be created (a file is in the way, no permission,
            a read-only file system) or written; the message names it and WORKBENCH_HOME.
    """
    import tempfile

    folder = out.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise ConfigError(f"{folder} is a file, not a folder; remove it or {_HOME_HINT}") from None
    except OSError as exc:
        raise ConfigError(f"cannot create the datasets folder {folder} ({exc.strerror or exc}); {_HOME_HINT}") from None
    if not folder.is_dir():
        raise ConfigError(f"{folder} is not a folder; remove it or {_HOME_HINT}")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} is a file, not a dataset folder; remove it (or {_HOME_HINT})")
    try:
        fd, probe = tempfile.mkstemp(prefix=".write-test-", dir=folder)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        kept = f"; the previous build in {out} is kept" if out.is_dir() else ""
        raise ConfigError(f"the datasets folder {folder} is not writable ({exc.strerror or exc}); "
                          f"make it writable or {_HOME_HINT}{kept}") from None


def _clear_leftovers(name: str, out: Path, started: float) -> None:
    """Remove the temporary folders that dead builds of dataset ``name`` left beside ``out``.

    Called with the dataset's lock held, so no other build of it runs: a build folder
    ``.NAME-build-<pid>-<hex>`` goes when its process is gone (never a live one's), the
    ``.NAME-old`` of a swap that was cut short goes, and so do the ``.NAME-XXXXXXXX``
    folders of older workbench versions that are older than this build.
    """
    import shutil

    current = re.compile(rf"^\.{re.escape(name)}-build-(\d+)-[0-9a-f]{{8}}$")
    legacy = re.compile(rf"^\.{re.escape(name)}-(?:[a-z0-9_]{{8}}|old)$")
    try:
        entries = list(out.parent.iterdir())
    except OSError:
        return
    for p in entries:
        try:
            m = current.match(p.name)
            dead = (m is not None and int(m.group(1)) != os.getpid() and not pid_exists(int(m.group(1)))) or (
                legacy.match(p.name) is not None and p.stat().st_mtime < started)
            if dead and p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
        except OSError:
            continue


def _restore_interrupted_swap(out: Path) -> None:
    """A build killed between the two renames of its swap left ``.NAME-old`` and no ``NAME``: put it back."""
    old = out.with_name(f".{out.name}-old")
    if not out.exists() and old.is_dir():
        try:
            old.rename(out)
            durable.fsync_dir(out.parent)
        except OSError:
            pass  # status then says missing, and the build below writes a new one


def _stamp(out: Path) -> tuple[int, int, int] | None:
    """What changes when a build replaces ``out`` (its manifest's inode, mtime and size), or None."""
    try:
        st = (out / "manifest.json").stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def _swap_into_place(tmp: Path, out: Path) -> None:
    """Move the finished build ``tmp`` to ``out``; the previous build goes, or stays when this fails.

    Raises:
        OSError: a rename failed (the previous build is back in place).
    """
    import shutil

    old = out.with_name(f".{out.name}-old")
    if out.exists():
        shutil.rmtree(old, ignore_errors=True)
        out.rename(old)
        try:
            tmp.rename(out)
        except OSError:
            old.rename(out)
            raise
        durable.fsync_dir(out.parent)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(out)
        durable.fsync_dir(out.parent)


def build(name: str, defs: Definitions | None = None, data: Path | None = None, home: Path | None = None,
          *, force: bool = False, step: Callable[[str], None] | None = None,
          log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Build one dataset unless it is current (or ``force``); return its manifest.

    See :func:`build_or_reuse`, which also says whether it built.

    Raises:
        ConfigError, DataError, StorageError: as :func:`build_or_reuse`.
    """
    return build_or_reuse(name, defs, data, home, force=force, step=step, log=log)[0]


def build_or_reuse(name: str, defs: Definitions | None = None, data: Path | None = None, home: Path | None = None,
                   *, force: bool = False, step: Callable[[str], None] | None = None,
                   log: Callable[[str], None] | None = None) -> tuple[dict[str, Any], bool]:
    """Build one dataset unless it is current (or ``force``); return ``(manifest, built)``.

    A current build is returned without writing anything (so this works on a read-only
    home). Otherwise the home's ``datasets`` folder is created and checked writable, and
    the dataset's lock (:func:`workbench.locks.dataset_lock`) is held for the whole
    build: a second build of the same dataset waits (saying for whom, through ``log``),
    then finds the first one's result current, or with ``force`` builds again. Under the
    lock, temporary folders of dead builds of this dataset are removed (never a live
    build's). Files are written to a temporary folder through :mod:`workbench.durable`
    (each ``fsync``-ed) and moved into place at the end, so a failed or interrupted
    build leaves the previous build intact.

    Args:
        log: where waiting for another build is said (default: stderr).

    Raises:
        ConfigError: bad definitions, an unwritable home, or a definition the corpus
            contradicts (an unknown held-out translator); names the dataset.
        DataError: missing, incomplete or malformed corpus files (names the path).
        StorageError: the build cannot be written (a full disk, a read-only home, a
            lock file that cannot be created); names the path and the fix, and the
            previous build is kept.
    """
    defs = defs or load_definitions()
    defn = defs.definition(name)
    data = data or _data_dir(sources=required_sources(defn, defs))
    return _build(name, defs, data, home, force=force, step=step, log=log, checked=None)


def _build(name: str, defs: Definitions, data: Path, home: Path | None, *, force: bool,
           step: Callable[[str], None] | None, log: Callable[[str], None] | None,
           checked: tuple[str, tuple | None] | None) -> tuple[dict[str, Any], bool]:
    """:func:`build_or_reuse`; ``checked`` is ``(status, stamp)`` when the caller has just looked."""
    from workbench.locks import dataset_lock

    started = time.time()
    defn = defs.definition(name)
    step = step or (lambda _msg: None)
    out = dataset_dir(name, home)
    stamp: tuple | None = None
    if not force:
        state, stamp = checked if checked is not None else (None, _stamp(out))
        if state is None:
            state = status(name, defs, data, home)
        if state == "current":
            manifest = read_manifest(name, home)
            if manifest is not None:
                return manifest, False
    _prepare_home(out)
    with dataset_lock(out.parent.parent, name, log=log):
        _restore_interrupted_swap(out)
        if not force and _stamp(out) != stamp and status(name, defs, data, home) == "current":
            manifest = read_manifest(name, home)  # built by the process this one waited for
            if manifest is not None:
                return manifest, False
        _clear_leftovers(name, out, started)
        return _build_locked(name, defs, defn, data, out, step), True


def _build_locked(name: str, defs: Definitions, defn: dict[str, Any], data: Path, out: Path,
                  step: Callable[[str], None]) -> dict[str, Any]:
    """Build ``name`` into a temporary folder and swap it into ``out`` (the caller holds the lock)."""
    import secrets
    import shutil

    step("hashing inputs")
    inputs = hash_inputs(input_files(defn, defs, data), data)
    try:
        built = _BUILDERS[defn["source"]](defn, defs, data, step)
    except ValueError as exc:
        raise ConfigError(f"cannot build dataset {name} (dataset.{name} in {defs.path}): {exc}; "
                          f"fix the definition, or the corpus under {data}") from exc
    except KeyError as exc:
        raise DataError(f"cannot build dataset {name}: a corpus record under {data} lacks the key {exc}; "
                        f"restore the corpus (or fix dataset.{name} in {defs.path})") from exc
    kept = f"the previous build in {out} is kept" if out.is_dir() else "nothing was kept"
    tmp = out.with_name(f".{name}-build-{os.getpid()}-{secrets.token_hex(4)}")
    try:
        try:
            tmp.mkdir()
        except OSError as exc:
            raise durable.storage_error(exc, tmp, action="create") from None
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
            "outputs": {f: _sha256(tmp / f) for f in OUTPUTS},
        }
        durable.atomic_write_json(tmp / "manifest.json", manifest, sort_keys=True)
        try:
            _swap_into_place(tmp, out)
        except OSError as exc:
            raise durable.storage_error(exc, out, action="move the new build into") from None
    except StorageError as exc:
        raise StorageError(f"cannot build dataset {name} into {out}: {exc}; {kept}") from None
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
    manifest = read_manifest(name, home)
    if manifest is None:
        raise StaleError(f"dataset {name} has no readable {d / 'manifest.json'}; run `workbench data build --only {name}`")
    return Dataset(name, read_documents(d / "documents.jsonl"), read_queries(d / "queries.tsv"),
                   read_qrels(d / "qrels.txt"), manifest)


def ensure(name: str, defs: Definitions | None = None, data: Path | None = None, home: Path | None = None,
           log: Callable[[str], None] | None = None) -> Dataset:
    """Load a dataset, building it first when it is missing or stale.

    The inputs are hashed once: the status check decides, and the build and the load
    then skip their own checks (unless another process built the dataset while this
    one waited for its lock: then that build is checked and used). ``log`` gets the
    reason for a build and the wait for another build's lock (default: only the wait
    is said, on stderr).

    Raises:
        ConfigError, DataError, StorageError: as :func:`build_or_reuse`.
        StaleError: the build cannot be loaded.
    """
    defs = defs or load_definitions()
    stamp = _stamp(dataset_dir(name, home))
    state = status(name, defs, data, home)
    if state != "current":
        if log is not None:
            log(f"building dataset {name} ({state})")
        data = data or _data_dir(sources=required_sources(defs.definition(name), defs))
        _build(name, defs, data, home, force=False, step=None, log=log, checked=(state, stamp))
    return load(name, defs, data, home, check=False)


def build_order(defs: Definitions, only: list[str] | None = None) -> list[str]:
    """Dataset names to build, in definition order, checking ``only`` names exist."""
    names = list(defs.datasets)
    if only:
        unknown = [n for n in only if n not in defs.datasets]
        if unknown:
            raise ConfigError(f"unknown dataset(s) {unknown}; {defs.path.name} defines: {', '.join(names)}")
        names = [n for n in names if n in only]
    return names
