"""What the judging pages (Judge, Adjudicate, Agreement) and the drill-down's "send to the pool"
show and do, without Streamlit: the pages in ``dashboards/views/`` only draw it.

* :func:`pair_view` — one (query, document) pair as a rater sees it: the query (text, type,
  language), the document's canonical address and its texts grouped as the drill-down groups
  them (:func:`workbench.dashboard.views.doc_texts`), the query's words marked in them
  (:func:`highlight_html`), and the :func:`~workbench.judging.store.document_hash` of the
  document shown, which goes with the judgment. **Blind**: nothing about a config, lane, rank,
  score, pool tier or why the pair was pooled is part of it.
* :func:`query_terms` / :func:`highlight_html` — diacritic-folded matching
  (:func:`workbench.textnorm.match_form`, then :func:`workbench.textnorm.ascii_fold`:
  ``satipatthana`` marks ``satipaṭṭhānaṁ``; ``ṃ`` and ``ṁ`` are one letter). Pali and Sanskrit
  inflect, so a query word of four letters also marks the words it begins, and a longer one
  the words that begin with it less its last letter (``dhamma`` marks ``dhammassa`` and
  ``dhammo``); shorter words must match whole, and common English and Russian words are never
  marked.
* :func:`unjudged_docs` / :func:`send_to_pool` — the drill-down's documents without a label
  go to the judging pool (reason ``sent``), skipping pairs already pooled or judged.
"""

from __future__ import annotations

import functools
import html
import re
import unicodedata
from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from workbench.textnorm import ascii_fold, match_form

#: The rater's buttons: (grade or None for "cannot judge", label, keyboard shortcut, session key).
GRADE_BUTTONS: tuple[tuple[int | None, str, str, str], ...] = (
    (0, "0 · not relevant", "0", "judge_g0"),
    (1, "1 · relevant", "1", "judge_g1"),
    (2, "2 · highly relevant", "2", "judge_g2"),
    (None, "cannot judge", "X", "judge_x"),
)
#: The undo button's shortcut and key.
UNDO_SHORTCUT, UNDO_KEY = "U", "judge_undo"

#: Words never marked (too common to help a reader find the match).
STOPWORDS = frozenset("""
a about after all also am an and any are as at be been before being but by can could did do does each for from
had has have he her here hers him his how i if in into is it its me more most my no nor not now of on once only or
other our ours out over own same shall she should so some such than that the their theirs them then there these they
this those through thus to too under unto until up upon very was we were what when where which while who whom why
will with would ye yet you your yours o thou thee thy thine hath doth therefore however said says
и в во не что он на я с со как а то все она так его но да ты к у же вы за бы по только ее мне было вот от
меня еще нет о из ему теперь когда даже ну ли если уже или ни быть был него до вас нибудь опять уж вам ведь там
потом себя ничего ей может они тут где есть надо ней для мы тебя их чем была сам чтоб без будто чего раз тоже себе
под будет ж тогда кто этот того потому этого какой совсем ним здесь этом один почти мой тем чтобы нее сейчас были
куда зачем всех никогда можно при наконец два об другой хоть после над больше тот через эти нас про всего них
какая много разве три эту моя впрочем хорошо свою этой перед иногда лучше чуть том нельзя такой им более всегда
конечно всю между
""".split())

#: Shortest query word that is marked at all, and shortest that also marks the words it begins.
MIN_TERM, MIN_PREFIX = 3, 4


@functools.lru_cache(maxsize=1)
def _word_re() -> re.Pattern:
    """A word: a letter, then letters and combining marks (so Devanagari vowel signs and viramas stay
    inside their word; Python's ``\\w`` has no class for marks, so it is built once from Unicode)."""
    marks, start = [], None
    for cp in [*range(0x20000), *range(0xE0000, 0xE0200)]:  # every mark lies in these planes
        is_mark = unicodedata.category(chr(cp)).startswith("M")
        if is_mark and start is None:
            start = cp
        elif not is_mark and start is not None:
            marks.append((start, cp - 1))
            start = None
    if start is not None:
        marks.append((start, 0xE01FF))
    cls = "".join(f"\\U{a:08x}" if a == b else f"\\U{a:08x}-\\U{b:08x}" for a, b in marks)
    return re.compile(f"[^\\W\\d_](?:[^\\W\\d_]|[{cls}])*")


