"""The Postgres lanes (pgvector, full text, trigram) on the gita's 701 verses, against a real server.

Every lane passes :func:`lane_conformance.check_lane`; real-value checks: full text finds
BG 2.47 for a strict-IAST phrase (``simple``) and its diacritic-free form (``wb_fold``),
``russian`` stems, trigram survives a misspelling, HNSW recall@10 against the exact scan
is >= 0.99 at ef_search 200, and k above ef_search still returns k rows.
"""

from __future__ import annotations

import pytest

from retrievers.fulltext import FORMS, FullTextLane
from retrievers.pgvector import VectorLane
from retrievers.trigram import TrigramLane
from workbench.data.catalog import Dataset
from workbench.engines.pg_client import PgError, connect, reader_dsn
from workbench.engines.pg_index import index_dataset
from workbench.errors import ConfigError
from workbench.protocols import Retriever
from workbench.testing import WordHashEmbedder, check_lane
from workbench.types import Document, Query, Text

EMB = WordHashEmbedder(64)


def Q(qid: str, text: str) -> Query:
    return Query(qid, text, "term", "und", "test")


@pytest.fixture(scope="session")
def index(pg_dsn: str, gita: Dataset):
    return index_dataset(pg_dsn, gita, EMB)


@pytest.fixture(scope="session")
def reader(pg_dsn: str, index) -> str:
    return reader_dsn(pg_dsn)


@pytest.fixture(scope="session")
def sample(gita: Dataset) -> list[Query]:
    """10 term queries (IAST, ASCII, Cyrillic) and 10 paraphrases (English, Hindi)."""
    terms = [q for q in gita.queries if q.query_type == "term"][:10]
    paras = [q for q in gita.queries if q.query_type == "paraphrase"][:10]
    return terms + paras


def _body(pg_dsn: str, table: str, doc_ids) -> dict[str, str]:
    with connect(pg_dsn) as conn:
        return dict(conn.execute(f"SELECT doc_id, body FROM {table} WHERE doc_id = ANY(%s)", (list(doc_ids),)).fetchall())


# ---------------------------------------------------------------- conformance

@pytest.mark.parametrize("kw", [{}, {"iterative_scan": "off", "ef_search": 40}, {"iterative_scan": "strict_order"},
                                {"exact": True}])
def test_vector_lane_conformance(reader, index, sample, kw):
    lane = VectorLane("vector", reader, index, EMB, **kw)
    assert isinstance(lane, Retriever)
    check_lane(lane, sample, 50, matches=701)  # every verse has a cosine


@pytest.mark.parametrize("config", ["simple", "russian", "wb_fold"])
@pytest.mark.parametrize("form", FORMS)
def test_fulltext_lane_conformance(pg_dsn, reader, index, sample, config, form):
    lane = FullTextLane(f"fts_{config}_{form}", reader, index.table, config=config, form=form)
    assert isinstance(lane, Retriever)
    matches = None
    if form == "or":  # count the matches independently: plainto_tsquery with its ANDs turned into ORs
        col = {"simple": "tsv_simple", "russian": "tsv_russian", "wb_fold": "tsv_fold"}[config]
        with connect(pg_dsn) as conn:
            matches = {q.query_id: conn.execute(
                f"SELECT count(*) FROM {index.table} WHERE {col} @@ "
                "replace(plainto_tsquery(%s::regconfig, %s)::text, ' & ', ' | ')::tsquery",
                (config, q.text)).fetchone()[0] for q in sample}
        assert any(n >= 20 for n in matches.values())
    check_lane(lane, sample, 20, matches=matches)


