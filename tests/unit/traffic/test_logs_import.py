"""``workbench logs import`` (:mod:`workbench.traffic.importer`): UBI JSON lines, OpenSearch exports, gzip and
rotated files into a log set; every unreadable line skipped, counted and named; nothing half-written."""

from __future__ import annotations

import gzip
import json

import pytest
from typer.testing import CliRunner

from workbench.cli import app
from workbench.traffic.importer import load_log_set, read_logs

Q = {"application": "mint", "client_id": "c1", "timestamp": "2026-12-01T10:00:00Z",
     "query_attributes": {"session_id": "s1"}, "object_id_field": "doc_id"}
E = {"application": "mint", "client_id": "c1", "session_id": "s1", "timestamp": "2026-12-01T10:00:05Z"}


def _q(qid, text, hits, **kw):
    return json.dumps({**Q, "query_id": qid, "user_query": text, "query_response_hit_ids": hits, **kw},
                      ensure_ascii=False)


def _e(qid, action, oid, pos, **kw):
    attrs = {"object": {"object_id": oid}, "position": {"ordinal": pos}} if oid is not None else {"position": {}}
    return json.dumps({**E, "query_id": qid, "action_name": action, "event_attributes": attrs, **kw})


@pytest.fixture
def logs(tmp_path):
    """A folder as ``serve --ubi-log`` leaves it (a rotated file, a torn last line) and an OpenSearch export."""
    d = tmp_path / "ubi"
    d.mkdir()
    (d / "ubi_queries.jsonl.1").write_text("\n".join([
        _q("q1", "сатипаттхана", ["mn10", "dn22"]),
        _q("q2", "anapanasati", ["mn118"]),
        "{not json",
        _q("q1", "a query id given twice", ["x"]),
        json.dumps({**Q, "query_id": "q3", "user_query": "no hits", "query_response_hit_ids": ["ok", None]}),
    ]) + "\n", encoding="utf-8")
    (d / "ubi_queries.jsonl").write_text(_q("q4", "sutta", []) + "\n" + _q("q5", "torn", ["a"])[:30],
                                         encoding="utf-8")
    with gzip.open(d / "ubi_events.jsonl.gz", "wt", encoding="utf-8") as f:
        f.write("\n".join([
            _e("q1", "click", "dn22", 2),
            _e("q1", "fetch", "mn10", 1),
            _e("q2", "hover", "mn118", 1),  # not an action of a hit's use
            _e("q2", "click", None, None),  # a hit without an id
            _e("q9", "click", "zz", 4),  # its query is not in the import: kept, counted
            _e("q2", "click", "mn118", 1, timestamp="last tuesday"),
            json.dumps({"hello": "world"}),
        ]) + "\n")
    export = tmp_path / "opensearch-export.ndjson"  # elasticdump / scroll hits
    export.write_text("\n".join([
        json.dumps({"_index": "ubi_queries", "_id": "x1", "_source": json.loads(_q("q6", "Brahmajala", ["dn1"]))}),
        json.dumps({"_index": "ubi_events", "_id": "x2", "_source": json.loads(_e("q6", "click_through", "dn1", 1))}),
    ]) + "\n")
    search = tmp_path / "search-answer.json"  # a _search answer, pretty-printed
    search.write_text(json.dumps({"took": 1, "hits": {"hits": [
        {"_index": "ubi_queries", "_source": json.loads(_q("q7", "Тевиджа", ["dn13"]))}]}}, indent=2))
    return d, export, search


def test_every_line_is_read_or_skipped_with_its_reason_and_place(logs):
    d, export, search = logs
    queries, events, report = read_logs([d, export, search], "week49")
    assert [q.query_id for q in queries] == ["q1", "q2", "q4", "q6", "q7"]
    assert queries[0].user_query == "сатипаттхана" and queries[0].hit_ids == ("mn10", "dn22")
    assert queries[0].session_id == "s1" and queries[4].user_query == "Тевиджа"
    assert [(e.query_id, e.action, e.object_id, e.position) for e in events] == [
        ("q1", "click", "dn22", 2), ("q1", "fetch", "mn10", 1), ("q9", "click", "zz", 4),
        ("q6", "click_through", "dn1", 1)]
    body = report.as_dict()
    assert {k: (v["count"], v["examples"]) for k, v in body["skipped"].items()} == {
        "not JSON": (1, ["ubi_queries.jsonl.1:3"]),
        "a query id given twice": (1, ["ubi_queries.jsonl.1:4"]),
        "a hit without an id": (2, ["ubi_events.jsonl.gz:4", "ubi_queries.jsonl.1:5"]),  # events come first by name
        "a torn last line": (1, ["ubi_queries.jsonl:2"]),
        "unknown action": (1, ["ubi_events.jsonl.gz:3"]),
        "bad timestamp": (1, ["ubi_events.jsonl.gz:6"]),
        "neither a query nor an event": (1, ["ubi_events.jsonl.gz:7"]),
    }
    assert body["skipped_total"] == 8 and report.lines == 5 + 2 + 7 + 2 + 1  # per file, in reading order
    assert (report.queries, report.events, report.events_without_query) == (5, 4, 1)
    assert report.actions == {"click": 2, "fetch": 1, "click_through": 1} and report.clients == 1
    assert (report.first, report.last) == ("2026-12-01T10:00:00.000Z", "2026-12-01T10:00:05.000Z")


def test_the_command_writes_the_log_set_whole_and_reports_as_json(logs, tmp_path, monkeypatch):
    d, export, _search = logs
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    runner = CliRunner()
    got = runner.invoke(app, ["logs", "import", "week49", str(d), str(export), "--json"])
    assert got.exit_code == 0, got.output
    body = json.loads(got.stdout)
    assert (body["queries"], body["events"], body["skipped_total"]) == (4, 4, 8)
    queries, events = load_log_set(tmp_path / "home", "week49")
    assert list(queries["query_id"]) == ["q1", "q2", "q4", "q6"] and list(queries["hit_ids"][0]) == ["mn10", "dn22"]
    assert str(queries["time"].dtype) == "datetime64[ms, UTC]" and list(events["position"]) == [2, 1, 4, 1]
    # a failing import leaves the set as it was: nothing to import (every line bad)
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{nope\n[1, 2]\n")
    got = runner.invoke(app, ["logs", "import", "week49", str(bad)])
    assert got.exit_code == 2 and "nothing to import" in got.output and "not JSON" in got.output
    assert len(load_log_set(tmp_path / "home", "week49")[0]) == 4
    for args, needle in ((["week49", str(tmp_path / "missing.jsonl")], "no such file or folder"),
                         (["bad name!", str(d)], "log set name 'bad name!' is not valid")):
        got = runner.invoke(app, ["logs", "import", *args])
        assert got.exit_code == 2 and needle in got.output, got.output
    with pytest.raises(Exception, match="no log set 'other'.*week49"):
        load_log_set(tmp_path / "home", "other")


def test_a_truncated_gzip_names_the_file_and_the_fix(tmp_path):
    path = tmp_path / "ubi_events.jsonl.gz"
    data = gzip.compress(("\n".join(_e("q1", "click", f"d{i}", 1) for i in range(200)) + "\n").encode())
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(Exception, match="ubi_events.jsonl.gz: cannot be read.*truncated gzip"):
        read_logs([path], "x")
