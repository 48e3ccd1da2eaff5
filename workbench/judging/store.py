"""The judgment store: raters, pools, assignments, judgments and adjudications in PostgreSQL.

The store lives in its own schema, ``wb_judge``, of the workbench's server (the embedded
one of the home by default, any server by ``WORKBENCH_PG_DSN``); retrieval's read-only role
has no access to it. The schema is created and upgraded by numbered migrations
(:data:`MIGRATIONS`, recorded in ``wb_judge.schema_version``); a store newer than this code
is refused rather than guessed at.

**Tables.** ``raters`` (name, role ``rater`` | ``adjudicator``, the sha256 of the token — the
token itself is shown once and never stored — and a per-rater shuffle seed); ``pools`` (a
dataset, how many raters judge each pair, the parameters that built it); ``pairs`` (query,
document, priority tier, why it was pooled); ``assignments`` (one row per pair and
judging slot: who claimed it, when, when it was judged); ``judgments`` and
``adjudications``, **append-only** (a trigger refuses UPDATE and DELETE): who, when, the
grade (0 not relevant, 1 relevant, 2 highly relevant) or *cannot judge*, an optional note,
and the sha256 of the document text the rater saw. Undo appends a ``retract`` row (a rater's
judgment; an adjudicator's decision since schema version 2). The current grade of each rater
on each pair is the view ``wb_judge.current_judgments``; the final grade of a pair, the view
``wb_judge.current_adjudications``.

**Handing out work.** Each rater has a queue (``wb_judge.queue``), made the first time they
ask for work in a pool: the pool's pairs in priority-tier order, shuffled within a tier by a
hash with the rater's own seed (blind: no rank or config order leaks, and each rater's order
is their own). :meth:`JudgmentStore.next_assignment` walks it from the front and claims the
first open slot with ``SELECT … FOR UPDATE SKIP LOCKED`` inside a transaction, removing the
queue entries it passed (pairs whose slots others filled): concurrent raters never get the
same slot, a rater never gets two slots of one pair (the entry is gone once claimed, and a
unique index backs it), and a claim costs an index walk, not a sort of the pool. A pair
claimed and left unjudged for :data:`CLAIM_TTL_S` (a page opened and abandoned) may be taken
over by another rater whose queue still holds it. :meth:`JudgmentStore.judge` locks the slot,
checks it is this rater's and still
open (a stale page submitting twice gets :class:`JudgeError`, nothing written), appends the
judgment and closes the slot in one transaction: a process killed mid-write leaves either
both or neither. A "cannot judge" also adds one more open slot to the pair when an active
rater without a slot on it is left (:meth:`JudgmentStore._reopen_for_another`), so the pair
still gets ``raters_per_pair`` grades; when none is left it waits for an adjudicator.

All SQL takes parameters (never string-built values); identifiers are constants.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from workbench.errors import WorkbenchError
from workbench.names import name_error

SCHEMA = "wb_judge"

#: Grades a rater may give (TREC graded relevance), and the label of each.
GRADES = {0: "not relevant", 1: "relevant", 2: "highly relevant"}

#: Roles a rater may have.
ROLES = ("rater", "adjudicator")

#: Longest note kept with a judgment (characters).
MAX_NOTE = 2000


#: Seconds a claimed pair stays with a rater who does not judge it (a page opened and left): after
#: that another rater may take it over (the first then gets "no longer yours" and their next pair).
CLAIM_TTL_S = 30 * 60

#: A pool's queue entries take ``ord`` values ``pool_id * _QUEUE_BLOCK + position`` (a pool holds fewer pairs).
_QUEUE_BLOCK = 10_000_000

_APPEND_ONLY = """
CREATE OR REPLACE FUNCTION wb_judge.append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  RAISE EXCEPTION 'wb_judge.% is append-only: % is not allowed', TG_TABLE_NAME, TG_OP;
END $$;
"""

#: (version, what it does, SQL). Append new versions; never edit an applied one.
MIGRATIONS: tuple[tuple[int, str, str], ...] = (
    (1, "raters, pools, pairs, assignments, per-rater queues, append-only judgments and adjudications, "
        "current_judgments", """
