"""Run files are ordered as trec_eval orders them (issue #28): score ties by doc_id descending.

The reference is pytrec_eval (trec_eval's own code), run on the same file.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from workbench.errors import DataError
from workbench.eval.evaluate import evaluate
from workbench.gate.decide import gate_pair
from workbench.gate.sources import load_source
from workbench.run import Hit, Run, count_float32_ties, count_ties, read_trec_run, reorder_ties
from workbench.types import Qrel, Query

pytrec_eval = pytest.importorskip("pytrec_eval")

# q1: a and b tie at 1.0; only a is relevant. trec_eval ranks b first (docno descending): P@1 = 0.
# q2: no tie; x relevant at rank 1: P@1 = 1.
RUN = "q1 Q0 a 1 1.0 t\nq1 Q0 b 2 1.0 t\nq1 Q0 c 3 0.5 t\nq2 Q0 x 1 2.0 t\nq2 Q0 y 2 1.0 t\n"
QRELS = [Qrel("q1", "a", 1), Qrel("q2", "x", 1)]


def _dataset():
    queries = [Query("q1", "one", "paraphrase", "en", "test", "g1"),
               Query("q2", "two", "paraphrase", "en", "test", "g2")]
    docs = [SimpleNamespace(doc_id=d) for d in "abcxy"]
    return SimpleNamespace(name="toy", queries=queries, qrels=QRELS, documents=docs)


def _pytrec(path, measure):
    run: dict[str, dict[str, float]] = {}
    for line in path.read_text().splitlines():
        q, _, d, _, s, _ = line.split()
        run.setdefault(q, {})[d] = float(s)
    qrels = {}
    for r in QRELS:
        qrels.setdefault(r.query_id, {})[r.doc_id] = r.relevance
    res = pytrec_eval.RelevanceEvaluator(qrels, {measure}).evaluate(run)
    return {q: v[measure] for q, v in res.items()}


def test_a_run_file_is_ordered_as_trec_eval_orders_it(tmp_path):
    p = tmp_path / "r.trec"
    p.write_text(RUN)
    run = read_trec_run(p)
    assert [h.doc_id for h in run["q1"]] == ["b", "a", "c"]  # equal scores: larger doc_id first
    ref = _pytrec(p, "P_1")
    assert ref == {"q1": 0.0, "q2": 1.0}  # trec_eval's figures
    ev = evaluate(run, QRELS, _dataset().queries, ["P@1", "RR@10"])
    assert dict(zip(ev.per_query.query_id, ev.per_query["P@1"])) == ref  # before the fix: q1 = 1.0
    rr = _pytrec(p, "recip_rank")
    assert dict(zip(ev.per_query.query_id, ev.per_query["RR@10"])) == pytest.approx(rr)
    assert rr["q1"] == 0.5


def test_keep_file_order_still_keeps_the_written_order(tmp_path):
    p = tmp_path / "r.trec"
    p.write_text(RUN)
    assert [h.doc_id for h in read_trec_run(p, keep_file_order=True)["q1"]] == ["a", "b", "c"]


def test_count_ties_and_reorder_ties():
    run = Run({"q1": [Hit("a", 1.0), Hit("b", 1.0), Hit("c", 0.5), Hit("d", 0.5), Hit("e", 0.5)],
               "q2": [Hit("x", 2.0), Hit("y", 1.0)],
               "q3": [Hit("m", 3.0), Hit("n", 3.0)]})
    t = count_ties(run, [1, 2, 3, 5])
    assert (t.queries, t.hits) == (2, 7)
    # q1 ranks a b | c d e: @1 a=b tie (q1), @3 c=d (q1), @1 m=n (q3); @2 b(1.0) vs c(0.5) no; @5 is the end
    assert t.straddling == {1: 2, 2: 0, 3: 1, 5: 0}
    assert [h.doc_id for h in reorder_ties(run, "trec_eval")["q1"]] == ["b", "a", "e", "d", "c"]
    assert [h.doc_id for h in reorder_ties(run, "doc_id")["q1"]] == ["a", "b", "c", "d", "e"]
    with pytest.raises(ValueError, match="tie order"):
        reorder_ties(run, "random")
    with pytest.raises(ValueError, match="cutoffs"):
        count_ties(run, [0])


def test_the_gate_warns_when_ties_decide_a_measure_of_a_run_file(tmp_path):
    ds = _dataset()
    p = tmp_path / "cand.trec"
    p.write_text(RUN)
    base = tmp_path / "base.trec"
    base.write_text("q1 Q0 a 1 2.0 t\nq1 Q0 b 2 1.0 t\nq2 Q0 x 1 2.0 t\n")
    cand, basel = load_source(str(p), ds, home=tmp_path), load_source(str(base), ds, home=tmp_path)
    res = gate_pair(cand, basel, ds, measures=["P@1", "R@10"], splits=("test",))
    tie = [w for w in res.warnings if "score ties decide" in w]
    assert len(tie) == 1, res.warnings
    assert "cand.trec" in tie[0] and "P@1 0.5000 (trec_eval order) vs 1.0000 (doc_id ascending)" in tie[0]
    assert "R@10" not in tie[0] and "@1: 1" in tie[0]
    assert not any("base.trec" in w for w in res.warnings)  # no ties: no warning


# q1: a and b differ only below float32 resolution (a is higher in float64); only a is relevant. trec_eval 9
# stores scores as C floats: a tie, docno descending, b first: P@1 = 0 (issue #41: the gate said 1.0, no warning).
F32_RUN = "q1 Q0 a 1 0.9222621453752586 t\nq1 Q0 b 2 0.92226214537525 t\nq1 Q0 c 3 0.5 t\nq2 Q0 x 1 2.0 t\n"


def test_scores_equal_in_float32_are_a_tie_as_trec_eval_9_reads_them(tmp_path):
    p = tmp_path / "cand.trec"
    p.write_text(F32_RUN)
    run = read_trec_run(p)
    assert [h.doc_id for h in run["q1"]] == ["b", "a", "c"]  # before the fix: a, b, c
    assert run["q1"][0].score == run["q1"][1].score == 0.9222621321678162  # the float32 value, as trec_eval holds it
    ref = _pytrec(p, "P_1")
    assert ref == {"q1": 0.0, "q2": 1.0}
    ev = evaluate(run, QRELS, _dataset().queries, ["P@1"])
    assert dict(zip(ev.per_query.query_id, ev.per_query["P@1"])) == ref
    kept = read_trec_run(p, keep_file_order=True)
    assert kept["q1"][0].score == 0.9222621453752586  # as written
    assert count_float32_ties(kept) == 2 and count_float32_ties(read_trec_run(p)) == 0

    base = tmp_path / "base.trec"
    base.write_text("q1 Q0 a 1 2.0 t\nq2 Q0 x 1 2.0 t\n")
    ds = _dataset()
    res = gate_pair(load_source(str(p), ds, home=tmp_path), load_source(str(base), ds, home=tmp_path), ds,
                    measures=["P@1"], splits=("test",))
    tie = [w for w in res.warnings if "score ties decide" in w]
    assert len(tie) == 1, res.warnings
    assert "P@1 0.5000 (trec_eval order) vs 1.0000 (doc_id ascending)" in tie[0]
    assert "2 tied hits, 2 of them written with different digits but equal as 32-bit floats" in tie[0]
    assert "trec_eval 9" in tie[0]


def test_a_score_beyond_float32_range_is_named(tmp_path):
    p = tmp_path / "big.trec"
    p.write_text("q1 Q0 a 1 1e39 t\nq1 Q0 b 2 2e39 t\n")
    with pytest.raises(DataError, match=r"big.trec:1: score '1e39' is beyond a 32-bit float's range"):
        read_trec_run(p)
    kept = {h.doc_id: h.score for h in read_trec_run(p, keep_file_order=True)["q1"]}
    assert kept["a"] == 1e39  # the candidate cache's own files keep float64


def test_a_run_file_with_a_byte_order_mark_reads_as_without_and_utf16_is_named(tmp_path):
    """Issue #41: a BOM glued to the first query id made the gate call it "a run of another dataset?"."""
    p = tmp_path / "bom.trec"
    p.write_bytes(b"\xef\xbb\xbf" + RUN.encode())
    plain = tmp_path / "r.trec"
    plain.write_text(RUN)
    assert read_trec_run(p).to_dict() == read_trec_run(plain).to_dict() and set(read_trec_run(p)) == {"q1", "q2"}
    (tmp_path / "u16.trec").write_bytes(RUN.encode("utf-16"))
    from workbench.errors import DataError

    with pytest.raises(DataError, match="is UTF-16 .*save it as UTF-8"):
        read_trec_run(tmp_path / "u16.trec")


def test_a_device_or_a_fifo_is_refused_before_it_is_read(tmp_path):
    """Issue #41: ``gate --candidate /dev/zero`` read until MemoryError, a FIFO hung forever."""
    import os

    from workbench.errors import ConfigError, DataError
    from workbench.gate.sources import check_source

    fifo = tmp_path / "run.fifo"
    os.mkfifo(fifo)
    for path in ("/dev/zero", str(fifo)):
        with pytest.raises(DataError, match="is not a regular file"):
            read_trec_run(Path(path))
        with pytest.raises(ConfigError, match="is not a regular file"):
            check_source(path)
