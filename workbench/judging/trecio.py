"""Export the human judgments as TREC qrels (with provenance), and import judgments from other tools.

**Export** (:func:`export`, ``workbench judge export -d DATASET -o FILE``) writes the ``human``
layer (or ``merged``: human over built) of :mod:`workbench.judging.layers` as TREC qrels
(``query_id 0 doc_id grade``, sorted; :func:`workbench.io.formats.write_qrels`, atomic), or
with ``fmt="csv"`` every rater's current grade (``query_id,doc_id,relevance,rater``: the
import format, so current grades move to another tool). **Neither is a backup**: they hold
current grades only — no adjudications, notes, "cannot judge", undo history or settings;
:mod:`workbench.judging.backup` (``workbench judge backup FILE``) holds the whole store. Beside it,
``FILE.provenance.json`` (:func:`provenance_path`) says what the file holds: the dataset and
the sha256 of its ``manifest.json``, the layer and its rule, the qrels' sha256 (the same
:func:`~workbench.judging.layers.qrels_sha256` that eval logs to MLflow; it is the sha256 of
the TREC file's bytes), counts per basis and grade, the raters and their counts, the
agreement summary, the store's schema version, and the stale judgments left out (made on a
document text that has changed since). Both files are written atomically (temporary file,
fsync, rename): a crash leaves the previous pair or the new one.

**Import** (:func:`import_file`, ``workbench judge import FILE -d DATASET [--rater NAME]``)
reads either

* TREC qrels, ``query_id iteration doc_id relevance`` (whitespace-separated; the
  iteration column is ignored): they name no rater, so ``--rater NAME`` is required; or
* CSV with the header ``query_id,doc_id,relevance,rater`` (a file whose first non-blank
  line holds a comma is CSV; quoting as RFC 4180).

A UTF-8 byte-order mark at the start and CRLF line ends (what spreadsheet programs write)
are accepted; blank lines are skipped. Every line is checked before anything is written:
the column count, a relevance of 0, 1 or 2, a valid rater name, no (query, document,
rater) twice, and query and document ids that exist in the built dataset. The first bad
line is reported as ``FILE:LINE: what is wrong; the fix`` (:class:`~workbench.errors.DataError`)
with the number of further bad lines, and nothing is written; a good file is appended in
one transaction (:meth:`~workbench.judging.store.JudgmentStore.import_judgments`), each
row with the hash of the document as built now. Raters the store does not know are created
without a usable token (imported raters do not sign in).
"""

from __future__ import annotations

import csv
import hashlib
import io
from collections import Counter, defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from workbench.errors import DataError
from workbench.judging.store import GRADES, JudgeError, JudgmentStore, document_hash
from workbench.names import NAME_RULE, is_name

#: The CSV header of an import (and of ``export --format csv``).
CSV_COLUMNS = ("query_id", "doc_id", "relevance", "rater")

#: What ``export`` can write.
EXPORT_LAYERS = ("human", "merged")
EXPORT_FORMATS = ("trec", "csv")

#: The rule of the human grade, as written into the provenance.
HUMAN_RULE = ("adjudicated grade, else the grade every rater agreed on, else the mean of the raters' grades rounded "
              "down; 'cannot judge' is no grade; judgments on a document text that changed since are left out "
              "(workbench.judging.layers)")

_EXPECTED = (f"TREC qrels (query_id 0 doc_id relevance) or CSV with the header {','.join(CSV_COLUMNS)}")


@dataclass(frozen=True)
class ImportRow:
    """One judgment read from an import file, with the line it came from (1-based)."""

    line: int
    query_id: str
    doc_id: str
    grade: int
    rater: str


def provenance_path(path: Path) -> Path:
    """The provenance file beside an export: ``qrels.txt`` → ``qrels.txt.provenance.json``."""
    path = Path(path)
    return path.with_name(path.name + ".provenance.json")


# ---------------------------------------------------------------- reading


#: Every refusal of an import file ends with this: a file with any bad line writes nothing.
NOTHING = "nothing was imported"


def _refuse(where: str, msg: str) -> DataError:
    return DataError(f"{where}: {msg}; {NOTHING}")


