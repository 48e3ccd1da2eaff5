"""``source = "bilara-passages"``: the segments of a bilara dataset (``segments_from``) merged into
passages of at most ``max_tokens`` tokens overlapping by ``overlap``, its judgments projected onto them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.data.definitions import Definitions, is_int, show
from workbench.data.sources import bilara
from workbench.data.sources.base import Built, Source, Step
from workbench.errors import ConfigError

#: ``max_tokens`` and ``overlap`` when a section names none.
DEFAULT_PASSAGE_SIZE = (512, 50)


def _check(path: Path, where: str, d: dict[str, Any], datasets: dict[str, Any]) -> None:
    parent_name = d["segments_from"]
    parent = datasets.get(parent_name) if isinstance(parent_name, str) else None
    if not isinstance(parent, dict) or parent.get("source") != "bilara":
        bilaras = [n for n, x in datasets.items() if isinstance(x, dict) and x.get("source") == "bilara"]
        raise ConfigError(f"{path}: {where}.segments_from must name a bilara dataset "
                          f"({', '.join(bilaras) or 'none is defined'}), got {show(parent_name)}")
    size, overlap = d.get("max_tokens", DEFAULT_PASSAGE_SIZE[0]), d.get("overlap", DEFAULT_PASSAGE_SIZE[1])
    if not is_int(size) or size < 1:
        raise ConfigError(f"{path}: {where}.max_tokens must be a positive integer, got {show(size)}")
    if not is_int(overlap) or not 0 <= overlap < size:
        raise ConfigError(f"{path}: {where}.overlap must be an integer with 0 <= overlap < max_tokens ({size}), "
                          f"got {show(overlap)}")


def _build(defn: dict[str, Any], defs: Definitions, data: Path, step: Step) -> Built:
    from workbench.data.querysets.builders import project_to_passages
    from workbench.text.passages import merge_segments

    parent = defs.definition(defn["segments_from"])
    segs, qs, notes = bilara.parts(parent, defs, data, step)
    step("merging passages")
    passages = merge_segments(segs, defn.get("max_tokens", DEFAULT_PASSAGE_SIZE[0]),
                              defn.get("overlap", DEFAULT_PASSAGE_SIZE[1]))
    qrels = project_to_passages(qs.qrels, passages)
    judged = {r.query_id for r in qrels}
    queries = [q for q in qs.queries if q.query_id in judged]
    return Built(passages, queries, qrels, {**notes, "segments_from": defn["segments_from"]})


SOURCE = Source(
    name="bilara-passages",
    keys=frozenset({"source", "segments_from", "max_tokens", "overlap"}),
    required_keys=("segments_from",),
    corpora=lambda defn, defs: bilara.corpora(defs.definition(defn["segments_from"]), defs),
    input_files=lambda defn, defs, data: bilara.input_files(defs.definition(defn["segments_from"]), defs, data),
    build=_build,
    check=_check,
)
