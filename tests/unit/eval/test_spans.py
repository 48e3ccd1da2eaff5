"""Time-span documents (:mod:`workbench.eval.spans`): a hit within the window / tolerance of a judged span counts,
each judged span once, on both evaluation paths.

Every expected value below is worked out by hand in the comments (ranks from 1; nDCG gain = grade, discount
log2(rank + 1)). The last test builds a transcript-shaped ``files`` dataset from two bilara suttas (each sutta a
track, each segment a document timed by its characters) and checks the span metadata survives the build and
the tolerant measures are the hand-computed ones.
"""

from __future__ import annotations

import json
import math

import pytest

from workbench.errors import ConfigError
from workbench.eval.evaluate import evaluate
from workbench.eval.fasteval import CandidateMatrix
from workbench.eval.fusion import FusionSpec
from workbench.eval.spans import SPENT, Span, SpanMatching, Transcript, credit, rewrite_ranking, span_matching, transcript
from workbench.run import Hit, Run
from workbench.types import Qrel, Query

L2 = math.log2
#: Track A: five passages, a1..a4 back to back (a1 [0, 1000] … a4 [3000, 4000]), a5 after a gap; track B: two.
SPANS = {
    "a1": Span("A", 0, 1000), "a2": Span("A", 1000, 2000), "a3": Span("A", 2000, 3000), "a4": Span("A", 3000, 4000),
    "a5": Span("A", 6000, 7000), "b1": Span("B", 0, 1000), "b2": Span("B", 1000, 2000),
}
QRELS = [Qrel("q1", "a3", 2), Qrel("q1", "b2", 1), Qrel("q2", "a1", 1), Qrel("q3", "a5", 1)]
RUN = Run({
    "q1": [Hit("a2", 5), Hit("a4", 4), Hit("b1", 3), Hit("a3", 2), Hit("b2", 1)],
    "q2": [Hit("b1", 3), Hit("a2", 2), Hit("a1", 1)],
    "q3": [Hit("a4", 2), Hit("a5", 1)],
}, "r")
QUERIES = [Query(q, "text", "paraphrase", "en", "test") for q in ("q1", "q2", "q3")]
MEASURES = ["R@1", "R@3", "R@5", "RR@10", "nDCG@3", "nDCG@5", "Judged@5"]


def _per_query(spans: SpanMatching | None, run: Run = RUN, qrels=QRELS, queries=QUERIES) -> dict[str, dict[str, float]]:
    pq = evaluate(run, qrels, queries, MEASURES, spans=spans).per_query.set_index("query_id")
    return {q: {m: float(pq.loc[q, m]) for m in MEASURES} for q in pq.index}


def test_exact_matching_by_hand_and_zero_widths_change_nothing():
    """N = Δ = 0 is exact id matching (a2's span touches a3's at 2000 ms, which active matching would count):
    q1 finds a3 (2) at rank 4 and b2 (1) at 5; q2 a1 at 3; q3 a5 at 2."""
    exact = _per_query(None)
    assert exact == _per_query(SpanMatching(SPANS, 0, 0))
    idcg = 2 + 1 / L2(3)
    assert exact["q1"] == pytest.approx({"R@1": 0, "R@3": 0, "R@5": 1, "RR@10": 1 / 4, "nDCG@3": 0,
                                         "nDCG@5": (2 / L2(5) + 1 / L2(6)) / idcg, "Judged@5": 2 / 5})
    assert exact["q2"] == pytest.approx({"R@1": 0, "R@3": 1, "R@5": 1, "RR@10": 1 / 3, "nDCG@3": 1 / L2(4),
                                         "nDCG@5": 1 / L2(4), "Judged@5": 1 / 3})
    assert exact["q3"] == pytest.approx({"R@1": 0, "R@3": 1, "R@5": 1, "RR@10": 1 / 2, "nDCG@3": 1 / L2(3),
                                         "nDCG@5": 1 / L2(3), "Judged@5": 1 / 2})