@pytest.mark.parametrize("function", ["word_similarity", "similarity"])
def test_trigram_lane_conformance(pg_dsn, reader, index, sample, function):
    sample = sample[:10] + sample[10:13]  # word_similarity over whole verses costs ~0.2-0.5 s a query here
    lane = TrigramLane("trigram", reader, index, function=function, threshold=0.3 if function == "word_similarity" else 0.05)
    assert isinstance(lane, Retriever)
    guc = "pg_trgm.word_similarity_threshold" if function == "word_similarity" else "pg_trgm.similarity_threshold"
    where = "%s::text <%% body" if function == "word_similarity" else "body %% %s::text"
    with connect(pg_dsn) as conn:  # how many rows pass the operator (the lane's query is capped at 512 chars)
        conn.execute("SELECT set_config(%s, %s, false)", (guc, repr(lane.threshold)))
        matches = {q.query_id: conn.execute(f"SELECT count(*) FROM {index.table} WHERE {where}",
                                            (q.text[:512],)).fetchone()[0] for q in sample}
    check_lane(lane, sample, 20, matches=matches)


# ---------------------------------------------------------------- full text, real values

@pytest.mark.parametrize("form", FORMS)
def test_simple_finds_the_iast_phrase(reader, index, form):
    lane = FullTextLane("fts", reader, index, config="simple", form=form)
    run = lane.search([Q("q", "phaleṣu kadācana")], 10)
    assert run["q"][0].doc_id == "bg2.47"


def test_fold_finds_it_without_diacritics(reader, index):
    q = [Q("q", "phalesu kadacana"), Q("upper", "PHALEṢU Kadācana")]
    fold = FullTextLane("fold", reader, index, config="wb_fold").search(q, 10)
    assert fold["q"][0].doc_id == "bg2.47" and fold["upper"][0].doc_id == "bg2.47"
    simple = FullTextLane("simple", reader, index, config="simple").search(q, 10)
    assert "bg2.47" not in [h.doc_id for h in simple["q"]]  # simple keeps diacritics: no match


def test_or_form_fills_the_list_and_forms_differ(reader, index):
    q = [Q("q", "Arjuna said to Krishna")]
    n = {f: len(FullTextLane(f, reader, index, form=f).search(q, 100)["q"]) for f in FORMS}
    assert n["or"] == 100 and n["and"] < n["or"] and n["phrase"] <= n["and"]


def test_fulltext_scores_are_ts_rank_cd(pg_dsn, reader, index):
    lane = FullTextLane("fts", reader, index, config="simple", form="and", normalization=0)
    hits = lane.search([Q("q", "phaleṣu kadācana")], 5)["q"]
    with connect(pg_dsn) as conn:
        want = conn.execute(f"SELECT ts_rank_cd(tsv_simple, plainto_tsquery('simple', 'phaleṣu kadācana'), 0) "
                            f"FROM {index.table} WHERE doc_id = 'bg2.47'").fetchone()[0]
    assert hits[0].score == pytest.approx(want)


def test_apostrophe_letters_and_do_not_use_devanagari_find_what_the_usual_spelling_finds(reader, index):
    """Issue #41: ``me ʼchyuta`` (U+02BC, a letter to Postgres' parser) found 0 verses where ``me ’chyuta`` finds
    BG 1.21; अ + ा found nothing where आ finds the 5 verses with the word आत्मा. The query normaliser maps both."""
    from workbench.text.query import clean_queries

    asked = clean_queries([Q("ʼ", "me \u02bcchyuta"), Q("’", "me \u2019chyuta"),
                           Q("अा", "\u0905\u093e\u0924\u094d\u092e\u093e"), Q("आ", "आत्मा")])
    run = FullTextLane("fts", reader, index, config="simple", form="phrase").search(asked, 100)
    ids = {q: [h.doc_id for h in run[q]] for q in run}
    assert ids["ʼ"] == ids["’"] == ["bg1.21"]
    assert ids["अा"] == ids["आ"] == ["bg5.7", "bg13.33", "bg13.34", "bg15.7", "bg6.6"]


