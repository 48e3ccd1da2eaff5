"""`workbench data`: build and list datasets and query sets."""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Optional

import typer

from workbench.cli._shared import _fail, _log, app, echo_json, json_option
from workbench.errors import WorkbenchError

data_app = typer.Typer(help="Build and list datasets and query sets.", no_args_is_help=True)
app.add_typer(data_app, name="data")


class _Steps:
    """Progress for a multi-step build: a tqdm bar on a terminal, one line per step otherwise."""

    def __init__(self, total: int):
        from tqdm import tqdm

        self.tty = sys.stderr.isatty()
        self.bar = tqdm(total=total, unit="dataset", file=sys.stderr, disable=not self.tty, dynamic_ncols=True)
        self.name = ""

    def step(self, msg: str) -> None:
        if self.tty:
            self.bar.set_postfix_str(f"{self.name}: {msg}")
        else:
            print(f"[data build] {self.name}: {msg}", file=sys.stderr, flush=True)

    def done(self) -> None:
        self.bar.update(1)

    def close(self) -> None:
        self.bar.close()


@data_app.command("build")
def data_build(
    only: Optional[list[str]] = typer.Option(None, "--only", help="Build only this dataset (repeatable)."),
    force: bool = typer.Option(False, "--force", help="Rebuild even when the build is current."),
    definitions: Optional[Path] = typer.Option(None, "--definitions",
                                               help="Dataset definitions TOML (default: WORKBENCH_DATASETS, else "
                                               "datasets/datasets.toml)."),
) -> None:
    """Build the datasets and query sets from WORKBENCH_DATA into WORKBENCH_HOME (skips what is current).

    Only the corpora the selected datasets read must be present. A dataset whose build
    fails keeps its previous build.
    """
    from workbench.data import catalog
    from workbench.settings import home_dir

    try:
        defs = catalog.load_definitions(definitions, option="--definitions")
        names = catalog.build_order(defs, only)
        data, home = catalog.data_for(names, defs), home_dir()
        steps = _Steps(len(names))
        rows = []
        try:
            for name in names:
                steps.name = name
                t0 = time.perf_counter()
                manifest, built = catalog.build_or_reuse(name, defs, data, home, force=force, step=steps.step, log=_log)
                rows.append((name, "built" if built else "current", manifest["counts"], time.perf_counter() - t0))
                steps.done()
        finally:
            steps.close()
    except WorkbenchError as exc:
        _fail(exc)
    for name, state, c, secs in rows:
        typer.echo(_counts_line(name, state, c, secs))
    typer.echo(f"built into {home / 'datasets'}")


@data_app.command("list")
def data_list(
    as_json: bool = json_option("the data folder, the home and each dataset's state"),
    definitions: Optional[Path] = typer.Option(None, "--definitions", help="Dataset definitions TOML (default: "
                                               "WORKBENCH_DATASETS, else datasets/datasets.toml)."),
) -> None:
    """Show the defined datasets, whether each build is current, and counts per query type and split."""
    from workbench.data import catalog
    from workbench.settings import home_dir

    try:
        defs = catalog.load_definitions(definitions, option="--definitions")
        data, home = catalog.data_for(list(defs.datasets), defs), home_dir()
        out = []
        for name in defs.datasets:
            try:  # one dataset whose files moved is a line of the list, not the end of it
                state = catalog.status(name, defs, data, home)
            except WorkbenchError as exc:
                state = f"unreadable: {exc}"
            entry = {"name": name, "source": defs.datasets[name]["source"], "status": state,
                     "path": str(catalog.dataset_dir(name, home))}
            m = catalog.read_manifest(name, home)  # None when missing or unreadable: no counts shown
            if m is not None and catalog.valid_counts(m.get("counts")):
                entry["counts"] = m["counts"]
                entry["inputs_sha256"] = m.get("inputs_sha256")
            out.append(entry)
    except WorkbenchError as exc:
        _fail(exc)
    if as_json:
        echo_json({"data": str(data), "home": str(home), "datasets": out})
        return
    typer.echo(f"data: {data}\nhome: {home}\n")
    for e in out:
        typer.echo(f"{e['name']} ({e['source']}): {e['status']}")
        c = e.get("counts")
        if not c:
            continue
        typer.echo(f"  {c['documents']:,d} documents, {c['queries']:,d} queries, {c['qrels']:,d} judgments")
        typer.echo(f"  {'query_type':12s} {'train':>6s} {'dev':>6s} {'test':>6s} {'total':>6s}")
        for t, by in c["by_type_split"].items():
            typer.echo(f"  {t:12s} {by.get('train', 0):6d} {by.get('dev', 0):6d} {by.get('test', 0):6d} {sum(by.values()):6d}")
        langs = ", ".join(f"{k} {v}" for k, v in c["by_language"].items())
        typer.echo(f"  languages: {langs}")
    if any(e["status"] != "current" for e in out):
        typer.echo("\nrun `workbench data build` to build what is missing or stale")


