"""``source = "cst4"``: the Chattha Sangayana Tipitaka 4 XML books named by ``books``
(``<data>/cst4-tipitaka-xml/cscd/<book>.*.xml``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.data.definitions import Definitions, str_list
from workbench.data.sources.base import Built, Source, Step


def _check(path: Path, where: str, d: dict[str, Any], datasets: dict[str, Any]) -> None:
    from workbench.data.loaders.cst4 import BOOKS

    if "books" in d:
        str_list(path, f"{where}.books", d["books"], known=BOOKS, nonempty=True, example='["s0201m"]')


def _input_files(defn: dict[str, Any], defs: Definitions, data: Path) -> list[Path]:
    return sorted(p for b in defn["books"] for p in (data / "cst4-tipitaka-xml" / "cscd").glob(f"{b}.*.xml"))


def _build(defn: dict[str, Any], defs: Definitions, data: Path, step: Step) -> Built:
    from workbench.data.loaders.cst4 import load_cst4
    from workbench.data.querysets import builders as b

    step("loading CST4 XML")
    docs = load_cst4(data, tuple(defn["books"]))
    types = SOURCE.query_types_of(defn)
    mula = [d for d in docs if d.metadata.get("sutta")]
    cands = []
    if "reference" in types:
        cands += b.sutta_references(mula, defs.seed, work_of=lambda d: d.metadata.get("sutta", ""))
    if "page_ref" in types:
        cands += b.page_ref_candidates(docs, defs.seed, forms="cst", forms_per_page=1,
                                       group_of=lambda d: d.metadata.get("sutta") or d.work_id,
                                       issue_for=lambda d: bool(d.metadata.get("sutta")))
    if "headword" in types:
        cands += b.cst_bold_headwords(docs)
    step("numbering CST queries")
    qs = b.finalize(cands, "cst4", defs.seed, defs.max_queries_per_type, defs.splits)
    return Built(docs, qs.queries, qs.qrels, {"books": list(defn["books"])})


SOURCE = Source(
    name="cst4",
    keys=frozenset({"source", "books", "query_types"}),
    required_keys=("books",),
    query_types=("reference", "page_ref", "headword"),
    corpora=lambda defn, defs: ("cst4-tipitaka-xml",),
    input_files=_input_files,
    build=_build,
    check=_check,
)