def fold(word: str) -> str:
    """The matching form of a word: NFC, lower case, one niggahīta, every diacritic dropped
    (``Satipaṭṭhānaṃ`` → ``satipatthanam``)."""
    return ascii_fold(match_form(word))


def query_terms(text: str) -> tuple[str, ...]:
    """The folded words of a query that are marked in the documents (see the module docstring), in order."""
    out = []
    for m in _word_re().finditer(text or ""):
        w = fold(m.group())
        if len(w) >= MIN_TERM and w not in STOPWORDS and w not in out:
            out.append(w)
    return tuple(out)


def _stem(term: str) -> str:
    return term[:-1] if len(term) > MIN_PREFIX else term


def _matches(word: str, terms: Sequence[str]) -> bool:
    return any(word == t or (len(t) >= MIN_PREFIX and word.startswith(_stem(t))) for t in terms)


def highlight_html(text: str, terms: Sequence[str]) -> str:
    """``text`` as HTML (escaped) with each word that matches a query term wrapped in ``<mark>``."""
    if not terms:
        return html.escape(text)
    parts, last = [], 0
    for m in _word_re().finditer(text):
        if _matches(fold(m.group()), terms):
            parts.append(html.escape(text[last:m.start()]))
            parts.append(f"<mark>{html.escape(m.group())}</mark>")
            last = m.end()
    parts.append(html.escape(text[last:]))
    return "".join(parts)


def marked_words(text: str, terms: Sequence[str]) -> list[str]:
    """The words of ``text`` :func:`highlight_html` marks, in order (for tests and counts)."""
    return [m.group() for m in _word_re().finditer(text) if _matches(fold(m.group()), terms)]


#: How the drill-down's text groups are titled on the judging pages.
TEXT_LABELS = {"original": "Original", "transliteration": "Transliteration", "translation": "Translations",
               "other": "Other texts"}


@dataclass(frozen=True)
class PairView:
    """One pair as the judging pages show it (blind: see the module docstring).

    Attributes:
        dataset, query_id, doc_id: the pair.
        query_text, query_type, language: the query (empty when it left the build).
        address: the document's canonical address (``BG 2.47``).
        blocks: ``(label, html)`` per text group with the query's words marked.
        doc_hash: :func:`~workbench.judging.store.document_hash` of the document shown
            (None when the document is not in the current build: only "cannot judge" is then offered).
        marks: how many words are marked in all the texts.
    """

    dataset: str
    query_id: str
    doc_id: str
    query_text: str
    query_type: str
    language: str
    address: str
    blocks: tuple[tuple[str, str], ...]
    doc_hash: str | None
    marks: int

    @property
    def missing(self) -> bool:
        """Whether the document is not in the current build of the dataset."""
        return self.doc_hash is None


def pair_view(dataset: str, query_id: str, doc_id: str, queries, documents: Mapping[str, Any], *,
              derive_cyrillic: bool = False) -> PairView:
    """Build the rater's view of one pair from a built dataset (:class:`~workbench.dashboard.store.DatasetFiles`'s
    ``queries`` frame, indexed by ``query_id``, and ``documents``)."""
    from workbench.dashboard.views import doc_texts
    from workbench.judging.store import document_hash

    if query_id in queries.index:
        q = queries.loc[query_id]
        qtext, qtype, lang = str(q["text"]), str(q["query_type"]), str(q["language"])
    else:
        qtext, qtype, lang = "", "", ""
    doc = documents.get(doc_id)
    if doc is None:
        return PairView(dataset, query_id, doc_id, qtext, qtype, lang, doc_id, (), None, 0)
    terms = query_terms(qtext)
    texts = doc_texts(doc, derive_cyrillic=derive_cyrillic)
    blocks, marks = [], 0
    for part, label in TEXT_LABELS.items():
        if texts[part]:
            blocks.append((label, highlight_html(texts[part], terms)))
            marks += len(marked_words(texts[part], terms))
    return PairView(dataset, query_id, doc_id, qtext, qtype, lang, doc.address, tuple(blocks), document_hash(doc),
                    marks)


