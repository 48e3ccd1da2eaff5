"""Query-set builders on the real corpora: judgments checked against facts and by hand."""

from __future__ import annotations

from collections import Counter, defaultdict

import pytest

from workbench.data import catalog
from workbench.data.querysets.builders import Candidate, finalize, project_to_passages
from workbench.data.querysets.split import assign_split, check_ratios, unit_interval
from workbench.io.formats import read_qrels, read_queries
from workbench.text import refs
from workbench.types import Document, Qrel, Text

# ------------------------------------------------------------ splits (no data)

def test_split_is_a_pure_function_of_seed_and_group():
    assert assign_split("mn10", 7) == assign_split("mn10", 7)
    splits = {assign_split(f"g{i}", 7) for i in range(200)}
    assert splits == {"train", "dev", "test"}


def test_split_ratios_hold_roughly_and_extremes_exactly():
    got = [assign_split(f"g{i}", 1) for i in range(10000)]
    assert abs(got.count("train") / 10000 - 0.6) < 0.02
    assert {assign_split(f"g{i}", 1, (1.0, 0.0, 0.0)) for i in range(100)} == {"train"}
    assert {assign_split(f"g{i}", 1, (0.0, 0.0, 1.0)) for i in range(100)} == {"test"}


@pytest.mark.parametrize("ratios", [(0.5, 0.5, 0.5), (-0.1, 0.6, 0.5), (0.5, 0.5)])
def test_bad_ratios_raise(ratios):
    with pytest.raises(ValueError):
        check_ratios(ratios)


def test_empty_group_raises():
    with pytest.raises(ValueError, match="group"):
        assign_split("", 1)


def test_unit_interval_is_sha256_based():
    # sha256(b"0:a") starts with 0x...; the value is stable across runs and platforms
    import hashlib
    expected = int.from_bytes(hashlib.sha256(b"0:a").digest()[:8], "big") / 2**64
    assert unit_interval(0, "a") == expected


# ------------------------------------------------------------ finalize (no data)

def _cand(text, group, rel, qtype="term", order=(0,)):
    return Candidate(text, qtype, "pi", group, rel, order)


def test_finalize_merges_duplicates_keeping_the_highest_grade():
    qs = finalize([_cand("dhamma", "a", {"d1": 1}), _cand("dhamma ", "b", {"d1": 2, "d2": 1})], "x", 1)
    assert [q.text for q in qs.queries] == ["dhamma"]
    assert qs.queries[0].group == "a"
    assert sorted((r.doc_id, r.relevance) for r in qs.qrels) == [("d1", 2), ("d2", 1)]


def test_finalize_caps_per_type_keeping_groups_whole():
    cands = [_cand(f"q{g}-{k}", f"g{g}", {"d": 1}, order=(g, k)) for g in range(50) for k in range(3)]
    qs = finalize(cands, "x", 3, max_per_type=30)
    assert len(qs.queries) == 30
    per_group = defaultdict(int)
    for q in qs.queries:
        per_group[q.group] += 1
    assert set(per_group.values()) == {3}
    assert [q.query_id for q in qs.queries][:2] == ["x-term-00001", "x-term-00002"]


def test_finalize_rejects_unjudged_and_unknown_types():
    with pytest.raises(ValueError, match="no relevant"):
        finalize([_cand("a", "g", {})], "x", 1)
    with pytest.raises(ValueError, match="unknown query_type"):
        finalize([_cand("a", "g", {"d": 1}, qtype="poem")], "x", 1)


def test_projection_onto_passages_takes_the_best_grade():
    passages = [
        Document("w#1", "W 1", "w", "passage", (Text("root", "pi", "Latn", "x"),), segment_ids=("w:1", "w:2")),
        Document("w#2", "W 2", "w", "passage", (Text("root", "pi", "Latn", "x"),), segment_ids=("w:2", "w:3")),
    ]
    got = project_to_passages([Qrel("q", "w:1", 1), Qrel("q", "w:2", 2), Qrel("q", "w:9", 2)], passages)
    assert got == [Qrel("q", "w#1", 2), Qrel("q", "w#2", 2)]


# ------------------------------------------------------------ built query sets (real data)

def _load(home, name):
    d = catalog.dataset_dir(name, home)
    queries = read_queries(d / "queries.tsv")
    qrels = defaultdict(dict)
    for r in read_qrels(d / "qrels.txt"):
        qrels[r.query_id][r.doc_id] = r.relevance
    return queries, qrels