# ---------------------------------------------------------------- data add

#: A TOML bare key: written as is; any other key is written as a quoted (JSON) string.
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def _toml_str(value: str) -> str:
    """``value`` as a TOML basic string (:func:`workbench.data.definitions.toml_string`)."""
    from workbench.data.definitions import toml_string

    return toml_string(value)


def _toml_key(key: str) -> str:
    return key if _BARE_KEY.fullmatch(key) else _toml_str(key)


def _stored_path(p: Path, base: Path | None) -> str:
    """``p`` as the section stores it: relative (POSIX) under ``base`` (the definitions file's folder), else
    absolute (always absolute when ``base`` is None)."""
    p = p.expanduser().resolve()
    if base is not None:
        try:
            return p.relative_to(base).as_posix()
        except ValueError:
            pass
    return str(p)


def _section(name: str, entries: list[tuple[str, str]]) -> str:
    """The ``[dataset.NAME]`` section: a header and one ``key = value`` line per entry (values already TOML)."""
    return "\n".join([f"[dataset.{_toml_key(name)}]", *(f"{k} = {v}" for k, v in entries)]) + "\n"


def _text_fields(specs: list[str]) -> tuple[list[tuple[str, Optional[str]]], bool]:
    """``--text-field F[=LANG]`` values as ``(field, language)`` pairs, and whether any names a language."""
    from workbench.errors import ConfigError

    pairs: list[tuple[str, str | None]] = []
    for spec in specs:
        field, sep, lang = spec.partition("=")
        field, lang = field.strip(), lang.strip()
        if not field or (sep and not lang):
            raise ConfigError(f"--text-field {spec!r}: write FIELD or FIELD=LANG (body, body_ru=ru)")
        if any(f == field for f, _ in pairs):
            raise ConfigError(f"--text-field {field} is given twice; name each text field once")
        pairs.append((field, lang or None))
    return pairs, any(lang for _f, lang in pairs)


def _first_record(path: Path, fmt: str) -> tuple[str, dict[str, object]]:
    """Where the documents file's first record is (``file:line``) and the record (for Parquet: its columns,
    every value None, read from the schema without reading a row).

    Raises:
        DataError: the file cannot be read, or holds no record.
    """
    from workbench.data.loaders.files import place, records
    from workbench.errors import DataError

    if fmt == "parquet":
        import pyarrow.parquet as pq

        if next(records(path, fmt, []), None) is not None:  # the reader's checks and messages; no column read
            return f"{path}", dict.fromkeys(pq.ParquetFile(path).schema_arrow.names)
        raise DataError(f"{path}: no documents; the file holds no record")
    for n, rec in records(path, fmt):
        return place(path, n, fmt), rec
    raise DataError(f"{path}: no documents; the file holds no record")