def text_html(block_html: str, language: str = "") -> str:
    """One text group as a block of HTML: line breaks kept, marks highlighted, long texts scroll."""
    lang = f' lang="{html.escape(language)}"' if language else ""
    return (f'<div class="wb-judge-text"{lang} style="white-space: pre-wrap; font-size: 1.05rem; line-height: 1.65; '
            f'max-height: 32rem; overflow-y: auto">{block_html}</div>')


def grade_text(grade: int | None, cannot_judge: bool = False) -> str:
    """``2 · highly relevant``, ``cannot judge``… for tables."""
    from workbench.judging.store import GRADES

    if cannot_judge or grade is None:
        return "cannot judge"
    return f"{grade} · {GRADES.get(int(grade), '?')}"


def when(ts) -> str:
    """A store timestamp for a table: ``2026-11-30 19:17 UTC`` (empty when missing)."""
    if ts is None:
        return ""
    import datetime as _dt

    if isinstance(ts, _dt.datetime) and ts.tzinfo is not None:
        ts = ts.astimezone(_dt.timezone.utc)
    return ts.strftime("%Y-%m-%d %H:%M UTC") if hasattr(ts, "strftime") else str(ts)


def progress_text(done: int, total: int) -> tuple[float, str]:
    """The progress bar's fraction and label for ``done`` of ``total`` pairs judged."""
    if total <= 0:
        return 0.0, "nothing to judge yet"
    return min(done / total, 1.0), f"{done} of {total} judged ({total - done} left)"


# ---------------------------------------------------------------- the drill-down's send-to-pool


def unjudged_docs(ranked: Iterable[Sequence[str]], labelled: Mapping[str, int]) -> list[str]:
    """The documents of the shown ranked lists (each a sequence of doc ids, best first) that have no
    label in ``labelled`` (the query's qrels), interleaved by rank and without repeats."""
    lists = [list(r) for r in ranked]
    out: list[str] = []
    for i in range(max((len(r) for r in lists), default=0)):
        for r in lists:
            if i < len(r) and r[i] not in labelled and r[i] not in out:
                out.append(r[i])
    return out


def send_to_pool(store, dataset: str, query_id: str, doc_ids: Sequence[str], *, raters_per_pair: int = 2,
                 params: dict | None = None) -> tuple[int | None, int]:
    """Pool ``(query_id, doc)`` for each document not pooled or judged yet (reason ``sent``).

    Returns:
        ``(pool_id, pairs added)``; ``(None, 0)`` when every pair is already pooled or judged
        (no empty pool is made).

    Raises:
        JudgeError: ``raters_per_pair`` outside 1..10 (from the store).
    """
    from workbench.judging.store import PoolPair

    taken = store.pooled_pairs(dataset) | store.judged_pairs(dataset)
    fresh = [d for d in dict.fromkeys(doc_ids) if (query_id, d) not in taken]
    if not fresh:
        return None, 0
    pairs = [PoolPair(query_id, d, tier=0, priority=float(len(fresh) - i), reason="sent") for i, d in enumerate(fresh)]
    pool_id = store.create_pool(dataset, pairs, raters_per_pair=raters_per_pair,
                                params={"sent_from": "dashboard query drill-down", **(params or {})})
    return pool_id, len(fresh)