def test_a_hyphenated_word_finds_what_its_parts_find_in_the_forms_that_require_every_word(pg_dsn, reader, index):
    """Issue #41: in ``and`` ``sense-organs`` required the compound lexeme ``sense-organ``, so it found fewer verses
    than ``sense organs``; now both find the same verses, in every form; ``websearch``'s ``-word`` still excludes."""
    with connect(pg_dsn) as conn:  # what plainto_tsquery does with the hyphen left in: fewer verses
        compound = conn.execute(f"SELECT count(*) FROM {index.table} WHERE tsv_simple @@ "
                                "plainto_tsquery('simple', 'sense-organs')").fetchone()[0]
    for form in ("and", "phrase", "websearch"):
        lane = FullTextLane("fts", reader, index, config="simple", form=form)
        run = lane.search([Q("h", "sense-organs"), Q("s", "sense organs")], 100)
        assert [h.doc_id for h in run["h"]] == [h.doc_id for h in run["s"]]
        if form == "and":
            assert len(run["s"]) > compound
    web = FullTextLane("fts", reader, index, config="simple", form="websearch")
    run = web.search([Q("all", "sense organs"), Q("not", "sense organs -mind")], 100)
    assert 0 < len(run["not"]) < len(run["all"])


def test_query_syntax_is_never_parsed(reader, index):
    nasty = ["it's", "a & b", "!(x | y):*", "'; DROP TABLE wb_index; --", "\\", "''''", "<->", "a:*B", "%s %(x)s {}"]
    for form in FORMS:
        for cfg in ("simple", "russian", "wb_fold"):
            run = FullTextLane("fts", reader, index, config=cfg, form=form).search(
                [Q(str(i), t) for i, t in enumerate(nasty)], 10)
            assert set(run) == {str(i) for i in range(len(nasty))}


def test_russian_stems(pg_dsn, tmp_path):
    with connect(pg_dsn) as conn:
        a, b = conn.execute("SELECT to_tsvector('russian', 'души')::text, to_tsvector('russian', 'душа')::text").fetchone()
        assert a == b == "'душ':1"
    docs = [Document(f"ru{i}", f"RU {i}", "ru", "verse", (Text("translation", "ru", "Cyrl", t),))
            for i, t in enumerate(["Бессмертие души не знает конца.", "Вечная душа не рождается.", "Колесница стоит в поле."])]
    tiny = index_dataset(pg_dsn, Dataset("tiny-ru", docs, [], [], {}), WordHashEmbedder(8))
    russian = FullTextLane("ru", reader_dsn(pg_dsn), tiny, config="russian")
    run = russian.search([Q("q", "душа"), Q("stop", "и не в")], 10)
    assert sorted(h.doc_id for h in run["q"]) == ["ru0", "ru1"]
    assert run["stop"] == ()  # only stop words: no lexemes, empty ranking
    simple = FullTextLane("simple", reader_dsn(pg_dsn), tiny, config="simple").search([Q("q", "душа")], 10)
    assert [h.doc_id for h in simple["q"]] == ["ru1"]


# ---------------------------------------------------------------- trigram, real values

def test_trigram_survives_a_misspelling(pg_dsn, reader, index):
    lane = TrigramLane("trigram", reader, index, threshold=0.3)
    hits = lane.search([Q("q", "Arjna")], 10)["q"]
    assert len(hits) == 10 and all(0.3 <= h.score <= 1.0 for h in hits)
    bodies = _body(pg_dsn, index.table, [h.doc_id for h in hits])
    assert all("arjun" in bodies[h.doc_id].lower() for h in hits)


def test_trigram_caps_long_queries(reader, index):
    lane = TrigramLane("trigram", reader, index)
    assert lane.config()["max_query_chars"] == 512
    long_q = "Arjuna " + "x" * 9_993
    a = lane.search([Q("q", long_q)], 5)
    b = lane.search([Q("q", "Arjuna")], 5)  # cut at the word boundary: the 9,993 x's would pass 512
    assert a["q"] == b["q"] and len(a["q"]) == 5
    c = lane.search([Q("q", "Arjuna Krishna " + "y" * 600)], 5)  # the half word is not searched
    assert c["q"] == lane.search([Q("q", "Arjuna Krishna")], 5)["q"]


