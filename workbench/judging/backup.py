"""A whole backup of the judgment store, and its restore into an empty store.

The CSV and TREC exports (:mod:`workbench.judging.trecio`) write *current grades*: they drop
adjudications, notes, "cannot judge", timestamps and the undo history. A backup holds every
row of every table of ``wb_judge`` instead, so a restored store is the same store:

- ``raters`` — name, role, seed, when added, when revoked; **without their tokens** (not even
  the tokens' sha256: a backup file is no way to sign in). A restored rater's old token no longer
  signs in; ``workbench judge rater token NAME`` gives each one a new token, and all their grades
  stay under their name.
- ``pools`` (with the parameters that built them), ``pairs``, ``assignments`` (who claimed and
  judged each slot, when), ``queue_pools`` and ``queue`` (each rater's shuffled queue);
- ``judgments`` — every row of the append-only history: ``judge`` and ``retract`` (undo) rows,
  grade, "cannot judge", note, the document hash, source, timestamp;
- ``adjudications`` — ``decide`` and ``retract`` rows, grade, note, hash, timestamp;
- ``settings`` — each dataset's ``adjudicate_at``.

Ids are kept (a judgment still points at its slot), and the id sequences continue after them.

**Format** (:data:`FORMAT`, version :data:`VERSION`): JSON Lines, gzip-compressed when the file
name ends in ``.gz``. The first line is the header ``{"format", "version", "schema_version",
"created_at", "tokens": "not included …", "tables": [...]}``; then one line per row,
``{"table": NAME, "row": {column: value}}`` (timestamps as ISO 8601 with their offset); the last
line is ``{"end": true, "counts": {table: rows}}``, so a cut-off file is refused, not half restored.
"""

from __future__ import annotations

import gzip
import json
import os
import secrets
import zlib
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import IO

from workbench._infra.jsonout import dumps as strict_json
from workbench.judging.store import SCHEMA_VERSION, JudgeError, JudgmentStore, token_hash

#: The ``format`` of a backup's header line.
FORMAT = "workbench-judge-backup"

#: The backup format's version this code writes and reads.
VERSION = 1

#: The tables in restore order (a row's references come first), each with its key columns (the dump order)
#: and its serial column (None: no sequence).
TABLES: tuple[tuple[str, tuple[str, ...], str | None], ...] = (
    ("raters", ("rater_id",), "rater_id"),
    ("pools", ("pool_id",), "pool_id"),
    ("pairs", ("pair_id",), "pair_id"),
    ("assignments", ("assignment_id",), "assignment_id"),
    ("judgments", ("judgment_id",), "judgment_id"),
    ("adjudications", ("adjudication_id",), "adjudication_id"),
    ("queue_pools", ("rater_id", "pool_id"), None),
    ("queue", ("rater_id", "ord"), None),
    ("settings", ("dataset",), None),
)

#: Columns a backup never holds.
LEFT_OUT = {"raters": ("token_sha256",)}


#: The columns of each table a row must hold (NOT NULL without a default), checked before a restore writes.
REQUIRED: dict[str, tuple[str, ...]] = {
    "raters": ("rater_id", "name", "role", "seed"),
    "pools": ("pool_id", "dataset", "raters_per_pair", "params"),
    "pairs": ("pair_id", "pool_id", "dataset", "query_id", "doc_id", "tier", "priority", "reason"),
    "assignments": ("assignment_id", "pair_id", "slot"),
    "judgments": ("judgment_id", "dataset", "query_id", "doc_id", "rater_id", "action"),
    "adjudications": ("adjudication_id", "dataset", "query_id", "doc_id", "adjudicator_id"),
    "queue_pools": ("rater_id", "pool_id"),
    "queue": ("rater_id", "pair_id", "ord"),
    "settings": ("dataset",),
}

#: The values a column may take (the store's CHECK constraints), by table.
ALLOWED: dict[str, dict[str, tuple]] = {
    "raters": {"role": ("rater", "adjudicator")},
    "pairs": {"reason": ("pool", "audit", "sent", "import")},
    "judgments": {"action": ("judge", "retract"), "grade": (None, 0, 1, 2), "cannot_judge": (None, True, False)},
    "adjudications": {"action": (None, "decide", "retract"), "grade": (None, 0, 1, 2)},
    "settings": {"adjudicate_at": (None, 1, 2)},
}

