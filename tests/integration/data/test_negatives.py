"""Unanswerable queries and honest empty answers (:mod:`workbench.eval.answers`,
:func:`workbench.data.querysets.builders.negative_references`).

Hand-computed cases: a negative query answered empty scores 1 on the empty-answer rate and a padded answer 0; the
``min_score`` curve read from best scores; and on the real gita: 100 references past the end of the text, each
diagnosed by the grammar, in the script it was asked in, with no judgment, answered with nothing by the
canonical-reference lane; and 50 Pali lemmas of the DPD of which no form occurs in the gita or the bilara
passages (:func:`workbench.data.querysets.builders.absent_lemmas`).
"""

from __future__ import annotations

import math

import pytest

from workbench.eval.answers import answer_rates, best_threshold, min_score_curve
from workbench.run import Hit, Run
from workbench.types import Qrel, Query


def Q(qid: str, qtype: str) -> Query:
    return Query(qid, qid, qtype, "en", "test")


QUERIES = [Q("n1", "negative"), Q("n2", "negative"), Q("a1", "term"), Q("a2", "term"), Q("u", "term")]
QRELS = [Qrel("a1", "d1", 2), Qrel("a2", "d2", 1), Qrel("u", "d3", 0)]  # u: judged, nothing relevant


def test_an_empty_answer_to_a_negative_scores_1_and_a_padded_one_0():
    run = Run({"n1": [], "n2": [Hit("d9", 0.4)], "a1": [Hit("d1", 0.9)], "a2": [], "u": []}, "r")
    assert answer_rates(run, QUERIES, QRELS) == {"negatives": 2, "empty_on_negatives": 0.5, "answerable": 2,
                                                "false_empty": 0.5}
    only_padded = answer_rates(run, [QUERIES[1]], QRELS)
    assert only_padded["empty_on_negatives"] == 0.0 and math.isnan(only_padded["false_empty"])


def test_the_min_score_curve_reads_both_rates_from_the_best_scores():
    # best scores: negatives 0.2 and 0.5, answerable 0.9 and 0.4
    run = Run({"n1": [Hit("x", 0.2)], "n2": [Hit("y", 0.5), Hit("z", 0.1)], "a1": [Hit("d1", 0.9)],
               "a2": [Hit("d2", 0.4)]}, "r")
    curve = min_score_curve(run, QUERIES[:4], QRELS, points=5)
    # thresholds: -inf and the quartiles of (0.2, 0.4, 0.5, 0.9): 0.2, 0.35, 0.45, 0.6, 0.9
    assert curve["min_score"].tolist() == pytest.approx([float("-inf"), 0.2, 0.35, 0.45, 0.6, 0.9])
    assert curve["empty_on_negatives"].tolist() == [0.0, 0.0, 0.5, 0.5, 1.0, 1.0]
    assert curve["false_empty"].tolist() == [0.0, 0.0, 0.0, 0.5, 0.5, 0.5]
    best = best_threshold(curve)
    assert best["min_score"] == pytest.approx(0.35) and best["abstention_accuracy"] == 0.75
    # 0.35 answers both answerable queries and says nothing to the negative whose best is 0.2
    assert best_threshold(min_score_curve(run, QUERIES[2:4], QRELS)) is None  # no negatives: no curve


def test_the_gita_negatives_are_out_of_range_references_in_their_script(built_home, data_dir):
    from retrievers.reference import ReferenceLane
    from workbench.data import catalog
    from workbench.text import refs
    from workbench.text.scripts import script_of

    ds = catalog.load("gita-negatives", catalog.load_definitions(), data_dir, built_home)
    gita = catalog.load("gita", catalog.load_definitions(), data_dir, built_home)
    neg = [q for q in ds.queries if q.query_type == "negative" and q.query_id.endswith("~neg")]
    absent = [q for q in ds.queries if q.query_id.startswith("absent~")]
    assert len(neg) == 100 and len(absent) == 50 and len(ds.queries) == len(gita.queries) + 150
    assert not {r.query_id for r in ds.qrels} & {q.query_id for q in neg}  # no judgment, by construction
    source = {q.query_id: q for q in gita.queries}
    for q in neg:
        res = refs.parse(q.text)
        assert res.ref is None and "has 18 chapters, not" in res.reason, (q.text, res.reason)
        base = source[q.query_id.removesuffix("~neg")]
        assert base.query_type == "reference" and script_of(q.text) == script_of(base.text)
        assert 19 <= int(q.text.split()[-1].split(".")[0]) <= 28
    asked = neg + [q for q in ds.queries if q.query_type == "reference"][:50]
    rates = answer_rates(ReferenceLane("reference", ds.documents).search(asked, 10), asked, ds.qrels)
    assert rates["empty_on_negatives"] == 1.0 and rates["false_empty"] == 0.0