def test_tolerance_credits_each_judged_span_once_and_never_across_parents():
    """Δ = 500, N = 0: judged a3 is [1500, 3500], b2 (track B) [500, 2500], a1 [-500, 1500], a5 [5500, 7500].

    q1: a2 [1000, 2000] meets a3 → credited a3 (2) at rank 1; a4 [3000, 4000] meets a3, spent → miss; b1 [0, 1000]
    meets b2 → credited b2 (1) at rank 3; a3 and b2 themselves, spent → misses. q2: b1 is on track B, never a1's;
    a2 meets a1 → rank 2; a1 itself spent. q3: a4 ends at 4000 < 5500 → miss; a5 at rank 2."""
    got = _per_query(SpanMatching(SPANS, 0, 500))
    idcg = 2 + 1 / L2(3)
    assert got["q1"] == pytest.approx({"R@1": 1 / 2, "R@3": 1, "R@5": 1, "RR@10": 1, "nDCG@3": (2 + 1 / L2(4)) / idcg,
                                       "nDCG@5": (2 + 1 / L2(4)) / idcg, "Judged@5": 2 / 5})
    assert got["q2"] == pytest.approx({"R@1": 0, "R@3": 1, "R@5": 1, "RR@10": 1 / 2, "nDCG@3": 1 / L2(3),
                                       "nDCG@5": 1 / L2(3), "Judged@5": 1 / 3})
    assert got["q3"] == pytest.approx({"R@1": 0, "R@3": 1, "R@5": 1, "RR@10": 1 / 2, "nDCG@3": 1 / L2(3),
                                       "nDCG@5": 1 / L2(3), "Judged@5": 1 / 2})
    # the rewritten ranking: ten hits around one moment are one relevant hit and misses
    grades = {"a3": 2, "b2": 1}
    assert rewrite_ranking(["a2", "a4", "b1", "a3", "b2"], grades, SpanMatching(SPANS, 0, 500)) == \
        ["a3", "a4", "b2", "a3" + SPENT, "b2" + SPENT]


def test_window_widens_the_hit_and_closed_intervals_touch():
    """N = 2000, Δ = 0: q3's a4 stands for [1000, 6000], which touches a5 [6000, 7000] → credited at rank 1
    (RR 1); with N = 1999 it misses (RR 1/2, a5 itself at rank 2). N and Δ add up: N = Δ = 1000 touches too."""
    assert _per_query(SpanMatching(SPANS, 2000, 0))["q3"]["RR@10"] == 1
    assert _per_query(SpanMatching(SPANS, 1999, 0))["q3"]["RR@10"] == 1 / 2
    assert _per_query(SpanMatching(SPANS, 1000, 1000))["q3"]["RR@10"] == 1


def test_credit_order_grade_then_the_hit_itself_then_start_then_id():
    m = SpanMatching(SPANS, 0, 100)  # a2 [1000, 2000] meets a1 [-100, 1100], a2, a3 [1900, 3100]
    assert rewrite_ranking(["a2"], {"a1": 1, "a2": 1, "a3": 2}, m) == ["a3"]  # the highest grade
    assert rewrite_ranking(["a2"], {"a1": 1, "a2": 1, "a3": 1}, m) == ["a2"]  # a tie: the hit itself
    assert rewrite_ranking(["a2"], {"a1": 1, "a3": 1}, m) == ["a1"]  # then the earlier start
    assert rewrite_ranking(["x", "a2"], {"x": 1, "a1": 0}, m) == ["x", "a1"]  # no span: its id; grade 0 is judged
    assert credit([("j1", "j2"), ("j1",), ("j1", "j2"), ()]) == ["j1", None, "j2", None]


