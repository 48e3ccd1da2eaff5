"""Query sets from traffic (:mod:`workbench.traffic.sample`, ``logs sample``, a dataset's ``traffic_queries``):
normalised, deduplicated, typed, drawn, split, and built into a dataset unjudged."""

from __future__ import annotations

import csv
import json

import pytest
from typer.testing import CliRunner

from workbench.cli import app
from workbench.traffic.sample import allocate, distinct, draw, normalise, predict_type, rows


def test_types_keys_and_duplicates():
    assert [predict_type(t) for t in ("BG 2.47", "Бг 2.20", "M i 56", "satipaṭṭhāna", "Сатипаттхана",
                                      "what is the middle way", "the four noble truths")] == [
        "reference", "reference", "page_ref", "term", "term", "paraphrase", "paraphrase"]
    assert normalise("  Karma\u200b  YOGA ") == "karma yoga"
    got = distinct(["Karma yoga", "karma  yoga", "KARMA YOGA", "BG 2.47", "", "\u200b", "karma  yoga"],
                   ["a", "b", "a", "c", "d", "e", "c"])
    # karma yoga: 4 searches by 3 clients, shown as the form typed most often ("karma yoga", twice)
    assert [(q.key, q.text, q.frequency, q.clients, q.query_type, q.script) for q in got] == [
        ("karma yoga", "karma yoga", 4, 3, "term", "ASCII"), ("bg 2.47", "BG 2.47", 1, 1, "reference", "ASCII")]
    assert got[0].query_id == "t-" + __import__("hashlib").sha256(b"karma yoga").hexdigest()[:12]


@pytest.mark.parametrize("sizes, n, want", [
    ({"a": 50, "b": 30, "c": 15, "d": 5}, 10, {"a": 5, "b": 3, "c": 1, "d": 1}),  # quotas 5, 3, 1.5, 0.5
    ({"a": 50, "b": 30, "c": 15, "d": 5}, 3, {"a": 1, "b": 1, "c": 1, "d": 0}),  # one each, largest first
    ({"a": 1, "b": 1, "c": 1}, 2, {"a": 1, "b": 1, "c": 0}),
    ({"a": 2, "b": 8}, 20, {"a": 2, "b": 8}),  # all there is
])
def test_proportional_allocation_by_hand(sizes, n, want):
    assert allocate(sizes, n) == want


def test_draws_are_seeded_and_each_method_does_what_it_says():
    texts = ["BG 2.47"] * 3 + ["karma"] * 200 + [f"what is verse {i} about" for i in range(40)] + \
        [f"слово{i}" for i in range(10)]
    pop = distinct(texts, [str(i) for i in range(len(texts))])
    assert len(pop) == 52 and pop[0].text == "karma" and pop[0].frequency == 200
    for method in ("random", "pps", "stratified"):
        a, b = draw(pop, 8, method, 1), draw(pop, 8, method, 1)
        assert a == b and len(a) == 8 and len({q.key for q in a}) == 8
    # stratified: 40 paraphrase/ASCII, 10 term/Cyrillic, 1 term/ASCII, 1 reference/ASCII → allocation of 8
    strata = [q.stratum for q in draw(pop, 8, "stratified", 1)]
    want = allocate({"paraphrase/ASCII": 40, "term/Cyrillic": 10, "term/ASCII": 1, "reference/ASCII": 1}, 8)
    assert {s: strata.count(s) for s in want} == want == {"paraphrase/ASCII": 5, "term/Cyrillic": 1,
                                                           "term/ASCII": 1, "reference/ASCII": 1}
    # pps: "karma" (200 of 293 searches) is drawn with every seed tried; uniformly it would be 8 in 52
    assert all(any(q.text == "karma" for q in draw(pop, 8, "pps", s)) for s in range(20))
    with pytest.raises(ValueError, match="not one of random, pps, stratified"):
        draw(pop, 8, "systematic", 1)
    out = rows(draw(pop, 8, "stratified", 1), 7)
    assert {r["split"] for r in out} <= {"train", "dev", "test"} and all(r["group"] == r["query_id"] for r in out)


