"""What the live lanes (``http``, ``mcp``) share: request templates, secrets in headers, reading hits out of an
answer, and mapping a system's ids or addresses to the dataset's ``doc_id``s.

* **Templates.** A URL template is a string with ``{query}`` and ``{k}`` (``{filters}`` optional), each value
  percent-encoded into it. A body (or an MCP tool's arguments) is a TOML table whose string values may hold
  placeholders: a value that *is* one placeholder (``"{k}"``) takes the value with its type (``k`` an integer,
  ``filters`` a table), any other string has the values put into it as text. A placeholder not among these, or
  a template that never uses ``{query}``, is refused when the experiment loads.
* **Secrets.** A header value ``"Bearer ${MY_KEY}"`` takes ``$MY_KEY`` from the environment at open; an unset
  variable is refused naming it. Values are never logged, cached, tracked or shown in a message.
* **Hits.** JMESPath expressions (https://jmespath.org, the AWS CLI's query language): ``hits`` selects the list
  of hits in the answer (``result.hits``, ``data[*]``), ``id`` and ``score`` select each hit's id and score
  within it. Without a ``score`` expression every hit gets ``-rank`` (the system's order is the ranking). With
  one, a hit whose score is missing or not a finite number is dropped and counted (``unscored``), the others
  kept; when no hit of an answer has one, the expression is wrong and the answer is malformed.
* **Ids** (:class:`retrievers._live.IdMapper`). ``id_map``: ``"doc_id"`` (the system returns the dataset's ids),
  ``"address"`` (its canonical addresses, ``BG 2.47`` exactly as the dataset writes them, case and spacing aside),
  ``"metadata:FIELD"`` (a field of the documents' metadata, e.g. ``metadata:verse_id``), or ``"reference"`` (any
  address the reference grammar reads, in Latin or Cyrillic, ``бг 2.47``: the unit it addresses), or
  ``"table:FILE"`` (a crosswalk: CSV, TSV or JSON lines mapping the system's ids to ``doc_id``, many to one;
  relative to the experiment file). ``id_rewrite = [pattern, replacement]`` rewrites each id first (``re.sub``), and
  ``id`` itself is a JMESPath expression, so a rule over a hit's fields is one expression:
  ``join(':', [track_id, to_string(start_ms)])``. An id that maps to no document is dropped from the hits and
  counted; when more than ``max_unmapped`` (default half) of a lane's ids map to nothing, the eval fails naming the lane and
  the first such ids (a wrong crosswalk must never look like a bad system).

Order: hits keep the system's order among equal scores (each hit's ``tiebreak`` is minus its position), so a
served config read back ranks exactly as it was served.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote

from workbench.errors import ConfigError
from workbench.io.http import finite_number
from workbench.run import Hit

#: The placeholders a template may use.
PLACEHOLDERS = ("query", "k", "filters")
_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")
_ENV = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
#: How a system's ids map to the dataset's documents.
ID_MAPS = ("doc_id", "address", "reference", "metadata:FIELD", "table:FILE")


def placeholders(template: Any) -> set[str]:
    """Every ``{name}`` used anywhere in ``template`` (a string, or nested tables and lists of them)."""
    if isinstance(template, str):
        return set(_PLACEHOLDER.findall(template))
    if isinstance(template, Mapping):
        return set().union(*(placeholders(v) for v in template.values())) if template else set()
    if isinstance(template, (list, tuple)):
        return set().union(*(placeholders(v) for v in template)) if template else set()
    return set()


def check_template(template: Any, where: str) -> str:
    """``""`` when ``template`` uses only known placeholders and uses ``{query}``, else what is wrong (naming
    ``where`` and the fix)."""
    used = placeholders(template)
    unknown = sorted(used - set(PLACEHOLDERS))
    if unknown:
        return (f"{where} uses {{{unknown[0]}}}, which is not a placeholder; use {{query}}, {{k}} or {{filters}} "
                "(write a literal brace as {{ or }} in a URL)")
    if "query" not in used:
        return f"{where} never uses {{query}}: every request would ask the same thing; put {{query}} where the text goes"
    return ""


def render(template: Any, values: Mapping[str, Any], *, url: bool = False) -> Any:
    """``template`` with its placeholders filled (see the module docstring); ``url``: percent-encode values put
    into a string (a URL template)."""
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template)
        if whole and not url:
            return values.get(whole.group(1))

        def put(m: re.Match) -> str:
            v = values.get(m.group(1))
            text = "" if v is None else (v if isinstance(v, str) else _compact(v))
            return quote(text, safe="") if url else text

        return _PLACEHOLDER.sub(put, template)
    if isinstance(template, Mapping):
        return {k: render(v, values, url=url) for k, v in template.items()}
    if isinstance(template, (list, tuple)):
        return [render(v, values, url=url) for v in template]
    return template


def _compact(value: Any) -> str:
    import json

    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def resolve_headers(headers: Mapping[str, str], where: str) -> dict[str, str]:
    """Headers with each ``${VAR}`` replaced by the environment's value.

    Raises:
        ConfigError: a variable is unset or blank (named, with the export to run).
    """
    out = {}
    for name, value in headers.items():
        def env(m: re.Match) -> str:  # called by the re.sub below, in this iteration only
            got = os.environ.get(m.group(1), "").strip()
            if not got:
                raise ConfigError(f"{where} header {name} takes ${{{m.group(1)}}}, which is not set; export "  # noqa: B023
                                  f"{m.group(1)}=<value> before running")
            return got

        out[name] = _ENV.sub(env, value)
    return out


def compile_path(expression: str, where: str):
    """A compiled JMESPath expression.

    Raises:
        ConfigError: it does not parse (naming ``where`` and the parser's reason).
    """
    import jmespath
    from jmespath.exceptions import JMESPathError

    try:
        return jmespath.compile(expression)
    except JMESPathError as exc:
        reason = " ".join(str(exc).split())
        raise ConfigError(f"{where} = {expression!r} is not a JMESPath expression ({reason}); e.g. \"result.hits\"") \
            from None


@dataclass
class Extracted:
    """The hits read out of one answer: ``hits`` (mapped, in the system's order, duplicates after the first
    dropped), ``unmapped`` (ids that named no document), ``unscored`` (hits dropped for a missing or non-finite
    score: ``"hit N: VALUE"``), ``returned`` (hits the system sent)."""

    hits: list[Hit] = field(default_factory=list)
    unmapped: list[str] = field(default_factory=list)
    unscored: list[str] = field(default_factory=list)
    returned: int = 0


class HitReader:
    """Reads hits out of a JSON answer with JMESPath (see the module docstring).

    Args:
        hits, id, score: the expressions (``score`` None: ``-rank``).
        mapper: a function from a system's id to a ``doc_id`` or None (:class:`retrievers._live.IdMapper`).
        where: the config key named in messages.
    """

    def __init__(self, hits: str, id: str, score: str | None, mapper: Callable[[Any], str | None],
                 where: str) -> None:
        self.where = where
        self.hits_expr = hits
        self.score_expr = score
        self._hits = compile_path(hits, f"{where}.hits")
        self.id_expr = id
        self._id = compile_path(id, f"{where}.id")
        self._score = compile_path(score, f"{where}.score") if score else None
        self.mapper = mapper

    def read(self, answer: Any, k: int) -> Extracted:
        """The first ``k`` mapped hits of ``answer``.

        Raises:
            ValueError: ``hits`` selects nothing or not a list, ``id`` selects nothing in any hit, or no hit of a
                non-empty answer has a finite score (the message says which and is safe to show).
        """
        found = self._hits.search(answer)
        if found is None:
            raise ValueError(f"hits = {self.hits_expr!r} selects nothing in the answer")
        if not isinstance(found, list):
            raise ValueError(f"hits = {self.hits_expr!r} selects a {type(found).__name__}, not a list")
        out = Extracted(returned=len(found))
        seen: set[str] = set()
        def ident(item: Any) -> Any:
            return self._id.search(item) if isinstance(item, (dict, list)) else item

        # a wrong path, not ids the dataset lacks (all() stops at the first hit with an id: no pass over 10,000)
        if found and all(ident(item) is None for item in found):
            first = found[0]
            keys = sorted(first)[:12] if isinstance(first, dict) else type(first).__name__
            raise ValueError(f"id = {self.id_expr!r} selects nothing in any hit (hit 1 has {keys})")
        for pos, item in enumerate(found):
            raw_id = ident(item)
            doc = self.mapper(raw_id)
            if doc is None:
                out.unmapped.append(str(raw_id)[:80])
                continue
            if doc in seen:
                continue
            if self._score is None:
                score = -float(pos + 1)
            else:
                value = self._score.search(item) if isinstance(item, (dict, list)) else None
                score = finite_number(value)  # type: ignore[assignment]
                if score is None:
                    out.unscored.append(f"hit {pos + 1}: {str(value)[:40]!r}")
                    continue
            seen.add(doc)
            out.hits.append(Hit(doc, float(score), -float(pos)))
            if len(out.hits) >= k:
                break
        if out.unscored and not out.hits:
            raise ValueError(f"score = {self.score_expr!r} gives no hit a finite number ({out.unscored[0]}); "
                             "check the lane's score expression")
        return out
