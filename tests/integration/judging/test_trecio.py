"""Export to TREC qrels with provenance, import from TREC qrels and CSV, and bad import files: on the built gita
dataset and a real PostgreSQL store, through the ``workbench judge`` commands."""

from __future__ import annotations

import hashlib
import json

import psycopg
import pytest
from typer.testing import CliRunner

from workbench.cli import app
from workbench.data.catalog import dataset_dir
from workbench.judging import layers
from workbench.judging.store import SCHEMA_VERSION, JudgmentStore, PoolPair, document_hash


@pytest.fixture(scope="module")
def gita(data_dir, pg_dsn, home_with):
    """A home with gita built (only gita: the judgments need its ids and texts), and the test server's DSN."""
    from workbench.data import catalog

    home = home_with("judge-home", "gita")
    defs = catalog.load_definitions()
    mp = pytest.MonkeyPatch()
    mp.setenv("WORKBENCH_HOME", str(home))
    mp.setenv("WORKBENCH_PG_DSN", pg_dsn)
    yield catalog.load("gita", defs, data_dir, home)
    mp.undo()


@pytest.fixture
def store(gita, judge_store):
    return judge_store


def judge(*args):
    return CliRunner().invoke(app, ["judge", *args])


def _count(pg_dsn) -> int:
    with psycopg.connect(pg_dsn) as conn:
        return conn.execute("SELECT count(*) FROM wb_judge.judgments").fetchone()[0]


def test_bad_cases_are_all_listed():
    assert len(BAD) == len(set(BAD)) == 18


def _ids(gita):
    """Five documents of one query (the first with a built label: a built pair to override) and the hashes."""
    built = gita.qrels[0]
    docs = [built.doc_id] + [d.doc_id for d in gita.documents if d.doc_id != built.doc_id][:4]
    return built.query_id, docs


def _judged(st: JudgmentStore, gita):
    """Hand-made judgments on query q and documents d0..d4 of gita:

    d0 (a built label): ann 0, bob 0           -> agreed 0 (a built label marked not relevant)
    d1: ann 2, bob 2                             -> agreed 2
    d2: ann 1, bob 2                             -> mean 1
    d3: ann 0, bob 2, adjudicated 2 by ada       -> adjudicated 2
    d4: ann 1 on an older text, bob cannot judge -> stale: left out, no human grade
    """
    q, d = _ids(gita)
    docs = {x.doc_id: x for x in gita.documents}
    grades = {d[0]: (0, 0), d[1]: (2, 2), d[2]: (1, 2), d[3]: (0, 2), d[4]: (1, None)}
    st.create_pool("gita", [PoolPair(q, x) for x in d], raters_per_pair=2)
    ann, _ = st.add_rater("ann")
    bob, _ = st.add_rater("bob")
    ada, _ = st.add_rater("ada", "adjudicator")
    for who, col in ((ann, 0), (bob, 1)):
        while (a := st.next_assignment(who, "gita")) is not None:
            g = grades[a.doc_id][col]
            h = "0" * 64 if (a.doc_id == d[4] and who is ann) else document_hash(docs[a.doc_id])
            st.judge(who, a.assignment_id, g, cannot_judge=g is None, doc_hash=h, note=f"{who.name}:{a.doc_id}")
    st.adjudicate(ada, "gita", q, d[3], 2, doc_hash=document_hash(docs[d[3]]))
    return q, d


