"""The Bhagavad-gītā (gita/gita data): 701 verses with translations.

One document per verse: doc_id ``bg<c>.<v>``, address ``BG <c>.<v>``, work ``bg``,
granularity ``verse``. Texts:

* ``root`` (sa, Deva): the Devanagari verse with its trailing ``।।2.47।।`` removed;
* ``transliteration`` (sa, Latn, source ``gita``): the romanisation as given (a
  Hindi-oriented scheme with ``ṣh``, ``ch``, ``ṛi``);
* ``transliteration_iast`` (sa, Latn, source ``iast``): the same in strict IAST
  (:func:`workbench.text.normalize.gita_to_iast`);
* ``word_meanings`` (en, Latn): the word-by-word gloss ``karmaṇi—in prescribed duties; …``;
* ``word_meanings_iast`` (en, Latn, source ``iast``): the same with each Sanskrit word
  (left of the dash) in strict IAST and the English gloss untouched;
* ``translation`` per translator (en Latn or hi Deva, source = the translator's name),
  from ``archive/translation_old.json`` (the translators' own wording, before the 2023
  GPT rewrite), with the leading verse address (``2.47``, ``1.23. - 1.24.``,
  ``।।1.4 -- 1.6।।``) stripped so that no text matches on the number alone. Four
  placeholders that stand where a translator has no text ("No such translation is
  available for this sloka." and the like, BG 10.30, 13.1, 18.2) are dropped.

Several verses share one translation where a translator rendered them together
(``1.4 -- 1.6``); :func:`shared_translation_groups` exposes that for split assignment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from workbench.data.damage import CheckedText, DroppedLetters
from workbench.data.loaders._io import json_kind, read_json
from workbench.errors import DataError
from workbench.text.normalize import gita_to_iast, nfc
from workbench.types import Document, Text

#: Verses per chapter in this 701-verse edition (13.1 is Arjuna's question).
VERSES_PER_CHAPTER = (47, 72, 43, 42, 29, 47, 30, 28, 34, 42, 55, 20, 35, 27, 20, 24, 28, 78)

_ADDR = r"\d+\s*\.\s*\d+\s*\.?"
_LEADING_ADDRESS = re.compile(
    rf"^\s*(?:।।\s*)?{_ADDR}(?:\s*(?:--|-|–|—|to|,)?\s*{_ADDR})*\s*(?:।।|॥)?\s*"
)
_TRAILING_ADDRESS = re.compile(r"\s*[।॥]{1,2}\s*\d+\s*\.\s*\d+\s*[।॥]{1,2}\s*$")

#: Placeholders the data holds where a translator has no text (BG 10.30, 13.1, 18.2); dropped.
_PLACEHOLDER = re.compile(r"^(?:No such translation is available for this sloka\.?|No Translation|Hindi Translation By .*)$",
                          re.IGNORECASE)

_SCRIPT = {"english": ("en", "Latn"), "hindi": ("hi", "Deva"), "sanskrit": ("sa", "Deva")}


def word_meanings_pairs(meanings: str) -> list[tuple[str, str]]:
    """Split a gloss ``karmaṇi—in prescribed duties; eva—only`` into ``(word, meaning)`` pairs.

    Entries without an em dash are skipped. Words keep the data's romanisation.
    """
    out = []
    for part in meanings.split(";"):
        word, sep, meaning = part.partition("—")
        if sep and word.strip():
            out.append((word.strip(), meaning.strip()))
    return out


def word_meanings_iast(meanings: str) -> str:
    """The gloss with each Sanskrit word in strict IAST (:func:`gita_to_iast`), English untouched."""
    return "; ".join(f"{gita_to_iast(w)}—{m}" for w, m in word_meanings_pairs(meanings))


def strip_leading_address(text: str) -> str:
    """Remove a leading verse address (``2.47``, ``1.1.``, ``1.23. - 1.24.``, ``।।1.4 -- 1.6।।``) and trim."""
    return _LEADING_ADDRESS.sub("", text, count=1).strip()


def strip_trailing_address(text: str) -> str:
    """Remove the Devanagari verse's closing ``।।2.47।।`` and trim."""
    return _TRAILING_ADDRESS.sub("", text).strip()


_INT = "integer"
_STR = "string"

#: The keys each record must carry, and their JSON type (other keys are ignored).
_VERSE_KEYS = {"id": _INT, "chapter_number": _INT, "verse_number": _INT, "text": _STR}
_VERSE_OPTIONAL = {"transliteration": _STR, "word_meanings": _STR}
_TRANSLATION_KEYS = {"verse_id": _INT, "author_id": _INT, "authorName": _STR, "lang": _STR, "description": _STR}
_CHAPTER_KEYS = {"chapter_number": _INT}
_CHAPTER_OPTIONAL = {"name_translation": _STR}