def test_fast_path_equals_the_reference_path():
    """:class:`CandidateMatrix` (the tuner's in-memory evaluator) gives what :func:`evaluate` gives, per query, with
    and without the matching, on a fused run of two lanes and after a top_k cut."""
    other = Run({"q1": [Hit("b2", 3), Hit("a1", 2)], "q2": [Hit("a3", 1)], "q3": [Hit("a3", 2), Hit("b1", 1)]}, "o")
    for spans in (None, SpanMatching(SPANS, 0, 0), SpanMatching(SPANS, 0, 500), SpanMatching(SPANS, 1500, 300)):
        m = CandidateMatrix({"r": RUN, "o": other}, QRELS, ["q1", "q2", "q3"], spans=spans)
        for s in (FusionSpec(("r",), "none", top_k=10), FusionSpec(("r", "o"), "rrf", top_k=4)):
            fast = m.evaluate(s, MEASURES)
            ref = evaluate(m.run(s), QRELS, QUERIES, MEASURES, spans=spans).per_query
            for name in MEASURES:
                assert fast[name] == pytest.approx(ref[name].to_numpy(), abs=1e-12), (spans, s, name)


def test_the_window_stage_brings_the_neighbours_of_the_same_parent_in_time_order():
    t = Transcript(SPANS | {"a0": Span("A", 500, 5500)})  # a0 spans a1..a4 and the gap: it meets every window
    ids = lambda doc, n: [d for d, _s, _e in t.window(doc, n)]  # noqa: E731
    # a3 [2000, 3000], N = 0: a2 ends at 2000 and a4 starts at 3000 (closed intervals touch)
    assert ids("a3", 0) == ["a0", "a2", "a3", "a4"]
    assert ids("a5", 0) == ["a5"]  # a0 ends at 5500 < 6000
    assert ids("a5", 500) == ["a0", "a5"]  # [5500, 7500] meets a0's end
    assert ids("a2", 1001) == ["a1", "a0", "a2", "a3", "a4"]  # [-1, 3001]: a4 starts at 3000; a5 does not
    assert ids("b1", 10_000) == ["b1", "b2"]  # never across parents
    assert t.window("b2", 0) == [("b1", 0, 1000), ("b2", 1000, 2000)]
    assert t.window("nospan", 100) == []
    assert t.window_records("a5", 0) == [{"doc_id": "a5", "start_ms": 6000, "end_ms": 7000}]
    with pytest.raises(ValueError, match="window_ms must be an integer >= 0"):
        t.window("a1", -1)
    assert transcript([], 0) is None and transcript([], 500) is None  # no width, no spans: no stage


def test_bad_widths_and_when_matching_is_off():
    with pytest.raises(ValueError, match="window_ms must be an integer >= 0"):
        SpanMatching(SPANS, -1, 0)
    assert span_matching([], 0, 0) is None and span_matching([], 100, 0) is None  # no spans: exact ids


def test_window_ms_and_time_tolerance_ms_in_an_experiment(tmp_path):
    from workbench.experiment.config import load_experiment

    def load(top: str, cfg: str):
        p = tmp_path / "e.toml"
        p.write_text(f'datasets = ["kb"]\n{top}\n[lanes.ref]\nkind = "reference"\n[configs.c]\nlanes = ["ref"]\n{cfg}\n')
        return load_experiment(p, known_datasets={"kb"})

    exp = load("time_tolerance_ms = 2000", "window_ms = 15000")
    assert (exp.time_tolerance_ms, exp.configs["c"].window_ms, exp.configs["c"].flat()["window_ms"]) == (2000, 15000,
                                                                                                        15000)
    assert (load("", "").time_tolerance_ms, load("", "").configs["c"].window_ms) == (0, 0)
    with pytest.raises(ConfigError, match=r"configs\.c\.window_ms must be an integer >= 0"):
        load("", "window_ms = -5")
    with pytest.raises(ConfigError, match=r"time_tolerance_ms must be an integer >= 0"):
        load("time_tolerance_ms = 1.5", "")
    # an exported config keeps its window (what the study measured), and reads back with it
    from workbench.tuning.export import config_export, read_export

    exported = config_export(exp, exp.configs["c"], "kb")
    assert exported["window_ms"] == 15000 and "window_ms" not in config_export(load("", ""), load("", "").configs["c"],
                                                                                 "kb")
    exported["provenance"]["experiment"] = str(tmp_path / "e.toml")
    (tmp_path / "e.toml").write_text('datasets = ["gita"]\ntime_tolerance_ms = 2000\n[lanes.ref]\nkind = "reference"\n'
                                     '[configs.c]\nlanes = ["ref"]\n')
    exp2, cfg2 = read_export(exported, tmp_path / "c.json")
    assert cfg2.window_ms == 15000 and exp2.time_tolerance_ms == 2000