def test_trigram_threshold_filters(reader, index):
    strict = TrigramLane("t", reader, index, threshold=0.9).search([Q("q", "Arjna")], 50)["q"]
    loose = TrigramLane("t", reader, index, threshold=0.3).search([Q("q", "Arjna")], 50)["q"]
    assert len(strict) == 0 and len(loose) == 50


# ---------------------------------------------------------------- vector, real values

def test_hnsw_recall_against_exact(reader, index, gita):
    queries = [q for q in gita.queries if q.query_type == "paraphrase"][:50]
    exact = VectorLane("exact", reader, index, EMB, exact=True).search(queries, 10)
    ann = VectorLane("ann", reader, index, EMB, ef_search=200).search(queries, 10)
    recall = sum(len({h.doc_id for h in ann[q.query_id]} & {h.doc_id for h in exact[q.query_id]}) / 10
                 for q in queries) / len(queries)
    assert recall >= 0.99, recall
    # the exact lane's scores are the true cosines
    q0 = queries[0]
    import numpy as np

    doc_vec = EMB.embed_passages([_body_text(gita, exact[q0.query_id][0].doc_id)])[0]
    assert exact[q0.query_id][0].score == pytest.approx(float(np.dot(EMB.embed_queries([q0.text])[0], doc_vec)), abs=1e-5)


def _body_text(gita: Dataset, doc_id: str) -> str:
    import unicodedata

    from workbench.text.doctext import index_text

    return unicodedata.normalize("NFC", index_text(next(d for d in gita.documents if d.doc_id == doc_id)))


def test_k_above_ef_search_still_returns_k_rows(reader, index, gita):
    lane = VectorLane("vector", reader, index, EMB, ef_search=40, iterative_scan="off")
    assert lane.effective_settings(150)["hnsw.ef_search"] == "150"
    assert lane.effective_settings(10)["hnsw.ef_search"] == "40"
    assert lane.effective_settings(1500)["hnsw.iterative_scan"] == "strict_order"
    queries = gita.queries[:20]
    run = lane.search(queries, 150)
    assert all(len(run[q.query_id]) == 150 for q in queries)
    assert lane.last_exact_fallbacks == []  # the index itself returned them
    assert len(lane.search(queries[:2], 701)[queries[0].query_id]) == 701


def test_ann_mode_uses_the_hnsw_index(reader, index):
    lane = VectorLane("vector", reader, index, EMB)
    vec = "[" + ",".join(repr(float(x)) for x in EMB.embed_queries(["Arjuna"])[0]) + "]"
    sql = f"EXPLAIN SELECT doc_id FROM {index.table} ORDER BY embedding <=> %s::vector LIMIT 10"
    with connect(reader) as conn:
        lane._set(conn, lane.effective_settings(10))
        plan = "\n".join(r[0] for r in conn.execute(sql, (vec,)))
        assert f"{index.table}_hnsw" in plan
        exact = VectorLane("exact", reader, index, EMB, exact=True)
        exact._set(conn, exact.effective_settings(10))
        plan = "\n".join(r[0] for r in conn.execute(sql, (vec,)))
        assert "hnsw" not in plan and "Seq Scan" in plan


def test_halfvec_index(pg_dsn, gita, index):
    half = index_dataset(pg_dsn, gita, EMB, halfvec=True)
    assert half.halfvec and half.key != index.key and half.vector_type == "halfvec"
    lane = VectorLane("half", reader_dsn(pg_dsn), half.table, EMB, ef_search=100)  # table name: looked up
    queries = [q for q in gita.queries if q.query_type == "paraphrase"][:20]
    full = VectorLane("full", reader_dsn(pg_dsn), index, EMB, exact=True).search(queries, 10)
    got = lane.search(queries, 10)
    overlap = sum(len({h.doc_id for h in got[q.query_id]} & {h.doc_id for h in full[q.query_id]}) for q in queries) / 200
    assert overlap >= 0.95
    assert lane.index_info().halfvec


