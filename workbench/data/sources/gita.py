"""``source = "gita"``: the Bhagavad Gita verses with their translations (``<data>/gita``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.data.definitions import Definitions, str_list
from workbench.data.sources.base import Built, Source, Step, strip_held_out, tree


def _check(path: Path, where: str, d: dict[str, Any], datasets: dict[str, Any]) -> None:
    if "held_out_translators" in d:
        str_list(path, f"{where}.held_out_translators", d["held_out_translators"], example='["Shri Purohit Swami"]')


def _build(defn: dict[str, Any], defs: Definitions, data: Path, step: Step) -> Built:
    from workbench.data.damage import check as check_damage
    from workbench.data.loaders.gita import DAMAGE_RULES, damage_texts, load_gita
    from workbench.data.querysets import builders as b

    step("loading gita")
    corpus = load_gita(data)
    held = list(defn.get("held_out_translators", []))
    step("checking gita texts for known damage")
    damage = check_damage(damage_texts(corpus), DAMAGE_RULES, held_out=held).to_json()
    types = SOURCE.query_types_of(defn)
    cands = []
    step("building gita queries")
    if "paraphrase" in types:
        cands += b.gita_paraphrase(corpus, held)
    if "term" in types:
        cands += b.gita_terms(corpus)
    if "reference" in types:
        cands += b.gita_references(corpus, defs.seed)
    qs = b.finalize(cands, "gita", defs.seed, defs.max_queries_per_type, defs.splits)
    docs = strip_held_out(corpus.documents, translators=set(held))
    return Built(docs, qs.queries, qs.qrels, {"held_out_translators": held, "damage": damage["summary"]}, damage)


SOURCE = Source(
    name="gita",
    keys=frozenset({"source", "held_out_translators", "query_types"}),
    query_types=("paraphrase", "term", "reference"),
    corpora=lambda defn, defs: ("gita",),
    input_files=lambda defn, defs, data: tree(data, "gita"),
    build=_build,
    check=_check,
)