def _check_fields(spec, given: dict[str, list[str]]) -> list[str]:
    """Check the named fields against the documents file's first record; return notes for optional fields the
    first record lacks (JSON lines, where records may differ).

    Raises:
        DataError: the record lacks the id, a text field or the work field, or (CSV, TSV, Parquet: every record
            has the header's columns) the title or a metadata field named with an option; the message names the
            file's fields and the option that fixes it.
    """
    from workbench.errors import DataError

    where, rec = _first_record(spec.documents, spec.fmt)
    md = rec.get("metadata")
    names = list(rec) + ([k for k in md if k not in rec] if isinstance(md, dict) else [])

    def has(field: str) -> bool:
        return field in rec or (isinstance(md, dict) and field in md)

    def missing(field: str, option: str) -> DataError:
        shown = ", ".join(names[:20]) + (f", … ({len(names)} in all)" if len(names) > 20 else "")
        return DataError(f"{where}: no field {field!r}; the file's fields are {shown}: name one with {option}")

    required = [(spec.id_field, "--id-field"), *((f, "--text-field") for f, _ in spec.text_fields)]
    if spec.work_field:
        required.append((spec.work_field, "--work-field"))
    for field, option in required:
        if not has(field):
            raise missing(field, option)
    notes = []
    optional = [(f, "--title-field") for f in given.get("title", [])] + [(f, "--metadata-field")
                                                                        for f in given.get("metadata", [])]
    for field, option in optional:
        if has(field):
            continue
        if spec.fmt in ("csv", "tsv", "parquet"):
            raise missing(field, option)
        notes.append(f"{where}: the first record has no field {field!r} (a record may lack it; check the name)")
    return notes


def _definitions_lock(path: Path):
    """The lock one ``workbench data add`` holds on a definitions file from its first read to the end of its build
    (or its restore): two at once would each append to, or restore, a file the other has changed, and lose a
    section while saying it was added. The lock file lives in the home (``locks/``), keyed by the file's path."""
    import hashlib

    from workbench._infra.locks import FileLock
    from workbench.settings import home_dir

    key = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return FileLock(home_dir() / "locks" / f"definitions-{key}.lock", f"the dataset definitions {path}", log=_log)


def _restore(path: Path, before: Optional[bytes], mode: Optional[int]) -> None:
    """Put the definitions file back as it was (remove it when it did not exist)."""
    from workbench._infra.durable import atomic_write_bytes

    if before is None:
        path.unlink(missing_ok=True)
        return
    atomic_write_bytes(path, before)
    if mode is not None:
        os.chmod(path, mode)


def _counts_line(name: str, state: str, c: dict, secs: float) -> str:
    types = ", ".join(f"{t} {n}" for t, n in c["by_type"].items())
    return f"{name:18s} {state:8s} {c['documents']:>7,d} docs  {c['queries']:>5,d} queries ({types})  {secs:5.1f} s"


