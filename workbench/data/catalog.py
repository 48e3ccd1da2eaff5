"""Dataset definitions, builds with manifests, staleness checks and loading: the public API.

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

This module reads and checks the definitions and offers :func:`build`, :func:`ensure`,
:func:`status` and :func:`load`. What each source (``gita``, ``bilara``, ...) accepts and
how it builds is declared in its module under :mod:`workbench.data.sources`; hashing,
manifests, staleness, the dataset lock and the atomic swap of the build folder are in
:mod:`workbench.data.build` (its public names are importable from here too).
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any

from workbench.data.build import (
    BUILDER_VERSION,
    OUTPUTS,
    build_dataset,
    build_stamp,
    build_state,
    code_fingerprint,
    counts,
    dataset_dir,
    hash_inputs,
    modified_outputs,
    read_manifest,
    valid_counts,
)
from workbench.data.definitions import NEGATIVE_KINDS, Definitions, is_int, show, str_list
from workbench.data.sources import SOURCES, Built, input_files, query_types_of, required_sources
from workbench.errors import ConfigError, DataError, StaleError
from workbench.io.formats import read_documents, read_qrels, read_queries
from workbench.settings import PROJECT_ROOT
from workbench.settings import data_dir as _data_dir
from workbench.types import Document, Qrel, Query

__all__ = [
    "BUILDER_VERSION", "OUTPUTS", "SOURCES", "Built", "Dataset", "Definitions", "build", "build_or_reuse", "build_order",
    "code_fingerprint", "counts", "data_for", "dataset_dir", "default_definitions_path", "ensure", "hash_inputs", "input_files",
    "load", "load_definitions", "modified_outputs", "query_types_of", "read_manifest", "required_sources", "status",
    "valid_counts", "valid_name",
]

_TOP_KEYS = ("seed", "splits", "max_queries_per_type", "dataset")
#: A dataset name is a folder name under ``<home>/datasets``.
_NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def valid_name(name: object) -> bool:
    """Whether ``name`` is a dataset name: a ``str`` that is a plain folder name under ``<home>/datasets``
    (letters, digits, ``-``, ``_`` and ``.``, starting with a letter or digit: never a path)."""
    return isinstance(name, str) and _NAME_RE.fullmatch(name) is not None


def default_definitions_path() -> Path:
    """``WORKBENCH_DATASETS`` if set, else ``datasets/datasets.toml`` of this checkout."""
    env = os.environ.get("WORKBENCH_DATASETS")
    if env:
        return Path(env).expanduser().resolve()
    return PROJECT_ROOT / "datasets" / "datasets.toml"


#: Keys every ``[dataset.NAME]`` may hold whatever its source: ``filters``, the facets filtered copies of its
#: queries are drawn by (:func:`workbench.data.querysets.builders.filtered_variants`); ``negatives``: the
#: unanswerable queries it draws (:data:`NEGATIVE_KINDS`); ``traffic_queries``: query files drawn from readers'
#: traffic, appended unjudged (:mod:`workbench.data.querysets.traffic`).
GENERIC_KEYS = frozenset({"filters", "negatives", "traffic_queries"})

#: The facets ``filters`` may name.
FILTER_FACETS = ("collection", "category", "book", "work", "chapter")


def _check_dataset(path: Path, name: str, d: object, datasets: dict[str, Any]) -> None:
    """Validate one ``[dataset.NAME]`` section (see :func:`load_definitions`): the name, the source,
    the keys its source allows and requires, ``query_types``, then the source's own checks."""
    where = f"dataset.{name}"
    if not _NAME_RE.fullmatch(name):
        raise ConfigError(f"{path}: dataset name {show(name)} is not a plain folder name; use letters, digits, '-', '_' "
                          "and '.' (starting with a letter or digit)")
    if not isinstance(d, dict):
        raise ConfigError(f"{path}: {where} must be a table ([{where}] with source = ...), got {show(d)}")
    src = d.get("source")
    if not isinstance(src, str) or src not in SOURCES:
        raise ConfigError(f"{path}: {where}.source must be one of {', '.join(SOURCES)}, got {show(src)}")
    source = SOURCES[src]
    extra = set(d) - source.keys - GENERIC_KEYS
    if extra:
        raise ConfigError(f"{path}: {where} has unknown key(s) {sorted(extra)}; allowed: "
                          f"{sorted(source.keys | GENERIC_KEYS)}")
    absent = [k for k in source.required_keys if k not in d]
    if absent:
        raise ConfigError(f"{path}: {where} lacks the required key(s) {absent} for source {show(src)}; add them")
    if "query_types" in d:
        known = tuple(sorted(source.query_types))
        types = str_list(path, f"{where}.query_types", d["query_types"], nonempty=True, example=f'["{known[0]}"]',
                         suggest=known)
        bad = sorted(set(types) - set(known))
        if bad:
            raise ConfigError(f"{path}: {where}.query_types {bad} not available for source {show(src)}; "
                              f"choose from {list(known)}")
    if "negatives" in d and not isinstance(d["negatives"], bool):
        str_list(path, f"{where}.negatives", d["negatives"], known=NEGATIVE_KINDS, nonempty=True,
                 example='["references", "absent_lemmas"]')
        if "gita_questions" in d["negatives"] and src == "gita":
            raise ConfigError(f"{path}: {where}.negatives: gita_questions asks the gita's own verses, which a gita "
                              "dataset answers; use it on another corpus (bilara, cst4)")
    if "filters" in d:
        str_list(path, f"{where}.filters", d["filters"], known=FILTER_FACETS, nonempty=True,
                 example='["collection", "work"]')
    if "traffic_queries" in d:
        from workbench.data.querysets.traffic import check as check_traffic

        check_traffic(path, where, d["traffic_queries"])
    if source.check is not None:
        source.check(path, where, d, datasets)


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
    if not is_int(seed):
        raise ConfigError(f"{path}: seed must be an integer, got {show(seed)}")
    splits = raw.get("splits", [0.6, 0.2, 0.2])
    if not isinstance(splits, list):
        raise ConfigError(f"{path}: splits must be a list of three ratios like [0.6, 0.2, 0.2], got {show(splits)}")
    splits = tuple(splits)
    try:
        check_ratios(splits)
    except ValueError as exc:
        raise ConfigError(f"{path}: splits: {exc}") from None
    cap = raw.get("max_queries_per_type")
    if cap is not None and (not is_int(cap) or cap < 1):
        raise ConfigError(f"{path}: max_queries_per_type must be a positive integer, got {show(cap)}")
    datasets = raw.get("dataset", {})
    if not isinstance(datasets, dict):
        raise ConfigError(f"{path}: dataset must be a table of [dataset.NAME] sections, got {show(datasets)}")
    if not datasets:
        raise ConfigError(f"{path} defines no [dataset.NAME] section")
    for name, d in datasets.items():
        _check_dataset(path, name, d, datasets)
    return Definitions(path, seed, splits, cap, datasets)