def test_latencies_are_per_query_ms(reader, index, sample):
    lane = VectorLane("vector", reader, index, EMB)
    lane.search(sample + [Q("blank", " ")], 10)
    assert set(lane.last_latencies_ms) == {q.query_id for q in sample} | {"blank"}
    assert lane.last_latencies_ms["blank"] == 0.0
    assert all(0 < lane.last_latencies_ms[q.query_id] < 5_000 for q in sample)
    assert lane.last_embed_ms > 0


# ---------------------------------------------------------------- bad configuration

def test_wrong_embedder_is_refused(reader, index, sample):
    with pytest.raises(ConfigError, match="hash-bow-64"):
        VectorLane("vector", reader, index, WordHashEmbedder(32)).search(sample[:1], 5)


def test_unknown_table_is_a_clear_error(reader, sample):
    for lane in (VectorLane("v", reader, "wb_docs_nope", EMB), FullTextLane("f", reader, "wb_docs_nope"),
                 TrigramLane("t", reader, "wb_docs_nope")):
        with pytest.raises(PgError, match="wb_docs_nope"):
            lane.search(sample[:1], 5)


def test_lane_on_a_server_that_is_down(tmp_path, index, sample):
    lane = FullTextLane("f", f"postgresql://wb_reader@/postgres?host={tmp_path}", index)
    with pytest.raises(PgError, match=str(tmp_path)):
        lane.search(sample[:1], 5)


@pytest.mark.parametrize("make", [
    lambda r, i: VectorLane("v", r, i, EMB, ef_search=0),
    lambda r, i: VectorLane("v", r, i, EMB, ef_search=1001),
    lambda r, i: VectorLane("v", r, i, EMB, iterative_scan="sideways"),
    lambda r, i: FullTextLane("f", r, i, config="english"),
    lambda r, i: FullTextLane("f", r, i, form="near"),
    lambda r, i: FullTextLane("f", r, i, normalization=64),
    lambda r, i: TrigramLane("t", r, i, function="levenshtein"),
    lambda r, i: TrigramLane("t", r, i, threshold=1.5),
])
def test_bad_lane_parameters(reader, index, make):
    with pytest.raises(ConfigError):
        make(reader, index)


def test_bad_k(reader, index, sample):
    lane = FullTextLane("f", reader, index)
    for k in (-1, 2.5, "10"):
        with pytest.raises(ValueError):
            lane.search(sample[:1], k)


def test_configs_name_every_engine_parameter(reader, index):
    assert VectorLane("v", reader, index, EMB).config() == {
        "kind": "pgvector", "table": index.table, "production": False, "model_id": EMB.model_id, "dim": 64,
        "distance": "cosine",
        "exact": False, "ef_search": 100, "ef_search_rule": "min(max(ef_search, k), 1000)",
        "iterative_scan": "relaxed_order", "max_scan_tuples": 20000}
    assert FullTextLane("f", reader, index, config="wb_fold", form="and").config()["column"] == "tsv_fold"
    assert TrigramLane("t", reader, index).config() == {"kind": "trigram", "table": index.table, "production": False,
                                                        "function": "word_similarity", "threshold": 0.3,
                                                        "max_query_chars": 512, "max_query_words": None,
                                                        "transliterate": False}


def test_connection_factory_and_read_only_session(pg_dsn, index):
    import psycopg

    made = []

    def factory():
        made.append(connect(pg_dsn))  # even the admin user: the lane's session is read-only
        return made[-1]

    with FullTextLane("f", factory, index) as lane:
        assert lane.search([Q("q", "phaleṣu kadācana")], 3)["q"][0].doc_id == "bg2.47"
        lane.search([Q("q", "Arjuna")], 3)
        assert len(made) == 1  # one connection for the lane's life
        with pytest.raises(psycopg.errors.ReadOnlySqlTransaction):
            lane._session.get().execute("CREATE TABLE wb_should_not_exist (x int)")
    assert made[0].closed


# ---------------------------------------------------------------- the query normaliser and transliteration (#12)

def _ids(run, qid):
    return [h.doc_id for h in run[qid]]