def test_export_writes_the_human_layer_and_its_provenance(store, gita, tmp_path, pg_dsn):
    q, d = _judged(store, gita)
    out = tmp_path / "qrels.txt"
    res = judge("export", "-d", "gita", "-o", str(out))
    assert res.exit_code == 0, res.output
    expected = sorted([f"{q} 0 {d[0]} 0", f"{q} 0 {d[1]} 2", f"{q} 0 {d[2]} 1", f"{q} 0 {d[3]} 2"])
    assert out.read_text().splitlines() == expected
    prov = json.loads((tmp_path / "qrels.txt.provenance.json").read_text())
    digest = hashlib.sha256(out.read_bytes()).hexdigest()
    assert prov["qrels_sha256"] == prov["file_sha256"] == digest
    assert digest == layers.load_layer("human", gita, store=store).sha256  # what eval logs for the same layer
    manifest = dataset_dir("gita") / "manifest.json"
    assert prov["dataset_manifest_sha256"] == hashlib.sha256(manifest.read_bytes()).hexdigest()
    assert prov["store"] == {"schema_version": SCHEMA_VERSION} and prov["layer"] == "human" and prov["lines"] == 4
    assert prov["counts"] == {"pairs": 4, "by_basis": {"adjudicated": 1, "agreed": 2, "mean": 1},
                              "by_grade": {"0": 1, "1": 1, "2": 2},
                              "by_basis_grade": {"adjudicated": {"2": 1}, "agreed": {"0": 1, "2": 1}, "mean": {"1": 1}}}
    assert prov["raters"] == {"ann": {"0": 2, "1": 2, "2": 1, "cannot_judge": 0},
                              "bob": {"0": 1, "1": 0, "2": 3, "cannot_judge": 1}}
    assert prov["stale"] == {"judgments": 1, "adjudications": 0,
                             "left_out": [{"query_id": q, "doc_id": d[4], "rater": "ann"}]}
    # the default sends every disagreement: d2 (1 vs 2) waits; d4 has a slot open for ada (bob could not judge)
    assert prov["adjudications"] == 1 and prov["adjudicate_at"] == 1 and prov["awaiting_adjudication"] == 1
    # agreement over d0..d3 (d4: ann's grade stale, bob's cannot judge): ann (0,2,1,0) vs bob (0,2,2,2)
    assert prov["agreement"]["pairable_units"] == 4 and prov["agreement"]["units"] == 4
    assert [(p["a"], p["b"]) for p in prov["agreement"]["pairs"]] == [("ann", "bob")]
    assert prov["agreement"]["exact_agreement"] == 0.5
    assert "stale judgment(s) left out" in res.stderr
    assert _count(pg_dsn) == 10  # export writes nothing to the store (5 pairs x 2 raters)


def test_export_merged_overrides_built_labels(store, gita, tmp_path):
    q, d = _judged(store, gita)
    out = tmp_path / "merged.txt"
    res = judge("export", "-d", "gita", "-o", str(out), "--layer", "merged")
    assert res.exit_code == 0, res.output
    built = {(r.query_id, r.doc_id): r.relevance for r in gita.qrels}
    want = dict(built)
    want.update({(q, d[0]): 0, (q, d[1]): 2, (q, d[2]): 1, (q, d[3]): 2})
    lines = out.read_text().splitlines()
    assert lines == sorted(f"{a} 0 {b} {g}" for (a, b), g in want.items())
    assert f"{q} 0 {d[0]} 0" in lines and built[(q, d[0])] >= 1  # a built label a human found not relevant
    prov = json.loads((tmp_path / "merged.txt.provenance.json").read_text())
    added = sum(1 for x in d[:4] if (q, x) not in built)
    assert prov["merged"] == {"built_pairs": len(built), "human_pairs": 4,
                              "overridden": sum(1 for x, g in zip(d[:4], (0, 2, 1, 2))
                                                if (q, x) in built and built[(q, x)] != g),
                              "added": added, "built_marked_not_relevant": 1}
    assert prov["counts"]["by_basis"]["built"] == len(built) - (4 - added)
    assert prov["qrels_sha256"] == layers.load_layer("merged", gita, store=store).sha256


def test_import_round_trips_export(store, gita, tmp_path, pg_dsn):
    q, d = _judged(store, gita)
    first = tmp_path / "first.txt"
    assert judge("export", "-d", "gita", "-o", str(first)).exit_code == 0
    csv_first = tmp_path / "first.csv"
    assert judge("export", "-d", "gita", "-o", str(csv_first), "--format", "csv").exit_code == 0
    assert csv_first.read_text().splitlines()[0] == "query_id,doc_id,relevance,rater"
    before = {(r["query_id"], r["doc_id"], r["rater"], r["grade"]) for r in store.current("gita")
              if r["grade"] is not None and r["doc_id"] != d[4]}
    # TREC: into an empty store as one rater, exported again: the same qrels
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA wb_judge CASCADE")
    res = judge("import", str(first), "-d", "gita", "--rater", "carol")
    assert res.exit_code == 0, res.output
    assert "imported 4 judgments (trec) into gita: carol 4" in res.stdout
    second = tmp_path / "second.txt"
    assert judge("export", "-d", "gita", "-o", str(second)).exit_code == 0
    assert second.read_bytes() == first.read_bytes()
    # CSV: every rater's own grades come back under their names, and export the same CSV again
    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA wb_judge CASCADE")
    st = JudgmentStore(pg_dsn)
    res = judge("import", str(csv_first), "-d", "gita")
    assert res.exit_code == 0, res.output
    assert {(r["query_id"], r["doc_id"], r["rater"], r["grade"]) for r in st.current("gita")} == before
    assert all(r["doc_sha256"] is not None and r["source"] == "import:first.csv" for r in st.current("gita"))
    csv_second = tmp_path / "second.csv"
    assert judge("export", "-d", "gita", "-o", str(csv_second), "--format", "csv").exit_code == 0
    assert csv_second.read_bytes() == csv_first.read_bytes()
    # imported raters exist without a usable token
    assert {r.name for r in st.raters()} == set()
    st.close()


