"""OpenSearch query DSL templates: the query a team really sends, with placeholders filled as JSON values.

Used by the ``template`` mode of the ``opensearch`` lane (:mod:`retrievers.opensearch`) and by the OpenSearch
export (:mod:`workbench.export.opensearch`). A placeholder is a whole JSON string value (``"{{k}}"``), never part
of a longer string: a value (a string, a number, an array of floats) is put in as JSON, never spliced into text,
so a query text with quotes, braces or ``{{…}}`` of its own is only ever a value.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from workbench.errors import ConfigError

#: The placeholders of a ``template`` lane's query DSL: ``{{query_text}}`` (the cleaned query), ``{{k}}`` (the depth),
#: ``{{query_vector}}`` (the embedded query), ``{{max_expansions}}`` (the fuzzy mode's rule) and ``{{ef_search}}``.
PLACEHOLDERS = ("{{query_text}}", "{{k}}", "{{query_vector}}", "{{max_expansions}}", "{{ef_search}}")


def _placeholders(node: Any, found: list[str], partial: list[str]) -> None:
    if isinstance(node, dict):
        for v in node.values():
            _placeholders(v, found, partial)
    elif isinstance(node, list):
        for v in node:
            _placeholders(v, found, partial)
    elif isinstance(node, str) and "{{" in node:
        (found if node in PLACEHOLDERS else partial).append(node)


def template_problem(template: Any, has_embedder: bool) -> str:
    """What is wrong with a ``template`` lane's query DSL (parsed JSON), or ``""``: not an object, a body with keys
    besides ``query``, no ``"{{query_text}}"`` or ``"{{query_vector}}"``, a placeholder inside a longer string or an
    unknown one, ``"{{query_vector}}"`` without an embedder (or an embedder without it)."""
    if not isinstance(template, dict) or not template:
        return "template must be a JSON object of query DSL (e.g. {\"match\": {\"content.text\": \"{{query_text}}\"}})"
    if "query" in template and set(template) != {"query"}:
        return (f"template is a request body with keys {sorted(set(template) - {'query'})} besides query; give the "
                "query only (size, sort and the rest are the lane's: size = the depth, ties by doc_id)")
    found: list[str] = []
    partial: list[str] = []
    _placeholders(template, found, partial)
    if partial:
        return (f"template has {partial[0]!r}: a placeholder must be a whole JSON string value, one of "
                f"{', '.join(PLACEHOLDERS)}")
    if "{{query_text}}" not in found and "{{query_vector}}" not in found:
        return "template has no \"{{query_text}}\" and no \"{{query_vector}}\": every query would get the same answer"
    if "{{query_vector}}" in found and not has_embedder:
        return "template has \"{{query_vector}}\" but the lane names no embedder: add embedder = \"NAME\""
    if "{{query_vector}}" not in found and has_embedder:
        return "the lane names an embedder but its template has no \"{{query_vector}}\": drop the embedder"
    return ""


def fill_template(template: Any, values: dict[str, Any]) -> Any:
    """``template`` with every string value that is a placeholder replaced by its value (a JSON value, never
    text spliced into a string); the template itself is not changed. A body ``{"query": …}`` gives its query."""
    if isinstance(template, dict) and set(template) == {"query"}:
        template = template["query"]

    def walk(node: Any) -> Any:
        if isinstance(node, dict):
            return {k: walk(v) for k, v in node.items()}
        if isinstance(node, list):
            return [walk(v) for v in node]
        if isinstance(node, str) and node in values:
            return values[node]
        return node

    return walk(template)


def read_template(path: str) -> Any:
    """The JSON of a ``template`` file: ``path`` as given (absolute, or relative to the working folder), else
    relative to the repository.

    Raises:
        ConfigError: the file is missing or not JSON (naming it and the fix).
    """
    import json

    from workbench.settings import PROJECT_ROOT

    p = Path(path)
    if not p.is_absolute() and not p.exists():
        p = PROJECT_ROOT / path
    try:
        return json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"template {path} not found (read relative to the working folder, then the repository "
                          f"{PROJECT_ROOT}); give the path of a JSON file of query DSL") from None
    except (OSError, ValueError) as exc:
        raise ConfigError(f"template {path} is not readable JSON ({exc}); fix the file") from None