class _Errors:
    """The bad lines of one file: the first is reported, the rest counted."""

    def __init__(self, path: Path):
        self.path = path
        self.first: str | None = None
        self.more = 0

    def add(self, line: int, msg: str) -> None:
        if self.first is None:
            self.first = f"{self.path}:{line}: {msg}"
        else:
            self.more += 1

    def raise_any(self) -> None:
        if self.first is not None:
            tail = f" ({self.more} more bad line{'s' if self.more != 1 else ''} after it)" if self.more else ""
            raise DataError(f"{self.first}{tail}; {NOTHING}")


def _decode(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise _refuse(str(path), "no such file; give the path of a qrels or CSV file to import") from None
    except IsADirectoryError:
        raise _refuse(str(path), "is a folder; give the path of a qrels or CSV file to import") from None
    except OSError as exc:
        raise _refuse(str(path), f"cannot be read ({exc.strerror}); check its permissions") from None
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise _refuse(f"{path}:1", "the file is UTF-16; save it as UTF-8 and import again")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[:exc.start].count(b"\n") + 1
        raise _refuse(f"{path}:{line}", f"not UTF-8 (byte {raw[exc.start]:#04x}); save the file as UTF-8 and "
                      "import again") from None
    if text.startswith("\ufeff"):
        text = text[1:]  # the byte-order mark spreadsheet programs write
    if "\x00" in text:
        line = text[:text.index("\x00")].count("\n") + 1
        raise _refuse(f"{path}:{line}", f"holds a NUL byte (a binary file?); expected {_EXPECTED}")
    return text


def _grade(value: str) -> int | None:
    value = value.strip()
    if value.lstrip("+-").isdigit() and value.isascii():
        g = int(value)
        return g if g in GRADES else None
    return None


def read_judgments_file(path: Path, *, rater: str | None = None) -> tuple[str, list[ImportRow]]:
    """Read an import file (TREC qrels or CSV, see the module docstring); checks its form, not its ids.

    Args:
        path: the file.
        rater: who judged a TREC file (required for TREC, refused for CSV, which names the
            rater on each line).

    Returns:
        ``("trec" | "csv", rows)``, rows in file order.

    Raises:
        DataError: ``FILE:LINE: …`` for the first bad line (an unreadable or empty file, a
            UTF-16 or non-UTF-8 file, a wrong header or column count, a relevance other than
            0/1/2, an empty id, a bad rater name, a (query, document, rater) twice, TREC
            without ``rater``, CSV with ``rater``), with the count of further bad lines.
    """
    path = Path(path)
    if rater is not None and not is_name(rater):
        raise DataError(f"--rater {rater!r} is not valid: use {NAME_RULE}; {NOTHING}")
    text = _decode(path)
    lines = text.split("\n")
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None:
        raise _refuse(f"{path}:1", f"the file is empty; expected {_EXPECTED}")
    errors = _Errors(path)
    rows: list[ImportRow] = []
    if "," in lines[first]:
        fmt = "csv"
        if rater is not None:
            raise _refuse(f"{path}:{first + 1}", "a CSV names the rater on each line (column 'rater'); drop --rater")
        reader = csv.reader(io.StringIO(text, newline=""))
        header_seen = False
        start = 1
        for fields in reader:
            line = start
            start = reader.line_num + 1
            if not any(f.strip() for f in fields):
                continue
            if not header_seen:
                header_seen = True
                got = tuple(f.strip() for f in fields)
                if got != CSV_COLUMNS:
                    raise _refuse(f"{path}:{line}", f"the CSV header must be {','.join(CSV_COLUMNS)}, got "
                                                    f"{','.join(got)}")
                continue
            if len(fields) != len(CSV_COLUMNS):
                errors.add(line, f"expected {len(CSV_COLUMNS)} comma-separated columns ({','.join(CSV_COLUMNS)}), "
                                 f"got {len(fields)}")
                continue
            qid, did, rel, who = (f.strip() for f in fields)
            _row(errors, rows, line, qid, did, rel, who)
    else:
        fmt = "trec"
        if rater is None:
            raise _refuse(f"{path}:{first + 1}", "TREC qrels name no rater; say who judged them with --rater NAME "
                                                 f"(or import a CSV with the header {','.join(CSV_COLUMNS)})")
        for n, raw in enumerate(lines, start=1):
            stripped = raw.rstrip("\r")
            if not stripped.strip():
                continue
            cols = stripped.split()
            if len(cols) != 4:
                errors.add(n, f"a TREC qrels line has 4 whitespace-separated columns (query_id 0 doc_id relevance), "
                              f"got {len(cols)}")
                continue
            _row(errors, rows, n, cols[0], cols[2], cols[3], rater)
    seen: dict[tuple[str, str, str], int] = {}
    for r in rows:
        key = (r.query_id, r.doc_id, r.rater)
        if key in seen:
            errors.add(r.line, f"{r.rater}'s judgment of query {r.query_id!r}, document {r.doc_id!r} repeats line "
                               f"{seen[key]}; keep one")
        else:
            seen[key] = r.line
    errors.raise_any()
    if not rows:
        raise _refuse(f"{path}:{first + 1}", f"only a header, no judgments; expected {_EXPECTED}")
    return fmt, rows


def _row(errors: _Errors, rows: list[ImportRow], line: int, qid: str, did: str, rel: str, who: str) -> None:
    if not qid or not did:
        errors.add(line, "an empty query_id or doc_id")
        return
    grade = _grade(rel)
    if grade is None:
        errors.add(line, f"relevance {rel!r} is not a grade: use 0 (not relevant), 1 (relevant) or 2 (highly relevant)")
        return
    if not is_name(who):
        errors.add(line, f"rater name {who!r} is not valid: use {NAME_RULE}")
        return
    rows.append(ImportRow(line, qid, did, grade, who))


def check_ids(path: Path, rows: list[ImportRow], ds) -> None:
    """Refuse rows whose query or document is not in the built dataset.

    Args:
        path: the file (for the message).
        rows: from :func:`read_judgments_file`.
        ds: the built dataset (:class:`workbench.data.catalog.Dataset`).

    Raises:
        DataError: ``FILE:LINE: unknown query id …`` (or document id) for the first, with the
            count of further unknown lines.
    """
    queries = {q.query_id for q in ds.queries}
    docs = {d.doc_id for d in ds.documents}
    errors = _Errors(Path(path))
    for r in rows:
        if r.query_id not in queries:
            errors.add(r.line, f"unknown query id {r.query_id!r}: dataset {ds.name} has no such query "
                               f"({len(queries)} queries; its ids are in queries.tsv of the built dataset)")
        elif r.doc_id not in docs:
            errors.add(r.line, f"unknown document id {r.doc_id!r}: dataset {ds.name} has no such document "
                               f"({len(docs)} documents; its ids are in documents.jsonl of the built dataset)")
    errors.raise_any()


def import_file(store: JudgmentStore, ds, path: Path, *, rater: str | None = None) -> dict:
    """Check an import file against the built dataset and append its judgments in one transaction.

    Args:
        store: the judgment store.
        ds: the built dataset (:class:`workbench.data.catalog.Dataset`) the judgments are for.
        path: TREC qrels or CSV (see the module docstring).
        rater: who judged a TREC file.

    Returns:
        ``{"format", "rows", "raters": {name: rows}, "new_raters": [name, ...], "replaced": int}``
        (``replaced``: rows that supersede an earlier current grade of the same rater on that pair).

    Raises:
        DataError: a bad line (see :func:`read_judgments_file`, :func:`check_ids`): nothing written.
        JudgeError: the store refuses a rater name (nothing written).
        PgError: the server cannot be reached.
    """
    path = Path(path)
    fmt, rows = read_judgments_file(path, rater=rater)
    check_ids(path, rows, ds)
    wanted = {r.doc_id for r in rows}
    hashes = {d.doc_id: document_hash(d) for d in ds.documents if d.doc_id in wanted}
    known = {r.name for r in store.raters()}
    before = {(r["query_id"], r["doc_id"], r["rater"]) for r in store.current(ds.name)}
    written = store.import_judgments(ds.name, [(r.query_id, r.doc_id, r.grade, r.rater) for r in rows],
                                     source=f"import:{path.name}"[:200], doc_hashes=hashes)
    per = Counter(r.rater for r in rows)
    return {"format": fmt, "rows": written, "raters": dict(sorted(per.items())),
            "new_raters": sorted(set(per) - known - {n for _q, _d, n in before}),
            "replaced": sum(1 for r in rows if (r.query_id, r.doc_id, r.rater) in before)}


# ---------------------------------------------------------------- export


def _manifest_sha256(ds) -> str | None:
    from workbench.data.catalog import dataset_dir

    try:
        return hashlib.sha256((dataset_dir(ds.name) / "manifest.json").read_bytes()).hexdigest()
    except OSError:
        return None


def check_export(layer: str, fmt: str) -> None:
    """Refuse an export layer or format :func:`export` does not write (before a dataset is loaded).

    Raises:
        JudgeError: a layer other than human/merged, a format other than trec/csv, or csv with merged.
    """
    if layer not in EXPORT_LAYERS:
        raise JudgeError(f"export layer {layer!r} must be one of {', '.join(EXPORT_LAYERS)} (built is the dataset's "
                         "own qrels.txt)")
    if fmt not in EXPORT_FORMATS:
        raise JudgeError(f"export format {fmt!r} must be one of {', '.join(EXPORT_FORMATS)}")
    if fmt == "csv" and layer != "human":
        raise JudgeError("a CSV export holds each rater's own grades, not a layer; drop --layer, or export TREC")


def export(store: JudgmentStore, ds, path: Path, *, layer: str = "human", fmt: str = "trec",
           seed: int | None = None, resamples: int | None = None, manifest_sha256: str | None = None) -> dict:
    """Write the dataset's human judgments to ``path`` and the provenance beside it; returns the provenance.

    Reads the store in one snapshot (:meth:`JudgmentStore.snapshot`: every rater's current
    judgment, the latest adjudications, the settings), so the file, its counts and its
    agreement describe the same moment.

    Args:
        store: the judgment store.
        ds: the built dataset (:class:`workbench.data.catalog.Dataset`): its documents' hashes decide
            which judgments are stale, its qrels are the ``built`` side of ``merged``.
        path: the file to write (replaced atomically).
        layer: ``human`` (human grades only) or ``merged`` (human over built) for TREC; a CSV is
            always each rater's own grades.
        fmt: ``trec`` or ``csv``.
        seed, resamples: the agreement summary's bootstrap (default
            :data:`workbench.judging.agreement.SEED`, :data:`~workbench.judging.agreement.AGREEMENT_RESAMPLES`).
        manifest_sha256: the sha256 of the dataset's ``manifest.json`` (default: read from the
            home's built dataset).

    Returns:
        The provenance dict (also written to :func:`provenance_path` ``(path)``)::

            {"dataset", "dataset_manifest_sha256", "layer", "format", "file", "rule", "lines",
             "qrels_sha256", "file_sha256", "written_at", "store": {"schema_version"},
             "counts": {"pairs", "by_basis": {basis: n}, "by_grade": {"0".."2": n},
                        "by_basis_grade": {basis: {grade: n}}},
             "merged": {"built_pairs", "human_pairs", "overridden", "added",
                        "built_marked_not_relevant"} (merged only),
             "raters": {name: {"0", "1", "2", "cannot_judge"}}, "adjudications": int,
             "adjudicate_at": int, "awaiting_adjudication": int,
             "stale": {"judgments": int, "adjudications": int, "left_out": [{"query_id", "doc_id", "rater"}]},
             "agreement": {"alpha", "pairable_units", "units", "exact_agreement", "pairs": [...], "bootstrap"}}

    Raises:
        JudgeError: an unknown layer or format.
        StorageError: a file cannot be written (names the path and the fix).
        PgError: the server cannot be reached.
    """
    from workbench._infra import durable
    from workbench.io.formats import write_qrels
    from workbench.judging import agreement as ag
    from workbench.judging.layers import final_grades, human_qrels, merged_qrels, qrels_sha256

    check_export(layer, fmt)
    path = Path(path)
    with store.snapshot():
        judgments = store.current(ds.name)
        adjudications = store.adjudications(ds.name)
        adjudicate_at = store.adjudicate_at(ds.name)
        version = store.version()
    hashes = ag.doc_hashes_of(ds, (r["doc_id"] for r in (*judgments, *adjudications)))
    final = final_grades(judgments, adjudications, hashes)
    stale_j = [r for r in judgments if ag.is_stale(r, hashes)]
    stale_a = [a for a in adjudications if ag.is_stale(a, hashes)]

    built = {(r.query_id, r.doc_id): r.relevance for r in ds.qrels}
    if fmt == "trec":
        qrels = human_qrels(final) if layer == "human" else merged_qrels(ds.qrels, final)
        write_qrels(path, qrels)
        digest = qrels_sha256(qrels)
        lines = len(qrels)
        basis = Counter(g.basis for g in final.values())
        by_basis_grade: dict[str, Counter] = defaultdict(Counter)
        for g in final.values():
            by_basis_grade[g.basis][str(g.grade)] += 1
        if layer == "merged":
            n_built = sum(1 for key in built if key not in final)
            basis["built"] = n_built
            for key, rel in built.items():
                if key not in final:
                    by_basis_grade["built"][str(rel)] += 1
        grades = Counter(str(r.relevance) for r in qrels)
        counts = {"pairs": lines, "by_basis": dict(sorted(basis.items())), "by_grade": dict(sorted(grades.items())),
                  "by_basis_grade": {b: dict(sorted(c.items())) for b, c in sorted(by_basis_grade.items())}}
    else:
        fresh = [r for r in judgments if not ag.is_stale(r, hashes) and not r.get("cannot_judge")
                 and r.get("grade") is not None]
        fresh.sort(key=lambda r: (r["query_id"], r["doc_id"], r["rater"]))
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(CSV_COLUMNS)
        for r in fresh:
            w.writerow((r["query_id"], r["doc_id"], int(r["grade"]), r["rater"]))
        durable.atomic_write_text(path, buf.getvalue())
        digest = None
        lines = len(fresh)
        counts = {"judgments": lines, "pairs": len({(r["query_id"], r["doc_id"]) for r in fresh}),
                  "by_grade": dict(sorted(Counter(str(int(r["grade"])) for r in fresh).items()))}
        layer = "raters"

    report = ag.agreement(judgments, query_types={q.query_id: q.query_type for q in ds.queries}, doc_hashes=hashes,
                          seed=ag.SEED if seed is None else seed,
                          resamples=ag.AGREEMENT_RESAMPLES if resamples is None else resamples)
    queue = ag.disagreements(judgments, adjudications, adjudicate_at, doc_hashes=hashes)
    prov: dict = {
        "dataset": ds.name,
        "dataset_manifest_sha256": manifest_sha256 or _manifest_sha256(ds),
        "layer": layer,
        "format": fmt,
        "file": path.name,
        "rule": HUMAN_RULE if fmt == "trec" else "each rater's current grade ('cannot judge' and stale ones left out)",
        "lines": lines,
        "qrels_sha256": digest,
        "file_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
        "written_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "store": {"schema_version": version},
        "counts": counts,
        "raters": ag.grade_counts(judgments),
        "adjudications": len(adjudications) - len(stale_a),
        "adjudicate_at": adjudicate_at,
        "awaiting_adjudication": len(queue),
        "stale": {"judgments": len(stale_j), "adjudications": len(stale_a),
                  "left_out": sorted(({"query_id": r["query_id"], "doc_id": r["doc_id"],
                                       "rater": r.get("rater") or r.get("adjudicator")}
                                      for r in (*stale_j, *stale_a)),
                                     key=lambda d: (d["query_id"], d["doc_id"], str(d["rater"])))},
        "agreement": {k: report[k] for k in ("alpha", "units", "pairable_units", "exact_agreement", "bootstrap")}
        | {"pairs": [{"a": p["a"], "b": p["b"], "kappa": p["kappa"]} for p in report["pairs"]]},
    }
    if fmt == "trec" and layer == "merged":
        prov["merged"] = {
            "built_pairs": len(built), "human_pairs": len(final),
            "overridden": sum(1 for key, g in final.items() if key in built and built[key] != g.grade),
            "added": sum(1 for key in final if key not in built),
            "built_marked_not_relevant": sum(1 for key, g in final.items()
                                             if built.get(key, 0) >= 1 and g.grade == 0),
        }
    durable.atomic_write_json(provenance_path(path), prov)
    return prov