def test_a_bom_and_crlf_are_read_like_a_plain_file(store, gita, tmp_path):
    q, d = _ids(gita)
    body = f"query_id,doc_id,relevance,rater\r\n{q},{d[1]},2,ann\r\n\r\n{q},{d[2]},0,bob\r\n"
    f = tmp_path / "excel.csv"
    f.write_bytes(b"\xef\xbb\xbf" + body.encode())
    res = judge("import", str(f), "-d", "gita")
    assert res.exit_code == 0, res.output
    assert sorted((r["doc_id"], r["rater"], r["grade"]) for r in store.current("gita")) == sorted(
        [(d[1], "ann", 2), (d[2], "bob", 0)])


def _bad_cases(q, d):
    header = "query_id,doc_id,relevance,rater\n"
    good = f"{q},{d[1]},1,ann\n"
    return [
        # (name, file bytes, --rater, line, message part)
        ("wrong header", b"qid,doc,rel,who\n" + good.encode(), None, 1, "the CSV header must be"),
        ("wrong columns", (header + good + f"{q},{d[2]},1\n").encode(), None, 3, "expected 4 comma-separated columns"),
        ("trec columns", f"{q} 0 {d[1]} 1\n{q} {d[2]} 1\n".encode(), "ann", 2, "4 whitespace-separated columns"),
        ("unknown query", (header + good + f"no-such-query,{d[2]},1,ann\n").encode(), None, 3,
         "unknown query id 'no-such-query'"),
        ("unknown document", f"{q} 0 {d[1]} 1\n\n{q} 0 bg99.99 2\n".encode(), "ann", 3, "unknown document id 'bg99.99'"),
        ("grade 3", f"{q} 0 {d[1]} 3\n".encode(), "ann", 1, "relevance '3' is not a grade"),
        ("grade -1", (header + good + f"{q},{d[2]},-1,bob\n").encode(), None, 3, "relevance '-1' is not a grade"),
        ("grade 1.0", (header + f"{q},{d[2]},1.0,bob\n").encode(), None, 2, "relevance '1.0' is not a grade"),
        ("trec without rater", f"{q} 0 {d[1]} 1\n".encode(), None, 1,
         "TREC qrels name no rater; say who judged them with --rater"),
        ("csv with rater", (header + good).encode(), "ann", 1, "drop --rater"),
        ("empty", b"", None, 1, "the file is empty"),
        ("blank", b"\n  \n", None, 1, "the file is empty"),
        ("header only", header.encode(), None, 1, "only a header, no judgments"),
        ("bom crlf bad line", b"\xef\xbb\xbf" + (header + good + f"{q},{d[2]},7,ann\n").replace("\n", "\r\n").encode(),
         None, 3, "relevance '7' is not a grade"),
        ("utf-16", (header + good).encode("utf-16"), None, 1, "the file is UTF-16"),
        ("latin-1", (header + good + f"{q},{d[2]},1,ann\n# café\n").encode("latin-1"), None, 4, "not UTF-8"),
        ("bad rater name", (header + f"{q},{d[2]},1,ann smith\n").encode(), None, 2, "rater name 'ann smith'"),
        ("twice", (header + good + f"{q},{d[2]},1,ann\n" + good).encode(), None, 4, "repeats line 2"),
    ]


BAD = [c[0] for c in _bad_cases("q", ["d"] * 5)]


@pytest.mark.parametrize("name", BAD)
def test_a_bad_import_file_is_refused_with_its_line_and_writes_nothing(store, gita, tmp_path, pg_dsn, name):
    q, d = _ids(gita)
    case = BAD.index(name)
    _name, body, rater, line, part = _bad_cases(q, d)[case]
    ann, _ = store.add_rater("ann")
    store.import_judgments("gita", [(q, d[0], 1, "ann")], source="test")  # something already in the store
    before = _count(pg_dsn)
    f = tmp_path / f"bad-{case}.txt"
    f.write_bytes(body)
    res = judge("import", str(f), "-d", "gita", *(["--rater", rater] if rater else []))
    assert res.exit_code == 2, (name, res.output)
    errors = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(errors) == 1 and errors[0].startswith("error: "), (name, res.stderr)
    assert f"{f}:{line}: " in errors[0] and part in errors[0], (name, errors[0])
    assert errors[0].endswith("nothing was imported")
    assert _count(pg_dsn) == before  # nothing written
    assert {r.name for r in store.raters()} == {"ann"}


