"""Names an export derives from the user's names (config, embedder): file stems, SQL identifiers, pipeline ids,
comment text. One rule: a name is kept when it is already safe where it goes; otherwise the unsafe characters
become ``_`` and the first 8 hex digits of the name's sha256 are appended, so two names never become one
(``a b`` and ``a_b``, ``Üß`` and ``éà``, ``x-y`` and ``x_y`` each keep their own function, file and input).
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

#: PostgreSQL's identifier limit, in bytes (NAMEDATALEN - 1).
PG_IDENT_MAX = 63


def derived(name: str, allowed: str, max_len: int, *, lower: bool = False, tag: bool = False) -> str:
    """``name`` as a token of the characters in the regex class ``allowed`` (e.g. ``a-z0-9_``), at most
    ``max_len`` characters, injective (module docstring); ``tag``: append the hash even when nothing changed."""
    base = name.lower() if lower else name
    safe = re.sub(f"[^{allowed}]+", "_", base).strip("_.") or "_"
    if safe == name and len(safe) <= max_len and not tag:
        return safe
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:8]
    return f"{safe[:max_len - 9]}_{digest}"


def file_stem(name: str) -> str:
    """A config name as a file name stem in the output folder: letters, digits, ``_``, ``-`` and ``.``, never a
    path (``../escaped`` and ``sub/dir`` stay in the folder)."""
    return derived(name, "A-Za-z0-9_.-", 120)


def sql_ident(prefix: str, name: str) -> str:
    """``prefix`` + ``name`` as a lower-case PostgreSQL identifier of at most 63 bytes (``wb_search_<config>``,
    ``p_vec_<embedder>``). A name of lower-case letters, digits, ``_`` and ``-`` reads as it is, ``-`` as ``_``
    (``aicharya-rrf60`` → ``wb_search_aicharya_rrf60``); any other name gets the hash suffix. The one pair this
    leaves alike (``a-b``, ``a_b``) is caught where it matters: the function file refuses to replace another
    config's function (:meth:`workbench.export.postgres.PostgresExport.function_sql`), and two embedders of one
    config that meet are told apart by the hash (:func:`distinct`)."""
    if re.fullmatch(r"[a-z0-9_-]+", name) and len(prefix) + len(name) <= PG_IDENT_MAX:
        return prefix + name.replace("-", "_")
    return prefix + derived(name, "a-z0-9_", PG_IDENT_MAX - len(prefix), lower=True)


def distinct(prefix: str, names: list[str]) -> dict[str, str]:
    """``name`` → :func:`sql_ident` for names that must not meet in one statement; names that would (``x-y`` and
    ``x_y``) each take the hashed form instead."""
    plain = {n: sql_ident(prefix, n) for n in names}
    met = {i for i in plain.values() if list(plain.values()).count(i) > 1}
    return {n: (prefix + derived(n, "a-z0-9_", PG_IDENT_MAX - len(prefix), lower=True, tag=True) if i in met else i)
            for n, i in plain.items()}


def pipeline_id(name: str) -> str:
    """``wb-<config>``: an OpenSearch search-pipeline id."""
    return "wb-" + derived(name, "A-Za-z0-9_.-", 120)


def comment_text(value: object) -> str:
    """``value`` as text safe inside a one-line comment (SQL ``--``, Markdown list): every control or line-breaking
    character (CR, LF, VT, FF, NEL, U+2028/2029 …) becomes a space, so a name cannot end the comment."""
    text = str(value)
    return "".join(" " if unicodedata.category(c) in ("Cc", "Zl", "Zp") else c for c in text)
