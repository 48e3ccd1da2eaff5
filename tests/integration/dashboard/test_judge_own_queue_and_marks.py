"""#41 item 14, the parts that need no browser: the Adjudicate page tells an adjudicator about the pairs waiting
in their own Judge queue, and the query's words are marked in every script a gita verse shows.

The Judge page's layout in a narrow window, under the mouse wheel, and its keys in a Russian layout are the
browser's: ``test_scholar.py``. The store, the AppTest runner and the pool come from ``test_judge_pages.py``; the
home here holds the gita alone.
"""

from __future__ import annotations

import re

import pytest
import test_judge_pages as pages

from workbench.dashboard import judging
from workbench.judging import agreement

# test_judge_pages' fixtures, as they are there (``jhome`` is this module's own: the gita alone)
store, gita, bind, _keep_main_module = pages.store, pages.gita, pages.bind, pages._keep_main_module


@pytest.fixture(scope="module")
def jhome(data_dir, tmp_path_factory):
    """A home with the gita alone built (``test_judge_pages``' fixtures read the dataset from ``jhome``)."""
    from workbench.data import catalog

    home = tmp_path_factory.mktemp("judge-own-queue-home")
    catalog.build("gita", catalog.load_definitions(), data_dir, home)
    return home


# ------------------------------------------------------------------ the adjudicator's own Judge queue


def test_the_adjudicate_page_names_the_pairs_in_the_adjudicators_own_judge_queue(store, gita, bind):
    """Two raters per pair, and only ann and the adjudicator cy to judge: ann's grades leave each pair's second slot
    to cy, in cy's Judge queue. The Adjudicate page has nothing to adjudicate, and says so; it also says how many
    pairs wait for cy on the Judge page, with a link there, and claims none of them."""
    pairs = pages._pairs(gita, 3)
    pages._pool(store, pairs)
    ann, _ = store.add_rater("ann")
    cy, token = store.add_rater("cy", "adjudicator")
    for _ in pairs:
        a = store.next_assignment(ann, "gita")
        store.judge(ann, a.assignment_id, 1)
    bind("127.0.0.1")
    at = pages._app(pages.APP, link=token)  # a link to the dashboard: an adjudicator lands on Adjudicate
    assert [t.value for t in at.title] == ["Adjudicate"]
    rule = agreement.adjudication_rule(store.adjudicate_at("gita"))
    assert [s.value for s in at.success] == [f"Nothing waits for adjudication on gita ({rule} come here)."]
    assert [i.value for i in at.info] == ["3 pair(s) of gita wait in your own Judge queue: as a rater too, you judge "
                                          "them blind on the Judge page. They never come to this page."]
    [link] = at.main.get("page_link")
    assert (link.proto.label, link.proto.page) == ("Open the Judge page", "judge")
    claimed = store.conn().execute("SELECT count(*) FROM wb_judge.assignments WHERE rater_id = %s",
                                   (cy.rater_id,)).fetchone()[0]
    assert claimed == 0  # counting them claims none

    a = store.next_assignment(cy, "gita")  # cy judges one of them on the Judge page
    store.judge(cy, a.assignment_id, 1)
    at.run()
    assert [i.value for i in at.info] == ["2 pair(s) of gita wait in your own Judge queue: as a rater too, you judge "
                                          "them blind on the Judge page. They never come to this page."]
    for _ in range(2):
        a = store.next_assignment(cy, "gita")
        store.judge(cy, a.assignment_id, 1)
    at.run()
    assert [i.value for i in at.info] == [] and at.main.get("page_link") == []  # nothing left: nothing said


def test_the_own_queue_line_counts_this_dataset_and_the_others():
    assert judging.own_queue_line(0, 0, "gita") == ""
    assert judging.own_queue_line(1, 4, "gita").startswith("1 pair(s) of gita (and 4 of other datasets) wait in your "
                                                           "own Judge queue")
    assert judging.own_queue_line(0, 2, "gita").startswith("2 pair(s) of other datasets wait in your own Judge queue")


# ------------------------------------------------------------------ the query's words in every script