def test_a_sample_becomes_a_datasets_unjudged_queries(data_dir, tmp_path, monkeypatch):
    """Searches logged, imported, sampled into a TSV, and given to a small files dataset (SN 56.11's segments)
    as traffic_queries: the build appends them, unjudged, with their predicted types and hashed splits."""
    from workbench.data import catalog
    from workbench.errors import DataError
    from workbench.traffic.importer import read_logs, write_log_set
    from workbench.traffic.log import TrafficLog

    home = tmp_path / "home"
    log = TrafficLog(tmp_path / "ubi")
    for i, text in enumerate(["the middle way", "The middle  way", "SN 56.11", "dukkha", "четыре истины",
                              "what are the four noble truths"]):
        log.searched(f"id:{i % 3}", text, ["x"])
    log.close()
    write_log_set(home / "logs" / "wk", *read_logs([tmp_path / "ubi"], "wk"))
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    got = CliRunner().invoke(app, ["logs", "sample", "wk", "--size", "4", "--method", "stratified", "-o",
                                   str(tmp_path / "t" / "wk.tsv"), "--json"])
    assert got.exit_code == 0, got.output
    body = json.loads(got.stdout)
    assert (body["searches"], body["distinct"], body["drawn"]) == (6, 5, 4)
    with (tmp_path / "t" / "wk.tsv").open(encoding="utf-8") as f:
        drawn = list(csv.DictReader(f, delimiter="\t"))
    assert [r["query_type"] for r in drawn].count("reference") == 1  # the one reference, in its own stratum

    folder = data_dir / "suttacentral-bilara" / "translation" / "en" / "sujato" / "sutta" / "sn" / "sn56"
    segments = json.loads((folder / "sn56.11_translation-en-sujato.json").read_text(encoding="utf-8"))
    with (tmp_path / "docs.jsonl").open("w", encoding="utf-8") as f:
        for seg, text in list(segments.items())[:20]:
            if text.strip():
                f.write(json.dumps({"id": seg, "text": text}) + "\n")
    first = next(seg for seg, text in segments.items() if text.strip())
    (tmp_path / "queries.tsv").write_text("query_id\ttext\nq1\tthe middle way\n")
    (tmp_path / "qrels.txt").write_text(f"q1 0 {first} 1\n")
    (tmp_path / "datasets.toml").write_text(
        '[dataset.talk]\nsource = "files"\ndocuments = "docs.jsonl"\nqueries = "queries.tsv"\n'
        'qrels = "qrels.txt"\ntraffic_queries = "t/wk.tsv"\n')
    defs = catalog.load_definitions(tmp_path / "datasets.toml")
    catalog.build("talk", defs, tmp_path, home)
    ds = catalog.load("talk", defs, tmp_path, home)
    traffic = [q for q in ds.queries if q.query_id.startswith("t-")]
    assert sorted(q.query_id for q in traffic) == sorted(r["query_id"] for r in drawn)
    assert {q.query_id: q.query_type for q in traffic} == {r["query_id"]: r["query_type"] for r in drawn}
    assert not {q.query_id for q in ds.qrels} & {q.query_id for q in traffic}  # unjudged: for the scholars
    # a bad file stops the build naming the line; the previous build stays
    good = (tmp_path / "t" / "wk.tsv").read_text(encoding="utf-8")
    (tmp_path / "t" / "wk.tsv").write_text("query_id\ttext\nq1\tclashes with the dataset's own q1\n")
    with pytest.raises(DataError, match=r"wk.tsv:2: query id 'q1' is already a query of the dataset"):
        catalog.build("talk", defs, tmp_path, home, force=True)
    (tmp_path / "t" / "wk.tsv").write_text(good)  # the file as it was: the previous build is current again
    assert len(catalog.load("talk", defs, tmp_path, home).queries) == 1 + 4


def test_pps_draws_read_like_the_traffic_and_random_draws_do_not():
    """3,000 distinct queries: 1,000 of each type, searched 6, 3 and once each, so the traffic is 60 % references,
    30 % terms, 10 % paraphrases while the distinct queries are a third each. A pps draw of 300 matches the
    traffic's shares (chi-squared goodness of fit, p > 0.01); a uniform draw matches the distinct shares and
    fails the same test (p < 1e-6)."""
    from scipy.stats import chisquare

    from workbench.traffic.sample import TrafficQuery

    pop = [TrafficQuery(f"{t}{i}", f"{t}{i}", f, 1, t, "ASCII")
           for t, f in (("reference", 6), ("term", 3), ("paraphrase", 1)) for i in range(1000)]
    traffic = [0.6, 0.3, 0.1]

    def shares(method: str, seed: int) -> list[int]:
        got = [q.query_type for q in draw(pop, 300, method, seed)]
        return [got.count(t) for t in ("reference", "term", "paraphrase")]

    for seed in (1, 2, 3):
        assert chisquare(shares("pps", seed), [300 * s for s in traffic]).pvalue > 0.01
        assert chisquare(shares("random", seed), [300 * s for s in traffic]).pvalue < 1e-6
