"""Building a dataset into its folder: input hashes, the manifest, staleness, the atomic swap.

:mod:`workbench.data.catalog` is the public face (``build``, ``ensure``, ``status``,
``load``); this module does the work under it. A build holds its dataset's lock
(:func:`workbench._infra.locks.dataset_lock`) from its last status check to the swap, so two
builds of one dataset queue instead of colliding; it writes into a temporary folder
(every file ``fsync``-ed through :mod:`workbench._infra.durable`) that is renamed into place at
the end, so a crash, a full disk or a read-only home leaves the previous build whole, and
says so in one :class:`~workbench.errors.StorageError` line.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from workbench._infra import durable
from workbench._infra.procs import pid_exists
from workbench.data.definitions import Definitions, negative_kinds
from workbench.data.sources import input_files, source_of
from workbench.errors import ConfigError, DataError, StorageError
from workbench.io.formats import BINARY_THRESHOLD, write_documents, write_qrels, write_queries
from workbench.settings import home_dir
from workbench.types import QUERY_TYPES, Qrel, Query

#: Bump when a builder's output format changes; every build is then stale.
BUILDER_VERSION = 1

#: The files a build writes beside its manifest (hashed into ``manifest["outputs"]``).
OUTPUTS = ("documents.jsonl", "queries.tsv", "qrels.txt")

#: Files a build writes only for some sources (hashed into ``manifest["outputs"]`` when written):
#: ``damage.json``, the known damage of the source's texts (:mod:`workbench.data.damage`).
OPTIONAL_OUTPUTS = ("damage.json",)


def _code_modules() -> tuple:
    """The modules whose code shapes a build (module objects: moving a file moves its entry with it).

    ``workbench.data`` is the whole package: the catalog, this module, the definitions,
    every source, loader and query-set builder.
    """
    from workbench import data, types
    from workbench.io import facets, formats
    from workbench.text import normalize as textnorm
    from workbench.text import passages, query, refs, sanskrit, translit

    return (data, facets, formats, passages, query, refs, sanskrit, textnorm, translit, types)


def code_fingerprint() -> str:
    """sha256 (hex) over the source of the modules that build datasets (:func:`_code_modules`; a package
    counts with every ``.py`` file under it): a change to any of them makes every build stale."""
    h = hashlib.sha256()
    for mod in _code_modules():
        path = Path(mod.__file__)
        files = sorted(path.parent.rglob("*.py")) if path.name == "__init__.py" else [path]
        for f in files:
            h.update(mod.__name__.encode() + b"\0" + f.relative_to(path.parent).as_posix().encode() + b"\0"
                     + f.read_bytes())
    return h.hexdigest()


# ---------------------------------------------------------------- inputs, outputs, manifests

def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def hash_inputs(files: list[Path], data: Path) -> dict[str, str]:
    """Relative path (to ``data``; the absolute path of a file outside it) → sha256 (hex) for each input file.

    Raises:
        DataError: an input file cannot be read (names it).
    """
    out = {}
    for p in files:
        try:  # a corpus file by its place under the data folder; a team's own file (source files) by its path
            out[str(p.relative_to(data)) if p.is_relative_to(data) else str(p)] = _sha256(p)
        except OSError as exc:
            raise DataError(f"corpus file {p} cannot be read ({exc.strerror or exc}); make it readable "
                            "or restore it from its source") from exc
    return out


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
    files = OUTPUTS + tuple(f for f in OPTIONAL_OUTPUTS if f in outputs)
    return tuple(f for f in files if not (folder / f).is_file() or _sha256(folder / f) != outputs.get(f))


def build_state(name: str, defs: Definitions, data: Path, home: Path | None) -> str:
    """``current``, ``missing``, or ``stale: <what changed>`` for one dataset (``catalog.status`` with
    every argument given).

    Raises:
        ConfigError: ``name`` is not defined.
        DataError: an input file cannot be read.
    """
    defn = defs.definition(name)
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
        differing = sorted(k for k in set(now) | set(before) if now.get(k) != before.get(k))
        return f"stale: {len(differing)} input file(s) changed, e.g. {differing[0] if differing else 'manifest.json inputs'}"
    changed = modified_outputs(name, home, manifest)
    if changed == ("manifest.json",):
        return "stale: manifest.json is unreadable"
    if changed:
        return f"stale: output {changed[0]} was modified or removed"
    return "current"


# ---------------------------------------------------------------- the build folder

def _stderr(msg: str) -> None:
    import sys

    print(f"[workbench] {msg}", file=sys.stderr, flush=True)


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


def build_stamp(out: Path) -> tuple[int, int, int] | None:
    """What changes when a build replaces the dataset folder ``out`` (its manifest's inode, mtime in ns
    and size), or None when it has no manifest."""
    try:
        st = (out / "manifest.json").stat()
    except OSError:
        return None
    return st.st_ino, st.st_mtime_ns, st.st_size


def build_dataset(name: str, defs: Definitions, data: Path, home: Path | None, *, force: bool,
                  step: Callable[[str], None] | None, log: Callable[[str], None] | None,
                  checked: tuple[str, tuple | None] | None) -> tuple[dict[str, Any], bool]:
    """``catalog.build_or_reuse`` with every argument given; ``checked`` is ``(status, stamp)`` when the
    caller has just looked (:func:`build_state`, :func:`build_stamp`).

    Raises:
        ConfigError, DataError, StorageError: as ``catalog.build_or_reuse``.
    """
    from workbench._infra.locks import dataset_lock

    started = time.time()
    defn = defs.definition(name)
    step = step or (lambda _msg: None)
    out = dataset_dir(name, home)
    stamp: tuple | None = None
    if not force:
        state, stamp = checked if checked is not None else (None, build_stamp(out))
        if state is None:
            state = build_state(name, defs, data, home)
        if state == "current":
            manifest = read_manifest(name, home)
            if manifest is not None:
                return manifest, False
    _prepare_home(out)
    with dataset_lock(out.parent.parent, name, log=log):
        _restore_interrupted_swap(out)
        if not force and build_stamp(out) != stamp and build_state(name, defs, data, home) == "current":
            manifest = read_manifest(name, home)  # built by the process this one waited for
            if manifest is not None:
                return manifest, False
        _clear_leftovers(name, out, started)
        return _build_locked(name, defs, defn, data, out, step, log), True


def _build_locked(name: str, defs: Definitions, defn: dict[str, Any], data: Path, out: Path,
                  step: Callable[[str], None], log: Callable[[str], None] | None = None) -> dict[str, Any]:
    """Build ``name`` into a temporary folder and swap it into ``out`` (the caller holds the lock). When the
    source checks its texts for known damage, ``damage.json`` is written too and one line about it goes to
    ``log`` (default: stderr)."""
    import secrets
    import shutil

    step("hashing inputs")
    inputs = hash_inputs(input_files(defn, defs, data), data)
    try:
        built = source_of(defn).build(defn, defs, data, step)
    except ValueError as exc:
        raise ConfigError(f"cannot build dataset {name} (dataset.{name} in {defs.path}): {exc}; "
                          f"fix the definition, or the corpus under {data}") from exc
    except KeyError as exc:
        raise DataError(f"cannot build dataset {name}: a corpus record under {data} lacks the key {exc}; "
                        f"restore the corpus (or fix dataset.{name} in {defs.path})") from exc
    kinds = negative_kinds(defn)
    listed = built.documents if isinstance(built.documents, list) else None  # None: a stream, read once when written
    if listed is None and (kinds or defn.get("filters") or built.damage is not None):
        listed = list(built.documents)
        built.documents = listed
    if kinds:
        assert listed is not None
        from dataclasses import replace

        from workbench.data.querysets import builders

        step("drawing negative queries")
        negatives = builders.negative_references(built.queries, defs.seed) if "references" in kinds else []
        if "absent_lemmas" in kinds:
            from workbench.data.loaders.dpd import load_dpd

            step("loading ms-dpd")
            negatives += builders.absent_lemmas(listed, load_dpd(data), defs.seed)
        if "gita_questions" in kinds:
            from workbench.data.loaders.gita import load_gita

            step("loading gita")
            negatives += builders.gita_questions(load_gita(data), defs.seed)
        built = replace(built, queries=[*built.queries, *negatives])
    if defn.get("filters"):
        from dataclasses import replace

        from workbench.data.querysets.builders import filtered_variants

        step("drawing filtered queries")
        assert listed is not None
        try:
            fq, fr = filtered_variants(built.queries, built.qrels, listed, defn["filters"], defs.seed)
        except ValueError as exc:
            raise ConfigError(f"cannot build dataset {name} (dataset.{name} in {defs.path}): {exc}") from exc
        built = replace(built, queries=[*built.queries, *fq], qrels=[*built.qrels, *fr])
    if defn.get("traffic_queries"):
        from dataclasses import replace

        from workbench.data.querysets import traffic

        step("reading traffic queries")
        extra = traffic.read(traffic.paths(defn, defs.path.parent), {q.query_id for q in built.queries}, defs.seed,
                             defs.splits)
        built = replace(built, queries=[*built.queries, *extra])
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
        written: tuple[str, ...] = OUTPUTS
        if built.damage is not None:
            from workbench.data import damage

            damage.write_report(tmp, built.damage)
            written = OUTPUTS + (damage.FILENAME,)
            unit = f"{listed[0].granularity}s" if listed else "documents"
            (log or _stderr)(damage.describe(built.damage, name, unit))
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
            "outputs": {f: _sha256(tmp / f) for f in written},
        }
        durable.atomic_write_json(tmp / "manifest.json", manifest, sort_keys=True)
        try:
            durable.swap_folder(tmp, out, out.with_name(f".{out.name}-old"))
        except OSError as exc:
            raise durable.storage_error(exc, out, action="move the new build into") from None
    except StorageError as exc:
        raise StorageError(f"cannot build dataset {name} into {out}: {exc}; {kept}") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return manifest
