"""User Behavior Insights (UBI) records: what a search showed (a *query*) and what was done with it (an *event*).

The schema is UBI 1.3.0 (``o19s/ubi``, ``schema/1.3.0/query.request.schema.json`` and ``event.schema.json``;
OpenSearch's UBI plug-in stores the same fields in its ``ubi_queries`` and ``ubi_events`` indexes):

* a query: ``application``, ``query_id``, ``client_id``, ``user_query``, ``timestamp`` (ISO 8601, UTC with a
  trailing ``Z``), ``query_attributes`` (here: the config, dataset and experiment that answered, ``k``, the
  filter, the ``session_id``), ``object_id_field`` and ``query_response_hit_ids`` (the ids shown, best first);
* an event: ``application``, ``action_name``, ``query_id``, ``session_id``, ``client_id``, ``timestamp``,
  ``message_type``, and ``event_attributes`` with ``object.object_id`` (the hit acted on) and
  ``position.ordinal`` (its rank, from 1).

The workbench writes two actions: ``click`` (a reader opened a hit: ``POST /click`` of ``workbench serve``) and
``fetch`` (an assistant asked for a hit's id with a later tool call in the same session: AICharya's contract,
"every hit carries exactly the id the assistant needs to fetch"). It reads every action of
:data:`ACTIONS`; others are skipped and counted by :mod:`workbench.traffic.importer`.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

#: The UBI version written and read.
UBI_VERSION = "1.3.0"

#: Actions read as a user's use of a hit (UBI's common defaults, and ``fetch`` for an assistant's follow-up).
ACTIONS = frozenset({"click", "click_through", "fetch", "add_to_cart", "watch", "view", "purchase", "impression"})

#: Longest string a UBI identifier field holds (``query_id``, ``client_id``, ``session_id``: ``maxLength``).
MAX_ID = 100


def utc_timestamp(epoch_s: float) -> str:
    """``epoch_s`` (seconds since 1970, UTC) as UBI writes a time: ISO 8601 with milliseconds and a trailing
    ``Z`` (OpenSearch refuses a time without a zone)."""
    return datetime.fromtimestamp(epoch_s, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def parse_timestamp(value: Any) -> float:
    """A UBI ``timestamp`` (ISO 8601; a time without a zone is read as UTC, as OpenSearch's examples do) or epoch
    milliseconds (what a ``date`` field of an OpenSearch export may hold) → epoch seconds.

    Raises:
        ValueError: anything else (names the value).
    """
    if isinstance(value, bool):
        raise ValueError(f"timestamp {value!r} is not a time")
    if isinstance(value, (int, float)) and math.isfinite(value):
        return float(value) / 1000.0
    if isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            t = datetime.fromisoformat(text)  # Python 3.11 reads a trailing Z
        except ValueError:
            try:
                t = datetime.fromisoformat(text[:-1] + "+00:00" if text.endswith(("Z", "z")) else text)
            except ValueError:
                raise ValueError(f"timestamp {value[:40]!r} is not ISO 8601 (e.g. 2026-12-08T10:20:39.123Z)") from None
        return (t if t.tzinfo else t.replace(tzinfo=UTC)).timestamp()
    raise ValueError(f"timestamp {str(value)[:40]!r} is not a time")


@dataclass(frozen=True)
class UbiQuery:
    """One search as shown: ``hit_ids`` best first (``query_response_hit_ids``). ``time`` is epoch seconds;
    ``attributes`` is ``query_attributes`` (config, dataset, session_id, ...)."""

    query_id: str
    client_id: str
    user_query: str
    time: float
    hit_ids: tuple[str, ...]
    application: str = ""
    attributes: Mapping[str, Any] = field(default_factory=dict)

    @property
    def session_id(self) -> str:
        """The session the query belongs to (``query_attributes.session_id``), or ``""``."""
        return str(self.attributes.get("session_id") or "")

    def record(self) -> dict[str, Any]:
        """The UBI query record (module docstring), JSON-ready."""
        return {"application": self.application, "query_id": self.query_id, "client_id": self.client_id,
                "user_query": self.user_query, "timestamp": utc_timestamp(self.time),
                "query_attributes": dict(self.attributes), "object_id_field": "doc_id",
                "query_response_hit_ids": list(self.hit_ids)}


@dataclass(frozen=True)
class UbiEvent:
    """One action on a shown hit: ``object_id`` at ``position`` (its rank from 1, or None when not known)."""

    action: str
    query_id: str
    client_id: str
    session_id: str
    time: float
    object_id: str
    position: int | None
    application: str = ""

    def record(self) -> dict[str, Any]:
        """The UBI event record (module docstring), JSON-ready."""
        attrs: dict[str, Any] = {"object": {"object_id": self.object_id, "object_id_field": "doc_id"}}
        attrs["position"] = {"ordinal": self.position} if self.position is not None else {}
        return {"application": self.application, "action_name": self.action, "query_id": self.query_id,
                "session_id": self.session_id, "client_id": self.client_id, "timestamp": utc_timestamp(self.time),
                "message_type": "FOLLOW_UP" if self.action == "fetch" else "CLICK_THROUGH",
                "event_attributes": attrs}


class Skip(ValueError):
    """A record that cannot be read: ``reason`` is the counted kind (``"no query_id"``), the message the detail."""

    def __init__(self, reason: str, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def _ident(rec: Mapping[str, Any], key: str, *, required: bool) -> str:
    v = rec.get(key)
    if type(v) is str:  # the common case, first
        t = v.strip()
        if t:
            return t[:MAX_ID]
    if v is None or (isinstance(v, str) and not v.strip()):
        if required:
            raise Skip(f"no {key}")
        return ""
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        raise Skip(f"bad {key}", f"{str(v)[:40]!r} is not a string")
    return str(v).strip()[:MAX_ID]


def read_query(rec: Mapping[str, Any]) -> UbiQuery:
    """A UBI query record → :class:`UbiQuery`.

    Raises:
        Skip: no ``query_id`` or ``user_query``, a bad ``timestamp``, or ``query_response_hit_ids`` that is not a
            list of ids (an id that is not a string or integer: ``"a hit without an id"``).
    """
    qid = _ident(rec, "query_id", required=True)
    text = rec.get("user_query")
    if not isinstance(text, str) or not text.strip():
        raise Skip("no user_query")
    try:
        t = parse_timestamp(rec.get("timestamp"))
    except ValueError as exc:
        raise Skip("bad timestamp", str(exc)) from None
    hits = rec.get("query_response_hit_ids") or []
    if not isinstance(hits, list):
        raise Skip("bad query_response_hit_ids", "not a list")
    ids: list[str] = []
    for h in hits:
        if isinstance(h, bool) or not isinstance(h, (str, int)) or not str(h).strip():
            raise Skip("a hit without an id", f"query {qid}: {str(h)[:40]!r}")
        ids.append(str(h).strip())
    attrs = rec.get("query_attributes") or {}
    return UbiQuery(qid, _ident(rec, "client_id", required=False), text, t, tuple(ids),
                    str(rec.get("application") or ""), attrs if isinstance(attrs, dict) else {})


def read_event(rec: Mapping[str, Any], actions: frozenset[str] = ACTIONS) -> UbiEvent:
    """A UBI event record → :class:`UbiEvent`.

    Raises:
        Skip: ``"unknown action"`` (not one of ``actions``), ``"no query_id"``, ``"a hit without an id"`` (no
            ``event_attributes.object.object_id``), a bad ``timestamp`` or ``position.ordinal``.
    """
    action = rec.get("action_name")
    if action not in actions:
        action = action.strip() if isinstance(action, str) else action
        if action not in actions:
            raise Skip("unknown action", str(action)[:40])
    qid = _ident(rec, "query_id", required=True)
    attrs = rec.get("event_attributes") or {}
    obj = attrs.get("object") if isinstance(attrs, dict) else None
    oid = obj.get("object_id") if isinstance(obj, dict) else None
    if type(oid) is str and oid and not oid[0].isspace() and not oid[-1].isspace():
        pass  # the common case: an id as it should be
    elif oid is None or isinstance(oid, bool) or not isinstance(oid, (str, int)) or not str(oid).strip():
        raise Skip("a hit without an id", f"event on query {qid}")
    pos = attrs.get("position") if isinstance(attrs, dict) else None
    ordinal = pos.get("ordinal") if isinstance(pos, dict) else None
    if ordinal is not None and (isinstance(ordinal, bool) or not isinstance(ordinal, int) or ordinal < 1):
        raise Skip("bad position", f"ordinal {str(ordinal)[:20]!r} is not a rank from 1")
    try:
        t = parse_timestamp(rec.get("timestamp"))
    except ValueError as exc:
        raise Skip("bad timestamp", str(exc)) from None
    return UbiEvent(action, qid, _ident(rec, "client_id", required=False),
                    _ident(rec, "session_id", required=False), t, str(oid).strip(), ordinal,
                    str(rec.get("application") or ""))


def kind_of(rec: Mapping[str, Any], index: str = "") -> str:
    """``"query"`` or ``"event"`` for a record: by the OpenSearch index it was exported from (``ubi_queries`` /
    ``ubi_events``, or a name ending so), else by its fields (``action_name`` → event, ``user_query`` → query);
    ``""`` when neither."""
    name = index.lower()
    if name.endswith("ubi_queries") or name.endswith("_queries"):
        return "query"
    if name.endswith("ubi_events") or name.endswith("_events"):
        return "event"
    if "action_name" in rec:
        return "event"
    if "user_query" in rec or "query_response_hit_ids" in rec:
        return "query"
    return ""


def position_of(hit_ids: Sequence[str], doc_id: str) -> int | None:
    """The rank (from 1) of ``doc_id`` among ``hit_ids``, or None."""
    try:
        return hit_ids.index(doc_id) + 1 if isinstance(hit_ids, list) else list(hit_ids).index(doc_id) + 1
    except ValueError:
        return None