def test_every_query_is_judged_and_groups_never_straddle_splits(built_home):
    for name in ("gita", "bilara-segments", "bilara-passages", "cst4-mn"):
        queries, qrels = _load(built_home, name)
        assert all(q.query_id in qrels for q in queries), name
        split_of_group = {}
        for q in queries:
            assert split_of_group.setdefault(q.group, q.split) == q.split, (name, q.group)


def test_each_type_has_at_least_300_queries_where_the_corpus_allows(built_home):
    counts = {}
    for name in ("gita", "bilara-segments", "cst4-mn"):
        queries, _ = _load(built_home, name)
        for q in queries:
            counts[(name, q.query_type)] = counts.get((name, q.query_type), 0) + 1
    for key in [("gita", "paraphrase"), ("gita", "term"), ("gita", "reference"), ("bilara-segments", "term"),
                ("bilara-segments", "reference"), ("bilara-segments", "page_ref"), ("bilara-segments", "paraphrase"),
                ("cst4-mn", "page_ref"), ("cst4-mn", "reference")]:
        assert counts[key] >= 300, key


def test_gita_paraphrase_queries_are_held_out_translators_and_point_at_their_verse(built_home, data_dir):
    import json

    queries, qrels = _load(built_home, "gita")
    old = json.loads((data_dir / "gita" / "archive" / "translation_old.json").read_text(encoding="utf-8"))
    purohit_247 = next(r["description"] for r in old if r["verse_id"] == 94 and r["author_id"] == 21)
    # "2.47 But thou hast only the right to work, ..." with the address stripped
    body = " ".join(purohit_247.split()[1:])
    para = [q for q in queries if q.query_type == "paraphrase" and q.language == "en"]
    match = [q for q in para if q.text == body]
    if match:  # the query may have been sampled out; when present it must be right
        assert qrels[match[0].query_id] == {"bg2.47": 2}  # the verse it translates: the guidelines' 2
    # the held-out translators never appear in the indexed documents
    docs = catalog.load("gita", home=built_home, data=data_dir).documents
    sources = {t.source for d in docs for t in d.texts}
    assert "Shri Purohit Swami" not in sources and "Swami Tejomayananda" not in sources
    assert "Swami Sivananda" in sources
    indexed = {t.text for d in docs for t in d.texts}
    assert not any(q.text in indexed for q in para)


def test_gita_verse_and_chapter_references(built_home):
    queries, qrels = _load(built_home, "gita")
    refs_q = [q for q in queries if q.query_type == "reference"]
    for q in refs_q:
        res = refs.parse(q.text)
        assert res, q.text
        if res.ref.scope == "verse":
            c, v = res.ref.numbers
            assert qrels[q.query_id] == {f"bg{c}.{v}": 2}
        else:
            (c,) = res.ref.numbers
            expected = {7: 30, 13: 35, 18: 78}.get(c)
            if expected:
                assert len(qrels[q.query_id]) == expected
    assert {q.language for q in refs_q} >= {"und", "ru"}


def test_built_labels_are_on_the_scholars_scale(built_home):
    """Issue #41: the built labels gave a paraphrase's own verse and a term's exact match grade 1 where the
    guidelines tell scholars to press 2, so a ``merged`` layer mixed two scales (nDCG favoured the configs whose
    hits happened to be judged). Each built kind of match now carries the grade a scholar gives the same match."""
    from workbench.dashboard.guidelines import DEFAULTS
    from workbench.dashboard.guidelines import load as load_guidelines
    from workbench.judging.layers import FinalGrade, merged_qrels
    from workbench.types import Qrel

    assert "uses the term itself" in DEFAULTS["term"].highly_relevant  # what 2 means for a term
    grades: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for name in ("gita", "bilara-segments", "cst4-mn"):
        queries, qrels = _load(built_home, name)
        for q in queries:
            grades[(name, q.query_type)].update(qrels[q.query_id].values())
    assert set(grades[("gita", "paraphrase")]) == {2}  # gita.toml: "in any of its translations ... each is 2"
    assert "each of them is 2" in load_guidelines("gita")["paraphrase"].highly_relevant
    for name in ("gita", "bilara-segments", "cst4-mn"):
        if grades[(name, "term")]:
            assert set(grades[(name, "term")]) == {2}, name  # the document uses the term: 2
    assert set(grades[("gita", "reference")]) == {1, 2}  # the named verse 2, a chapter's verses 1
    # a scholar who grades a built match as the guidelines say changes nothing in the merged layer
    queries, qrels = _load(built_home, "gita")
    pairs = [(q.query_id, d, g) for q in queries if q.query_type in ("paraphrase", "term")
             for d, g in qrels[q.query_id].items()][:50]
    built = [Qrel(q, d, g) for q, d, g in pairs]
    human = {(q, d): FinalGrade(2, "agreed", 2) for q, d, _ in pairs}
    assert merged_qrels(built, human) == sorted(built)


