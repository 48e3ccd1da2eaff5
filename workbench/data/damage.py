"""Known damage in a source's texts, found when a dataset is built: letters its pipeline dropped.

The gita's source (gita/gita ``archive/translation_old.json``) lost the letters ``qu`` in four
translators' texts: "eal" for *equal*, "alities" for *qualities*, "conered" for *conquered*. The
build keeps the source's texts as published (the corpora are never edited); it finds such words,
writes them beside the documents (``damage.json``, :func:`write_report`) and prints one line, and
the judging page can show a scholar a note where a text is known damaged (:func:`known_damage`,
:func:`damage_note`).

**The rule for dropped letters** (:class:`DroppedLetters`, :func:`check`), on the texts of one
corpus, using no word list but the corpus itself:

1. *Words*: maximal runs of letters (:data:`WORD`), lower-cased. A *source* is who wrote a text
   (a translator) or the field it comes from (the word-meanings gloss).
2. *Which sources keep the letters*: English words hold ``qu`` about 4-5 times in 1,000 (the
   gita's gloss 4.8, Purohit Swami 4.6); a source where fewer than ``kept_per_1000`` (1) of
   every 1,000 words hold them is taken to drop them (the four damaged translators: 0 to 0.16).
   The words of the sources that keep them are the *reference words*; every source's words are
   the *corpus words*.
3. A word X of a source that does not keep the letters is **damaged** when X is not a reference
   word and inserting the letters at one position gives a corpus word W (the *likely* word;
   the most frequent in the corpus when several fit, then the first alphabetically). X must
   be found nowhere in the intact sources (so *it*, which *quit* minus ``qu`` also gives, never
   counts, nor does *vanished* for *vanquished*), and W must be attested.
4. When no source keeps the letters there is no evidence, and nothing is reported (the
   report's ``sources`` say so).

A damaged word whose intact form the corpus never uses is not found ("ite" for *quite*: no
source of the gita writes *quite*). Words are found, never changed: retrieval and the judging
page see the text as published.
"""

from __future__ import annotations

import json
import re
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

#: A word: a maximal run of letters (any script; digits and ``_`` split words).
WORD = re.compile(r"[^\W\d_]+")

#: The file a build writes beside ``documents.jsonl``.
FILENAME = "damage.json"

#: Version of the file's layout.
FORMAT_VERSION = 1


@dataclass(frozen=True)
class DroppedLetters:
    """A known kind of damage: a letter sequence a source's pipeline dropped from words.

    Attributes:
        letters: the dropped letters, lower case (``"qu"``).
        kept_per_1000: a source keeps the letters when at least this many of every 1,000 of its
            words hold them (see the module docstring).
    """

    letters: str
    kept_per_1000: float = 1.0

    @property
    def name(self) -> str:
        """The rule's name in reports: ``dropped-qu``."""
        return f"dropped-{self.letters}"

    def describe(self) -> str:
        """The rule in one sentence (written into ``damage.json``)."""
        return (f"a word of a source where fewer than {self.kept_per_1000:g} in 1,000 words hold '{self.letters}', "
                f"that no source keeping '{self.letters}' uses, and that becomes a word of the corpus when "
                f"'{self.letters}' is put back at one position")


@dataclass(frozen=True)
class CheckedText:
    """One text to check: the document, its field, its source (a translator, or the field's name)."""

    doc_id: str
    field: str
    source: str
    text: str


@dataclass(frozen=True)
class Damage:
    """One damaged word of one text: ``token`` as written (first occurrence), ``likely`` the word it was,
    ``count`` how often it occurs in that text."""

    doc_id: str
    field: str
    source: str
    token: str
    likely: str
    rule: str
    count: int = 1

    def to_json(self) -> dict:
        return {"rule": self.rule, "field": self.field, "source": self.source, "token": self.token,
                "likely": self.likely, "count": self.count}


