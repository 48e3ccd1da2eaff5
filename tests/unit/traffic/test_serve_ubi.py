"""``workbench serve --ubi-log``: a real Searcher (a reference lane on a transcript-shaped dataset the test builds
from bilara's SN 56.11) behind the real HTTP app; searches, clicks and follow-up fetches land in the UBI log and
read back through ``workbench logs import``'s reader."""

from __future__ import annotations

import json

import pytest
from starlette.testclient import TestClient

from workbench.live.serve import Searcher, http_app, mcp_server
from workbench.traffic.importer import read_logs
from workbench.traffic.log import TrafficLog


@pytest.fixture(scope="module")
def searcher(data_dir, tmp_path_factory):
    """SN 56.11's first twelve segments with text, each a document addressed ``sn56.11 ¶i``, work ``sn56.11``;
    one config: the reference lane."""
    import os

    tmp = tmp_path_factory.mktemp("ubi-serve")
    folder = data_dir / "suttacentral-bilara" / "translation" / "en" / "sujato" / "sutta" / "sn" / "sn56"
    segments = json.loads((folder / "sn56.11_translation-en-sujato.json").read_text(encoding="utf-8"))
    rows = [(seg, text) for seg, text in segments.items() if text.strip()][:12]
    with (tmp / "docs.jsonl").open("w", encoding="utf-8") as f:
        for i, (seg, text) in enumerate(rows):
            f.write(json.dumps({"id": seg, "work": "sn56.11", "address": f"sn56.11 ¶{i}", "text": text}) + "\n")
    (tmp / "queries.tsv").write_text("query_id\ttext\nq1\tthe middle way\n")
    (tmp / "qrels.txt").write_text(f"q1 0 {rows[3][0]} 1\n")
    (tmp / "datasets.toml").write_text('[dataset.talk]\nsource = "files"\ndocuments = "docs.jsonl"\n'
                                       'queries = "queries.tsv"\nqrels = "qrels.txt"\nwork_field = "work"\n'
                                       'address_field = "address"\n')
    (tmp / "e.toml").write_text('datasets = ["talk"]\n[lanes.ref]\nkind = "reference"\n[configs.ref]\nlanes = ["ref"]\n')
    old = os.environ.get("WORKBENCH_DATASETS")
    os.environ["WORKBENCH_DATASETS"] = str(tmp / "datasets.toml")
    try:
        yield Searcher(tmp / "e.toml", "ref", None, tmp / "home"), [seg for seg, _t in rows]
    finally:
        if old is None:
            os.environ.pop("WORKBENCH_DATASETS", None)
        else:
            os.environ["WORKBENCH_DATASETS"] = old