@pytest.mark.parametrize("value, needle", [('"yes"', "dataset.g.negatives must be a list"),
                                           ('["references", "topics"]', r"unknown value\(s\) \['topics'\]"),
                                           ("[]", "is empty; list at least one of references, absent_lemmas")])
def test_negatives_must_be_true_false_or_known_kinds(tmp_path, value, needle):
    from workbench.data import catalog
    from workbench.errors import ConfigError

    path = tmp_path / "datasets.toml"
    path.write_text(f'seed = 1\n[dataset.g]\nsource = "gita"\nnegatives = {value}\n')
    with pytest.raises(ConfigError, match=needle):
        catalog.load_definitions(path)


@pytest.mark.parametrize("name", ["gita", "bilara-passages"])
def test_absent_lemmas_occur_in_no_document_in_any_form(built_home, data_dir, name):
    """Recomputed here from the tokens of every text: no form of the lemma (nor its IAST text) folds to the ASCII
    of any token of the corpus, and no compound of the corpus is made of it."""
    from workbench.data import catalog
    from workbench.data.loaders.dpd import load_dpd
    from workbench.data.querysets.builders import absent_lemmas, absent_stem
    from workbench.text.normalize import ascii_fold, tokens

    ds = catalog.load(name, catalog.load_definitions(), data_dir, built_home)
    lexicon = load_dpd(data_dir)
    got = absent_lemmas(ds.documents, lexicon, 20261129)
    assert len(got) == 50 and len({q.query_id for q in got}) == 50
    assert {q.split for q in got} == {"train", "dev", "test"}  # the order's hash is not the split's
    corpus = {ascii_fold(t) for d in ds.documents for x in d.texts for t in tokens(x.text)}
    compounds = {m for t in corpus for lemma in lexicon.lemmas(t) for m in lexicon.members(lemma)}
    for q in got:
        assert q.query_type == "negative" and q.language == "pi" and q.group == f"absent:{q.text}"
        forms = {q.text, *lexicon.forms_of(q.text)}
        assert not {ascii_fold(f) for f in forms} & corpus, q.text
        assert q.text not in compounds, q.text
        stem = absent_stem(ascii_fold(q.text))
        assert not any(t.startswith(stem) for t in corpus), (q.text, stem)  # no other tense of it (akkosissanti)
    assert got == absent_lemmas(ds.documents, lexicon, 20261129)  # seeded: the same draw


def test_gita_questions_are_asked_of_a_corpus_without_the_gita(built_home, data_dir, tmp_path):
    """bilara-filtered holds 50 of the gita's English verses as unanswerable questions (no judgment; each the text
    of one translator of that verse), and a gita dataset may not draw them."""
    from workbench.data import catalog
    from workbench.data.loaders.gita import load_gita
    from workbench.errors import ConfigError

    ds = catalog.load("bilara-filtered", catalog.load_definitions(), data_dir, built_home)
    asked = [q for q in ds.queries if q.query_id.startswith("gita~")]
    assert len(asked) == 50 and all(q.query_type == "negative" and q.language == "en" for q in asked)
    assert not {r.query_id for r in ds.qrels} & {q.query_id for q in asked}
    verses = {d.doc_id: d for d in load_gita(data_dir).documents}
    for q in asked:
        d = verses[q.query_id.removeprefix("gita~")]
        assert q.text in {" ".join(t.text.split()) for t in d.texts if t.field == "translation" and t.language == "en"}
    assert not any(d.doc_id.startswith("bg") for d in ds.documents)
    path = tmp_path / "datasets.toml"
    path.write_text('seed = 1\n[dataset.g]\nsource = "gita"\nnegatives = ["gita_questions"]\n')
    with pytest.raises(ConfigError, match="gita_questions asks the gita's own verses"):
        catalog.load_definitions(path)