#: The longest note the store keeps (its CHECK on ``note``).
NOTE_LIMIT = 2000


def row_problem(table: str, row: dict) -> str | None:
    """What in one backup row the store's constraints would refuse (a grade out of 0–2, an unknown role or
    action, a missing column, a note over :data:`NOTE_LIMIT` characters…), as a phrase; None when it is fine.
    :func:`read_backup` calls it on every row, so a restore refuses such a file before writing anything."""
    missing = [c for c in REQUIRED.get(table, ()) if row.get(c) is None]
    if missing:
        return f"no {', '.join(missing)}"
    if table == "raters":  # the one rule for names people type (workbench.names), as `rater add` and import apply it
        from workbench.names import name_error

        problem = name_error("rater name", row["name"])
        if problem:
            return problem
    for col, allowed in ALLOWED.get(table, {}).items():
        v = row.get(col)
        if not any(type(v) is type(a) and v == a for a in allowed):  # exact types: True is no grade, nor 1.0
            shown = ", ".join("empty" if a is None else json.dumps(a) for a in allowed)
            return f"{col} {json.dumps(v, ensure_ascii=False)} is not one of {shown}"
    if table == "pools" and (isinstance(row["raters_per_pair"], bool) or not isinstance(row["raters_per_pair"], int)
                             or not 1 <= row["raters_per_pair"] <= 10):
        return f"raters_per_pair {json.dumps(row['raters_per_pair'])} is not a whole number from 1 to 10"
    note = row.get("note")
    if note is not None and (not isinstance(note, str) or len(note) > NOTE_LIMIT):
        return f"the note is not text of at most {NOTE_LIMIT} characters"
    if table == "judgments":
        if row.get("cannot_judge") and row.get("grade") is not None:
            return f"grade {row['grade']} with cannot_judge true (a judgment has one or the other)"
        if row["action"] == "judge" and not row.get("cannot_judge") and row.get("grade") is None:
            return "a judge row with neither a grade nor cannot_judge"
    if table == "adjudications" and row.get("action", "decide") == "decide" and row.get("grade") is None:
        return "a decide row without a grade"
    return None


#: The deepest nesting of lists and objects a backup line may hold (its own is 3: the line, its row, a pool's
#: parameters); a deeper line is refused by :func:`read_backup` rather than risk the parser's recursion.
MAX_DEPTH = 64
_TOO_DEEP = object()  # what read_backup holds for a line the parser gave up on