def test_searches_clicks_and_fetches_are_logged_and_read_back(searcher, tmp_path):
    s, ids = searcher
    s.traffic = TrafficLog(tmp_path / "ubi", attributes={"config": "ref", "dataset": "talk"})
    try:
        with TestClient(http_app(s, mcp_server(s))) as c:
            who = {"X-Client-Id": "reader-7"}
            r = c.get("/search", params={"q": "sn56.11 ¶3", "k": 5}, headers=who).json()
            assert r["ok"] and [h["doc_id"] for h in r["result"]["hits"]] == [ids[3]]
            qid = r["result"]["query_id"]
            r2 = c.post("/search", json={"query": "SN 56.11", "k": 5}, headers=who).json()["result"]
            shown = [h["doc_id"] for h in r2["hits"]]
            assert len(shown) == 5 and ids[3] not in shown[:1]
            got = c.post("/fetch", json={"doc_id": shown[2]}, headers=who).json()
            assert got["ok"] and got["result"]["doc_id"] == shown[2] and got["result"]["texts"][0]["text"].strip()
            assert got["result"]["address"] == f"sn56.11 ¶{ids.index(shown[2])}"
            # shown by both searches (the second at rank 4): credited to the latest
            assert shown[3] == ids[3] and c.get("/fetch", params={"id": ids[3]}, headers=who).json()["ok"]
            clicked = c.post("/click", json={"query_id": r2["query_id"], "doc_id": shown[1]}).json()
            assert clicked == {"ok": True, "result": {"query_id": r2["query_id"], "doc_id": shown[1], "position": 2}}
            # refused, one line each, and nothing logged
            bad = c.post("/click", json={"query_id": "nope", "doc_id": shown[1]})
            assert bad.status_code == 404 and "no search 'nope'" in bad.json()["error"]["message"]
            bad = c.post("/click", json={"query_id": qid, "doc_id": shown[4]})
            assert bad.status_code == 400 and "did not show" in bad.json()["error"]["message"]
            bad = c.post("/click", json={"query_id": qid, "doc": ids[3]})
            assert bad.status_code == 400 and "unknown key(s) ['doc']" in bad.json()["error"]["message"]
            assert c.get("/fetch", params={"id": "sn99.99:1.1"}).status_code == 404
            assert c.post("/fetch", json={"doc_id": ids[0]}, headers={"X-Client-Id": "stranger"}).json()["ok"]
    finally:
        s.traffic.close()
    queries, events, report = read_logs([tmp_path / "ubi"], "t")
    assert [q.query_id for q in queries] == [qid, r2["query_id"]] and queries[1].hit_ids == tuple(shown)
    assert len({q.client_id for q in queries}) == 1 and queries[0].attributes["config"] == "ref"
    assert [(e.action, e.query_id, e.object_id, e.position) for e in events] == [
        ("fetch", r2["query_id"], shown[2], 3), ("fetch", r2["query_id"], ids[3], 4), ("click", r2["query_id"], shown[1], 2)]
    assert s.traffic.unattributed == 1 and report.as_dict()["skipped_total"] == 0  # the stranger's fetch


def test_without_a_log_clicks_are_refused_and_answers_carry_no_query_id(searcher):
    s, ids = searcher
    s.traffic = None
    with TestClient(http_app(s, mcp_server(s))) as c:
        r = c.get("/search", params={"q": "sn56.11 ¶3"}).json()
        assert r["ok"] and "query_id" not in r["result"]
        bad = c.post("/click", json={"query_id": "x", "doc_id": ids[3]})
        assert bad.status_code == 404 and "--ubi-log" in bad.json()["error"]["message"]


def test_serve_interleaves_two_configs_and_logs_the_teams(searcher, tmp_path):
    """Two configs of the same lane rank alike: team-draft then shows that ranking, each pair of places one from
    each team (the coin picks who goes first); the answer hides the teams, the log keeps them with both rankings."""
    s0, _ids = searcher
    exp = s0.served.experiment
    exp.write_text(exp.read_text() + '[configs.ref5]\nlanes = ["ref"]\ntop_k = 5\n')
    s = Searcher(exp, "ref", None, s0.engine.home, interleave="ref5")
    s.traffic = TrafficLog(tmp_path / "ubi")
    try:
        alone = s0.search("SN 56.11", 5)["hits"]
        got = s.answer("SN 56.11", 5, None, "id:r")
        assert "_interleave" not in got["result"]
        assert [h["doc_id"] for h in got["result"]["hits"]] == [h["doc_id"] for h in alone]
    finally:
        s.traffic.close()
    (q,), _events, _report = read_logs([tmp_path / "ubi"], "t")
    mix = q.attributes["interleave"]
    assert (mix["a"], mix["b"], mix["method"]) == ("ref", "ref5", "team-draft")
    assert mix["a_hits"] == mix["b_hits"] == [h["doc_id"] for h in alone]
    t = mix["teams"]  # a coin whenever both teams have picked as many, the other team next
    assert len(t) == 5 and {t[0], t[1]} == {t[2], t[3]} == {"A", "B"} and t[0] == ("A" if mix["a_first"] else "B")
    with pytest.raises(Exception, match="unknown config 'nope' to interleave with"):
        Searcher(exp, "ref", None, s0.engine.home, interleave="nope")