@dataclass
class DamageReport:
    """What :func:`check` found.

    Attributes:
        rules: rule name → ``{"description", "kept_per_1000", "sources": {source: {"words", "with_letters",
            "per_1000", "keeps"}}}``: the evidence each rule used.
        found: the damaged words, in document order (then field, source, first occurrence).
        held_out: sources whose texts are not in the built documents (query texts); their
            findings are marked ``held_out`` in the file.
    """

    rules: dict[str, dict] = field(default_factory=dict)
    found: list[Damage] = field(default_factory=list)
    held_out: frozenset = frozenset()

    @property
    def tokens(self) -> int:
        """Damaged word occurrences."""
        return sum(d.count for d in self.found)

    @property
    def documents(self) -> list[str]:
        """The documents with at least one damaged word, in order."""
        return list(dict.fromkeys(d.doc_id for d in self.found))

    def by_source(self) -> dict[str, int]:
        """Source → damaged word occurrences, by name."""
        c: Counter = Counter()
        for d in self.found:
            c[d.source] += d.count
        return dict(sorted(c.items()))

    def to_json(self) -> dict:
        """The ``damage.json`` layout::

            {"format": 1, "rules": {name: {...}},
             "summary": {"documents": int, "tokens": int, "by_source": {source: tokens},
                         "documents_by_source": {source: documents}},
             "documents": {doc_id: [{"rule", "field", "source", "token", "likely", "count", "held_out"?}]}}
        """
        docs: dict[str, list[dict]] = {}
        per_source: dict[str, set] = defaultdict(set)
        for d in self.found:
            entry = d.to_json()
            if d.source in self.held_out:
                entry["held_out"] = True
            docs.setdefault(d.doc_id, []).append(entry)
            per_source[d.source].add(d.doc_id)
        return {"format": FORMAT_VERSION, "rules": self.rules,
                "summary": {"documents": len(docs), "tokens": self.tokens, "by_source": self.by_source(),
                            "documents_by_source": {s: len(v) for s, v in sorted(per_source.items())}},
                "documents": docs}


def _words(text: str) -> list[str]:
    return WORD.findall(text)


def check(texts: Iterable[CheckedText], rules: Iterable[DroppedLetters], *,
          held_out: Iterable[str] = ()) -> DamageReport:
    """Find the words each rule says a source damaged (the rule is in the module docstring).

    Args:
        texts: every text of the corpus to check and to take evidence from (include the
            held-out translators' texts: they are evidence too).
        rules: the known kinds of damage of this source (e.g. ``[DroppedLetters("qu")]``).
        held_out: sources whose texts the built documents leave out (marked in the report).

    Returns:
        A :class:`DamageReport`.

    Raises:
        ValueError: a rule's letters are empty or not lower-case letters.
    """
    texts = list(texts)
    report = DamageReport(held_out=frozenset(held_out))
    words_of: list[list[str]] = [_words(t.text) for t in texts]
    for rule in rules:
        if not rule.letters or not WORD.fullmatch(rule.letters) or rule.letters != rule.letters.lower():
            raise ValueError(f"a dropped-letters rule needs lower-case letters, got {rule.letters!r}")
        total: Counter = Counter()
        holding: Counter = Counter()
        vocab: dict[str, Counter] = defaultdict(Counter)
        for t, ws in zip(texts, words_of):
            for w in ws:
                lw = w.lower()
                vocab[t.source][lw] += 1
                total[t.source] += 1
                holding[t.source] += rule.letters in lw
        keeps = {s: total[s] > 0 and 1000 * holding[s] / total[s] >= rule.kept_per_1000 for s in total}
        report.rules[rule.name] = {
            "description": rule.describe(), "kept_per_1000": rule.kept_per_1000,
            "sources": {s: {"words": total[s], "with_letters": holding[s],
                            "per_1000": round(1000 * holding[s] / total[s], 3) if total[s] else None,
                            "keeps": keeps[s]} for s in sorted(total)}}
        reference = set().union(*(set(vocab[s]) for s in vocab if keeps[s])) if any(keeps.values()) else set()
        if not reference:
            continue  # no source keeps the letters: no evidence either way
        corpus: Counter = Counter()
        for c in vocab.values():
            corpus.update(c)
        likely_of: dict[str, str | None] = {}

        # noqa B023 below: likely() is only called in this iteration of the rules loop
        def likely(x: str) -> str | None:
            if x not in likely_of:  # noqa: B023
                fits = {x[:i] + rule.letters + x[i:] for i in range(len(x) + 1)} & corpus.keys()  # noqa: B023
                likely_of[x] = min(fits, key=lambda w: (-corpus[w], w)) if fits else None  # noqa: B023
            return likely_of[x]  # noqa: B023

        for t, ws in zip(texts, words_of):
            if keeps.get(t.source, True):
                continue
            seen: dict[str, list] = {}
            for w in ws:
                lw = w.lower()
                if lw in reference or rule.letters in lw:
                    continue
                if lw in seen:
                    seen[lw][1] += 1
                    continue
                fit = likely(lw)
                if fit is not None:
                    seen[lw] = [w, 1, fit]
            report.found += [Damage(t.doc_id, t.field, t.source, tok, fit, rule.name, n)
                             for tok, n, fit in seen.values()]
    return report