def _is(value: object, kind: str) -> bool:
    if kind == _INT:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, str)


def _records(obj: object, path: Path, what: str, required: dict[str, str],
             optional: dict[str, str] | None = None) -> list[dict]:
    """``obj`` if it is a JSON array of objects with the ``required`` keys (and types), else a DataError.

    The message names the path, the record's position and the key.
    """
    if not isinstance(obj, list):
        raise DataError(f"{path} is not a JSON array of {what} records (it holds a JSON {json_kind(obj)}); "
                        "restore it from gita/gita")
    for i, rec in enumerate(obj):
        if not isinstance(rec, dict):
            raise DataError(f"{path}: {what} record {i} is a JSON {json_kind(rec)}, not an object; "
                            "restore the file from gita/gita")
        for key, kind in required.items():
            if key not in rec:
                raise DataError(f"{path}: {what} record {i} lacks the key {key!r}; restore the file from gita/gita")
            if not _is(rec[key], kind):
                raise DataError(f"{path}: {what} record {i}: {key!r} is a JSON {json_kind(rec[key])}, "
                                f"not {'an' if kind == _INT else 'a'} {kind}; restore the file from gita/gita")
        for key, kind in (optional or {}).items():
            if key in rec and not _is(rec[key], kind):
                raise DataError(f"{path}: {what} record {i}: {key!r} is a JSON {json_kind(rec[key])}, not a {kind}; "
                                "restore the file from gita/gita")
    return obj


@dataclass
class GitaCorpus:
    """The gita verses and the facts the query builders need.

    Attributes:
        documents: 701 verse documents, in verse order (BG 1.1 … BG 18.78).
        translators: translator name → language code, in the data's author-id order.
        files: the files read.
    """

    documents: list[Document] = field(default_factory=list)
    translators: dict[str, str] = field(default_factory=dict)
    files: list[Path] = field(default_factory=list)


def load_gita(data_dir: Path) -> GitaCorpus:
    """Load the 701 verses of ``gita/`` with every translator's original wording.

    Raises:
        DataError: a file is missing or malformed (not an array of records with the
            keys used, each of the right type), a translation points at an unknown
            verse, or the verses are not the 701 of the edition (names the path, and
            the record and key).
    """
    base = data_dir / "gita"
    verse_path, trans_path = base / "data" / "verse.json", base / "archive" / "translation_old.json"
    chapters_path = base / "data" / "chapters.json"
    verses, translations, chapters = read_json(verse_path), read_json(trans_path), read_json(chapters_path)
    if not isinstance(verses, list) or len(verses) != sum(VERSES_PER_CHAPTER):
        n = len(verses) if isinstance(verses, list) else "no list of"
        raise DataError(f"{verse_path} holds {n} verses; expected 701 (gita/gita @ c6fce39)")
    _records(verses, verse_path, "verse", _VERSE_KEYS, _VERSE_OPTIONAL)
    _records(translations, trans_path, "translation", _TRANSLATION_KEYS)
    _records(chapters, chapters_path, "chapter", _CHAPTER_KEYS, _CHAPTER_OPTIONAL)
    ids = [v["id"] for v in verses]
    if len(set(ids)) != len(ids):
        dup = sorted({i for i in ids if ids.count(i) > 1})[:5]
        raise DataError(f"{verse_path} repeats verse ids {dup}; restore it from gita/gita")
    want = {(c, n) for c, count in enumerate(VERSES_PER_CHAPTER, start=1) for n in range(1, count + 1)}
    have = {(v["chapter_number"], v["verse_number"]) for v in verses}
    if have != want:
        odd = sorted(have - want)[:5] or sorted(want - have)[:5]
        raise DataError(f"{verse_path} does not hold the 701 verses BG 1.1 … 18.78 of the edition "
                        f"(e.g. {', '.join(f'{c}.{n}' for c, n in odd)} is out of place); restore it from gita/gita")
    chapter_names = {c["chapter_number"]: c.get("name_translation", "") for c in chapters}
    by_verse: dict[int, list[dict]] = {}
    for rec in translations:
        by_verse.setdefault(rec["verse_id"], []).append(rec)
    corpus = GitaCorpus(files=[verse_path, trans_path, chapters_path])
    for rec in sorted(translations, key=lambda r: r["author_id"]):
        corpus.translators.setdefault(rec["authorName"], _SCRIPT.get(rec["lang"], ("und", "Latn"))[0])
    known_ids = {v["id"] for v in verses}
    unknown = sorted(set(by_verse) - known_ids)
    if unknown:
        raise DataError(f"{trans_path} has translations for unknown verse ids {unknown[:5]}")
    for v in sorted(verses, key=lambda v: v["id"]):
        c, n = v["chapter_number"], v["verse_number"]
        translit = nfc(v.get("transliteration", "")).strip()
        meanings = nfc(v.get("word_meanings", "")).strip()
        texts = [
            Text("root", "sa", "Deva", strip_trailing_address(nfc(v["text"])), "gita"),
            Text("transliteration", "sa", "Latn", translit, "gita"),
            Text("transliteration_iast", "sa", "Latn", gita_to_iast(translit), "iast"),
            Text("word_meanings", "en", "Latn", meanings, "gita"),
            Text("word_meanings_iast", "en", "Latn", word_meanings_iast(meanings), "iast"),
        ]
        for rec in sorted(by_verse.get(v["id"], []), key=lambda r: r["author_id"]):
            lang, script = _SCRIPT.get(rec["lang"], ("und", "Latn"))
            body = strip_leading_address(nfc(rec["description"]))
            if body and not _PLACEHOLDER.match(body):
                texts.append(Text("translation", lang, script, body, rec["authorName"]))
        corpus.documents.append(
            Document(
                doc_id=f"bg{c}.{n}",
                address=f"BG {c}.{n}",
                work_id="bg",
                granularity="verse",
                texts=tuple(texts),
                metadata={"chapter": c, "verse": n, "verse_id": v["id"], "chapter_name": chapter_names.get(c, "")},
            )
        )
    _add_stems(corpus)
    return corpus


