"""Query-set builders over loaded corpora: paraphrase, term, reference, page_ref and headword queries.

Each builder returns :class:`Candidate` queries with their graded judgments; :func:`finalize`
samples them (seeded, per query type), numbers them and assigns splits by group
(:mod:`workbench.data.querysets.split`). Grades: 2 = the exact target (the verse, the segment
where a page starts, a sutta's heading), 1 = also relevant (the rest of the page or
sutta, verses sharing one translation, documents holding the term).

Builders are pure functions of their inputs: no I/O, no randomness but the seed.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import cast

from workbench.data.loaders.dpd import Lexicon
from workbench.data.loaders.gita import GitaCorpus, shared_translation_groups, word_meanings_pairs
from workbench.data.querysets.split import DEFAULT_RATIOS, assign_split, assign_splits, unit_interval
from workbench.text import refs
from workbench.text.normalize import ascii_fold, gita_to_iast, match_form, to_cyrillic_many, tokens
from workbench.text.translit import iast_to_devanagari_many
from workbench.types import QUERY_TYPES, Document, Qrel, Query

_ABBREV = {"paraphrase": "para", "term": "term", "reference": "ref", "page_ref": "page", "headword": "head",
           "negative": "neg"}
_LETTERS = re.compile(r"^[^\W\d_]+$")


@dataclass(frozen=True)
class Candidate:
    """A query before sampling and numbering.

    Attributes:
        text: the query text.
        query_type: one of :data:`~workbench.types.QUERY_TYPES`.
        language: ISO 639-1 of the text (``und`` for references).
        group: the target the split is drawn for.
        relevant: doc_id → grade (>= 1).
        order: a sort key giving the corpus order, for stable numbering.
    """

    text: str
    query_type: str
    language: str
    group: str
    relevant: dict[str, int] = field(hash=False)
    order: tuple = ()


@dataclass
class QuerySet:
    """Numbered queries with their qrels."""

    queries: list[Query]
    qrels: list[Qrel]


def _pick_forms(forms: Sequence[tuple[str, str]], seed: int, key: str, per_language: int) -> list[tuple[str, str]]:
    """Up to ``per_language`` forms per language, chosen by seeded hash (stable for a seed)."""
    by_lang: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for f in forms:
        by_lang[f[1]].append(f)
    out = []
    for lang in sorted(by_lang):
        ranked = sorted(by_lang[lang], key=lambda f: unit_interval(seed, f"form:{key}:{f[0]}"))
        out += ranked[:per_language]
    return out


# ---------------------------------------------------------------- gita

def gita_paraphrase(corpus: GitaCorpus, held_out: Sequence[str]) -> list[Candidate]:
    """One query per distinct text of each held-out translator; relevant = the verse(s) it renders.

    The held-out translators' texts must be removed from the indexed documents (the
    dataset build does this), so the answer is never a string match. Relevant, grade 2 (the guidelines'
    "highly relevant": the verse the query translates): the verse, or where one text renders several verses
    (``1.4 -- 1.6``) each of them (``datasets/guidelines/gita.toml``); the query's group is their shared group.

    Raises:
        ValueError: a held-out translator that the corpus does not have.
    """
    unknown = [t for t in held_out if t not in corpus.translators]
    if unknown:
        raise ValueError(f"unknown gita translator(s) {unknown}; known: {', '.join(corpus.translators)}")
    groups = shared_translation_groups(corpus)
    out = []
    for src in held_out:
        by_text: dict[str, list[int]] = {}
        for i, d in enumerate(corpus.documents):
            for t in d.texts:
                if t.field == "translation" and t.source == src and t.text.strip():
                    by_text.setdefault(t.text, []).append(i)
        for text, idx in by_text.items():
            docs = [corpus.documents[i] for i in idx]
            lang = next(t.language for t in docs[0].texts if t.source == src)
            out.append(Candidate(text, "paraphrase", lang, groups[docs[0].doc_id],
                                 {d.doc_id: 2 for d in docs}, (idx[0], src)))
    return out


def gita_terms(corpus: GitaCorpus, min_df: int = 2, max_df: int = 15, min_len: int = 4) -> list[Candidate]:
    """Sanskrit words of the word-by-word glosses and their dictionary forms, in IAST, ASCII, Cyrillic and Devanagari.

    * A gloss word qualifies when it is a single word of at least ``min_len`` letters found
      in the glosses of ``min_df``..``max_df`` verses; relevant: the verses whose gloss lists it.
    * A **stem** (the dictionary form a reader types: ``kṣetra``, ``yuyutsu``) qualifies when
      the verses' ``stems`` metadata (:func:`workbench.text.sanskrit.stem_map`, vidyut's
      declensions) gives it for at least two distinct gloss words, so that it stands for a
      word attested in several inflections; relevant: the verses holding any of its forms.
      A stem that is also a gloss word joins the two sets.

    The ASCII, Cyrillic and Devanagari forms are issued only when no other word shares them
    (:func:`_term_candidates`). Grade 2: the verse uses the word, in some inflected form (the guidelines'
    "highly relevant").
    """
    holders: dict[str, set[str]] = defaultdict(set)
    stem_forms: dict[str, set[str]] = defaultdict(set)
    for d in corpus.documents:
        words = {match_form(gita_to_iast(w)) for w, _ in word_meanings_pairs(d.text("word_meanings"))}
        for w in words:
            holders[w].add(d.doc_id)
        for form, stems in (d.metadata.get("stems") or {}).items():
            for stem in stems:
                stem_forms[match_form(stem)].add(form)
    for d in corpus.documents:
        for _form, stems in (d.metadata.get("stems") or {}).items():
            for stem in stems:
                if len(stem_forms[match_form(stem)]) >= 2:
                    holders[match_form(stem)].add(d.doc_id)
    return _term_candidates({w: sorted(ds) for w, ds in holders.items()}, "sa", min_df, max_df, min_len)


def _term_candidates(holders: dict[str, list[str]], language: str, min_df: int, max_df: int,
                     min_len: int) -> list[Candidate]:
    """Term queries in IAST, ASCII, Cyrillic and Devanagari for words held by ``min_df``..``max_df`` documents.

    A word qualifies when it is letters only, at least ``min_len`` long, and no other
    word of ``holders`` shares its ASCII form; its Cyrillic form (the Russian reader's,
    :func:`workbench.text.translit.iast_to_cyrillic_many`) and its Devanagari form are
    issued only when no other such word shares them. Relevant: the holders, grade 2 (a document that uses the
    term, in any form or inside a compound: the guidelines' "highly relevant", :mod:`workbench.dashboard.guidelines`;
    a scholar grading the same match gives 2, so the built and the human grades agree in a ``merged`` layer).
    """
    found = [w for w in holders if _LETTERS.match(w)]
    ascii_count: dict[str, int] = defaultdict(int)
    for w in found:
        ascii_count[ascii_fold(w)] += 1
    unique_ascii = [w for w in found if ascii_count[ascii_fold(w)] == 1]
    cyr = dict(zip(unique_ascii, to_cyrillic_many(unique_ascii)))
    deva = dict(zip(unique_ascii, iast_to_devanagari_many(unique_ascii)))
    cyr_count: dict[str, int] = defaultdict(int)
    deva_count: dict[str, int] = defaultdict(int)
    for w in unique_ascii:
        cyr_count[cyr[w]] += 1
        deva_count[deva[w]] += 1
    out = []
    for w in sorted(unique_ascii):
        if len(w) < min_len or not min_df <= len(holders[w]) <= max_df:
            continue
        rel = {doc: 2 for doc in holders[w]}
        forms = [w]
        if ascii_fold(w) != w:
            forms.append(ascii_fold(w))
        if cyr_count[cyr[w]] == 1:
            forms.append(cyr[w])
        if deva_count[deva[w]] == 1:
            forms.append(deva[w])
        for k, text in enumerate(forms):
            out.append(Candidate(text, "term", language, f"term:{language}:{w}", rel, (w, k)))
    return out


def gita_references(corpus: GitaCorpus, seed: int, forms_per_language: int = 1) -> list[Candidate]:
    """Verse references (``BG 2.47``, ``Бг 2.47``…) and whole-chapter references (``BG 7``).

    A verse reference's relevant set is that verse (grade 2); a chapter reference's is
    every verse of the chapter (grade 1). Verse references take ``forms_per_language``
    forms per script language, chosen by seed; chapter references take every form.
    """
    groups = shared_translation_groups(corpus)
    out = []
    chapters: dict[int, list[str]] = defaultdict(list)
    for i, d in enumerate(corpus.documents):
        c, v = d.metadata["chapter"], d.metadata["verse"]
        chapters[c].append(d.doc_id)
        ref = refs.TextRef("BG", (c, v))
        for text, lang in _pick_forms(refs.variants(ref), seed, ref.canonical(), forms_per_language):
            out.append(Candidate(text, "reference", "und" if lang == "en" else lang, groups[d.doc_id],
                                 {d.doc_id: 2}, (0, i, text)))
    for c, docs in sorted(chapters.items()):
        ref = refs.TextRef("BG", (c,))
        for text, lang in refs.variants(ref):
            out.append(Candidate(text, "reference", "und" if lang == "en" else lang, f"bg-ch{c}",
                                 {d: 1 for d in docs}, (1, c, text)))
    return out


# ---------------------------------------------------------------- bilara

def bilara_paraphrase_ru(documents: Sequence[Document], min_words: int = 3) -> list[Candidate]:
    """Russian segments as cross-lingual queries for their Pali/English segment.

    Relevant: the segment itself (grade 2) and every other segment whose Pali text is
    identical after normalisation (grade 1: stock formulas such as *evaṁ me sutaṁ*
    are equally right answers). Queries shorter than ``min_words`` words are skipped.
    The Russian texts must be removed from the indexed documents (the dataset build does).
    """
    same_root: dict[str, list[str]] = defaultdict(list)
    for d in documents:
        root = d.text("root", "pi")
        if root:
            same_root[" ".join(tokens(root))].append(d.doc_id)
    out = []
    for i, d in enumerate(documents):
        ru = d.text("translation", "ru")
        if not ru or len(ru.split()) < min_words:
            continue
        rel = {doc: 1 for doc in same_root.get(" ".join(tokens(d.text("root", "pi"))), [])}
        rel[d.doc_id] = 2
        out.append(Candidate(ru, "paraphrase", "ru", d.work_id, rel, (i,)))
    return out


def lemma_holders(documents: Sequence[Document], lexicon: Lexicon, field: str = "root") -> dict[str, list[str]]:
    """Bare lemma → doc_ids whose ``field`` text holds any inflected form of it (corpus order)."""
    cache: dict[str, tuple[str, ...]] = {}
    holders: dict[str, list[str]] = defaultdict(list)
    for d in documents:
        found: set[str] = set()
        for t in d.texts:
            if t.field != field:
                continue
            for tok in tokens(t.text):
                if tok not in cache:
                    cache[tok] = lexicon.lemmas(tok)
                found.update(cache[tok])
        for lemma in sorted(found):
            holders[lemma].append(d.doc_id)
    return holders


def pali_terms(documents: Sequence[Document], lexicon: Lexicon, min_df: int = 3, max_df: int = 30,
               min_len: int = 5) -> list[Candidate]:
    """Pali lemmas in IAST, ASCII, Cyrillic and Devanagari; relevant = documents holding any inflected form.

    A lemma qualifies when it is one word of at least ``min_len`` letters, found in
    ``min_df``..``max_df`` documents, and its ASCII (and Cyrillic, Devanagari) form is shared
    with no other lemma found in the corpus. A lemma found only inside compounds
    (:func:`compound_member_holders`) qualifies the same way, its holders being the
    documents with those compounds. Grade 2 for every holder (:func:`_term_candidates`).
    """
    holders = lemma_holders(documents, lexicon)
    for member, docs in compound_member_holders(holders, lexicon).items():
        holders.setdefault(member, docs)
    return _term_candidates(holders, "pi", min_df, max_df, min_len)


def compound_member_holders(holders: dict[str, list[str]], lexicon: Lexicon) -> dict[str, list[str]]:
    """Lemmas found in the corpus **only inside compounds** (#12): member → the documents holding a compound
    made of it (:meth:`~workbench.data.loaders.dpd.Lexicon.members`, the DPD's construction data), for members
    with no standalone form in any document (``kakaca``: only in ``kakacūpama``, MN 21's simile). Corpus order
    of ``holders`` is kept."""
    order = {d: i for i, d in enumerate(dict.fromkeys(d for ds in holders.values() for d in ds))}
    inside: dict[str, set[str]] = defaultdict(set)
    for lemma, docs in holders.items():
        for member in lexicon.members(lemma):
            if member not in holders:
                inside[member].update(docs)
    return {m: sorted(ds, key=order.__getitem__) for m, ds in sorted(inside.items())}


_WORK_RE = re.compile(r"^(dn|mn|sn|dhp)(\d+)(?:\.(\d+))?(?:-(\d+))?$")


def _work_refs(work_id: str) -> list[refs.TextRef]:
    """Text references a bilara work answers: ``mn10`` → MN 10; ``sn56.105-107`` → SN 56.105..107."""
    m = _WORK_RE.match(work_id)
    if not m:
        return []
    coll, a, b, c = m.group(1), int(m.group(2)), m.group(3), m.group(4)
    if coll == "sn":
        if b is None:
            return []
        lo = int(b)
        hi = int(c) if c else lo
        return [refs.TextRef("SN", (a, n)) for n in range(lo, hi + 1)]
    book = {"dn": "DN", "mn": "MN", "dhp": "Dhp"}[coll]
    hi = int(c) if c else a
    return [refs.TextRef(book, (n,)) for n in range(a, hi + 1)]


def sutta_references(documents: Sequence[Document], seed: int, forms_per_language: int = 1,
                     work_of: Callable[[Document], str] | None = None) -> list[Candidate]:
    """References to suttas (``MN 10``, ``МН 10``, ``SN 56.11``, ``Dhp 21``).

    Relevant: every document of the work, grade 2 for its heading segments (``:0.x``)
    or, where a work has none, its first document; grade 1 for the rest.
    ``work_of(doc)`` gives a document's work (default ``doc.work_id``).
    """
    work_of = work_of or (lambda d: d.work_id)
    by_work: dict[str, list[Document]] = {}
    for d in documents:
        w = work_of(d)
        if w:
            by_work.setdefault(w, []).append(d)
    out = []
    for order, (work, docs) in enumerate(by_work.items()):
        heads = [d.doc_id for d in docs if d.doc_id.partition(":")[2].startswith("0.")] or [docs[0].doc_id]
        rel = {d.doc_id: (2 if d.doc_id in heads else 1) for d in docs}
        for ref in _work_refs(work):
            for text, lang in _pick_forms(refs.variants(ref), seed, ref.canonical(), forms_per_language):
                out.append(Candidate(text, "reference", "und" if lang == "en" else lang, work, rel,
                                     (order, ref.numbers, text)))
    return out


def page_ref_candidates(documents: Sequence[Document], seed: int, forms: str = "pts",
                        forms_per_page: int = 2, group_of: Callable[[Document], str] | None = None,
                        issue_for: Callable[[Document], bool] | None = None) -> list[Candidate]:
    """Page references; relevant = documents on that page, grade 2 where the page starts.

    Args:
        documents: documents with canonical ``page_refs`` / ``pages`` (see :mod:`workbench.text.refs`).
        seed: chooses the forms issued per page.
        forms: ``pts`` for the scholarly forms of PTS pages (``M i 56``, ``MN i 56``,
            ``PTS M 1.56``), keyed by the canonical page; or ``cst`` for the CST notation
            of every edition (``P1.56``, ``V1.71``, ``M1.70``, ``T1.128``). CST notation
            names no collection, so in ``cst`` mode pages are keyed by their notation and
            every document carrying it is judged (MN mūla and its commentary alike).
        forms_per_page: how many forms to issue per page (chosen by seed).
        group_of: the split group of the document where the page starts (default its work).
        issue_for: a predicate on the start document; queries are issued only for pages
            whose first start document passes (default: all).

    Raises:
        ValueError: an unknown ``forms``.
    """
    if forms not in ("pts", "cst"):
        raise ValueError(f"forms must be 'pts' or 'cst', got {forms!r}")
    group_of = group_of or (lambda d: d.work_id)
    parsed: dict[str, refs.PageRef | None] = {}

    def key(canon: str) -> str | None:
        if canon not in parsed:
            r = refs.parse(canon).ref
            parsed[canon] = r if isinstance(r, refs.PageRef) else None
        page = parsed[canon]
        if page is None or (forms == "pts" and page.edition != "PTS"):
            return None
        return canon if forms == "pts" else page.cst()

    starts: dict[str, list[Document]] = defaultdict(list)
    on_page: dict[str, list[str]] = defaultdict(list)
    for d in documents:
        for p in d.page_refs:
            k = key(p)
            if k is not None:
                starts[k].append(d)
        for p in d.pages:
            k = key(p)
            if k is not None:
                on_page[k].append(d.doc_id)
    out = []
    for order, (k, start_docs) in enumerate(starts.items()):
        first = start_docs[0]
        if issue_for is not None and not issue_for(first):
            continue
        if forms == "pts":
            page = cast(refs.PageRef, parsed[k])  # key() returns None for an unparsed page: every k has one
            texts = [(t, lang) for t, lang in refs.variants(page) if t != page.cst()]
        else:
            texts = [(k, "und")]
        rel = {doc: 1 for doc in on_page.get(k, [])}
        for d in start_docs:
            rel[d.doc_id] = 2
        for text, _lang in _pick_forms(texts, seed, k, forms_per_page):
            out.append(Candidate(text, "page_ref", "und", group_of(first), rel, (order, text)))
    return out


# ---------------------------------------------------------------- cst4 headwords

#: Headwords held in bold by more commentary documents than this are not issued (see :func:`cst_bold_headwords`).
HEADWORD_MAX_DF = 30
#: Longest headword issued, in words.
HEADWORD_MAX_WORDS = 4
#: Shortest headword issued, in letters.
HEADWORD_MIN_LETTERS = 3

_WORDS = re.compile(r"\w+")


def _folded_words(text: str) -> str:
    """``" " + words``: lower case, diacritics removed, one space between words (for the root check)."""
    return " " + " ".join(_WORDS.findall(ascii_fold(text).lower()))


def cst_bold_headwords(documents: Sequence[Document], max_df: int = HEADWORD_MAX_DF,
                       max_words: int = HEADWORD_MAX_WORDS, min_letters: int = HEADWORD_MIN_LETTERS) -> list[Candidate]:
    """Bold headwords of the CST aṭṭhakathā as queries for the commentary paragraphs that explain them.

    The commentary explains the root text word by word: a paragraph (a ``<p>`` line) opens with the
    word or phrase it explains in bold, the lemma (``<hi rend="bold">Pajāpati</hi>nti ettha …``).
    The loader keeps each document's bold spans (``metadata["bold"]``) and those that open a line
    (``metadata["bold_lead"]``, :mod:`workbench.data.loaders.cst4`).

    * A headword is a line-opening bold span of an aṭṭhakathā document (collection ``Ps``), in
      lower case (``pajāpati``), that occurs in the root text of the sutta the document comments
      on: the words of the mūla sutta, diacritics and case folded, hold the headword's words in a
      row, its last word as a prefix (the bold stops before the sandhi: ``Pajāpati`` + *nti* for
      *pajāpatiṃ*). The sutta is the one of the mūla paragraph with the document's number
      (``s0201a:105`` → ``s0201m:105`` → ``mn10``), for an unnumbered document the number of the
      numbered one before it in its book. So citations (``Visuddhimagge``) and the commentary's own
      terms are left out, and a headword needs its mūla book in ``documents``.
    * Left out as well: headwords of more than ``max_words`` words (quoted sentences), with fewer
      than ``min_letters`` letters (``na``, ``so``), or holding an elision mark (``…pe…``); and those
      held in bold by more than ``max_df`` commentary documents (``evaṃ``, the *Evaṃ me sutaṃ*
      opening every sutta's commentary: 156 documents).
    * Relevant: every commentary document holding the headword as a bold span (same lower-case
      text): grade 2 where the span opens a line (the paragraph explaining it), 1 elsewhere.
    * Forms: the IAST headword, plus its ASCII form (``pajapati``) when no other headword shares
      it (among all line-opening spans). Group ``headword:<iast>``, so both forms fall in one split.
    """
    def key(span: str) -> str:
        return unicodedata.normalize("NFC", span).lower()

    mula_sutta: dict[tuple[str, int], str] = {}
    sutta_words: dict[str, list[str]] = defaultdict(list)
    for d in documents:
        sutta = d.metadata.get("sutta")
        if d.metadata.get("collection") == "M" and sutta and d.metadata.get("paranum") is not None:
            for n in range(d.metadata["paranum"], d.metadata["paranum_end"] + 1):
                mula_sutta[(d.work_id, n)] = sutta
            sutta_words[sutta].append(d.text("root"))
    folded = {s: _folded_words("\n".join(texts)) for s, texts in sutta_words.items()}

    holders: dict[str, dict[str, int]] = defaultdict(dict)
    first: dict[str, int] = {}
    suttas: dict[str, set[str]] = defaultdict(set)
    last_num: dict[str, int] = {}
    for i, d in enumerate(documents):
        if d.metadata.get("collection") != "Ps":
            continue
        if d.metadata.get("paranum") is not None:
            last_num[d.work_id] = d.metadata["paranum"]
        for span in d.metadata.get("bold") or ():
            holders[key(span)].setdefault(d.doc_id, 1)
        book = d.work_id[:-1] + "m"
        sutta = mula_sutta.get((book, last_num[d.work_id])) if d.work_id in last_num else None
        for span in d.metadata.get("bold_lead") or ():
            k = key(span)
            holders[k][d.doc_id] = 2
            first.setdefault(k, i)
            if sutta:
                suttas[k].add(sutta)

    def qualifies(k: str) -> bool:
        words = _WORDS.findall(k)
        if "…" in k or not words or len(words) > max_words or sum(c.isalpha() for c in k) < min_letters:
            return False
        if len(holders[k]) > max_df:
            return False
        probe = _folded_words(k)
        return any(probe in folded[s] for s in suttas[k])

    chosen = sorted((k for k in first if qualifies(k)), key=lambda k: (first[k], k))
    ascii_count: dict[str, int] = defaultdict(int)
    for k in first:
        ascii_count[ascii_fold(k)] += 1
    out = []
    for k in chosen:
        rel = dict(holders[k])
        forms = [k]
        if ascii_fold(k) != k and ascii_count[ascii_fold(k)] == 1:
            forms.append(ascii_fold(k))
        for j, text in enumerate(forms):
            out.append(Candidate(text, "headword", "pi", f"headword:{k}", rel, (first[k], j)))
    return out


# ---------------------------------------------------------------- finalize

def project_to_passages(qrels: Iterable[Qrel], passages: Sequence[Document]) -> list[Qrel]:
    """Map segment judgments onto passages: a passage's grade is the highest of its segments'."""
    containing: dict[str, list[str]] = defaultdict(list)
    for p in passages:
        for s in p.segment_ids:
            containing[s].append(p.doc_id)
    best: dict[tuple[str, str], int] = {}
    for r in qrels:
        for pid in containing.get(r.doc_id, ()):
            key = (r.query_id, pid)
            best[key] = max(best.get(key, 0), r.relevance)
    return [Qrel(q, d, g) for (q, d), g in sorted(best.items())]


def finalize(candidates: Iterable[Candidate], prefix: str, seed: int, max_per_type: int | None = None,
             ratios: tuple[float, float, float] = DEFAULT_RATIOS) -> QuerySet:
    """Deduplicate, sample, number and split candidates.

    * Candidates with the same (query_type, text) are merged (their judgments united,
      keeping the highest grade; the first group wins).
    * With ``max_per_type``, each query type keeps at most that many queries: whole
      groups are taken in the seeded order ``sha256(seed:sample:group)``, so queries
      about one target stay together.
    * Queries are numbered ``<prefix>-<type>-<nnnnn>`` in corpus order.

    Raises:
        ValueError: an unknown query type, a candidate with no relevant document, or
            ``max_per_type`` < 1.
    """
    if max_per_type is not None and max_per_type < 1:
        raise ValueError(f"max_per_type must be >= 1, got {max_per_type}")
    merged: dict[tuple[str, str], Candidate] = {}
    for c in candidates:
        if c.query_type not in QUERY_TYPES:
            raise ValueError(f"unknown query_type {c.query_type!r}")
        if not c.relevant:
            raise ValueError(f"candidate {c.text!r} has no relevant document")
        text = " ".join(c.text.split())
        key = (c.query_type, text)
        if key in merged:
            old = merged[key]
            rel = dict(old.relevant)
            for d, g in c.relevant.items():
                rel[d] = max(rel.get(d, 0), g)
            merged[key] = Candidate(old.text, old.query_type, old.language, old.group, rel, old.order)
        else:
            merged[key] = Candidate(text, c.query_type, c.language, c.group, dict(c.relevant), c.order)
    by_type: dict[str, list[Candidate]] = defaultdict(list)
    for c in merged.values():
        by_type[c.query_type].append(c)
    queries, qrels = [], []
    chosen: dict[str, list[Candidate]] = {}
    for qtype in QUERY_TYPES:
        cands = by_type.get(qtype, [])
        if max_per_type is not None and len(cands) > max_per_type:
            ranked = sorted(cands, key=lambda c: (unit_interval(seed, f"sample:{c.group}"), c.order, c.text))
            cands = ranked[:max_per_type]
        chosen[qtype] = sorted(cands, key=lambda c: (c.order, c.text))
    split_of = assign_splits({t: [c.group for c in cs] for t, cs in chosen.items()}, seed, ratios)
    for qtype, cands in chosen.items():
        for n, c in enumerate(cands, start=1):
            qid = f"{prefix}-{_ABBREV[qtype]}-{n:05d}"
            queries.append(Query(qid, c.text, qtype, c.language, split_of[c.group], c.group))
            qrels += [Qrel(qid, d, g) for d, g in sorted(c.relevant.items())]
    return QuerySet(queries, qrels)


#: Filtered copies drawn per facet (:func:`filtered_variants`).
FILTERED_PER_FACET = 100
#: Query types a filtered copy is drawn from: what a reader filters (exact references name their unit already).
FILTERED_FROM = ("paraphrase", "term", "headword")


def filtered_variants(queries: Sequence[Query], qrels: Sequence[Qrel], documents: Sequence[Document],
                      facet_names: Sequence[str], seed: int,
                      per_facet: int = FILTERED_PER_FACET) -> tuple[list[Query], list[Qrel]]:
    """Filtered copies of a query set's queries, from the corpus's own structure (:mod:`workbench.io.facets`).

    For each facet in ``facet_names`` (``collection``, ``category``, ``book``, ``work``, ``chapter``), up to
    ``per_facet`` queries of :data:`FILTERED_FROM` whose relevant documents (grade >= 1) all share one value of
    the facet are copied with the filter ``{facet: value}``: the reader narrowing a search to the collection, the
    commentary layer, the book or the sutta the answer lies in. The copy keeps the text, type, language, split
    and group of its query (a group never straddles splits) and the judgments of the documents the filter admits
    (all its relevant ones, by construction); its id is ``<query_id>~<facet>``. Queries are drawn in the seeded
    order ``sha256(seed:filter:<facet>:<query_id>)`` (:func:`~workbench.data.querysets.split.unit_interval`).
    The filter's selectivity is the value's share of the corpus (MN 45 %, a sutta under 1 %), so the facets
    chosen span the range from about half the corpus to about 1 %.

    Returns:
        ``(queries, qrels)`` of the copies only.

    Raises:
        ValueError: a facet name that is not one of :data:`workbench.io.facets.FACETS` (or is ``doc_id``), or one
            that yields no copy (the documents lack it, or no query's answers share one value of it).
    """
    from workbench.io.facets import FACETS, Filter, facets, parse_filter

    bad = [f for f in facet_names if f not in FACETS or f in ("doc_id", "language")]
    if bad:
        raise ValueError(f"filters = {bad}: a filtered copy is drawn by collection, category, book, work or chapter")
    of = {d.doc_id: facets(d) for d in documents}
    relevant: dict[str, list[Qrel]] = defaultdict(list)
    for r in qrels:
        relevant[r.query_id].append(r)
    out_q: list[Query] = []
    out_r: list[Qrel] = []
    for facet in facet_names:
        picked = []
        for q in queries:
            rel = [r for r in relevant.get(q.query_id, ()) if r.relevance >= 1]
            if q.query_type not in FILTERED_FROM or q.filter or not rel:
                continue
            values = {of[r.doc_id].get(facet) for r in rel if r.doc_id in of}
            if len(values) != 1 or None in values:
                continue
            picked.append((unit_interval(seed, f"filter:{facet}:{q.query_id}"), q, values.pop()))
        if not picked:
            present = sorted({f for doc in of.values() for f, v in doc.items() if v not in (None, "", [])})
            raise ValueError(f"filters = [{facet!r}]: no query's relevant documents share one value of {facet} "
                             f"(the documents' facets: {', '.join(present)}), so no filtered copy can be drawn; "
                             "name a facet the documents have")
        picked.sort(key=lambda t: t[0])
        for _u, q, value in picked[:per_facet]:
            text = cast(Filter, parse_filter({facet: value})).text  # a non-empty filter: never None
            qid = f"{q.query_id}~{facet}"
            out_q.append(Query(qid, q.text, q.query_type, q.language, q.split, q.group, text))
            out_r += [Qrel(qid, r.doc_id, r.relevance) for r in relevant[q.query_id]
                      if r.doc_id in of and of[r.doc_id].get(facet) == value]
    return out_q, out_r


#: Negative queries drawn per dataset (:func:`negative_references`).
NEGATIVES = 100
_FIRST_NUMBER = re.compile(r"[0-9]+")


def negative_references(queries: Sequence[Query], seed: int, n: int = NEGATIVES,
                        ratios: tuple[float, float, float] = DEFAULT_RATIOS) -> list[Query]:
    """Unanswerable queries (type ``negative``) made from a query set's reference queries: the first number moved
    past the end of the text (``BG 2.47`` → ``BG 19.47``, ``Бг 2.47`` → ``Бг 21.47``, ``MN 10`` → ``MN 155``), kept
    only when the reference grammar (:func:`workbench.text.refs.parse`) diagnoses it as out of range, so no
    document can answer it. The text keeps its script and spelling; the number past the end is the book's last
    (:attr:`workbench.text.refs.Book.limits`) plus 1–10, seeded. Ids ``<query_id>~neg``; each its own group
    (``neg:<text>``), split by :func:`~workbench.data.querysets.split.assign_split`. At most ``n``, in the seeded
    order ``sha256(seed:negative:<query_id>)``; no judgments.
    """
    out: dict[str, Query] = {}
    picked = sorted((q for q in queries if q.query_type == "reference"),
                    key=lambda q: unit_interval(seed, f"negative:{q.query_id}"))
    for q in picked:
        res = refs.parse(q.text)
        if not isinstance(res.ref, refs.TextRef):
            continue
        limit = refs.BOOKS[res.ref.book].limits[0]
        m = _FIRST_NUMBER.search(q.text)
        if not isinstance(limit, int) or m is None or int(m.group()) != res.ref.numbers[0]:
            continue
        past = limit + 1 + int(unit_interval(seed, f"past:{q.query_id}") * 10)
        text = q.text[:m.start()] + str(past) + q.text[m.end():]
        if refs.parse(text).ref is not None or text in out:
            continue
        group = f"neg:{text}"
        out[text] = Query(f"{q.query_id}~neg", text, "negative", q.language, assign_split(group, seed, ratios), group)
        if len(out) >= n:
            break
    return list(out.values())


def absent_stem(folded: str) -> str:
    """The stem an absent lemma's ASCII form must not begin any corpus token with: the word without its last 3
    letters, never shorter than 5 (``abbhanumodi`` → ``abbhanumo``, which ``abbhanumodati`` begins with: the DPD
    files an aorist or an absolutive under its own headword)."""
    return folded[:max(5, len(folded) - 3)]


def absent_lemmas(documents: Sequence[Document], lexicon: Lexicon, seed: int, n: int = NEGATIVES // 2,
                  ratios: tuple[float, float, float] = DEFAULT_RATIOS, min_len: int = 6) -> list[Query]:
    """Unanswerable term queries (type ``negative``): Pali lemmas of the DPD that the corpus does not hold. A lemma
    qualifies when no token of any text of any document (every field and language) is one of its inflected
    forms, is a form of a compound made of it (:meth:`~workbench.data.loaders.dpd.Lexicon.members`), folds to
    the same ASCII as one of its forms (so a folded full-text lane cannot match it either), or begins with its
    :func:`absent_stem` (another tense or a compound the DPD files apart: ``akkositvā`` when the corpus has
    ``akkosissanti``); it is one word of at
    least ``min_len`` letters with an English meaning. Text: the lemma in IAST, as a reader types a term; language
    ``pi``; id ``absent~<ascii>``; group ``absent:<lemma>``, split by
    :func:`~workbench.data.querysets.split.assign_split`. At most ``n``, in the seeded order
    ``sha256(seed:absent-order:<lemma>)`` (not the group's hash, which picks the split); no judgments (no document
    holds the word, so none answers a term query for it).
    """
    present: set[str] = set()
    folded: set[str] = set()
    cache: dict[str, tuple[str, ...]] = {}
    for d in documents:
        for t in d.texts:
            for tok in tokens(t.text):
                if tok not in cache:
                    cache[tok] = lexicon.lemmas(tok)
                    folded.add(ascii_fold(tok))
                present.update(cache[tok])
    for lemma in list(present):
        present.update(lexicon.members(lemma))
    candidates = [lemma for lemma in lexicon.all_lemmas()
                  if lemma not in present and len(lemma) >= min_len and lemma.isalpha()]
    out: list[Query] = []
    ids: set[str] = set()
    starts = sorted(folded)
    for lemma in sorted(candidates, key=lambda w: unit_interval(seed, f"absent-order:{w}")):
        key = ascii_fold(lemma)
        if key in ids or any(ascii_fold(f) in folded for f in (lemma, *lexicon.forms_of(lemma))):
            continue
        stem = absent_stem(key)
        at = bisect.bisect_left(starts, stem)
        if at < len(starts) and starts[at].startswith(stem):  # a form the DPD files under another headword
            continue
        if not any(e.meaning_en for e in lexicon.lemma_entries(lemma)):
            continue
        ids.add(key)
        group = f"absent:{lemma}"
        out.append(Query(f"absent~{key}", lemma, "negative", "pi", assign_split(group, seed, ratios), group))
        if len(out) >= n:
            break
    return out


def gita_questions(corpus: GitaCorpus, seed: int, n: int = NEGATIVES // 2,
                   ratios: tuple[float, float, float] = DEFAULT_RATIOS) -> list[Query]:
    """Unanswerable questions for another corpus's index (type ``negative``): the gita's English renderings of
    ``n`` verses, one translator each, asked of a corpus that does not hold the gita (the bilara passages, CST), so
    no document there answers them by construction, however many words they share with it. Id ``gita~<doc_id>``;
    group ``gita:<doc_id>``, split by :func:`~workbench.data.querysets.split.assign_split`; verses drawn in the
    seeded order ``sha256(seed:gita-question:<doc_id>)``, the translator by ``sha256(seed:gita-translator:<doc_id>)``;
    no judgments."""
    out: list[Query] = []
    for d in sorted(corpus.documents, key=lambda d: unit_interval(seed, f"gita-question:{d.doc_id}")):
        texts = sorted(t.text for t in d.texts if t.field == "translation" and t.language == "en" and t.text.strip())
        if not texts:
            continue
        text = texts[int(unit_interval(seed, f"gita-translator:{d.doc_id}") * len(texts))]
        group = f"gita:{d.doc_id}"
        out.append(Query(f"gita~{d.doc_id}", " ".join(text.split()), "negative", "en",
                         assign_split(group, seed, ratios), group))
        if len(out) >= n:
            break
    return out