def describe(report: Mapping, dataset: str, unit: str = "documents") -> str:
    """The build's one line about a report (``damage.json``'s dict), e.g. ``119 verses of gita: 230 tokens
    where 'qu' seems dropped (translators Dr. S. Sankaranarayan 60, …); see damage.json``."""
    s = report.get("summary", {})
    letters = ", ".join(f"'{name.removeprefix('dropped-')}'" for name in report.get("rules", {}))
    if not s.get("tokens"):
        return f"{dataset}: no damaged words found (checked: {letters or 'nothing'})"
    who = ", ".join(f"{src} {n}" for src, n in s["by_source"].items())
    return (f"{s['documents']} {unit} of {dataset}: {s['tokens']} tokens where {letters} seems dropped "
            f"(translators {who}); see {FILENAME}")


def write_report(folder: Path, report: Mapping) -> Path:
    """Write ``damage.json`` (atomically, sorted keys) into a build folder; returns its path.

    Raises:
        StorageError: the file cannot be written.
    """
    from workbench._infra import durable

    path = Path(folder) / FILENAME
    durable.atomic_write_json(path, dict(report), sort_keys=True)
    return path


# ---------------------------------------------------------------- reading, for the judging page

_CACHE: dict[Path, tuple[tuple[int, int], dict]] = {}


def read_report(dataset: str, home: Path | None = None) -> dict:
    """The ``damage.json`` of a built dataset as a dict; ``{}`` when the build has none (a source without
    known damage) or it cannot be read. Cached per file (re-read when the file changes)."""
    from workbench.settings import home_dir

    path = Path(home if home is not None else home_dir()) / "datasets" / dataset / FILENAME
    try:
        st = path.stat()
    except OSError:
        return {}
    stamp = (st.st_mtime_ns, st.st_size)
    hit = _CACHE.get(path)
    if hit is not None and hit[0] == stamp:
        return hit[1]
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return {}
    report = report if isinstance(report, dict) else {}
    _CACHE[path] = (stamp, report)
    return report


def known_damage(dataset: str, doc_id: str, *, home: Path | None = None, held_out: bool = False) -> list[dict]:
    """The known damaged words of one document of a built dataset, for the judging page.

    Args:
        dataset: the dataset's name (``gita``).
        doc_id: the document shown (``bg2.45``).
        home: the workbench home (default :func:`workbench.settings.home_dir`).
        held_out: also list words of texts the documents leave out (query texts); default no.

    Returns:
        ``[{"rule": "dropped-qu", "field": "translation", "source": "Swami Gambirananda", "token": "alities",
        "likely": "qualities", "count": 1}, …]`` in text order; ``[]`` when none is known (or the
        dataset has no ``damage.json``). Never raises for a missing or unreadable file.
    """
    entries = read_report(dataset, home).get("documents", {}).get(doc_id, [])
    return [dict(e) for e in entries if isinstance(e, dict) and (held_out or not e.get("held_out"))]


def damage_note(entries: Iterable[Mapping]) -> str:
    """A note for the scholar from :func:`known_damage`'s entries (``""`` when there are none), e.g.
    ``Known damage in the source, not in the verse: Swami Sivananda's translation lost the letters 'qu'
    ("eal" is "equal", "alities" is "qualities").``"""
    by_source: dict[tuple[str, str], list[str]] = {}
    for e in entries:
        letters = str(e.get("rule", "")).removeprefix("dropped-")
        by_source.setdefault((str(e.get("source")), letters), []).append(f"\"{e.get('token')}\" is \"{e.get('likely')}\"")
    if not by_source:
        return ""
    parts = [f"{src}'s text lost the letters '{letters}' ({', '.join(words)})"
             for (src, letters), words in by_source.items()]
    return "Known damage in the source, not in the verse: " + "; ".join(parts) + "."