@pytest.mark.parametrize("make", [
    lambda r, i: FullTextLane("fts", r, i, config="wb_fold"),
    lambda r, i: TrigramLane("trigram", r, i, threshold=0.6),
    lambda r, i: VectorLane("vector", r, i, EMB),
])
def test_a_nul_byte_costs_no_other_query_its_answer(reader, index, make):
    """One NUL in one query used to abort the batch on every Postgres lane (exit 2, nothing answered)."""
    lane = make(reader, index)
    alone = lane.search([Q("b", "phaleṣu kadācana")], 10)
    run = lane.search([Q("a", "phale\x00ṣu kadācana"), Q("b", "phaleṣu kadācana")], 10)
    assert _ids(run, "b") == _ids(alone, "b") and _ids(run, "b")
    assert _ids(run, "a") == _ids(alone, "b")  # the NUL is removed, not a word break


@pytest.mark.parametrize("pasted", ["pha\u00adle\u1e63u kad\u0101cana", "phale\u1e63u\u200b kad\u0101\u200dcana",
                                    "\ufeff\u200ephale\u1e63u kad\u0101cana\u200f"])
def test_invisible_characters_inside_words_are_ignored(reader, index, pasted):
    for lane in (FullTextLane("fts", reader, index, config="simple"), TrigramLane("trigram", reader, index)):
        assert _ids(lane.search([Q("q", pasted)], 10), "q")[0] == "bg2.47"
    # the vector lane embeds the cleaned text (it used to look the cleaned text up among the raw ones: KeyError)
    vec = VectorLane("vector", reader, index, EMB)
    assert _ids(vec.search([Q("q", pasted)], 10), "q") == _ids(vec.search([Q("q", "phaleṣu kadācana")], 10), "q")


def test_websearch_with_no_positive_term_is_an_empty_ranking(reader, index):
    lane = FullTextLane("fts", reader, index, config="simple", form="websearch")
    run = lane.search([Q("neg", "-krishna"), Q("both", "arjuna -krishna")], 10)
    assert run["neg"] == ()
    assert len(run["both"]) == 10 and all(h.score > 0 for h in run["both"])


def test_transliterated_terms_find_what_their_iast_form_finds(reader, index):
    """The gita term ``abhidhīyate`` typed in Cyrillic, Devanagari and Harvard-Kyoto: with ``transliterate``
    the folded lane ranks exactly what the IAST form ranks; without it, nothing."""
    typed = {"iast": "abhidhīyate", "cyr": "абхидхияте", "deva": "अभिधीयते", "hk": "abhidhIyate"}
    qs = [Q(k, v) for k, v in typed.items()]
    tr = FullTextLane("fold_tr", reader, index, config="wb_fold", transliterate=True).search(qs, 10)
    plain = FullTextLane("fold", reader, index, config="wb_fold").search(qs, 10)
    want = _ids(plain, "iast")
    assert len(want) >= 2
    for k in ("cyr", "deva", "hk"):
        assert _ids(tr, k) == want, k
    assert plain["cyr"] == () and plain["deva"] == ()
    trig = TrigramLane("trigram_tr", reader, index, threshold=0.6, transliterate=True).search(qs, 10)
    assert set(_ids(trig, "cyr")) >= set(want[:2])


def test_one_devanagari_word_is_searched_as_its_term(reader, index):
    """अग्नि is the Sanskrit agni and the Hindi word for fire the gita's Hindi translations use: with
    ``transliterate`` the full-text lane ranks what ``agni`` ranks, not the verses whose translation says अग्नि."""
    qs = [Q("iast", "agni"), Q("deva", "अग्नि")]
    plain = FullTextLane("simple", reader, index, config="simple").search(qs, 100)
    tr = FullTextLane("simple_tr", reader, index, config="simple", transliterate=True).search(qs, 100)
    assert len(plain["deva"]) > len(plain["iast"]) > 0  # the Hindi form matches more verses than the term
    assert _ids(tr, "deva") == _ids(plain, "iast")