@data_app.command("add")
def data_add(
    name: str = typer.Argument(..., help="The dataset's name (letters, digits, '-', '_', '.'): its build folder."),
    source: Path = typer.Option(..., "--from", help="A BEIR folder (corpus.jsonl, queries.jsonl, "
                                "qrels/<split>.tsv), or a documents file: JSON lines, CSV, TSV or Parquet (.gz "
                                "allowed)."),
    fmt: Optional[str] = typer.Option(None, "--format", metavar="[beir|jsonl|csv|tsv|parquet]",
                                      help="The format, when the name does not say it (a folder is BEIR)."),
    queries: Optional[Path] = typer.Option(None, "--queries", help="The queries file (TSV/CSV with a header, JSON "
                                           "lines, TREC topics); needed unless --from is a BEIR folder."),
    qrels: Optional[list[Path]] = typer.Option(None, "--qrels", metavar="FILE", help="A judgments file: TREC qrels "
                                               "or a BEIR qrels TSV (repeatable); needed unless --from is a BEIR "
                                               "folder."),
    id_field: Optional[str] = typer.Option(None, "--id-field", help="The documents' id field (default _id in a "
                                           "BEIR folder, else id)."),
    text_field: Optional[list[str]] = typer.Option(None, "--text-field", metavar="FIELD[=LANG]",
                                                   help="A text field, with its language (repeatable; default "
                                                   "text, in --language)."),
    title_field: Optional[str] = typer.Option(None, "--title-field", help="The title field (a BEIR folder: title)."),
    metadata_field: Optional[list[str]] = typer.Option(None, "--metadata-field", metavar="FIELD",
                                                       help="A field kept as metadata (repeatable; collection, "
                                                       "book, chapter are filter facets)."),
    work_field: Optional[str] = typer.Option(None, "--work-field", help="The field naming the work a document "
                                             "belongs to (default: its id)."),
    language: Optional[str] = typer.Option(None, "--language", help="The language of texts and queries that do "
                                           "not say theirs (ISO 639-1; default und)."),
    definitions: Optional[Path] = typer.Option(None, "--definitions", help="Dataset definitions TOML to add to "
                                               "(default: WORKBENCH_DATASETS, else datasets/datasets.toml)."),
    build: bool = typer.Option(True, "--build/--no-build", help="Build the dataset once added."),
    as_json: bool = json_option("the section written, the definitions file and the build's counts"),
) -> None:
    """Add your own corpus, queries and judgments as a dataset (`source = "files"`), then build it.

    Appends a \\[dataset.NAME] section to the definitions file (created when missing), leaving the rest of the
    file as it was; when a check or the build fails, the file is left unchanged. Paths under the definitions
    file's folder are stored relative to it, others absolute. Examples:

        workbench data add scifact --from ~/beir/scifact --language en

        workbench data add kb --from kb/docs.parquet --queries kb/queries.tsv --qrels kb/qrels.txt
        --text-field body=en --text-field body_ru=ru --metadata-field author --work-field track_id
    """
    import tomllib
    from contextlib import ExitStack

    from workbench._infra.durable import atomic_write_text
    from workbench.data import catalog
    from workbench.data.loaders.files import beir_files, format_of
    from workbench.data.sources.files import FORMATS, FilesSpec
    from workbench.errors import ConfigError, DataError
    from workbench.settings import home_dir

    with ExitStack() as held:  # one `data add` at a time per definitions file (see _definitions_lock)
        try:
            if not catalog.valid_name(name):
                raise ConfigError(f"dataset name {name!r} is not a plain folder name; use letters, digits, '-', '_' and "
                                  "'.', starting with a letter or digit")
            path = (definitions.expanduser() if definitions is not None else catalog.default_definitions_path())
            path = path.absolute()
            if path.is_dir():
                raise ConfigError(f"dataset definitions {path} is a folder, not a TOML file; name the file")
            if not path.parent.is_dir():
                raise ConfigError(f"dataset definitions {path}: the folder {path.parent} does not exist; create it or "
                                  "name another file")
            held.enter_context(_definitions_lock(path))
            exists = path.exists()
            defs = catalog.load_definitions(path, option="--definitions") if exists else None
            if defs is not None and name in defs.datasets:
                raise ConfigError(f"dataset {name} is already defined in {path}; choose another name, or delete its "
                                  f"[dataset.{name}] section there first")
            # relative paths resolve against the folder of the file as named: through a link, store absolute ones
            base = None if path.is_symlink() else path.resolve().parent
            docs = source.expanduser()
            if not docs.exists():
                raise DataError(f"{docs}: no such file or folder; --from names a BEIR folder or a documents file")
            docs = docs.resolve()
            named = "beir" if docs.is_dir() else format_of(docs)
            if fmt is None:
                fmt = named
                if fmt is None:
                    raise ConfigError(f"{docs}: the name does not say the format; pass --format jsonl (or csv, tsv, "
                                      "parquet)")
            elif fmt not in FORMATS:
                raise ConfigError(f"--format {fmt!r} is not one of {', '.join(FORMATS)}")
            if fmt == "beir" and not docs.is_dir():
                raise ConfigError(f"{docs} is a file; --format beir takes a BEIR folder (corpus.jsonl, queries.jsonl, "
                                  "qrels/<split>.tsv)")
            if fmt != "beir" and docs.is_dir():
                raise ConfigError(f"{docs} is a folder; name the documents file, or pass --format beir for a BEIR folder")
            if fmt == "beir":
                beir_files(docs)  # the layout, checked: names what the folder lacks
            else:
                absent = [o for o, v in (("--queries", queries), ("--qrels", qrels)) if not v]
                if absent:
                    verb = "is" if len(absent) == 1 else "are"
                    raise ConfigError(f"{' and '.join(absent)} {verb} needed: only a BEIR folder brings its own queries "
                                      "and judgments")
            for p in (queries, *(qrels or ())):
                if p is not None and not p.expanduser().is_file():
                    raise DataError(f"{p}: no such file")
            pairs, with_lang = _text_fields(text_field or [])
            for option, value in (("--id-field", id_field), ("--title-field", title_field),
                                  ("--work-field", work_field), ("--language", language),
                                  *(("--metadata-field", m) for m in metadata_field or ())):
                if value is not None and not value.strip():
                    raise ConfigError(f"{option} is empty; name a field" if option != "--language" else
                                      "--language is empty; give an ISO 639-1 code (en, ru)")

            entries = [("source", _toml_str("files")), ("documents", _toml_str(_stored_path(docs, base)))]
            # written when the name does not say it: a folder with a dot in its name does not read as BEIR
            if fmt != named or (fmt == "beir" and "." in docs.name):
                entries.append(("format", _toml_str(fmt)))
            if queries is not None:
                entries.append(("queries", _toml_str(_stored_path(queries, base))))
            if qrels:
                entries.append(("qrels", "[" + ", ".join(_toml_str(_stored_path(q, base)) for q in qrels) + "]"))
            if id_field is not None:
                entries.append(("id_field", _toml_str(id_field.strip())))
            if pairs and with_lang:
                table = ", ".join(f"{_toml_key(f)} = {_toml_str(lang or language or 'und')}" for f, lang in pairs)
                entries.append(("text_fields", "{ " + table + " }"))
            elif pairs:
                entries.append(("text_fields", "[" + ", ".join(_toml_str(f) for f, _ in pairs) + "]"))
            if title_field is not None:
                entries.append(("title_field", _toml_str(title_field.strip())))
            if metadata_field:
                entries.append(("metadata_fields", "[" + ", ".join(_toml_str(m.strip()) for m in metadata_field) + "]"))
            if work_field is not None:
                entries.append(("work_field", _toml_str(work_field.strip())))
            if language is not None:
                entries.append(("language", _toml_str(language.strip())))
            section = _section(name, entries)

            # the fields, against the documents file's first record, before the file is touched
            defn = tomllib.loads(section)["dataset"][name]
            spec = FilesSpec.of(defn, base or path.parent)
            given = {"title": [title_field.strip()] if title_field else [],
                     "metadata": [m.strip() for m in metadata_field or ()]}
            notes = _check_fields(spec, given)

            before = path.read_bytes() if exists else None
            mode = path.stat().st_mode & 0o7777 if exists else None
            text = before.decode("utf-8") if before is not None else ""
            sep = "" if not text or text.endswith("\n\n") else "\n" if text.endswith("\n") else "\n\n"
            atomic_write_text(path, text + sep + section)
            if mode is not None:
                os.chmod(path, mode)
            try:
                defs = catalog.load_definitions(path, option="--definitions")
            except WorkbenchError:
                _restore(path, before, mode)
                raise
        except WorkbenchError as exc:
            _fail(exc)
        for note in notes:
            _log(note)
        result = {"name": name, "definitions": str(path), "section": section, "built": False, "counts": None}
        if build:
            try:
                home = home_dir()
                steps = _Steps(1)
                steps.name = name
                t0 = time.perf_counter()
                try:
                    manifest, built = catalog.build_or_reuse(name, defs, catalog.data_for([name], defs), home,
                                                             step=steps.step, log=_log)
                finally:
                    steps.close()
            except WorkbenchError as exc:
                _restore(path, before, mode)
                _fail(WorkbenchError(f"{exc} ({path.name} is left as it was; --no-build adds the section without "
                                     "building it)"))
            except BaseException:  # Ctrl-C, or a bug: the section goes too (the build keeps nothing half-written)
                _restore(path, before, mode)
                raise
            result.update(built=True, counts=manifest["counts"], path=str(catalog.dataset_dir(name, home)))
            secs = time.perf_counter() - t0
        if as_json:
            echo_json(result)
            return
        typer.echo(f"added to {path}:\n\n{section}")
        if build:
            typer.echo(_counts_line(name, "built" if built else "current", manifest["counts"], secs))
            typer.echo(f"built into {home / 'datasets'}")
        else:
            typer.echo(f"build it with `workbench data build --only {name}`")