def _marks(view) -> dict[str, list[str]]:
    """Each text of a pair view (section and label) → the words marked in it, in order; texts with none left out."""
    out = {}
    for heading, entries in view.sections:
        for e in entries:
            if words := re.findall(r"<mark>(.*?)</mark>", e.text):
                out[f"{heading}: {e.label}"] = words
    return out


#: What a gita term query marks in BG 8.2 (adhiyajñaḥ, "the Lord of sacrifice"), whichever script it is typed in.
ADHIYAJNA_IN_BG_8_2 = {
    "Original: Sanskrit, Devanagari": ["अधियज्ञः"],
    "Transliterations: the edition's own simplified scheme (ṣh, śh, ch, ṛi for IAST ṣ, ś, c, ṛ)": ["adhiyajñaḥ"],
    "Transliterations: IAST": ["adhiyajñaḥ"],
    "Translations: Swami Ramsukhdas · Hindi": ["अधियज्ञ"],
    "Translations: Swami Sivananda · English": ["Adhiyajna"],
    "Translations: Dr. S. Sankaranarayan · English": ["adhiyajna"],
    "Word meanings: Sanskrit words in the edition's own scheme": ["adhiyajñaḥ"],
    "Word meanings: Sanskrit words in IAST": ["adhiyajñaḥ"],
}


def test_a_term_marks_its_devanagari_iast_and_cyrillic_forms_whichever_script_it_is_typed_in(gita):
    """The gita's term queries come in IAST, plain ASCII, the Russian reader's Cyrillic and Devanagari; each marks
    the Devanagari original, the transliterations, the Hindi and English translations and the word meanings of
    BG 8.2 alike (before: an IAST query marked nothing in the original, a Devanagari one nothing in Latin script)."""
    forms = gita.queries[gita.queries["group"] == "term:sa:adhiyajña"]
    assert sorted(forms["text"]) == ["adhiyajna", "adhiyajña", "адхияджна", "अधियज्ञ"]
    assert set(forms["language"]) == {"sa"}
    for qid, row in forms.iterrows():
        view = judging.pair_view("gita", qid, "bg8.2", gita.queries, gita.documents)
        assert view.address == "BG 8.2"
        assert _marks(view) == ADHIYAJNA_IN_BG_8_2, row["text"]
        assert view.marks == 8, row["text"]
    # the avagraha ends a word, as the apostrophe does in IAST: abhyāsa marks अभ्यासे in अभ्यासेऽप्यसमर्थोऽसि
    qid = gita.queries.index[(gita.queries["text"] == "abhyāsa") & (gita.queries["query_type"] == "term")][0]
    marks = _marks(judging.pair_view("gita", qid, "bg12.10", gita.queries, gita.documents))
    assert marks["Original: Sanskrit, Devanagari"] == ["अभ्यासे"]
    assert marks["Transliterations: the edition's own simplified scheme (ṣh, śh, ch, ṛi for IAST ṣ, ś, c, ṛ)"] == [
        "abhyāse"]


def test_cyrillic_texts_are_marked_and_english_words_are_not_read_in_another_script():
    terms = judging.mark_terms("abhyāsa", "sa")
    assert (terms.own, terms.latin, terms.cyrillic) == (("abhyasa",), ("abhyasa",), ("абхьяса",))
    assert judging.marked_words("Практикуй абхьясу: абхьяса, а не абхидхарма", terms) == ["абхьясу", "абхьяса"]
    assert judging.marked_words("अभ्यासः अभ्यासेन अभ्युदय", terms) == ["अभ्यासः", "अभ्यासेन"]
    # an English word is not read in Devanagari: "man" would mark मन (mind) there; a Sanskrit one is
    assert judging.mark_terms("the mind of man", "en") == judging.MarkTerms(("mind", "man"))
    assert judging.marked_words("मन और बुद्धि", judging.mark_terms("the mind of man", "en")) == []
    assert judging.marked_words("मन और बुद्धि", judging.mark_terms("manas buddhi", "sa")) == ["बुद्धि"]
    # ... unless it carries IAST diacritics, whatever the query's language
    assert judging.marked_words("कृष्ण उवाच", judging.mark_terms("Where does Kṛṣṇa say it?", "en")) == ["कृष्ण"]