def test_ny_finds_the_palatal_nasal(reader, index):
    """``jñānam`` (the gita's spelling) typed with ny for ñ, as older English renderings and Russian readers write
    it (``jnyanam``, ``джньянам``): with ``transliterate`` the folded lane finds the verses ``jnanam`` finds."""
    qs = [Q("ascii", "jnanam"), Q("ny", "jnyanam"), Q("cyr", "джньянам")]
    plain = FullTextLane("fold", reader, index, config="wb_fold").search(qs, 10)
    tr = FullTextLane("fold_tr", reader, index, config="wb_fold", transliterate=True).search(qs, 10)
    want = _ids(plain, "ascii")
    assert len(want) >= 5 and plain["ny"] == () and plain["cyr"] == ()
    assert _ids(tr, "ny") == want and _ids(tr, "cyr") == want


def test_velar_nasal_variants_find_the_same_verses(reader, index):
    """``saṅkalpa`` (the gita's spelling) typed with ṁ or m before the k."""
    qs = [Q("text", "saṅkalpa"), Q("m", "saṁkalpa"), Q("ascii", "samkalpa")]
    plain = FullTextLane("simple", reader, index, config="simple").search(qs, 10)
    tr = FullTextLane("simple_tr", reader, index, config="simple", transliterate=True).search(qs, 10)
    want = _ids(plain, "text")
    assert want and plain["m"] == () and plain["ascii"] == ()
    assert _ids(tr, "m") == want and _ids(tr, "ascii")[: len(want)] == want


def test_a_query_too_short_for_trigrams_gets_nothing_and_a_note(reader, index):
    """Issue #41: ``a`` filled the trigram lane with 100 verses tied at 1.0 in doc_id order, which RRF credits
    like real matches; ``BG`` likewise. Such a query now gets an empty ranking and says why."""
    import psycopg

    with psycopg.connect(reader) as conn:  # what the lane gave before: every verse with the word "a", all 1.0
        conn.execute("SET pg_trgm.word_similarity_threshold = 0.3")
        tied = conn.execute(f'SELECT count(*) FROM "{index.table}" WHERE %s <%% body AND word_similarity(%s, body) = 1',
                            ["a", "a"]).fetchone()[0]
    assert tied >= 100
    lane = TrigramLane("trigram", reader, index, threshold=0.3)
    run = lane.search([Q("a", "a"), Q("bg", "BG"), Q("ref", "BG 2.47"), Q("word", "Arjna")], 100)
    assert run["a"] == () and run["bg"] == ()
    assert set(lane.last_notes) == {"a", "bg"} and "'BG' is too short for trigrams" in lane.last_notes["bg"]
    assert len(run["word"]) > 0 and run["word"][0].score > 0.5  # 5 letters: searched as before
    assert "ref" not in lane.last_notes
    # a short Devanagari word is searched in its longer IAST form when the lane transliterates
    tr = TrigramLane("trigram_tr", reader, index, threshold=0.6, transliterate=True)
    tr.search([Q("atha", "अथ")], 10)
    assert tr.last_notes == {}


@pytest.mark.parametrize("text, n", [("a", 1), ("BG", 2), ("अथ", 2), ("भोग", 3), ("BG 2.47", 5), ("\u201ca\u201d", 3),
                                     ("a_b [x] \\y", 4), ("a-b c", 3), ("Бг", 2), ("{~}`^", 0)])
def test_the_exported_statement_counts_a_querys_trigram_characters_as_the_lane_does(pg_dsn, text, n):
    """The export answers nothing for a form too short for trigrams by the same rule as the lane
    (workbench.text.query.trigram_chars); PostgreSQL computes it in SQL, whatever its locale."""
    import psycopg

    from workbench.text.query import ASCII_NON_ALNUM_SQL, trigram_chars

    with psycopg.connect(pg_dsn) as conn:
        got = conn.execute(f"SELECT length(regexp_replace(%s, '{ASCII_NON_ALNUM_SQL}', '', 'g'))", [text]).fetchone()[0]
    assert trigram_chars(text) == got == n
