"""``source = "bilara"``: SuttaCentral's bilara segments (``<data>/suttacentral-bilara``), one document per segment.

The Russian and Swedish translations (``suttacentral-bilara-ru-sv``) are read when present;
the term queries read the DPD lexicon (``ms-dpd``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.data.definitions import Definitions, str_list
from workbench.data.sources.base import Built, Source, Step, strip_held_out, tree

_DEFAULT_COLLECTIONS = ["dn", "mn", "sn56", "dhp"]


def _check(path: Path, where: str, d: dict[str, Any], datasets: dict[str, Any]) -> None:
    from workbench.data.loaders.bilara import COLLECTIONS, LANGUAGES

    if "held_out_languages" in d:
        str_list(path, f"{where}.held_out_languages", d["held_out_languages"], known=LANGUAGES, example='["ru"]')
    if "collections" in d:
        str_list(path, f"{where}.collections", d["collections"], known=tuple(COLLECTIONS), nonempty=True,
                 example='["dn", "mn"]')


def corpora(defn: dict[str, Any], defs: Definitions) -> tuple[str, ...]:
    """``suttacentral-bilara``, plus ``ms-dpd`` when the bilara section ``defn`` builds term queries
    (the optional ``suttacentral-bilara-ru-sv`` is not listed)."""
    return ("suttacentral-bilara",) + (("ms-dpd",) if "term" in SOURCE.query_types_of(defn) else ())


def input_files(defn: dict[str, Any], defs: Definitions, data: Path) -> list[Path]:
    """The bilara trees (with the ru/sv one), plus ``ms-dpd`` when the bilara section ``defn`` builds term queries."""
    files = tree(data, "suttacentral-bilara") + tree(data, "suttacentral-bilara-ru-sv")
    if "term" in SOURCE.query_types_of(defn):
        files += tree(data, "ms-dpd")
    return files


def parts(defn: dict[str, Any], defs: Definitions, data: Path, step: Step):
    """The segments (held-out languages removed), the query set and the notes of the bilara section ``defn``."""
    from workbench.data.loaders import bilara
    from workbench.data.querysets import builders as b

    step("loading bilara")
    # Checked against the published corpus: a partial copy fails instead of building fewer documents.
    corpus = bilara.load_bilara(data, defn.get("collections", _DEFAULT_COLLECTIONS), expected=bilara.PUBLISHED)
    types = SOURCE.query_types_of(defn)
    held_langs = list(defn.get("held_out_languages", []))
    cands = []
    if "paraphrase" in types:
        cands += b.bilara_paraphrase_ru(corpus.documents)
    if "term" in types:
        from workbench.data.loaders.dpd import load_dpd

        step("loading ms-dpd")
        lexicon = load_dpd(data)
        step("finding Pali lemmas")
        cands += b.pali_terms(corpus.documents, lexicon)
    if "reference" in types:
        cands += b.sutta_references(corpus.documents, defs.seed)
    if "page_ref" in types:
        cands += b.page_ref_candidates(corpus.documents, defs.seed, forms="pts")
    step("numbering bilara queries")
    qs = b.finalize(cands, "bilara", defs.seed, defs.max_queries_per_type, defs.splits)
    docs = strip_held_out(corpus.documents, languages=set(held_langs))
    notes = {"held_out_languages": held_langs, "orphan_translation_keys": len(corpus.orphans),
             "skipped_empty_segments": len(corpus.skipped_empty)}
    return docs, qs, notes


def _build(defn: dict[str, Any], defs: Definitions, data: Path, step: Step) -> Built:
    docs, qs, notes = parts(defn, defs, data, step)
    return Built(docs, qs.queries, qs.qrels, notes)


SOURCE = Source(
    name="bilara",
    keys=frozenset({"source", "collections", "held_out_languages", "query_types"}),
    query_types=("paraphrase", "term", "reference", "page_ref"),
    corpora=corpora,
    input_files=input_files,
    build=_build,
    check=_check,
)
