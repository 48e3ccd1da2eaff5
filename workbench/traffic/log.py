"""What a served config records: each search a UBI query, each click or follow-up fetch a UBI event.

``workbench serve --ubi-log DIR`` (off by default) writes ``DIR/ubi_queries.jsonl`` and ``DIR/ubi_events.jsonl``
(:mod:`workbench.traffic.writer`: whole lines, rotated, bounded). Nothing is sent anywhere: the files stay on the
serving machine.

**Clients, hashed.** A request's client is what it says it is (the ``X-Client-Id`` header a front end sends, as
UBI's ``client_id``), else its bearer token, else its User-Agent and address; the log holds only
``HMAC-SHA256(salt, client)`` (32 hex digits), the salt made once per log folder (``DIR/.salt``, 0600) and never
written elsewhere: the same client is one id within a log, and no id can be turned back into a token or an
address without the folder.

**Sessions.** A client's session runs while it keeps asking: a query more than :data:`SESSION_IDLE_S` seconds
after the client's last one starts a new session (the usual web-analytics cut). A session id is the hash of the
client and the time the session started.

**Follow-ups.** An event names the query whose hits it acted on. ``click(query_id, doc_id)`` (``POST /click``)
names it; a ``fetch(doc_id)`` (an assistant's later tool call) is credited to the latest query of the same
client's live session that showed that id, with its rank there; a fetch of an id no such query showed is not an
event of a search, and is not logged (counted in :attr:`TrafficLog.unattributed`).
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.traffic.ubi import UbiEvent, UbiQuery, position_of
from workbench.traffic.writer import DEFAULT_KEEP, DEFAULT_MAX_BYTES, JsonlWriter

#: A client's session ends after this many seconds without a query.
SESSION_IDLE_S = 1800.0
#: Recent queries kept per client for crediting follow-ups.
PER_CLIENT = 64
#: Clients kept in memory (the least recently seen are forgotten first).
MAX_CLIENTS = 10_000
#: File names of the two streams.
QUERIES_FILE, EVENTS_FILE = "ubi_queries.jsonl", "ubi_events.jsonl"


@dataclass
class _Session:
    session_id: str
    last: float
    queries: deque  # of (query_id, hit_ids tuple), newest last


class TrafficLog:
    """The UBI log of one served config (module docstring).

    Args:
        folder: where the two streams live (created 0700).
        application: UBI ``application`` (default ``workbench-serve``).
        attributes: ``query_attributes`` every query carries (config, dataset, experiment).
        max_bytes, keep: rotation (:class:`workbench.traffic.writer.JsonlWriter`).
        clock: seconds since the epoch (tests pass their own).

    Raises:
        OSError: the folder, its salt or a stream cannot be created.
        ValueError: bad rotation settings.
    """

    def __init__(self, folder: Path, *, application: str = "workbench-serve",
                 attributes: Mapping[str, Any] | None = None, max_bytes: int = DEFAULT_MAX_BYTES,
                 keep: int = DEFAULT_KEEP, clock: Callable[[], float] = time.time) -> None:
        self.folder = Path(folder)
        self.application = application
        self.attributes = dict(attributes or {})
        self.clock = clock
        self.queries = JsonlWriter(self.folder / QUERIES_FILE, max_bytes=max_bytes, keep=keep)
        self.events = JsonlWriter(self.folder / EVENTS_FILE, max_bytes=max_bytes, keep=keep)
        self._salt = _salt(self.folder)
        self._lock = threading.Lock()
        self._clients: OrderedDict[str, _Session] = OrderedDict()
        self._by_query: OrderedDict[str, tuple[str, str, tuple[str, ...]]] = OrderedDict()
        self.unattributed = 0

    def client_id(self, raw: str) -> str:
        """The hashed id of a raw client key (module docstring): 32 hex digits."""
        return hmac.new(self._salt, raw.encode("utf-8", "replace"), hashlib.sha256).hexdigest()[:32]

    def searched(self, raw_client: str, text: str, hit_ids: Sequence[str],
                 attributes: Mapping[str, Any] | None = None) -> str:
        """Record a search as a UBI query; returns its ``query_id`` (a UUID).

        Raises:
            OSError: the line could not be written (the caller answers anyway and says so once).
        """
        now = self.clock()
        client = self.client_id(raw_client)
        qid = str(uuid.uuid4())
        hits = tuple(str(h) for h in hit_ids)
        with self._lock:
            sess = self._session(client, now)
            sess.queries.append((qid, hits))
            self._by_query[qid] = (client, sess.session_id, hits)
            while len(self._by_query) > MAX_CLIENTS * 4:
                self._by_query.popitem(last=False)
        attrs = {**self.attributes, **(attributes or {}), "session_id": sess.session_id}
        self.queries.write(UbiQuery(qid, client, text, now, hits, self.application, attrs).record())
        return qid

    def clicked(self, query_id: str, doc_id: str) -> UbiEvent:
        """Record a click on ``doc_id`` of the query ``query_id`` (``POST /click``); returns the event.

        Raises:
            KeyError: no query of this server's memory has that id (too old, or never served).
            LookupError: that query did not show ``doc_id``.
            OSError: the line could not be written.
        """
        with self._lock:
            found = self._by_query.get(query_id)
        if found is None:
            raise KeyError(query_id)
        client, session_id, hits = found
        pos = position_of(hits, doc_id)
        if pos is None:
            raise LookupError(doc_id)
        return self._event("click", query_id, client, session_id, doc_id, pos)

    def fetched(self, raw_client: str, doc_id: str) -> UbiEvent | None:
        """Record an assistant's fetch of ``doc_id`` as a follow-up of the latest query of the client's live session
        that showed it; returns the event, or None (nothing logged) when no such query is known.

        Raises:
            OSError: the line could not be written.
        """
        now = self.clock()
        client = self.client_id(raw_client)
        with self._lock:
            sess = self._clients.get(client)
            if sess is None or now - sess.last > SESSION_IDLE_S:
                self.unattributed += 1
                return None
            hit = next(((qid, position_of(hits, doc_id)) for qid, hits in reversed(sess.queries) if doc_id in hits),
                       None)
            session_id = sess.session_id
            if hit is None:
                self.unattributed += 1
                return None
        return self._event("fetch", hit[0], client, session_id, doc_id, hit[1])

    def _event(self, action: str, qid: str, client: str, session_id: str, doc_id: str, pos: int | None) -> UbiEvent:
        ev = UbiEvent(action, qid, client, session_id, self.clock(), doc_id, pos, self.application)
        self.events.write(ev.record())
        return ev

    def _session(self, client: str, now: float) -> _Session:
        sess = self._clients.get(client)
        if sess is None or now - sess.last > SESSION_IDLE_S:
            sid = hashlib.sha256(f"{client}:{now!r}".encode()).hexdigest()[:32]
            sess = _Session(sid, now, deque(maxlen=PER_CLIENT))
        sess.last = now
        self._clients[client] = sess
        self._clients.move_to_end(client)
        while len(self._clients) > MAX_CLIENTS:
            self._clients.popitem(last=False)
        return sess

    def close(self) -> None:
        """Close both streams."""
        self.queries.close()
        self.events.close()


def _salt(folder: Path) -> bytes:
    """The folder's salt (``.salt``, 32 random bytes as hex, 0600), made on first use."""
    path = folder / ".salt"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return path.read_text(encoding="ascii").strip().encode()
    with os.fdopen(fd, "w", encoding="ascii") as f:
        f.write(secrets.token_hex(32))
    return path.read_text(encoding="ascii").strip().encode()