def test_several_bad_lines_report_the_first_and_count_the_rest(store, gita, tmp_path, pg_dsn):
    q, d = _ids(gita)
    f = tmp_path / "many.txt"
    f.write_text(f"{q} 0 {d[1]} 1\n{q} 0 nope 1\n{q} 0 {d[2]} 5\n{q} 0 {d[3]} 1\nx 0 {d[3]} 1\n")
    res = judge("import", str(f), "-d", "gita", "--rater", "ann")
    assert res.exit_code == 2
    # form errors come first (line 3), then the unknown ids would be checked
    assert f"{f}:3: relevance '5'" in res.stderr and "nothing was imported" in res.stderr
    f.write_text(f"{q} 0 {d[1]} 1\n{q} 0 nope 1\nx 0 {d[3]} 1\n")
    res = judge("import", str(f), "-d", "gita", "--rater", "ann")
    assert f"{f}:2: unknown document id 'nope'" in res.stderr and "(1 more bad line after it)" in res.stderr
    assert _count(pg_dsn) == 0


def test_settings_and_agreement_commands(store, gita, tmp_path):
    q, d = _judged(store, gita)
    res = judge("settings", "-d", "gita")
    assert res.exit_code == 0 and "differ by 1 or more" in res.stdout and "1 vs 2" in res.stdout
    res = judge("settings", "-d", "gita", "--adjudicate-at", "2")
    assert res.exit_code == 0 and "differ by 2 or more" in res.stdout and "and 0 vs 1, always" in res.stdout
    res = judge("settings", "-d", "gita", "--adjudicate-at", "1")
    assert res.exit_code == 0 and "differ by 1 or more" in res.stdout and store.adjudicate_at("gita") == 1
    res = judge("settings", "-d", "gita", "--adjudicate-at", "3")
    assert res.exit_code == 2 and "1 or 2" in res.stderr
    res = judge("settings", "-d", "nope")
    assert res.exit_code == 2 and "unknown dataset 'nope'" in res.stderr
    res = judge("agreement", "-d", "gita", "--json", "--resamples", "200")
    assert res.exit_code == 0, res.output
    rep = json.loads(res.stdout)
    assert rep["pairable_units"] == 4 and rep["stale"] == 1 and rep["cannot_judge"] == 1
    assert rep["awaiting_adjudication"] == 1  # d2 (1 vs 2) at --adjudicate-at 1; d3 is adjudicated
    # the pool's quality (issue #41): d0 0, d1 2, d2 1, d3 2 (adjudicated); d4 has no fresh grade
    assert rep["pool_quality"] == {"graded": 4, "zeros": 1, "share_zero": 0.25}
    assert set(rep["by_type"]) == {next(x.query_type for x in gita.queries if x.query_id == q)}
    res = judge("agreement", "-d", "gita", "--resamples", "200")
    assert res.exit_code == 0, res.output
    assert "4 with ≥2 grades" in res.stdout and "ann / bob" in res.stdout and "1 pair(s) await adjudication" in res.stdout
    assert "pool quality: 1 of 4 graded pooled pairs were 0 (25 %)" in res.stdout


def test_the_store_readers_take_the_built_dataset_for_types_and_stale_texts(store, gita):
    from workbench.judging import agreement as ag

    q, d = _judged(store, gita)
    ada = store.rater("ada")
    store.set_adjudicate_at("gita", 1)
    # cy grades d4 on the current text: against ann's stale 1, a difference of 1 only when the stale grade counts
    store.import_judgments("gita", [(q, d[4], 2, "cy")], source="test", doc_hashes=ag.doc_hashes_of(gita, [d[4]]))
    assert [x["doc_id"] for x in ag.adjudication_queue(store, "gita", ada)] == sorted([d[2], d[4]])
    assert [x["doc_id"] for x in ag.adjudication_queue(store, "gita", ada, ds=gita)] == [d[2]]
    rep = ag.store_agreement(store, "gita", ds=gita, resamples=100)
    qtype = next(x.query_type for x in gita.queries if x.query_id == q)
    assert rep["stale"] == 1 and rep["pairable_units"] == 4 and list(rep["by_type"]) == [qtype]
    assert ag.store_agreement(store, "gita", resamples=100)["pairable_units"] == 5  # without the dataset: none stale


def test_an_export_with_no_judgments_says_so(store, gita, tmp_path):
    out = tmp_path / "qrels.txt"
    res = judge("export", "-d", "gita", "-o", str(out), "--json")
    assert res.exit_code == 0, res.output
    body = json.loads(res.stdout)
    assert body["lines"] == 0 and body["file"] == str(out) and out.read_text() == ""
    assert "no human judgments of gita to export yet" in res.stderr