CREATE TABLE wb_judge.raters (
  rater_id serial PRIMARY KEY,
  name text NOT NULL UNIQUE,
  role text NOT NULL CHECK (role IN ('rater', 'adjudicator')),
  token_sha256 text NOT NULL UNIQUE,
  seed bigint NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  revoked_at timestamptz
);
CREATE TABLE wb_judge.pools (
  pool_id serial PRIMARY KEY,
  dataset text NOT NULL,
  raters_per_pair int NOT NULL CHECK (raters_per_pair BETWEEN 1 AND 10),
  params jsonb NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE wb_judge.pairs (
  pair_id bigserial PRIMARY KEY,
  pool_id int NOT NULL REFERENCES wb_judge.pools ON DELETE CASCADE,
  dataset text NOT NULL,
  query_id text NOT NULL,
  doc_id text NOT NULL,
  tier int NOT NULL,
  priority double precision NOT NULL,
  reason text NOT NULL CHECK (reason IN ('pool', 'audit', 'sent', 'import')),
  UNIQUE (pool_id, query_id, doc_id)
);
CREATE INDEX pairs_dataset ON wb_judge.pairs (dataset, query_id, doc_id);
CREATE TABLE wb_judge.assignments (
  assignment_id bigserial PRIMARY KEY,
  pair_id bigint NOT NULL REFERENCES wb_judge.pairs ON DELETE CASCADE,
  slot int NOT NULL,
  rater_id int REFERENCES wb_judge.raters,
  claimed_at timestamptz,
  done_at timestamptz,
  UNIQUE (pair_id, slot),
  UNIQUE (pair_id, rater_id)
);
CREATE INDEX assignments_open ON wb_judge.assignments (pair_id) WHERE rater_id IS NULL;
CREATE INDEX assignments_rater ON wb_judge.assignments (rater_id, done_at);
CREATE TABLE wb_judge.judgments (
  judgment_id bigserial PRIMARY KEY,
  dataset text NOT NULL,
  query_id text NOT NULL,
  doc_id text NOT NULL,
  rater_id int NOT NULL REFERENCES wb_judge.raters,
  assignment_id bigint REFERENCES wb_judge.assignments ON DELETE SET NULL,
  action text NOT NULL CHECK (action IN ('judge', 'retract')),
  grade smallint CHECK (grade BETWEEN 0 AND 2),
  cannot_judge boolean NOT NULL DEFAULT false,
  note text CHECK (length(note) <= 2000),
  doc_sha256 text,
  source text NOT NULL DEFAULT 'ui',
  created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
  CHECK (action = 'retract' OR cannot_judge OR grade IS NOT NULL),
  CHECK (NOT (cannot_judge AND grade IS NOT NULL))
);
CREATE INDEX judgments_pair ON wb_judge.judgments (dataset, query_id, doc_id, rater_id, judgment_id);
CREATE INDEX judgments_rater ON wb_judge.judgments (rater_id, judgment_id);
CREATE TABLE wb_judge.adjudications (
  adjudication_id bigserial PRIMARY KEY,
  dataset text NOT NULL,
  query_id text NOT NULL,
  doc_id text NOT NULL,
  adjudicator_id int NOT NULL REFERENCES wb_judge.raters,
  grade smallint NOT NULL CHECK (grade BETWEEN 0 AND 2),
  note text CHECK (length(note) <= 2000),
  doc_sha256 text,
  created_at timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX adjudications_pair ON wb_judge.adjudications (dataset, query_id, doc_id, adjudication_id);
CREATE TABLE wb_judge.queue (
  rater_id int NOT NULL REFERENCES wb_judge.raters,
  pair_id bigint NOT NULL REFERENCES wb_judge.pairs ON DELETE CASCADE,
  ord bigint NOT NULL,
  PRIMARY KEY (rater_id, ord),
  UNIQUE (rater_id, pair_id)
);
CREATE TABLE wb_judge.queue_pools (
  rater_id int NOT NULL REFERENCES wb_judge.raters,
  pool_id int NOT NULL REFERENCES wb_judge.pools ON DELETE CASCADE,
  PRIMARY KEY (rater_id, pool_id)
);
CREATE TABLE wb_judge.settings (
  dataset text PRIMARY KEY,
  adjudicate_at int NOT NULL DEFAULT 2 CHECK (adjudicate_at IN (1, 2))
);
""" + _APPEND_ONLY + """
CREATE TRIGGER judgments_append_only BEFORE UPDATE OR DELETE ON wb_judge.judgments
  FOR EACH ROW EXECUTE FUNCTION wb_judge.append_only();
CREATE TRIGGER adjudications_append_only BEFORE UPDATE OR DELETE ON wb_judge.adjudications
  FOR EACH ROW EXECUTE FUNCTION wb_judge.append_only();
CREATE VIEW wb_judge.current_judgments AS
  SELECT * FROM (
    SELECT DISTINCT ON (dataset, query_id, doc_id, rater_id) *
    FROM wb_judge.judgments
    ORDER BY dataset, query_id, doc_id, rater_id, judgment_id DESC
  ) latest
  WHERE action = 'judge';
CREATE VIEW wb_judge.current_adjudications AS
  SELECT DISTINCT ON (dataset, query_id, doc_id) *
  FROM wb_judge.adjudications
  ORDER BY dataset, query_id, doc_id, adjudication_id DESC;
"""),
    (2, "an adjudication can be retracted (appended, latest wins): a slip of the key is undone", """
ALTER TABLE wb_judge.adjudications ADD COLUMN action text NOT NULL DEFAULT 'decide'
  CHECK (action IN ('decide', 'retract'));
ALTER TABLE wb_judge.adjudications ALTER COLUMN grade DROP NOT NULL;
ALTER TABLE wb_judge.adjudications ADD CONSTRAINT adjudications_decide_has_grade
  CHECK (action = 'retract' OR grade IS NOT NULL);
DROP VIEW wb_judge.current_adjudications;
CREATE VIEW wb_judge.current_adjudications AS
  SELECT * FROM (
    SELECT DISTINCT ON (dataset, query_id, doc_id) *
    FROM wb_judge.adjudications
    ORDER BY dataset, query_id, doc_id, adjudication_id DESC
  ) latest
  WHERE action = 'decide';
"""),
    (3, "every real disagreement goes to adjudication by default (adjudicate_at 1: 0 vs 1 and 1 vs 2 too)", """
ALTER TABLE wb_judge.settings ALTER COLUMN adjudicate_at SET DEFAULT 1;
"""),
)

#: The grade difference that sends a pair to adjudication when a dataset has no setting: 1, every real
#: disagreement (0 vs 1, 1 vs 2, 0 vs 2). A team may set 2 (``workbench judge settings --adjudicate-at 2``):
#: then 1 vs 2 ("relevant" vs "highly relevant") resolves to 1 without an adjudicator, but a pair where one
#: rater says 0 and another 1 or 2 (relevant or not at all) still goes, whatever the setting.
DEFAULT_ADJUDICATE_AT = 1

#: The schema version this code writes and reads.
SCHEMA_VERSION = MIGRATIONS[-1][0]


class JudgeError(WorkbenchError):
    """A judging action that cannot be done as asked (unknown token or rater, a slot already judged,
    a grade out of range, an adjudication by a plain rater); names the thing and the fix; nothing written."""


#: SQLSTATE of PostgreSQL's ``disk_full`` (``psycopg.errors.DiskFull``): a table, index or WAL file could not grow.
DISK_FULL = "53100"


def write_error(exc: BaseException, where: str, folder: str | None = None, *,
                broken: bool = False) -> WorkbenchError:
    """The one-line error for a ``psycopg.OperationalError`` raised while the judgment store wrote
    (:meth:`JudgmentStore.writing`): the transaction was rolled back.

    Args:
        exc: the driver's error (its ``sqlstate`` tells a full disk, ``53100``, from the rest).
        where: the server, as :func:`workbench.engines.pg_client.redact_dsn` gives it (no password).
        folder: the server's folder on the full disk when known (its data folder, or the tablespace
            the failing file lies in): named, with the space free on its disk when that folder is on this machine.
        broken: the connection broke (then a commit under way may or may not have been made, and the
            message says so instead of "nothing was written").

    Returns:
        :class:`~workbench.errors.StorageError` for a full disk, else :class:`~workbench.errors.PgError`
        (the caller raises it ``from None``).
    """
    from workbench._infra.durable import free_bytes, human_size
    from workbench.engines.pg_client import first_line
    from workbench.errors import PgError, StorageError

    said = getattr(getattr(exc, "diag", None), "message_primary", None) or first_line(exc)  # the server's words
    if getattr(exc, "sqlstate", None) == DISK_FULL:
        if folder:
            disk = f"the disk of {folder}"
            free = free_bytes(Path(folder)) if Path(folder).is_dir() else None
            disk += f" ({human_size(free)} free)" if free is not None else ""
        else:
            disk = "the disk of its data folder (`SHOW data_directory` on that server names it)"
        return StorageError(f"disk full: the judgment store's PostgreSQL at {where} could not write ({said}); "
                            f"nothing was written — free space on {disk}, then run it again")
    outcome = ("the connection broke, so the write may or may not have been made: look before running it again"
               if broken else "nothing was written")
    return PgError(f"the judgment store's PostgreSQL at {where} failed while writing ({said}); {outcome} — check "
                   "that the server runs, and its log")


@dataclass(frozen=True)
class Rater:
    """A rater of the store (``role``: ``rater`` or ``adjudicator``; ``seed`` shuffles their queue)."""

    rater_id: int
    name: str
    role: str
    seed: int

    @property
    def is_adjudicator(self) -> bool:
        return self.role == "adjudicator"


@dataclass(frozen=True)
class Assignment:
    """One open judging slot handed to a rater: a (query, document) pair of a dataset."""

    assignment_id: int
    pair_id: int
    dataset: str
    query_id: str
    doc_id: str


@dataclass(frozen=True)
class PoolPair:
    """A pair to pool: ``tier`` orders the queue (0 first), ``priority`` explains it (higher first),
    ``reason`` is ``pool`` (depth-k pooling), ``audit`` (a sample of built labels) or ``sent`` (by hand)."""

    query_id: str
    doc_id: str
    tier: int = 0
    priority: float = 0.0
    reason: str = "pool"


def token_hash(token: str) -> str:
    """sha256 hex of a rater token (what the store keeps)."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def document_hash(doc) -> str:
    """sha256 hex of what a rater sees of a document: its address and every text (field, language,
    script, source, text), as canonical JSON. Stored with each judgment; when the built document
    changes later, the hash differs and the judgment is *stale* (left out of the ``human`` layer
    until re-judged)."""
    import json

    body = {"address": doc.address, "texts": [t.to_json() for t in doc.texts]}
    return hashlib.sha256(json.dumps(body, ensure_ascii=False, sort_keys=True).encode("utf-8")).hexdigest()


def _check_grade(grade: Any, cannot_judge: bool) -> int | None:
    if cannot_judge:
        if grade is not None:
            raise JudgeError("a judgment is either a grade or 'cannot judge', not both")
        return None
    if isinstance(grade, bool) or not isinstance(grade, int) or grade not in GRADES:
        raise JudgeError(f"grade {grade!r} is not one of {sorted(GRADES)} "
                         f"({', '.join(f'{g} {label}' for g, label in GRADES.items())}), or 'cannot judge'")
    return grade


def _check_note(note: str | None) -> str | None:
    if note is None:
        return None
    if not isinstance(note, str):
        raise JudgeError(f"a note is text, got {type(note).__name__}")
    note = note.replace("\x00", "").strip()
    if len(note) > MAX_NOTE:
        raise JudgeError(f"the note has {len(note)} characters; keep it under {MAX_NOTE}")
    return note or None


class JudgmentStore:
    """The judgment store on one PostgreSQL server (see the module docstring).

    Args:
        dsn: a DSN with the right to create the schema the first time (the embedded
            server's superuser: :func:`workbench.engines.pg_client.server_dsn`).

    Every method opens its own short connection work on one kept connection (reopened
    when broken); the object is not thread-safe: use one per thread or process.

    Raises (from every method):
        PgError: the server cannot be reached, or failed while writing (names it and the fix).
        StorageError: (a method that writes) the server's disk is full (:meth:`writing`); nothing written.
    """

    def __init__(self, dsn: str, *, migrate: bool = True):
        self.dsn = dsn
        self._session = _WriteSession(dsn)
        if migrate:
            self.migrate()

    @classmethod
    def open(cls, home=None, *, migrate: bool = True, quiet: bool = False) -> JudgmentStore:
        """The store of the workbench's server: ``WORKBENCH_PG_DSN``, else the home's embedded one
        (started when needed). The one way the workbench opens the judgment store.

        Args:
            home: the workbench home (None: :func:`workbench.settings.home_dir`).
            migrate: create or upgrade the schema (False: create nothing).
            quiet: keep the embedded server's start-up lines off stderr.

        Raises:
            PgError: the server cannot be started or reached (names its log and the fix).
        """
        from workbench.engines.pg_client import DSN_ENV, server_dsn

        if quiet and not os.environ.get(DSN_ENV, "").strip():
            from workbench.services import postgres
            from workbench.settings import home_dir

            return cls(postgres.attach(Path(home) if home is not None else home_dir()), migrate=migrate)
        return cls(server_dsn(home), migrate=migrate)

    # ------------------------------------------------------------ connection and schema

    def conn(self):
        """The open connection (autocommit; writes use ``with conn.transaction()``)."""
        return self._session.get()

    def close(self) -> None:
        """Close the connection (it reopens on the next call)."""
        self._session.close()

    @contextmanager
    def writing(self) -> Iterator[Any]:
        """One write transaction on the store's connection (``with store.writing() as conn:``), whose
        failures of the server itself come out as one line (:func:`write_error`): a full disk under
        the server's data (SQLSTATE 53100) or another ``psycopg.OperationalError`` (a lost connection,
        out of memory). Other errors (a constraint, :class:`JudgeError`) pass through as they are.
        Inside another transaction it is a savepoint of it.

        Raises:
            StorageError: the server's disk is full (names the server's folder on that disk — its data folder
                or the tablespace — the space free and the fix);
                the transaction was rolled back, so nothing was written.
            PgError: another operational failure of the server (names it and the fix).
        """
        import psycopg

        conn = self.conn()
        try:
            with conn.transaction():
                yield conn
        except psycopg.OperationalError as exc:
            broken = conn.closed or conn.broken
            full = None if broken or getattr(exc, "sqlstate", None) != DISK_FULL else self._folder_of(exc)
            raise write_error(exc, self._session.where, full, broken=broken) from None

    def _folder_of(self, exc: BaseException) -> str | None:
        """The server's folder that a disk-full error is about: the tablespace's location when the file the
        server names lies in one (``pg_tblspc/<oid>/…``), else the data folder (``data_directory``); None
        when it cannot be read (no right to, or the connection is gone). Only for messages."""
        import re

        import psycopg

        named = re.search(r'file "([^"]+)"', str(exc))
        space = re.match(r"pg_tblspc/(\d+)/", named.group(1)) if named else None
        try:
            if space is not None:
                row = self.conn().execute("SELECT pg_tablespace_location(%s::oid)", (int(space.group(1)),)).fetchone()
                if row and row[0]:
                    return str(row[0])
            row = self.conn().execute("SELECT current_setting('data_directory', true)").fetchone()
        except (psycopg.Error, WorkbenchError):
            return None
        return str(row[0]) if row and row[0] else None

    def __enter__(self) -> JudgmentStore:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    @contextmanager
    def snapshot(self) -> Iterator[JudgmentStore]:
        """Read the store as of one moment: the reads inside share one ``REPEATABLE READ, READ ONLY``
        transaction, so an export's file, counts and agreement agree while raters keep judging.
        Inside a transaction already, it adds nothing (that transaction's snapshot rules).

        Raises:
            psycopg.errors.ReadOnlySqlTransaction: a write inside it (nothing is written).
        """
        from psycopg.pq import TransactionStatus

        conn = self.conn()
        if conn.info.transaction_status != TransactionStatus.IDLE:
            yield self
            return
        with conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield self

    def version(self) -> int:
        """The schema version of the store (0: no store yet)."""
        conn = self.conn()
        if conn.execute("SELECT to_regclass('wb_judge.schema_version')").fetchone()[0] is None:
            return 0
        row = conn.execute("SELECT max(version) FROM wb_judge.schema_version").fetchone()
        return int(row[0] or 0)

    def migrate(self) -> int:
        """Create or upgrade the schema to :data:`SCHEMA_VERSION`; returns the version.

        Serialised across processes by an advisory lock; each migration runs in its own
        transaction with its version row, so a killed process leaves a whole version or none.

        Raises:
            JudgeError: the store was made by a newer workbench (names both versions).
        """
        have = self.version()
        if have == SCHEMA_VERSION:
            return have
        if have > SCHEMA_VERSION:
            raise JudgeError(f"the judgment store at {self._session.where} has schema version {have}, newer than this "
                             f"workbench's {SCHEMA_VERSION}: upgrade the workbench (git pull; make test)")
        with self.writing() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('workbench.judge.migrate'))")
            conn.execute("CREATE SCHEMA IF NOT EXISTS wb_judge")
            conn.execute("CREATE TABLE IF NOT EXISTS wb_judge.schema_version (version int PRIMARY KEY, "
                         "note text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())")
        for version, note, sql in MIGRATIONS:
            with self.writing() as conn:
                conn.execute("SELECT pg_advisory_xact_lock(hashtext('workbench.judge.migrate'))")
                done = conn.execute("SELECT 1 FROM wb_judge.schema_version WHERE version = %s", (version,)).fetchone()
                if done:
                    continue
                conn.execute(sql)
                conn.execute("INSERT INTO wb_judge.schema_version (version, note) VALUES (%s, %s)", (version, note))
        return self.version()

    # ------------------------------------------------------------ raters

    def add_rater(self, name: str, role: str = "rater") -> tuple[Rater, str]:
        """Create a rater; return it and its token (shown once: only its sha256 is kept).

        Raises:
            JudgeError: a bad name or role, or the name is taken (names the fix).
        """
        if (err := name_error("rater name", name)) is not None:
            raise JudgeError(err)
        if role not in ROLES:
            raise JudgeError(f"role {role!r} must be one of {', '.join(ROLES)}")
        token = secrets.token_urlsafe(24)
        seed = secrets.randbits(62)
        import psycopg

        try:
            with self.writing() as conn:
                row = conn.execute("INSERT INTO wb_judge.raters (name, role, token_sha256, seed) VALUES (%s, %s, %s, %s) "
                                   "RETURNING rater_id", (name, role, token_hash(token), seed)).fetchone()
        except psycopg.errors.UniqueViolation:
            revoked = self.conn().execute("SELECT revoked_at IS NOT NULL FROM wb_judge.raters WHERE name = %s",
                                          (name,)).fetchone()
            if revoked and revoked[0]:
                raise JudgeError(f"rater {name!r} exists but was revoked (or imported without a token); "
                                 f"`workbench judge rater token {name}` gives them a new token, so all their grades "
                                 "stay under one name, or choose another name") from None
            raise JudgeError(f"a rater named {name!r} exists; `workbench judge rater token {name}` replaces their "
                             "token, or choose another name") from None
        return Rater(row[0], name, role, seed), token

    def new_token(self, name: str) -> tuple[Rater, str]:
        """Give the rater ``name`` (active, revoked, or imported without a token) a new token and make
        them active; the old token stops signing in. Their grades stay under the same rater. Returns
        the rater and the token (shown once: only its sha256 is kept).

        Raises:
            JudgeError: no rater has that name (lists the active ones).
        """
        token = secrets.token_urlsafe(24)
        with self.writing() as conn:
            row = conn.execute("UPDATE wb_judge.raters SET token_sha256 = %s, revoked_at = NULL WHERE name = %s "
                               "RETURNING rater_id, name, role, seed", (token_hash(token), name)).fetchone()
        if row is None:
            self.rater(name)  # raises with the known names
        return Rater(*row), token

    def rater_by_token(self, token: str) -> Rater | None:
        """The active rater whose token this is, or None. Compared in constant time (:func:`hmac.compare_digest`)
        against every active rater's hash, so timing tells nothing about which rater or how close."""
        if not isinstance(token, str) or not token.strip():
            return None
        want = token_hash(token.strip())
        found = None
        for rid, name, role, seed, h in self.conn().execute(
                "SELECT rater_id, name, role, seed, token_sha256 FROM wb_judge.raters WHERE revoked_at IS NULL"):
            if hmac.compare_digest(want, h):
                found = Rater(rid, name, role, seed)
        return found

    def rater_tokens(self) -> list[tuple[Rater, str, str]]:
        """Every active rater with the sha256 (hex) of their token and when they were added (UTC, ISO 8601):
        what the dashboard's sign-in compares a presented token with (:class:`workbench.dashboard.auth.RaterTokens`).
        A store without the schema yet has none."""
        if self.version() == 0:
            return []
        return [(Rater(rid, name, role, seed), h, created.strftime("%Y-%m-%dT%H:%M:%SZ"))
                for rid, name, role, seed, h, created in self.conn().execute(
                    "SELECT rater_id, name, role, seed, token_sha256, created_at AT TIME ZONE 'UTC' "
                    "FROM wb_judge.raters WHERE revoked_at IS NULL ORDER BY rater_id")]

    def rater(self, name: str) -> Rater:
        """The active rater named ``name``.

        Raises:
            JudgeError: no such active rater (lists the known ones).
        """
        row = self.conn().execute("SELECT rater_id, name, role, seed FROM wb_judge.raters WHERE name = %s "
                                  "AND revoked_at IS NULL", (name,)).fetchone()
        if row is None:
            known = [r.name for r in self.raters()]
            raise JudgeError(f"no active rater named {name!r}; known: {', '.join(known) or 'none'} "
                             "(add one with `workbench judge rater add NAME`)")
        return Rater(*row)

    def raters(self) -> list[Rater]:
        """The active raters, by name."""
        return [Rater(*r) for r in self.conn().execute(
            "SELECT rater_id, name, role, seed FROM wb_judge.raters WHERE revoked_at IS NULL ORDER BY name")]

    def revoke_rater(self, name: str) -> None:
        """Revoke a rater's token (their judgments stay).

        Raises:
            JudgeError: no such active rater.
        """
        with self.writing() as conn:
            n = conn.execute("UPDATE wb_judge.raters SET revoked_at = now() WHERE name = %s AND revoked_at IS NULL",
                             (name,)).rowcount
        if n == 0:
            self.rater(name)  # raises with the known names

    # ------------------------------------------------------------ pools

    def create_pool(self, dataset: str, pairs: Sequence[PoolPair], *, raters_per_pair: int = 2,
                    params: dict | None = None, repool: Iterable[tuple[str, str]] = ()) -> int:
        """Store a pool: its pairs and ``raters_per_pair`` open slots for each; returns the pool id.

        Pairs already in an earlier pool of the dataset are skipped (a pool never repeats a pair),
        except those named in ``repool``: pairs whose judgments are all stale (their document
        changed), to be judged again — by the same raters too.

        Raises:
            JudgeError: ``raters_per_pair`` outside 1..10, a pair with an empty id or a bad reason.
        """
        from psycopg.types.json import Jsonb

        if isinstance(raters_per_pair, bool) or not isinstance(raters_per_pair, int) or not 1 <= raters_per_pair <= 10:
            raise JudgeError(f"raters per pair must be an integer from 1 to 10, got {raters_per_pair!r}")
        if len(pairs) >= _QUEUE_BLOCK:
            raise JudgeError(f"a pool holds fewer than {_QUEUE_BLOCK:,} pairs, got {len(pairs):,}; pool fewer "
                             "(--max-pairs) or in several pools")
        for p in pairs:
            if not p.query_id or not p.doc_id:
                raise JudgeError(f"a pooled pair needs a query_id and a doc_id, got {p!r}")
            if p.reason not in ("pool", "audit", "sent", "import"):
                raise JudgeError(f"pair reason {p.reason!r} must be pool, audit, sent or import")
        with self.writing() as conn:
            have = {(q, d) for q, d in conn.execute(
                "SELECT query_id, doc_id FROM wb_judge.pairs WHERE dataset = %s", (dataset,))} - set(repool)
            pool_id = conn.execute("INSERT INTO wb_judge.pools (dataset, raters_per_pair, params) VALUES (%s, %s, %s) "
                                   "RETURNING pool_id", (dataset, raters_per_pair, Jsonb(params or {}))).fetchone()[0]
            fresh = [p for p in dict.fromkeys(pairs) if (p.query_id, p.doc_id) not in have]
            seen: set[tuple[str, str]] = set()
            rows = []
            for p in fresh:
                if (p.query_id, p.doc_id) in seen:
                    continue
                seen.add((p.query_id, p.doc_id))
                rows.append((pool_id, dataset, p.query_id, p.doc_id, int(p.tier), float(p.priority), p.reason))
            with conn.cursor() as cur:
                with cur.copy("COPY wb_judge.pairs (pool_id, dataset, query_id, doc_id, tier, priority, reason) "
                              "FROM STDIN") as copy:
                    for r in rows:
                        copy.write_row(r)
            conn.execute("INSERT INTO wb_judge.assignments (pair_id, slot) "
                         "SELECT p.pair_id, s FROM wb_judge.pairs p, generate_series(1, %s) s WHERE p.pool_id = %s",
                         (raters_per_pair, pool_id))
            conn.execute("ANALYZE wb_judge.pairs, wb_judge.assignments")  # plans for the new size at once
        return pool_id

    def pooled_pairs(self, dataset: str) -> set[tuple[str, str]]:
        """Every (query_id, doc_id) of the dataset that is in some pool (judged or not)."""
        return {(q, d) for q, d in self.conn().execute(
            "SELECT query_id, doc_id FROM wb_judge.pairs WHERE dataset = %s", (dataset,))}

    def pair_reasons(self, dataset: str) -> dict[tuple[str, str], str]:
        """``(query_id, doc_id)`` → why the pair was pooled (``pool``, ``audit``, ``sent``, ``import``), for every
        pooled pair of the dataset; a pair pooled again (its text changed) keeps its latest pool's reason."""
        return {(q, d): why for q, d, why in self.conn().execute(
            "SELECT DISTINCT ON (query_id, doc_id) query_id, doc_id, reason FROM wb_judge.pairs WHERE dataset = %s "
            "ORDER BY query_id, doc_id, pair_id DESC", (dataset,))}

    def judged_pairs(self, dataset: str) -> set[tuple[str, str]]:
        """Every (query_id, doc_id) of the dataset that a human graded (a current judgment or an adjudication)."""
        return {(q, d) for q, d in self.conn().execute(
            "SELECT query_id, doc_id FROM wb_judge.current_judgments WHERE dataset = %s AND NOT cannot_judge "
            "UNION SELECT query_id, doc_id FROM wb_judge.current_adjudications WHERE dataset = %s", (dataset, dataset))}

    def datasets(self) -> list[str]:
        """The datasets that have pools or judgments."""
        return [r[0] for r in self.conn().execute(
            "SELECT dataset FROM wb_judge.pairs UNION SELECT dataset FROM wb_judge.judgments ORDER BY 1")]

    # ------------------------------------------------------------ judging

    def next_assignment(self, rater: Rater, dataset: str | None = None) -> Assignment | None:
        """The rater's next pair: an open slot they claimed before (a reloaded page), else a newly
        claimed one from their queue (see the module docstring); None when their queue is empty."""
        conn = self.conn()
        ds_clause = "AND p.dataset = %(ds)s" if dataset else ""
        args = {"r": rater.rater_id, "ds": dataset, "seed": rater.seed}
        row = conn.execute(
            "SELECT a.assignment_id, a.pair_id, p.dataset, p.query_id, p.doc_id FROM wb_judge.assignments a "
            f"JOIN wb_judge.pairs p USING (pair_id) WHERE a.rater_id = %(r)s AND a.done_at IS NULL {ds_clause} "
            "ORDER BY a.claimed_at, a.assignment_id LIMIT 1", args).fetchone()
        if row is not None:
            return Assignment(*row)
        import psycopg

        self._fill_queue(rater, dataset)
        for _attempt in range(5):
            try:
                with self.writing() as conn:
                    row = conn.execute(
                        "WITH cand AS ("  # walk the queue in order (its primary key); lock the first open slot
                        " SELECT a.assignment_id, q.ord FROM wb_judge.queue q"
                        " JOIN wb_judge.pairs p ON p.pair_id = q.pair_id"
                        " CROSS JOIN LATERAL (SELECT s.assignment_id FROM wb_judge.assignments s"
                        "   WHERE s.pair_id = q.pair_id AND (s.rater_id IS NULL OR (s.done_at IS NULL"
                        "     AND s.rater_id <> %(r)s AND s.claimed_at < clock_timestamp() - %(ttl)s::interval))"
                        "   ORDER BY s.rater_id NULLS FIRST LIMIT 1 FOR UPDATE SKIP LOCKED) a"
                        f" WHERE q.rater_id = %(r)s {ds_clause}"
                        " ORDER BY q.ord LIMIT 1), "
                        "claimed AS ("
                        " UPDATE wb_judge.assignments a SET rater_id = %(r)s, claimed_at = clock_timestamp() "
                        " FROM cand WHERE a.assignment_id = cand.assignment_id RETURNING a.assignment_id, a.pair_id,"
                        " cand.ord), "
                        "passed AS ("  # this entry, and those before it in the same pool whose pair is full
                        " DELETE FROM wb_judge.queue q USING claimed WHERE q.rater_id = %(r)s"
                        " AND q.ord BETWEEN claimed.ord / %(block)s * %(block)s AND claimed.ord"
                        " AND (q.pair_id = claimed.pair_id OR NOT EXISTS (SELECT 1 FROM wb_judge.assignments h"
                        "   WHERE h.pair_id = q.pair_id AND h.done_at IS NULL))) "  # a held slot may still expire
                        "SELECT c.assignment_id, c.pair_id, p.dataset, p.query_id, p.doc_id FROM claimed c "
                        "JOIN wb_judge.pairs p USING (pair_id)",
                        {**args, "block": _QUEUE_BLOCK, "ttl": f"{CLAIM_TTL_S} seconds"}).fetchone()
                return Assignment(*row) if row else None
            except psycopg.errors.UniqueViolation:
                continue  # the same rater claimed this pair in a parallel session: try the next one
        return None

    def _fill_queue(self, rater: Rater, dataset: str | None) -> None:
        """Make the rater's queue for every pool (of ``dataset``) they have no queue for yet."""
        conn = self.conn()
        ds = "AND dataset = %(ds)s" if dataset else ""
        args = {"r": rater.rater_id, "ds": dataset, "seed": rater.seed, "block": _QUEUE_BLOCK}
        missing = conn.execute(
            f"SELECT 1 FROM wb_judge.pools WHERE true {ds} AND NOT EXISTS (SELECT 1 FROM wb_judge.queue_pools qp "
            "WHERE qp.rater_id = %(r)s AND qp.pool_id = pools.pool_id) LIMIT 1", args).fetchone()
        if missing is None:
            return
        with self.writing() as conn:
            conn.execute(
                "WITH fresh AS ("
                " INSERT INTO wb_judge.queue_pools (rater_id, pool_id)"
                f" SELECT %(r)s, pool_id FROM wb_judge.pools WHERE true {ds}"
                " ON CONFLICT DO NOTHING RETURNING pool_id) "
                "INSERT INTO wb_judge.queue (rater_id, pair_id, ord) "
                "SELECT %(r)s, p.pair_id, p.pool_id::bigint * %(block)s + row_number() OVER ("
                " PARTITION BY p.pool_id ORDER BY p.tier, hashtextextended(p.pair_id::text, %(seed)s), p.pair_id) "
                "FROM wb_judge.pairs p JOIN fresh USING (pool_id)", args)

    def judge(self, rater: Rater, assignment_id: int, grade: int | None, *, note: str | None = None,
              doc_hash: str | None = None, cannot_judge: bool = False) -> int:
        """Record the rater's grade for an assignment they hold; returns the judgment id.

        Raises:
            JudgeError: a grade out of range, an unknown assignment, one that is not this
                rater's, or one already judged (a stale page submitting twice): nothing written.
        """
        grade = _check_grade(grade, cannot_judge)
        note = _check_note(note)
        with self.writing() as conn:
            row = conn.execute(
                "SELECT a.rater_id, a.done_at, p.dataset, p.query_id, p.doc_id FROM wb_judge.assignments a "
                "JOIN wb_judge.pairs p USING (pair_id) WHERE a.assignment_id = %s FOR UPDATE OF a",
                (assignment_id,)).fetchone()
            if row is None:
                raise JudgeError(f"assignment {assignment_id} does not exist; reload the page for your next pair")
            holder, done, dataset, qid, did = row
            if holder != rater.rater_id:
                raise JudgeError(f"{qid} / {did} is not yours (or no longer: it was open for more than "
                                 f"{CLAIM_TTL_S // 60} minutes and another rater took it over); nothing was written")
            if done is not None:
                raise JudgeError(f"assignment {assignment_id} ({qid} / {did}) is already judged (a page submitted "
                                 "twice?); nothing was written — reload the page, or undo to change it")
            jid = conn.execute(
                "INSERT INTO wb_judge.judgments (dataset, query_id, doc_id, rater_id, assignment_id, action, grade, "
                "cannot_judge, note, doc_sha256) VALUES (%s, %s, %s, %s, %s, 'judge', %s, %s, %s, %s) "
                "RETURNING judgment_id",
                (dataset, qid, did, rater.rater_id, assignment_id, grade, cannot_judge, note, doc_hash)).fetchone()[0]
            conn.execute("UPDATE wb_judge.assignments SET done_at = clock_timestamp() WHERE assignment_id = %s",
                         (assignment_id,))
            if cannot_judge:
                self._reopen_for_another(conn, assignment_id)
        return jid

    def saved_judgment(self, rater: Rater, assignment_id: int) -> dict | None:
        """The rater's current judgment made through ``assignment_id`` — ``{"judgment_id", "grade",
        "cannot_judge", "created_at"}`` (``grade`` None with ``cannot_judge``) — or None when that
        assignment is not theirs, unknown, or holds no current judgment of theirs (never judged, or undone).
        What tells a second press of the same grade (already saved) from a press that was lost."""
        row = self.conn().execute(
            "SELECT j.judgment_id, j.grade, j.cannot_judge, j.created_at FROM wb_judge.current_judgments j "
            "JOIN wb_judge.assignments a ON a.assignment_id = j.assignment_id AND a.rater_id = j.rater_id "
            "WHERE j.assignment_id = %s AND j.rater_id = %s AND a.done_at IS NOT NULL",
            (assignment_id, rater.rater_id)).fetchone()
        if row is None:
            return None
        return {"judgment_id": row[0], "grade": None if row[1] is None else int(row[1]),
                "cannot_judge": bool(row[2]), "created_at": row[3]}

    def _reopen_for_another(self, conn, assignment_id: int) -> bool:
        """After a "cannot judge" on ``assignment_id``: when more active raters (either role) have no slot
        on that pair than it has unclaimed slots, add one more open slot to the pair (and put it back in the queue of
        every such rater who already has a queue for the pool; the others get it with their queue), so the pair still gets
        its ``raters_per_pair`` grades. Returns whether a slot was added; when not, the pair waits for an
        adjudicator (:func:`workbench.judging.agreement.disagreements`). Runs in the caller's transaction."""
        pair_id, pool_id = conn.execute(
            "SELECT a.pair_id, p.pool_id FROM wb_judge.assignments a JOIN wb_judge.pairs p USING (pair_id) "
            "WHERE a.assignment_id = %s", (assignment_id,)).fetchone()
        conn.execute("SELECT 1 FROM wb_judge.pairs WHERE pair_id = %s FOR UPDATE", (pair_id,))
        free = conn.execute(
            "SELECT count(*) FROM wb_judge.raters r WHERE r.revoked_at IS NULL AND NOT EXISTS (SELECT 1 FROM "
            "wb_judge.assignments a WHERE a.pair_id = %s AND a.rater_id = r.rater_id)", (pair_id,)).fetchone()[0]
        unclaimed = conn.execute("SELECT count(*) FROM wb_judge.assignments WHERE pair_id = %s AND rater_id IS NULL",
                                 (pair_id,)).fetchone()[0]
        if free <= unclaimed:  # every rater who could take one more slot already has one waiting
            return False
        conn.execute("INSERT INTO wb_judge.assignments (pair_id, slot) SELECT %s, max(slot) + 1 "
                     "FROM wb_judge.assignments WHERE pair_id = %s", (pair_id, pair_id))
        conn.execute(
            "INSERT INTO wb_judge.queue (rater_id, pair_id, ord) "
            "SELECT qp.rater_id, %(pair)s, GREATEST(COALESCE((SELECT max(q.ord) FROM wb_judge.queue q "
            "  WHERE q.rater_id = qp.rater_id AND q.ord / %(block)s = %(pool)s), 0), "
            "  %(pool)s::bigint * %(block)s + (SELECT count(*) FROM wb_judge.pairs WHERE pool_id = %(pool)s)) + 1 "
            "FROM wb_judge.queue_pools qp JOIN wb_judge.raters r USING (rater_id) "
            "WHERE qp.pool_id = %(pool)s AND r.revoked_at IS NULL "
            "AND NOT EXISTS (SELECT 1 FROM wb_judge.assignments a WHERE a.pair_id = %(pair)s AND a.rater_id = qp.rater_id) "
            "ON CONFLICT DO NOTHING", {"pair": pair_id, "pool": pool_id, "block": _QUEUE_BLOCK})
        return True

    def undo_last(self, rater: Rater, dataset: str | None = None) -> Assignment | None:
        """Retract the rater's latest judgment (append a ``retract`` row) and reopen its slot for them;
        return that assignment (to show again), or None when there is nothing to undo."""
        ds_clause = "AND j.dataset = %(ds)s" if dataset else ""
        with self.writing() as conn:
            row = conn.execute(
                "SELECT j.judgment_id, j.assignment_id, j.dataset, j.query_id, j.doc_id, j.cannot_judge "
                "FROM wb_judge.current_judgments j "
                f"WHERE j.rater_id = %(r)s AND j.assignment_id IS NOT NULL {ds_clause} "
                "ORDER BY j.judgment_id DESC LIMIT 1", {"r": rater.rater_id, "ds": dataset}).fetchone()
            if row is None:
                return None
            _jid, aid, ds, qid, did, was_cannot = row
            a = conn.execute("SELECT pair_id FROM wb_judge.assignments WHERE assignment_id = %s AND rater_id = %s "
                             "FOR UPDATE", (aid, rater.rater_id)).fetchone()
            if a is None:
                return None
            if was_cannot:  # the slot its "cannot judge" added for another rater goes again while nobody holds it
                conn.execute(
                    "DELETE FROM wb_judge.assignments WHERE assignment_id = (SELECT s.assignment_id FROM "
                    "wb_judge.assignments s JOIN wb_judge.pairs p USING (pair_id) JOIN wb_judge.pools o USING (pool_id) "
                    "WHERE s.pair_id = %s AND s.rater_id IS NULL AND s.slot > o.raters_per_pair "
                    "ORDER BY s.slot DESC LIMIT 1)", (a[0],))
            conn.execute("INSERT INTO wb_judge.judgments (dataset, query_id, doc_id, rater_id, assignment_id, action) "
                         "VALUES (%s, %s, %s, %s, %s, 'retract')", (ds, qid, did, rater.rater_id, aid))
            conn.execute("UPDATE wb_judge.assignments SET done_at = NULL WHERE assignment_id = %s", (aid,))
        return Assignment(aid, a[0], ds, qid, did)

    def progress(self, rater: Rater, dataset: str | None = None) -> tuple[int, int]:
        """``(judged, total)`` of the rater's queue: pairs judged through assignments, and that plus
        the open ones they hold or may still claim."""
        ds = "AND p.dataset = %(ds)s" if dataset else ""
        args = {"r": rater.rater_id, "ds": dataset}
        done, held = self.conn().execute(
            "SELECT count(*) FILTER (WHERE a.done_at IS NOT NULL), count(*) FILTER (WHERE a.done_at IS NULL) "
            f"FROM wb_judge.assignments a JOIN wb_judge.pairs p USING (pair_id) WHERE a.rater_id = %(r)s {ds}",
            args).fetchone()
        self._fill_queue(rater, dataset)
        claimable = self.conn().execute(
            "SELECT count(*) FROM wb_judge.queue q JOIN wb_judge.pairs p USING (pair_id) "
            f"WHERE q.rater_id = %(r)s {ds} AND EXISTS (SELECT 1 FROM wb_judge.assignments a "
            "WHERE a.pair_id = q.pair_id AND a.rater_id IS NULL)", args).fetchone()[0]
        return int(done), int(done + held + claimable)

    def my_judgments(self, rater: Rater, dataset: str | None = None) -> list[dict]:
        """The rater's own current judgments, newest first (a rater never reads another's)."""
        ds = "AND dataset = %(ds)s" if dataset else ""
        cur = self.conn().execute(
            "SELECT judgment_id, dataset, query_id, doc_id, grade, cannot_judge, note, created_at "
            f"FROM wb_judge.current_judgments WHERE rater_id = %(r)s {ds} ORDER BY judgment_id DESC",
            {"r": rater.rater_id, "ds": dataset})
        cols = [c.name for c in cur.description]
        return [dict(zip(cols, r)) for r in cur]

    # ------------------------------------------------------------ reading everyone's (engineers, adjudicators)

    def current(self, dataset: str) -> list[dict]:
        """Every rater's current judgment on the dataset: dicts with ``query_id, doc_id, rater, rater_id,
        grade, cannot_judge, note, doc_sha256, created_at, source`` (grade None when cannot judge), and of
        the pair: ``raters_per_pair`` (the most of the pools holding it; None: in no pool, e.g. imported)
        and ``open_slots`` (its judging slots not judged yet, claimed or not) — what the "cannot judge"
        rule of :func:`workbench.judging.layers.final_grades` needs."""
        cur = self.conn().execute(
            "SELECT j.query_id, j.doc_id, r.name AS rater, j.rater_id, j.grade, j.cannot_judge, j.note, j.doc_sha256, "
            "j.created_at, j.source, pp.raters_per_pair, COALESCE(pp.open_slots, 0) AS open_slots "
            "FROM wb_judge.current_judgments j JOIN wb_judge.raters r USING (rater_id) "
            "LEFT JOIN LATERAL (SELECT max(o.raters_per_pair) AS raters_per_pair, "
            "  (SELECT count(*) FROM wb_judge.assignments a JOIN wb_judge.pairs p2 USING (pair_id) "
            "   WHERE p2.dataset = j.dataset AND p2.query_id = j.query_id AND p2.doc_id = j.doc_id "
            "   AND a.done_at IS NULL) AS open_slots "
            "  FROM wb_judge.pairs p JOIN wb_judge.pools o USING (pool_id) "
            "  WHERE p.dataset = j.dataset AND p.query_id = j.query_id AND p.doc_id = j.doc_id) pp ON true "
            "WHERE j.dataset = %s ORDER BY j.query_id, j.doc_id, r.name", (dataset,))
        cols = [c.name for c in cur.description]
        return [dict(zip(cols, r)) for r in cur]

    def adjudications(self, dataset: str) -> list[dict]:
        """The latest adjudication of each pair of the dataset (``query_id, doc_id, grade, adjudicator, note,
        doc_sha256, created_at``)."""
        cur = self.conn().execute(
            "SELECT a.query_id, a.doc_id, a.grade, r.name AS adjudicator, a.note, a.doc_sha256, a.created_at "
            "FROM wb_judge.current_adjudications a JOIN wb_judge.raters r ON r.rater_id = a.adjudicator_id "
            "WHERE a.dataset = %s ORDER BY a.query_id, a.doc_id", (dataset,))
        cols = [c.name for c in cur.description]
        return [dict(zip(cols, r)) for r in cur]

    def adjudicate_at(self, dataset: str) -> int:
        """The grade difference at which a pair goes to adjudication for this dataset
        (:data:`DEFAULT_ADJUDICATE_AT`, 1, unless set; 0 vs 1 or 2 goes at either setting)."""
        row = self.conn().execute("SELECT adjudicate_at FROM wb_judge.settings WHERE dataset = %s",
                                  (dataset,)).fetchone()
        return int(row[0]) if row else DEFAULT_ADJUDICATE_AT

    def set_adjudicate_at(self, dataset: str, diff: int) -> None:
        """Send pairs whose grades differ by ``diff`` (1 or 2) or more to adjudication.

        Raises:
            JudgeError: ``diff`` is not 1 or 2.
        """
        if diff not in (1, 2) or isinstance(diff, bool):
            raise JudgeError(f"adjudicate at a grade difference of 1 or 2, got {diff!r}")
        with self.writing() as conn:
            conn.execute("INSERT INTO wb_judge.settings (dataset, adjudicate_at) VALUES (%s, %s) "
                         "ON CONFLICT (dataset) DO UPDATE SET adjudicate_at = EXCLUDED.adjudicate_at", (dataset, diff))

    def adjudicate(self, adjudicator: Rater, dataset: str, query_id: str, doc_id: str, grade: int, *,
                   note: str | None = None, doc_hash: str | None = None) -> int:
        """Record the final grade of a pair; returns the adjudication id.

        Raises:
            JudgeError: the rater is not an adjudicator, or the grade is out of range.
        """
        if not adjudicator.is_adjudicator:
            raise JudgeError(f"{adjudicator.name} is a rater, not an adjudicator; an adjudicator's token is made with "
                             "`workbench judge rater add NAME --adjudicator`")
        grade = cast(int, _check_grade(grade, False))  # an int: None only with cannot_judge
        note = _check_note(note)
        with self.writing() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"wb_judge.adjudicate:{dataset}",))
            return conn.execute(
                "INSERT INTO wb_judge.adjudications (dataset, query_id, doc_id, adjudicator_id, grade, note, doc_sha256) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s) RETURNING adjudication_id",
                (dataset, query_id, doc_id, adjudicator.rater_id, grade, note, doc_hash)).fetchone()[0]

    def retract_adjudication(self, adjudicator: Rater, dataset: str, query_id: str, doc_id: str) -> int:
        """Take back the pair's current adjudication (a slip of the key): a ``retract`` row is appended,
        the pair has no final grade again and returns to the adjudication queue while its grades still
        differ. Returns the new row's id.

        Raises:
            JudgeError: the rater is not an adjudicator, or the pair has no current adjudication.
        """
        if not adjudicator.is_adjudicator:
            raise JudgeError(f"{adjudicator.name} is a rater, not an adjudicator; only an adjudicator may take back a "
                             "final grade")
        with self.writing() as conn:
            conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"wb_judge.adjudicate:{dataset}",))
            if conn.execute("SELECT 1 FROM wb_judge.current_adjudications WHERE dataset = %s AND query_id = %s "
                            "AND doc_id = %s", (dataset, query_id, doc_id)).fetchone() is None:
                raise JudgeError(f"{query_id} / {doc_id} has no final grade to take back; nothing was written")
            return conn.execute(
                "INSERT INTO wb_judge.adjudications (dataset, query_id, doc_id, adjudicator_id, action) "
                "VALUES (%s, %s, %s, %s, 'retract') RETURNING adjudication_id",
                (dataset, query_id, doc_id, adjudicator.rater_id)).fetchone()[0]

    def import_judgments(self, dataset: str, rows: Iterable[tuple[str, str, int, str]], *, source: str,
                         doc_hashes: dict[str, str] | None = None) -> int:
        """Append judgments from another tool (``(query_id, doc_id, grade, rater name)`` rows); unknown
        rater names are created as raters with a token nobody knows (revoked). Returns rows written.
        The caller checks ids and grades first (:mod:`workbench.judging.trecio`); one transaction.
        ``doc_hashes`` (doc_id → :func:`document_hash` of the built document now) is stored with each
        row, so an imported grade goes stale like any other when the text changes later."""
        rows = list(rows)
        with self.writing() as conn:
            ids: dict[str, int] = {n: i for i, n in conn.execute("SELECT rater_id, name FROM wb_judge.raters")}
            for name in sorted({r[3] for r in rows} - set(ids)):
                if (err := name_error("rater name", name)) is not None:
                    raise JudgeError(f"{err} (in the import)")
                ids[name] = conn.execute(
                    "INSERT INTO wb_judge.raters (name, role, token_sha256, seed, revoked_at) "
                    "VALUES (%s, 'rater', %s, %s, now()) RETURNING rater_id",
                    (name, token_hash(secrets.token_urlsafe(32)), secrets.randbits(62))).fetchone()[0]
            with conn.cursor() as cur:
                with cur.copy("COPY wb_judge.judgments (dataset, query_id, doc_id, rater_id, action, grade, source, "
                              "doc_sha256) FROM STDIN") as copy:
                    for qid, did, grade, name in rows:
                        copy.write_row((dataset, qid, did, ids[name], "judge", int(grade), source,
                                        (doc_hashes or {}).get(did)))
        return len(rows)


class _WriteSession:
    """One connection for the store (autocommit; reopened when broken). Unlike retrieval's
    :class:`workbench.engines.pg_client.Session` it may write."""

    def __init__(self, dsn: str):
        from workbench.engines.pg_client import redact_dsn

        self._dsn = dsn
        self._conn = None
        self.where = redact_dsn(dsn)

    def get(self):
        from workbench.engines.pg_client import connect

        if self._conn is None or self._conn.closed or self._conn.broken:
            self._conn = connect(self._dsn)
        return self._conn

    def close(self) -> None:
        if self._conn is not None and not self._conn.closed:
            self._conn.close()
        self._conn = None


#: The command that creates the first rater (and so the judgment store), for messages.
RATER_ADD_COMMAND = "workbench judge rater add NAME"


def store_exists(home: Path) -> bool:
    """Whether a judgment store may hold raters, decided without creating anything:
    ``WORKBENCH_PG_DSN`` is set, or the home's embedded PostgreSQL has a data folder."""
    from workbench.engines.pg_client import DSN_ENV
    from workbench.services import postgres

    if os.environ.get(DSN_ENV, "").strip():
        return True
    return (postgres.layout(Path(home)).pgdata / "PG_VERSION").is_file()