def _nested_deeper(value: object, limit: int) -> bool:
    """Whether ``value`` (parsed JSON) nests lists and objects more than ``limit`` deep (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        v, depth = stack.pop()
        if isinstance(v, (dict, list)):
            if depth > limit:
                return True
            stack.extend((c, depth + 1) for c in (v.values() if isinstance(v, dict) else v))
    return False


def _open_write(path: Path, gz: bool) -> IO[str]:
    if gz:
        return gzip.open(path, "wt", encoding="utf-8", newline="\n")
    return open(path, "w", encoding="utf-8", newline="\n")


def _open_read(path: Path) -> IO[str]:
    with open(path, "rb") as f:
        magic = f.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def table_rows(store: JudgmentStore, table: str) -> list[dict]:
    """Every row of ``wb_judge.<table>`` as JSON-ready dicts (timestamps as ISO 8601 strings), in key order,
    without the columns a backup leaves out (:data:`LEFT_OUT`). What :func:`backup` writes, and what a test
    compares table by table."""
    keys = {name: key for name, key, _serial in TABLES}[table]
    drop = "".join(f" - '{c}'" for c in LEFT_OUT.get(table, ()))
    return [r[0] for r in store.conn().execute(
        f"SELECT to_jsonb(t){drop} FROM wb_judge.{table} t ORDER BY {', '.join(keys)}")]


def backup(store: JudgmentStore, path: Path) -> dict[str, int]:
    """Write the whole store to ``path`` (format in the module docstring), read as of one moment
    (:meth:`JudgmentStore.snapshot`); written to a temporary file beside it and renamed, so ``path``
    is never half written. Returns rows per table.

    Raises:
        JudgeError: the store has no schema yet (nothing to back up).
        OSError: the file cannot be written (the temporary file is removed).
    """
    from datetime import datetime

    path = Path(path)
    if store.version() == 0:
        raise JudgeError(f"the judgment store at {store._session.where} is empty (no wb_judge schema): nothing to "
                         "back up")
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    counts: dict[str, int] = {}
    try:
        with store.snapshot(), _open_write(tmp, path.name.endswith(".gz")) as out:
            header = {"format": FORMAT, "version": VERSION, "schema_version": store.version(),
                      "created_at": datetime.now(UTC).isoformat(),
                      "tokens": "not included: restored raters get new tokens with `workbench judge rater token NAME`",
                      "tables": [t for t, _k, _s in TABLES]}
            out.write(strict_json(header, ensure_ascii=False) + "\n")
            for table, _keys, _serial in TABLES:
                rows = table_rows(store, table)
                counts[table] = len(rows)
                for row in rows:
                    out.write(strict_json({"table": table, "row": row}, ensure_ascii=False) + "\n")
            out.write(strict_json({"end": True, "counts": counts}) + "\n")
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return counts


def read_backup(path: Path) -> tuple[dict, dict[str, list[dict]]]:
    """The header and the rows per table of a backup file, checked whole before anything is written.

    Raises:
        JudgeError: not a backup, a newer format or schema, a bad line (named by number: not JSON, or lists
            and objects nested more than :data:`MAX_DEPTH` deep), an unknown table, a row the store's constraints
            refuse (:func:`row_problem`, named by line), or a file cut off (no end line, or counts that differ);
            nothing is written.
    """
    path = Path(path)
    if path.is_dir():
        raise JudgeError(f"backup file {path} is a folder; give the file `workbench judge backup FILE` wrote")
    if not path.is_file():
        raise JudgeError(f"backup file {path} does not exist; give the file `workbench judge backup FILE` wrote")
    rows: dict[str, list[dict]] = {t: [] for t, _k, _s in TABLES}
    header = end = None
    try:
        with _open_read(path) as f:
            for n, line in enumerate(f, 1):
                if end is not None:
                    raise JudgeError(f"{path}:{n}: a line after the end line; the file is not one backup")
                try:
                    item = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise JudgeError(f"{path}:{n}: not JSON ({exc.msg}); the file is damaged — restore from "
                                     "another backup") from None
                except RecursionError:  # lists or objects nested thousands deep: more than the parser can hold
                    item = _TOO_DEEP
                if item is _TOO_DEEP or _nested_deeper(item, MAX_DEPTH):
                    raise JudgeError(f"{path}:{n}: lists or objects nested more than {MAX_DEPTH} deep, which no "
                                     "backup writes; the file is damaged — nothing was restored (a restore takes a "
                                     "whole file or nothing): restore from another backup")
                if n == 1:
                    if not isinstance(item, dict) or item.get("format") != FORMAT:
                        raise JudgeError(f"{path} is not a judgment store backup (its first line has no format "
                                         f"{FORMAT!r}); give the file `workbench judge backup FILE` wrote")
                    if not isinstance(item.get("version"), int) or item["version"] > VERSION:
                        raise JudgeError(f"{path} is backup format version {item.get('version')!r}, newer than this "
                                         f"workbench's {VERSION}: upgrade the workbench first")
                    if not isinstance(item.get("schema_version"), int) or item["schema_version"] > SCHEMA_VERSION:
                        raise JudgeError(f"{path} holds a store of schema version {item.get('schema_version')!r}, "
                                         f"newer than this workbench's {SCHEMA_VERSION}: upgrade the workbench first")
                    header = item
                    continue
                if isinstance(item, dict) and item.get("end") is True:
                    end = item
                    continue
                if (not isinstance(item, dict) or item.get("table") not in rows
                        or not isinstance(item.get("row"), dict)):
                    raise JudgeError(f"{path}:{n}: not a row of a known table ({', '.join(rows)}); the file is "
                                     "damaged — restore from another backup")
                problem = row_problem(item["table"], item["row"])
                if problem is not None:
                    raise JudgeError(f"{path}:{n}: a {item['table']} row the store refuses: {problem}; nothing was "
                                     "restored — correct that line or restore from another backup")
                rows[item["table"]].append(item["row"])
    except (OSError, EOFError, UnicodeDecodeError, gzip.BadGzipFile, zlib.error) as exc:
        raise JudgeError(f"{path} cannot be read whole ({exc}); the file is damaged or cut off — restore from "
                         "another backup") from None
    if header is None:
        raise JudgeError(f"{path} is empty; give the file `workbench judge backup FILE` wrote")
    have = {t: len(r) for t, r in rows.items()}
    if end is None or {t: int(end.get("counts", {}).get(t, 0)) for t in rows} != have:
        raise JudgeError(f"{path} is cut off or damaged: its end line is missing or its counts "
                         f"({(end or {}).get('counts')}) differ from the rows read ({have}); nothing was restored — "
                         "restore from a whole backup")
    return header, rows


def restore(store: JudgmentStore, path: Path, *, log: Callable[[str], None] | None = None,
            checked: tuple[dict, dict[str, list[dict]]] | None = None) -> dict[str, int]:
    """Restore a backup into an **empty** store (migrated to this workbench's schema; every table empty),
    in one transaction: a failure leaves the store empty. Rows keep their ids; the id sequences continue
    after them. Raters get an unknown token (the backup has none): give each a new one with
    ``workbench judge rater token NAME``. Returns rows per table. ``checked`` is :func:`read_backup` ``(path)``
    when the caller has already read it (the command checks the file before it opens the store).

    Raises:
        JudgeError: the file is not a whole backup or holds a row the store refuses (:func:`read_backup`),
            the store is not empty (names the tables that hold rows and the fix), or the store refuses a
            table's rows all the same (a dangling id); nothing written.
        StorageError: the server's disk is full (:meth:`~workbench.judging.store.JudgmentStore.writing`); nothing
            written.
    """
    import psycopg

    header, rows = checked if checked is not None else read_backup(path)
    store.migrate()
    with store.writing() as conn:  # a full disk under the server: one line naming it (StorageError), nothing written
        conn.execute("LOCK TABLE " + ", ".join(f"wb_judge.{t}" for t, _k, _s in TABLES) + " IN EXCLUSIVE MODE")
        full = [t for t, _k, _s in TABLES
                if conn.execute(f"SELECT 1 FROM wb_judge.{t} LIMIT 1").fetchone() is not None]
        if full:
            raise JudgeError(f"the judgment store at {store._session.where} is not empty ({', '.join(full)} hold rows); "
                             "a backup is restored into an empty store only — point WORKBENCH_PG_DSN at a fresh server, "
                             "or back this store up first and drop its schema wb_judge")
        for table, _keys, serial in TABLES:
            batch = rows[table]
            if not batch:
                continue
            if table == "raters":
                batch = [{**r, "token_sha256": token_hash(secrets.token_urlsafe(32))} for r in batch]
            cols = list(dict.fromkeys(c for r in batch for c in r))
            known = {r[0] for r in conn.execute(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = 'wb_judge' AND table_name = %s",
                (table,))}
            unknown = [c for c in cols if c not in known]
            if unknown:
                raise JudgeError(f"{path}: table {table} has column(s) {', '.join(unknown)} this workbench does not "
                                 "know; upgrade the workbench first")
            try:
                with conn.cursor() as cur:
                    with cur.copy(f"COPY wb_judge.{table} ({', '.join(cols)}) FROM STDIN") as copy:
                        for r in batch:
                            copy.write_row([json.dumps(v, ensure_ascii=False) if isinstance(v, (dict, list)) else v
                                            for v in (r.get(c) for c in cols)])
                if serial is not None:
                    conn.execute(f"SELECT setval(pg_get_serial_sequence('wb_judge.{table}', '{serial}'), "
                                 f"(SELECT max({serial}) FROM wb_judge.{table}))")
            except psycopg.OperationalError:
                raise  # the server's own failure (a full disk): store.writing names it
            except psycopg.Error as exc:  # a constraint the file check does not cover (a dangling id, a repeat)
                detail = " ".join(str(exc).split())
                raise JudgeError(f"{path}: the store refuses the {table} rows ({detail}); nothing was restored — "
                                 "restore from another backup") from None
    if log is not None and rows["raters"]:
        log(f"{len(rows['raters'])} rater(s) restored without tokens: `workbench judge rater token NAME` gives each a "
            f"new one ({', '.join(sorted(r['name'] for r in rows['raters']))})")
    return {t: len(r) for t, r in rows.items()}
