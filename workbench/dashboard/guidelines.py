"""What "relevant" means, per dataset and query type: the guidelines the Judge and Adjudicate pages
show beside each pair.

Raters split exactly where a definition is missing (#28: a chapter reference, a term named by a
synonym, a paraphrase of a neighbouring verse). So every query type of
:data:`workbench.types.QUERY_TYPES` has a built-in guideline (:data:`DEFAULTS`) that says what the
query is and what **2**, **1**, **0** and **cannot judge** mean for it, and the engineer may
replace any part of it per dataset in ``datasets/guidelines/<dataset>.toml`` (beside the
``datasets.toml`` in use: ``WORKBENCH_DATASETS`` moves both), one section per query type::

    [reference]
    query = "A verse or a chapter named by its number: BG 2.47, Бг 2.47, Bg. 18."
    highly_relevant = "The verse the reference names (for BG 2.47: BG 2.47)."
    relevant = "A verse of the chapter a chapter reference names (for Bg. 18: any verse of chapter 18)."
    not_relevant = "Any other verse, the neighbours of the named verse included."
    cannot_judge = "The reference names no verse of this text (BG 19.3)."

Every key is optional (a missing one keeps the built-in text); Markdown is allowed. An unknown
section or key, or a value that is not text, is refused with the file, the place and the fix
(:class:`~workbench.errors.ConfigError`), so a typo never silently shows the default.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, replace
from pathlib import Path

from workbench.errors import ConfigError
from workbench.types import QUERY_TYPES

#: The keys of a guideline section, in the order the page shows them, with the grade each one defines.
FIELDS: tuple[tuple[str, str], ...] = (
    ("query", "The query"),
    ("highly_relevant", "2 · highly relevant"),
    ("relevant", "1 · relevant"),
    ("not_relevant", "0 · not relevant"),
    ("cannot_judge", "cannot judge"),
)
#: The folder of the per-dataset files, beside the dataset definitions.
FOLDER = "guidelines"

_CANNOT = ("You cannot read the texts shown (a script you do not read, a damaged or cut text), or the "
           "query makes no sense to you. Not for a doubt between two grades: give the lower one and say "
           "why in the note.")


@dataclass(frozen=True)
class Guideline:
    """What the grades mean for one query type of one dataset.

    Attributes:
        query_type: one of :data:`workbench.types.QUERY_TYPES`.
        query, highly_relevant, relevant, not_relevant, cannot_judge: the texts (Markdown) of
            :data:`FIELDS`.
        source: where the texts come from: ``built-in`` or the file that replaced some (its path).
    """

    query_type: str
    query: str
    highly_relevant: str
    relevant: str
    not_relevant: str
    cannot_judge: str
    source: str = "built-in"

    def items(self) -> list[tuple[str, str]]:
        """``(heading, text)`` for each of :data:`FIELDS`, in order."""
        return [(heading, getattr(self, key)) for key, heading in FIELDS]


#: The built-in guideline of every query type.
DEFAULTS: dict[str, Guideline] = {
    "paraphrase": Guideline(
        "paraphrase",
        query="The query retells one passage in other words (another translator's rendering, or the sense in "
              "another language). Judge whether the document says what the query says.",
        highly_relevant="The document is the passage the query retells: the same statement, whatever the wording, "
                        "translator or language.",
        relevant="The document says part of the query's statement, or a passage retold together with it (one "
                 "translation covering several verses), so a reader looking for the query's passage needs it too.",
        not_relevant="It shares names, words or the topic but not the statement: a neighbouring verse that goes on "
                     "to something else is 0, however close it stands.",
        cannot_judge=_CANNOT),
    "term": Guideline(
        "term",
        query="The query is one word or term, written in any script (IAST, plain Latin letters, Cyrillic or "
              "Devanagari): the reader wants the passages that use it.",
        highly_relevant="The document uses the term itself, in any spelling, script or inflected form (abhyāsa, "
                        "abhyasa, अभ्यास, abhyāsena), or inside a compound, with the meaning asked.",
        relevant="The document does not use the word but names the same thing by a synonym or a gloss (a "
                 "translation that renders the term), or uses the word only in another sense.",
        not_relevant="Neither the term nor what it names: a word that merely begins or sounds alike is 0.",
        cannot_judge=_CANNOT),
    "reference": Guideline(
        "reference",
        query="The query names a place in the text by its number: a verse (BG 2.47, Бг 2.47), a sutta or a "
              "chapter (Bg. 18, MN 10).",
        highly_relevant="The document is the verse the reference names, or the opening (heading) of the sutta it "
                        "names.",
        relevant="For a chapter or sutta: any other verse or segment of that chapter or sutta.",
        not_relevant="Any other place, the named verse's neighbours included: a verse that only mentions the work's "
                     "name (\"Gita\") is 0.",
        cannot_judge="The reference names nothing in this text (a verse number that does not exist), or the "
                     "document's address is missing. " + _CANNOT),
    "page_ref": Guideline(
        "page_ref",
        query="The query names a page of a printed edition (PTS: M i 56, MN i 56; CST: P1.56, V1.71): the reader "
              "wants the text printed on it.",
        highly_relevant="The document is where that page begins.",
        relevant="The document is on that page, after its beginning.",
        not_relevant="Any text not on that page, the pages before and after included.",
        cannot_judge="The page is not in this edition, or the document shows no page numbers. " + _CANNOT),
    "headword": Guideline(
        "headword",
        query="The query is a word or short phrase of the root text (the mūla) that the commentary (aṭṭhakathā) "
              "prints in bold where it explains it, in IAST or plain Latin letters (pajāpati, pajapati): the reader "
              "wants the commentary's explanation of it.",
        highly_relevant="The commentary paragraph that explains the word: a line of it opens with the word in bold "
                        "and glosses it (*Pajāpatinti ettha …* for pajāpati).",
        relevant="A commentary paragraph that takes the word up again in bold inside a line (explains it once more, "
                 "or in another sutta).",
        not_relevant="A root-text paragraph that only uses the word, and commentary that uses it without explaining "
                     "it; a word that merely begins or sounds alike is 0.",
        cannot_judge=_CANNOT),
    "negative": Guideline(
        "negative",
        query="The query asks for something the corpus does not hold, by construction: a reference beyond the "
              "text's end (BG 19.1: the Gita has 18 chapters; MN 200: the Majjhima has 152 suttas). A good search "
              "answers it with nothing.",
        highly_relevant="None: no document answers it.",
        relevant="None: a verse or sutta with the same number in another chapter or collection is still 0.",
        not_relevant="Every document.",
        cannot_judge=_CANNOT),
    "other": Guideline(
        "other",
        query="A query from the team's own set (its users' searches or its test questions), of no type the "
              "workbench builds. Judge whether the document answers what the query asks.",
        highly_relevant="The document answers the query: a reader who asked it would stop here.",
        relevant="The document helps: it holds part of the answer, or leads to it.",
        not_relevant="The document is about something else, or only shares words with the query.",
        cannot_judge=_CANNOT),
}


def guidelines_path(dataset: str, definitions: Path | None = None) -> Path:
    """``<the folder of datasets.toml>/guidelines/<dataset>.toml``: the dataset's guidelines file
    (``definitions`` defaults to :func:`workbench.data.catalog.default_definitions_path`)."""
    if definitions is None:
        from workbench.data.catalog import default_definitions_path

        definitions = default_definitions_path()
    return Path(definitions).parent / FOLDER / f"{dataset}.toml"


def load(dataset: str, path: Path | None = None) -> dict[str, Guideline]:
    """The guidelines of one dataset: query type → :class:`Guideline`, the built-in ones with what the
    dataset's file (``path``, default :func:`guidelines_path`) replaces; the built-in ones alone when
    there is no file.

    Raises:
        ConfigError: the file cannot be read or parsed, or holds an unknown query type, an unknown key
            or a value that is not non-empty text (names the file, the place and the fix).
    """
    import tomllib

    path = guidelines_path(dataset) if path is None else Path(path)
    if not path.is_file():
        return dict(DEFAULTS)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read the guidelines file {path}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"the guidelines file {path} is not valid TOML ({exc}); fix it, or remove it to show the "
                          "built-in guidelines") from None
    out = dict(DEFAULTS)
    keys = [k for k, _h in FIELDS]
    for section, values in data.items():
        if section not in DEFAULTS:
            raise ConfigError(f"{path}: [{section}] is not a query type; the sections are "
                              f"{', '.join(f'[{t}]' for t in QUERY_TYPES)}")
        if not isinstance(values, dict):
            raise ConfigError(f"{path}: {section} must be a section ([{section}] followed by lines such as "
                              f'highly_relevant = "…"), not a single value')
        for key, value in values.items():
            if key not in keys:
                raise ConfigError(f"{path}: [{section}] has an unknown key {key!r}; the keys are {', '.join(keys)}")
            if not isinstance(value, str) or not value.strip():
                raise ConfigError(f"{path}: [{section}] {key} must be a non-empty text in quotes "
                                  f'({key} = "…", or """…""" over several lines); leave the key out to show the '
                                  "built-in text")
        out[section] = replace(out[section], **{k: v.strip() for k, v in values.items()}, source=str(path))
    return out


def for_type(guides: dict[str, Guideline], query_type: str) -> Guideline | None:
    """The guideline of ``query_type`` (None for a type the workbench does not know: a query that left the build)."""
    return guides.get(query_type)


_BOLD = re.compile(r"\*\*(.+?)\*\*")
_ITALIC = re.compile(r"(?<![\w*])\*(?!\s)(.+?)(?<!\s)\*(?![\w*])")
_CODE = re.compile(r"`([^`]+)`")


def _inline(text: str) -> str:
    """Escaped text with the Markdown an engineer is likely to write: **bold**, *italic*, `code`, line breaks."""
    out = html.escape(text)
    out = _CODE.sub(r"<code>\1</code>", out)
    out = _BOLD.sub(r"<b>\1</b>", out)
    out = _ITALIC.sub(r"<i>\1</i>", out)
    return out.replace("\n\n", "<br><br>").replace("\n", " ")


def guideline_html(guide: Guideline, type_words: str = "") -> str:
    """The guideline as a block of HTML for the page (class ``wb-guidelines``): a heading naming the
    query type in words, then each grade's definition."""
    head = f"What counts as relevant for {html.escape(type_words or guide.query_type)} queries"
    rows = [f'<div class="wb-guide-{key}" style="margin-top: 0.35rem"><b>{html.escape(heading)}</b> — '
            f"{_inline(getattr(guide, key))}</div>" for key, heading in FIELDS]
    where = ("the workbench's built-in guideline" if guide.source == "built-in"
             else f"from {html.escape(Path(guide.source).name)}")
    return (f'<div class="wb-guidelines" data-query-type="{html.escape(guide.query_type)}" '
            'style="border-left: 4px solid #0072b2; padding: 0.4rem 0.8rem; font-size: 0.92rem; line-height: 1.45; '
            f'background: rgba(0, 114, 178, 0.06)"><div style="font-weight: 600">{head}</div>{"".join(rows)}'
            f'<div style="font-size: 0.78rem; opacity: 0.65; margin-top: 0.4rem">{where}</div></div>')