def test_pali_term_judgments_hold_an_inflected_form(built_home, data_dir):
    from workbench.data.loaders.dpd import load_dpd
    from workbench.text.normalize import ascii_fold, to_cyrillic, tokens
    from workbench.text.translit import iast_to_devanagari_many

    lexicon = load_dpd(data_dir)
    queries, qrels = _load(built_home, "bilara-segments")
    docs = {d.doc_id: d for d in catalog.load("bilara-segments", home=built_home, data=data_dir).documents}
    terms = [q for q in queries if q.query_type == "term"]
    assert {q.language for q in terms} == {"pi"}
    for q in terms[:60]:
        lemma = q.group.split(":", 2)[2]
        forms = set(lexicon.forms_of(lemma))
        assert 3 <= len(qrels[q.query_id]) <= 30
        for doc_id in qrels[q.query_id]:
            words = set(tokens(docs[doc_id].text("root", "pi")))
            # a lemma found only inside compounds (#12) is judged by the compounds made of it
            inside = {lem for w in words for lem2 in lexicon.lemmas(w) for lem in (lem2, *lexicon.members(lem2))}
            assert forms & words or lemma in inside, (lemma, doc_id)
        assert q.text in (lemma, ascii_fold(lemma), to_cyrillic(lemma), iast_to_devanagari_many([lemma])[0])


def test_pts_page_ref_mi56_starts_at_mn10_2_1(built_home, data_dir):
    from workbench.data.querysets.builders import page_ref_candidates

    docs = catalog.load("bilara-segments", home=built_home, data=data_dir).documents
    cands = page_ref_candidates([d for d in docs if d.work_id in ("mn9", "mn10")], seed=1, forms_per_page=10)
    by_text = {c.text: c for c in cands}
    c = by_text["M i 56"]
    assert c.relevant["mn10:2.1"] == 2
    assert c.relevant["mn10:3.1"] == 1  # the next segment, still on page 56
    assert "mn10:1.1" not in c.relevant  # MN 10 opens on M i 55
    assert by_text["PTS M 1.56"].relevant == c.relevant == by_text["MN i 56"].relevant
    assert by_text["M i 55"].relevant["mn10:1.1"] == 1
    assert c.group == "mn10"


def test_cst_page_ref_p156_starts_at_paragraph_106(built_home, data_dir):
    from workbench.data.querysets.builders import page_ref_candidates

    docs = catalog.load("cst4-mn", home=built_home, data=data_dir).documents
    cands = {c.text: c for c in page_ref_candidates(docs, seed=1, forms="cst", forms_per_page=1)}
    assert cands["P1.56"].relevant["s0201m:106"] == 2
    assert cands["M1.70"].relevant["s0201m:105"] == 2
    assert cands["V1.71"].relevant["s0201m:105"] == 2


def test_russian_paraphrase_judges_identical_pali_segments(built_home):
    queries, qrels = _load(built_home, "bilara-segments")
    para = [q for q in queries if q.query_type == "paraphrase"]
    assert {q.language for q in para} == {"ru"}
    assert {q.group for q in para} <= {"dn3", "dn9", "dn13", "sn56.11", "sn56.31"}
    for q in para:
        grades = qrels[q.query_id]
        targets = [d for d, g in grades.items() if g == 2]
        # the segment the Russian renders; identical Russian from several suttas
        # ("Так я слышал.") is one query with each rendered segment as a target
        assert targets and q.group in {t.split(":")[0] for t in targets}


def test_passage_qrels_are_projected_segment_qrels(built_home, data_dir):
    seg_q, seg_rel = _load(built_home, "bilara-segments")
    pas_q, pas_rel = _load(built_home, "bilara-passages")
    passages = catalog.load("bilara-passages", home=built_home, data=data_dir).documents
    holding = defaultdict(set)
    for p in passages:
        for s in p.segment_ids:
            holding[s].add(p.doc_id)
    assert {q.query_id for q in pas_q} == {q.query_id for q in seg_q}
    for q in seg_q[::50]:
        expected = {}
        for seg, g in seg_rel[q.query_id].items():
            for p in holding[seg]:
                expected[p] = max(expected.get(p, 0), g)
        assert pas_rel[q.query_id] == expected
