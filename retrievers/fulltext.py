"""The PostgreSQL full-text lane: a tsquery over one tsvector column, ranked by ``ts_rank_cd``.

Raw score: **ts_rank_cd** (cover density) of the document's tsvector for the query with
the lane's normalisation bitmask (default 32: rank/(rank+1), so in [0, 1)); higher is
better. Ties are broken by ``doc_id`` (code-point order, ``COLLATE "C"``).

Configurations and their columns (built by :mod:`workbench.engines.pg_index`): ``simple``
(``tsv_simple``: lower case, IAST diacritics kept), ``russian`` (``tsv_russian``:
Russian stemming and stop words) and ``wb_fold`` (``tsv_fold``: ``simple`` plus
``unaccent``, so ``phalesu`` finds ``phaleṣu``).

The query text is never parsed as tsquery syntax and never spliced into SQL: it is
sent as a parameter and turned into lexemes by the same configuration, so quotes,
``& | ! ( ) : *`` and SQL metacharacters are ordinary characters. Forms:

* ``or``: every lexeme of ``to_tsvector(config, query)`` joined by ``|`` (each lexeme
  quoted and escaped as tsquery text, in SQL); fills a top-k list for
  natural-language queries;
* ``and``: ``plainto_tsquery`` (every lexeme must occur);
* ``phrase``: ``phraseto_tsquery`` (the lexemes in order, adjacent);
* ``websearch``: ``websearch_to_tsquery`` (quotes, ``or``, ``-``; never a syntax error).

In ``and``, ``phrase`` and ``websearch`` a hyphen inside a word is read as a space: PostgreSQL's parser makes
``sense-organs`` a compound lexeme *and* its parts, and these forms would then require the compound, which only
documents that hyphenate it hold (``sense-organs`` found 27 verses where ``sense organs`` finds 31, issue #41).
A hyphen before a word (``websearch``'s ``-krishna``) is not inside one and keeps its meaning.

A query with no lexemes (empty, only stop words or punctuation) returns an empty
ranking, and so does one with no positive term (``websearch`` ``-krishna``: PostgreSQL's
``querytree`` is ``T``), which would otherwise match every document with score 0. Queries longer
than ``max_query_chars`` (default 2,000) are cut to that length, at a word boundary
(:func:`workbench.text.query.cut`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Literal, Optional

from pydantic import Field

from retrievers._sql import ProductionTable, SqlLane, TextIndexKind
from workbench.engines.pg_index import TSV_COLUMNS
from workbench.errors import ConfigError
from workbench.registry import Params
from workbench.run import Run
from workbench.text.query import cut
from workbench.types import Query

FORMS = ("or", "and", "phrase", "websearch")
#: A hyphen (ASCII, U+2010, U+2011) between two letters or digits: a space in the forms that require every lexeme.
_INNER_HYPHEN = re.compile(r"(?<=\w)[-\u2010\u2011](?=\w)")

_OR = ("(SELECT string_agg('''' || replace(replace(lexeme, '\\', '\\\\'), '''', '''''') || '''', ' | ' ORDER BY lexeme) "
       "FROM unnest(to_tsvector(%(cfg)s::regconfig, %(q)s::text)))::tsquery")
_TSQUERY = {
    "or": _OR,
    "and": "plainto_tsquery(%(cfg)s::regconfig, %(q)s::text)",
    "phrase": "phraseto_tsquery(%(cfg)s::regconfig, %(q)s::text)",
    "websearch": "websearch_to_tsquery(%(cfg)s::regconfig, %(q)s::text)",
}


class FullTextLane(SqlLane):
    """PostgreSQL full-text search (see the module docstring).

    Args:
        name: lane name.
        dsn: the read-only role's DSN or a connection factory.
        table: the :class:`~workbench.engines.pg_index.IndexInfo` or its table name.
        config: ``simple``, ``russian`` or ``wb_fold``.
        form: ``or``, ``and``, ``phrase`` or ``websearch``.
        normalization: ``ts_rank_cd`` normalisation bitmask, 0..63 (PostgreSQL docs §12.3.3).
        max_query_chars: longer queries are cut to this many characters.
        transliterate: also search the query's IAST form and Pali variants
            (:func:`workbench.text.query.query_forms`; each document keeps its best score).
        production: a team's table (:class:`retrievers._sql.Production`) instead of ``table``: its tsvector column
            with its own configuration (``table.ts_config``; ``config`` is then unused).

    Attributes:
        last_latencies_ms: per query_id, the SQL round trip in ms.

    Raises:
        ConfigError: an unknown configuration or form, or a bad normalisation.
    """

    def __init__(self, name: str, dsn, table, *, config: str = "simple", form: str = "or",
                 normalization: int = 32, max_query_chars: int = 2000, transliterate: bool = False,
                 production=None):
        super().__init__(name, dsn, table, production)
        if production is not None:
            config = production.table.ts_config
        elif config not in TSV_COLUMNS:
            raise ConfigError(f"lane {name}: config must be one of {', '.join(TSV_COLUMNS)}, got {config!r}")
        if form not in FORMS:
            raise ConfigError(f"lane {name}: form must be one of {', '.join(FORMS)}, got {form!r}")
        if not isinstance(normalization, int) or isinstance(normalization, bool) or not 0 <= normalization <= 63:
            raise ConfigError(f"lane {name}: normalization must be an integer bitmask in 0..63, got {normalization!r}")
        if not isinstance(max_query_chars, int) or max_query_chars < 1:
            raise ConfigError(f"lane {name}: max_query_chars must be a positive integer, got {max_query_chars!r}")
        self.ts_config, self.form, self.normalization = config, form, normalization
        self.max_query_chars = max_query_chars
        self.transliterate = bool(transliterate)
        self.column = "tsv" if production is not None else TSV_COLUMNS[config]
        self.score_kind = (f"ts_rank_cd({self.column}, {form} tsquery, normalization {normalization}), "
                           ">= 0, higher is better")

    def config(self) -> dict[str, Any]:
        """Every engine parameter that shapes the ranking (keys the candidate cache)."""
        return {"kind": "fulltext", "table": self.table, "production": self.production is not None,
                "config": self.ts_config, "column": self.column,
                "form": self.form, "normalization": self.normalization, "rank": "ts_rank_cd",
                "max_query_chars": self.max_query_chars, "transliterate": self.transliterate}

    def search(self, queries: Sequence[Query], k: int) -> Run:
        """Top ``k`` documents by ``ts_rank_cd`` for every query (empty ranking when a query has no lexemes).

        Raises:
            ValueError: ``k`` is not an integer >= 0.
            PgError: the table is missing or the server is unreachable.
        """
        from psycopg import sql

        if self.production is not None:
            self.checked_production()
        stmt = sql.SQL(
            "SELECT t.doc_id, ts_rank_cd(t.{col}, q.tsq, %(norm)s::int) AS score "
            "FROM (SELECT {tsq} AS tsq) q, {table} t WHERE t.{col} @@ q.tsq AND querytree(q.tsq) <> 'T' "
            "{{filter}}ORDER BY score DESC, t.doc_id COLLATE \"C\" LIMIT %(k)s"
        ).format(col=sql.Identifier(self.column), tsq=sql.SQL(_TSQUERY[self.form]),
                 table=sql.SQL(self.relation)).as_string(None)

        def one(conn, text: str, k: int, where) -> list[tuple[str, float]]:
            text = cut(text, self.max_query_chars)
            if self.form != "or":
                text = _INNER_HYPHEN.sub(" ", text)
            params = {"cfg": self.ts_config, "q": text, "norm": self.normalization, "k": k, **where[1]}
            query = stmt.replace("{filter}", f"AND {where[0]} " if where[0] else "")
            return [(d, float(s)) for d, s in conn.execute(query, params).fetchall()]

        return self._run(queries, k, one, transliterate=self.transliterate)


class FullTextParams(Params):
    """Parameters of a ``kind = "fulltext"`` lane (see :class:`FullTextLane`)."""

    config: Literal["simple", "russian", "wb_fold"] = Field(
        "simple", description="text search configuration (wb_fold: simple + unaccent)")
    form: Literal["or", "and", "phrase", "websearch"] = Field("or", description="how query words combine")
    normalization: int = Field(32, ge=0, le=63, description="ts_rank_cd normalization bitmask")
    max_query_chars: int = Field(2000, ge=1, description="longer queries are cut at a word boundary")
    transliterate: bool = Field(False, description="also search the query in IAST (Cyrillic, Devanagari, HK, "
                                "Velthuis) and its Pali spelling variants; best score per document")
    table: Optional[ProductionTable] = Field(None, description="a team's own table, read-only (name, id, tsvector, "
                                             "ts_config, dsn_env) instead of the workbench's index")


class FullTextKind(TextIndexKind):
    """``fulltext``: PostgreSQL full-text search ranked by ``ts_rank_cd``."""

    kind = "fulltext"
    summary = "PostgreSQL full text (simple / russian / folded), ts_rank_cd; higher is better"
    Params = FullTextParams
    lane_class = FullTextLane
    columns = (("tsv", "tsvector"),)