def _add_stems(corpus: GitaCorpus) -> None:
    """Put in each verse's metadata ``stems``: its gloss words → their Sanskrit stems (dictionary forms), chosen
    across the whole gita (:func:`workbench.text.sanskrit.stem_map`; vidyut, offline). The ``sanskrit-lemma``
    lane and the stem term queries read it; computing it once here keeps vidyut out of every search."""
    from workbench.text.sanskrit import gloss_words, stem_map

    words = {d.doc_id: gloss_words(d.text("word_meanings_iast")) for d in corpus.documents}
    stems = stem_map(w for ws in words.values() for w in ws)
    for d in corpus.documents:
        d.metadata["stems"] = {w: list(stems[w]) for w in dict.fromkeys(words[d.doc_id]) if w in stems}


#: The damage known in this source (issue #28): four translators' texts in ``archive/translation_old.json``
#: lost the letters "qu" ("eal" for "equal", "alities" for "qualities"); :mod:`workbench.data.damage` finds
#: the words at build and the build writes them to ``damage.json``. The texts stay as published.
DAMAGE_RULES = (DroppedLetters("qu"),)


def damage_texts(corpus: GitaCorpus) -> list[CheckedText]:
    """The English texts the damage check reads (:func:`workbench.data.damage.check`): every translator's
    translation (source: the translator) and the English side of each word-meanings gloss (source
    ``word_meanings``; the Sanskrit words left of the dashes are left out: they are not English). Held-out
    translators are included: their words are evidence too."""
    out = []
    for d in corpus.documents:
        for t in d.texts:
            if t.language != "en" or t.script != "Latn":
                continue
            if t.field == "translation":
                out.append(CheckedText(d.doc_id, "translation", t.source, t.text))
            elif t.field == "word_meanings":
                gloss = "; ".join(m for _w, m in word_meanings_pairs(t.text))
                out.append(CheckedText(d.doc_id, "word_meanings", "word_meanings", gloss))
    return out


def shared_translation_groups(corpus: GitaCorpus) -> dict[str, str]:
    """Map each verse doc_id to the first doc_id of its group of verses that share a translation.

    Verses rendered together by any translator (identical text for ``1.4``-``1.6``)
    are linked; the groups are the connected components (union-find), and every
    verse maps to the component's first verse in corpus order.
    """
    parent = {d.doc_id: d.doc_id for d in corpus.documents}
    order = {d.doc_id: i for i, d in enumerate(corpus.documents)}

    def find(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    seen: dict[tuple[str, str], str] = {}
    for d in corpus.documents:
        for t in d.texts:
            if t.field != "translation":
                continue
            key = (t.source, t.text)
            if key in seen:
                a, b = find(seen[key]), find(d.doc_id)
                if a != b:
                    lo, hi = sorted((a, b), key=order.__getitem__)
                    parent[hi] = lo
            else:
                seen[key] = d.doc_id
    return {d.doc_id: find(d.doc_id) for d in corpus.documents}