def status(name: str, defs: Definitions | None = None, data: Path | None = None, home: Path | None = None) -> str:
    """``current``, ``missing``, or ``stale: <what changed>`` for one dataset.

    A manifest that cannot be read (not UTF-8, not JSON, not an object) is ``stale:
    manifest.json is unreadable``; one without valid counts is stale too, so that
    ``workbench data build`` rebuilds it.

    Raises:
        ConfigError: bad definitions or an unknown dataset.
        DataError: an input file cannot be read.
    """
    defs = defs or load_definitions()
    data = data or data_for([name], defs)
    return build_state(name, defs, data, home)


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
    the dataset's lock (:func:`workbench._infra.locks.dataset_lock`) is held for the whole
    build: a second build of the same dataset waits (saying for whom, through ``log``),
    then finds the first one's result current, or with ``force`` builds again. Under the
    lock, temporary folders of dead builds of this dataset are removed (never a live
    build's). Files are written to a temporary folder through :mod:`workbench._infra.durable`
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
    data = data or data_for([name], defs)
    return build_dataset(name, defs, data, home, force=force, step=step, log=log, checked=None)


def data_for(names: list[str], defs: Definitions | None = None) -> Path:
    """The corpus folder the named datasets' builds read, checked for the corpora they need
    (:func:`workbench.settings.data_dir`). Datasets that read no corpus (``source = "files"``: a team's own files)
    need none: then the data folder is used when one is set, else the folder of the definitions file.

    Raises:
        ConfigError: a dataset is not defined, or one needs the corpora and no data folder is set.
        DataError: the data folder lacks a file the datasets need.
    """
    defs = defs or load_definitions()
    sources = tuple(dict.fromkeys(s for n in names for s in required_sources(defs.definition(n), defs)))
    if sources:
        return _data_dir(sources=sources)
    try:
        return _data_dir(check=False)
    except ConfigError:
        return defs.path.parent


@dataclass
class Dataset:
    """A built dataset, loaded: documents, queries, qrels and the manifest."""

    name: str
    documents: list[Document]
    queries: list[Query]
    qrels: list[Qrel]
    manifest: dict[str, Any]

    @cached_property
    def facet_index(self):
        """The documents' :class:`workbench.io.facets.FacetIndex` (built on first use, then kept)."""
        from workbench.io.facets import FacetIndex

        return FacetIndex(self.documents)


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
    from workbench.io.facets import facet_values

    documents = read_documents(d / "documents.jsonl")
    ds = Dataset(name, documents, read_queries(d / "queries.tsv", lambda: facet_values(documents), name),
                 read_qrels(d / "qrels.txt"), manifest)
    empty = next((q for q in ds.queries if q.filter and not ds.facet_index.admitted(q.filter)), None)
    if empty is not None:  # each clause names a value some document has, but no document has them all
        raise DataError(f"{d / 'queries.tsv'}: query {empty.query_id}: filter {empty.filter[:120]} admits no document "
                        f"of {name} (no document meets every clause at once); loosen the filter or drop the query")
    return ds


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
    stamp = build_stamp(dataset_dir(name, home))
    state = status(name, defs, data, home)
    if state != "current":
        if log is not None:
            log(f"building dataset {name} ({state})")
        data = data or data_for([name], defs)
        build_dataset(name, defs, data, home, force=False, step=None, log=log, checked=(state, stamp))
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
