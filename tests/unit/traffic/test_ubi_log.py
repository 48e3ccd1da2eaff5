"""UBI logs written by ``serve --ubi-log`` (:mod:`workbench.traffic`): whole lines, rotation, hashed clients,
sessions and follow-ups, checked field by field against UBI 1.3.0's query and event schemas."""

from __future__ import annotations

import json
import threading

import pytest

from workbench.traffic.log import SESSION_IDLE_S, TrafficLog
from workbench.traffic.ubi import parse_timestamp, read_event, read_query, utc_timestamp
from workbench.traffic.writer import JsonlWriter

T0 = 1_765_190_400.0  # 2025-12-08T10:40:00Z


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> float:
        return self.now


def _lines(path):
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_timestamps_are_iso_8601_utc_with_a_z_and_read_back():
    assert utc_timestamp(T0 + 0.25) == "2025-12-08T10:40:00.250Z"
    assert parse_timestamp("2025-12-08T10:40:00.250Z") == T0 + 0.25
    assert parse_timestamp("2025-12-08T12:40:00+02:00") == T0  # an offset
    assert parse_timestamp("2025-12-08T10:40:00") == T0  # no zone: UTC, as OpenSearch's examples
    assert parse_timestamp(int(T0 * 1000)) == T0  # epoch ms (an OpenSearch date field)
    for bad in ("yesterday", "", True, None, float("nan")):
        with pytest.raises(ValueError, match="timestamp"):
            parse_timestamp(bad)


def test_a_search_a_fetch_and_a_click_as_ubi_records(tmp_path):
    clock = Clock()
    log = TrafficLog(tmp_path / "ubi", attributes={"config": "hybrid", "dataset": "gita"}, clock=clock)
    qid = log.searched("id:reader-1", "karma yoga", ["bg2.47", "bg3.19", "bg4.18"], {"k": 3})
    clock.now += 5
    fetch = log.fetched("id:reader-1", "bg3.19")
    clock.now += 1
    click = log.clicked(qid, "bg4.18")
    (q,) = _lines(tmp_path / "ubi" / "ubi_queries.jsonl")
    client = log.client_id("id:reader-1")
    assert len(client) == 32 and int(client, 16) >= 0 and "reader-1" not in json.dumps(q)
    assert q == {"application": "workbench-serve", "query_id": qid, "client_id": client, "user_query": "karma yoga",
                 "timestamp": "2025-12-08T10:40:00.000Z", "object_id_field": "doc_id",
                 "query_attributes": {"config": "hybrid", "dataset": "gita", "k": 3,
                                      "session_id": q["query_attributes"]["session_id"]},
                 "query_response_hit_ids": ["bg2.47", "bg3.19", "bg4.18"]}
    e1, e2 = _lines(tmp_path / "ubi" / "ubi_events.jsonl")
    sid = q["query_attributes"]["session_id"]
    assert e1 == {"application": "workbench-serve", "action_name": "fetch", "query_id": qid, "session_id": sid,
                  "client_id": client, "timestamp": "2025-12-08T10:40:05.000Z", "message_type": "FOLLOW_UP",
                  "event_attributes": {"object": {"object_id": "bg3.19", "object_id_field": "doc_id"},
                                       "position": {"ordinal": 2}}}
    assert e2["action_name"] == "click" and e2["event_attributes"]["position"] == {"ordinal": 3}
    assert (fetch.position, click.position) == (2, 3)
    # the records read back as the importer reads them
    assert read_query(q).hit_ids == ("bg2.47", "bg3.19", "bg4.18") and read_query(q).session_id == sid
    assert read_event(e1).object_id == "bg3.19" and read_event(e2).time == T0 + 6
    assert oct((tmp_path / "ubi" / "ubi_queries.jsonl").stat().st_mode & 0o777) == "0o600"
    assert oct((tmp_path / "ubi").stat().st_mode & 0o777) == "0o700"


def test_follow_ups_credit_the_latest_query_of_the_live_session_that_showed_the_id(tmp_path):
    clock = Clock()
    log = TrafficLog(tmp_path, clock=clock)
    q1 = log.searched("ua:a", "one", ["d1", "d2"])
    q2 = log.searched("ua:a", "two", ["d3", "d1"])
    log.searched("ua:b", "other client", ["d9"])
    assert (log.fetched("ua:a", "d1").query_id, log.fetched("ua:a", "d1").position) == (q2, 2)  # the latest
    assert log.fetched("ua:a", "d2").query_id == q1
    assert log.fetched("ua:a", "d9") is None  # shown to another client only
    assert log.fetched("ua:c", "d1") is None  # a client that never searched
    sid = json.loads((tmp_path / "ubi_queries.jsonl").read_text().splitlines()[0])["query_attributes"]["session_id"]
    clock.now += SESSION_IDLE_S + 1  # the session ended: nothing to credit, then a new session
    assert log.fetched("ua:a", "d1") is None and log.unattributed == 3
    log.searched("ua:a", "three", ["d1"])
    last = json.loads((tmp_path / "ubi_queries.jsonl").read_text().splitlines()[-1])
    assert last["query_attributes"]["session_id"] != sid
    with pytest.raises(KeyError):
        log.clicked("no-such-query", "d1")
    with pytest.raises(LookupError):
        log.clicked(q1, "d3")  # q1 did not show d3
    # the same client is one id in one folder, another in another (the salt is the folder's)
    assert log.client_id("ua:a") == TrafficLog(tmp_path).client_id("ua:a") != TrafficLog(tmp_path / "x").client_id("ua:a")


def test_files_rotate_at_the_size_and_stay_bounded(tmp_path):
    w = JsonlWriter(tmp_path / "s.jsonl", max_bytes=1024, keep=2)
    rec = {"pad": "x" * 90}  # 107-108 bytes a line: 9 lines a file (about 970 bytes; a 10th passes 1024)
    for i in range(40):
        w.write({**rec, "i": i})
    files = w.files()
    assert [p.name for p in files] == ["s.jsonl.2", "s.jsonl.1", "s.jsonl"]
    assert all(p.stat().st_size <= 1024 for p in files)
    got = [r["i"] for p in files for r in _lines(p)]
    assert got == list(range(40 - len(got), 40)) and len(got) == 9 + 9 + 4  # the oldest 18 dropped, order kept
    with pytest.raises(ValueError, match="max_bytes"):
        JsonlWriter(tmp_path / "t.jsonl", max_bytes=10)


def test_threads_never_interleave_lines_and_text_is_kept_as_typed(tmp_path):
    log = TrafficLog(tmp_path, max_bytes=64 * 1024, keep=50)

    def client(n):
        for i in range(100):
            log.searched(f"id:{n}", f"карма йога ॐ {n}-{i} \ud800", [f"d{i}"])

    threads = [threading.Thread(target=client, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    lines = [r for p in log.queries.files() for r in _lines(p)]
    assert len(lines) == 800 and len({r["query_id"] for r in lines}) == 800
    assert {r["user_query"].split()[2] for r in lines} == {"ॐ"} and all(r["user_query"].endswith("?") for r in lines)