# ---------------------------------------------------------------- a transcript made of bilara segments

MS_PER_CHAR = 60


def test_transcript_dataset_from_bilara_segments(data_dir, tmp_path, monkeypatch):
    """Two suttas (SN 56.11, SN 56.16, English) as two tracks: each non-empty segment a document, timed by the
    characters before it (start = 60 ms × characters so far, end = start + 60 ms × its own length, so each
    segment's end is the next one's start). Built by the ``files`` source with ``span``; measured by hand:

    * q1 judges T1's segment 10 (grade 2); run: T2's segment 10 (the same times, another track), T1's 12, 9,
      10, 11. Exact: segment 10 at rank 4 (RR 1/4, nDCG@5 = 2/log2(5) / 2). Δ = 1 ms: 9 touches 10 → rank 3
      (RR 1/3, nDCG@5 = 1/log2(4) = 1/2); 10 itself and 11 are spent. N = 60 ms × len(11), Δ = 0: 12's window
      reaches back to 10's end → rank 2 (RR 1/2, nDCG@5 = 1/log2(3)).
    * q2 judges T2's segments 3 and 20 (grade 1 each); run: T2's 4, 2, 21 and T1's 20. Exact: nothing (0).
      Δ = 1 ms: 4 touches 3 → rank 1, 2 touches only 3 (spent) → miss, 21 touches 20 → rank 3, T1's 20 is another
      track: R@1 = 1/2, R@3 = 1, RR 1, nDCG@3 = (1 + 1/log2(4)) / (1 + 1/log2(3)).
    """
    from workbench.data import catalog
    from workbench.data.sources.files import SPAN_END, SPAN_PARENT, SPAN_START

    folder = data_dir / "suttacentral-bilara" / "translation" / "en" / "sujato" / "sutta" / "sn" / "sn56"
    tracks: dict[str, list[tuple[str, int, int]]] = {}
    with (tmp_path / "docs.jsonl").open("w", encoding="utf-8") as f:
        for track in ("sn56.11", "sn56.16"):
            segments = json.loads((folder / f"{track}_translation-en-sujato.json").read_text(encoding="utf-8"))
            t, rows = 0, []
            for seg, text in segments.items():
                if not text.strip():
                    continue
                start, t = t, t + MS_PER_CHAR * len(text)
                rows.append((seg, start, t))
                f.write(json.dumps({"id": seg, "track_id": track, "start_ms": start, "end_ms": t, "text": text,
                                    "address": f"{track} ¶{len(rows) - 1}"}) + "\n")
            tracks[track] = rows
    t1, t2 = tracks["sn56.11"], tracks["sn56.16"]
    (tmp_path / "queries.tsv").write_text("query_id\ttext\nq1\tthe middle way\nq2\tfour noble truths\n")
    (tmp_path / "qrels.txt").write_text(f"q1 0 {t1[10][0]} 2\nq2 0 {t2[3][0]} 1\nq2 0 {t2[20][0]} 1\n")
    (tmp_path / "datasets.toml").write_text(
        'seed = 7\n[dataset.talks]\nsource = "files"\ndocuments = "docs.jsonl"\nqueries = "queries.tsv"\n'
        'qrels = "qrels.txt"\nwork_field = "track_id"\naddress_field = "address"\n'
        'span = { parent = "track_id", start = "start_ms", end = "end_ms" }\n')
    defs = catalog.load_definitions(tmp_path / "datasets.toml")
    catalog.build("talks", defs, tmp_path, tmp_path / "home")
    ds = catalog.load("talks", defs, tmp_path, tmp_path / "home")

    got = {d.doc_id: d.metadata for d in ds.documents}
    assert len(got) == len(t1) + len(t2) > 40
    for track, rows in tracks.items():
        for seg, start, end in rows:
            assert (got[seg][SPAN_PARENT], got[seg][SPAN_START], got[seg][SPAN_END]) == (track, start, end)

    run = Run({"q1": [Hit(t2[10][0], 5), Hit(t1[12][0], 4), Hit(t1[9][0], 3), Hit(t1[10][0], 2), Hit(t1[11][0], 1)],
               "q2": [Hit(t2[4][0], 4), Hit(t2[2][0], 3), Hit(t2[21][0], 2), Hit(t1[20][0], 1)]}, "talk")
    reach = t1[12][1] - t1[10][2]  # = 60 ms × len(segment 11)

    def measured(window: int, tolerance: int) -> tuple[dict, dict]:
        spans = span_matching(ds.documents, window, tolerance)
        ref = _per_query(spans, run, ds.qrels, ds.queries)
        fast = CandidateMatrix({"talk": run}, ds.qrels, ["q1", "q2"], spans=spans).evaluate(
            FusionSpec(("talk",), "none", top_k=10), MEASURES)
        for i, q in enumerate(["q1", "q2"]):
            assert {m: fast[m][i] for m in MEASURES} == pytest.approx(ref[q])
        return ref["q1"], ref["q2"]

    q1, q2 = measured(0, 0)
    assert (q1["RR@10"], q1["nDCG@5"], q2["R@5"], q2["RR@10"]) == pytest.approx((1 / 4, 1 / L2(5), 0, 0))
    q1, q2 = measured(0, 1)
    assert (q1["RR@10"], q1["R@3"], q1["nDCG@5"]) == pytest.approx((1 / 3, 1, 1 / 2))
    assert (q2["R@1"], q2["R@3"], q2["RR@10"], q2["nDCG@3"]) == pytest.approx((1 / 2, 1, 1, 1.5 / (1 + 1 / L2(3))))
    q1, _ = measured(reach, 0)
    assert (q1["RR@10"], q1["nDCG@5"]) == pytest.approx((1 / 2, 1 / L2(3)))
    q1, _ = measured(reach - 1, 0)  # one millisecond short: segment 9 touches 10 (N > 0), rank 3
    assert q1["RR@10"] == pytest.approx(1 / 3)

    # the window stage as a reader gets it from serve: a config with window_ms = reach on a reference lane, asked
    # T1's segment 11 by its address; its window [start - reach, end + reach] holds every T1 segment that meets it
    # (closed intervals; 10 and 12 at least, since each is back to back with 11), in time order
    from workbench.live.serve import Searcher

    monkeypatch.setenv("WORKBENCH_DATASETS", str(tmp_path / "datasets.toml"))
    (tmp_path / "e.toml").write_text(f'datasets = ["talks"]\n[lanes.ref]\nkind = "reference"\n'
                                     f'[configs.win]\nlanes = ["ref"]\nwindow_ms = {reach}\n')
    hits = Searcher(tmp_path / "e.toml", "win", None, tmp_path / "home").search("sn56.11 ¶11", 3)["hits"]
    lo, hi = t1[11][1] - reach, t1[11][2] + reach
    expected = [{"doc_id": d, "start_ms": s, "end_ms": e} for d, s, e in t1 if s <= hi and e >= lo]
    assert [h["doc_id"] for h in hits][:1] == [t1[11][0]]
    assert hits[0]["window"] == expected
    ids = [w["doc_id"] for w in expected]  # a run of consecutive T1 segments around 11, 10 and 12 among them
    first = [d for d, _s, _e in t1].index(ids[0])
    assert ids == [d for d, _s, _e in t1[first:first + len(ids)]] and {t1[10][0], t1[12][0]} <= set(ids)
