"""The trigram lane (pg_trgm): fuzzy matching that survives misspellings (``Arjna`` → ``Arjuna``).

Raw score, in [0, 1], higher is better:

* ``word_similarity`` (default): ``word_similarity(query, body)``, the best trigram
  similarity between the query and any run of words in the document; candidates are
  the rows where ``query <% body`` (``pg_trgm.word_similarity_threshold`` = threshold);
* ``similarity``: ``similarity(body, query)`` over the whole document; candidates
  ``body % query`` (``pg_trgm.similarity_threshold``). Long documents score low on it.

A query with fewer than :data:`~workbench.text.query.MIN_TRIGRAM_CHARS` letters and digits (``a``, ``BG``,
``अथ``; :func:`~workbench.text.query.trigram_chars`) gets an empty ranking without touching the database, and a
note (:attr:`TrigramLane.last_notes`, shown by ``workbench search``): its only trigrams are its padded edges, so
every document holding it as a word scores 1.0, and the lane would hand fusion its limit of tied documents in
doc_id order, which RRF credits like real matches.

Both operators use the trigram GIN index on ``body``. Ties are broken by ``doc_id``
(code-point order). A query is cut at a word boundary to ``max_query_chars`` (default 512) characters
before matching: a 10,000-character query then costs what a 512-character one does
(its trigram set, and with it the index scan, grows with its length), and a query
that long has a tiny word similarity to any verse anyway. pg_trgm lower-cases and
ignores non-word characters, so quotes and SQL metacharacters only split words;
the text is always a parameter, never part of the SQL.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Optional

from pydantic import Field

from retrievers._sql import ProductionTable, SqlLane, TextIndexKind
from workbench.errors import ConfigError
from workbench.registry import Params
from workbench.run import Run
from workbench.text.query import MIN_TRIGRAM_CHARS, cut, trigram_chars
from workbench.types import Query

FUNCTIONS = ("word_similarity", "similarity")

_SQL = {
    "word_similarity": ("SELECT doc_id, word_similarity(%(q)s::text, body) AS score FROM {table} t "
                        "WHERE %(q)s::text <%% body {{filter}}ORDER BY score DESC, doc_id COLLATE \"C\" LIMIT %(k)s"),
    "similarity": ("SELECT doc_id, similarity(body, %(q)s::text) AS score FROM {table} t "
                   "WHERE body %% %(q)s::text {{filter}}ORDER BY score DESC, doc_id COLLATE \"C\" LIMIT %(k)s"),
}
_GUC = {"word_similarity": "pg_trgm.word_similarity_threshold", "similarity": "pg_trgm.similarity_threshold"}


class TrigramLane(SqlLane):
    """Trigram similarity search (see the module docstring).

    Args:
        name: lane name.
        dsn: the read-only role's DSN or a connection factory.
        table: the :class:`~workbench.engines.pg_index.IndexInfo` or its table name.
        function: ``word_similarity`` or ``similarity``.
        threshold: the operator's threshold in [0, 1] (pg_trgm's defaults are 0.6 for
            word similarity and 0.3 for similarity; lower finds more).
        max_query_chars: longer queries are cut to this many characters.
        max_query_words: queries of more words get an empty ranking without touching the
            database (default ``None``: no limit). The lane is meant for short strings —
            canonical addresses, terms, near-spellings — and on this 2-core machine a
            paraphrase costs 70-350 ms a query against 700 gita verses (``word_similarity``
            rechecks every candidate against the whole body), several seconds against
            512-token passages; a limit keeps a main job within minutes.
        transliterate: also search the query's IAST form and Pali variants
            (:func:`workbench.text.query.query_forms`; each document keeps its best score).

    Attributes:
        last_latencies_ms: per query_id, the SQL round trip in ms.
        last_notes: per query_id, why the last :meth:`search` gave it an empty ranking without asking the
            database (a query too short for trigrams); queries it searched are absent.

    Raises:
        ConfigError: an unknown function, or a threshold outside [0, 1].
    """

    def __init__(self, name: str, dsn, table, *, function: str = "word_similarity", threshold: float = 0.3,
                 max_query_chars: int = 512, max_query_words: int | None = None, transliterate: bool = False,
                 production=None):
        super().__init__(name, dsn, table, production)
        if function not in FUNCTIONS:
            raise ConfigError(f"lane {name}: function must be one of {', '.join(FUNCTIONS)}, got {function!r}")
        if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) or not 0.0 <= threshold <= 1.0:
            raise ConfigError(f"lane {name}: threshold must be a number in [0, 1], got {threshold!r}")
        if not isinstance(max_query_chars, int) or max_query_chars < 1:
            raise ConfigError(f"lane {name}: max_query_chars must be a positive integer, got {max_query_chars!r}")
        if max_query_words is not None and (isinstance(max_query_words, bool) or not isinstance(max_query_words, int)
                                            or max_query_words < 1):
            raise ConfigError(f"lane {name}: max_query_words must be a positive integer or absent, got {max_query_words!r}")
        self.function, self.threshold, self.max_query_chars = function, float(threshold), max_query_chars
        self.max_query_words = max_query_words
        self.transliterate = bool(transliterate)
        self.score_kind = f"pg_trgm {function}, in [0, 1], higher is better"
        self.last_notes: dict[str, str] = {}

    def config(self) -> dict[str, Any]:
        """Every engine parameter that shapes the ranking (keys the candidate cache)."""
        return {"kind": "trigram", "table": self.table, "production": self.production is not None,
                "function": self.function, "threshold": self.threshold,
                "max_query_chars": self.max_query_chars, "max_query_words": self.max_query_words,
                "transliterate": self.transliterate}

    def search(self, queries: Sequence[Query], k: int) -> Run:
        """Top ``k`` documents by trigram similarity above the threshold, for every query.

        Raises:
            ValueError: ``k`` is not an integer >= 0.
            PgError: the table is missing or the server is unreachable.
        """
        from psycopg import sql

        if self.production is not None:
            self.checked_production()
        stmt = sql.SQL(_SQL[self.function]).format(table=sql.SQL(self.relation)).as_string(None)

        from workbench.text.query import clean, query_forms

        self.last_notes = {}
        for q in queries:
            text = clean(q.text or "")
            if not 0 < trigram_chars(text) < MIN_TRIGRAM_CHARS:
                continue  # most queries: no note, and no transliteration computed twice
            # the forms _run searches: a short Devanagari word may have a longer IAST form
            if self.transliterate and max(map(trigram_chars, query_forms(q.text or ""))) >= MIN_TRIGRAM_CHARS:
                continue
            self.last_notes[q.query_id] = (f"{text!r} is too short for trigrams (fewer than {MIN_TRIGRAM_CHARS} "
                                           "letters or digits): the lane answers nothing")

        def one(conn, text: str, k: int, where) -> list[tuple[str, float]]:
            if self.max_query_words is not None and len(text.split()) > self.max_query_words:
                return []
            if trigram_chars(text) < MIN_TRIGRAM_CHARS:
                return []
            query = stmt.replace("{filter}", f"AND {where[0]} " if where[0] else "")
            rows = conn.execute(query, {"q": cut(text, self.max_query_chars), "k": k, **where[1]}).fetchall()
            return [(d, float(s)) for d, s in rows]

        return self._run(queries, k, one, before=lambda conn: self._set(conn, {_GUC[self.function]: repr(self.threshold)}),
                         transliterate=self.transliterate)


class TrigramParams(Params):
    """Parameters of a ``kind = "trigram"`` lane (see :class:`TrigramLane`)."""

    function: Literal["word_similarity", "similarity"] = Field(
        "word_similarity", description="pg_trgm similarity function")
    threshold: float = Field(0.3, ge=0, le=1, description="pg_trgm threshold of a candidate")
    max_query_words: Optional[int] = Field(None, ge=1, description="words of the query kept (default all)")
    max_query_chars: int = Field(512, ge=1, description="characters of the query kept")
    transliterate: bool = Field(False, description="also search the query in IAST (Cyrillic, Devanagari, HK, "
                                "Velthuis) and its Pali spelling variants; best score per document")
    table: Optional[ProductionTable] = Field(None, description="a team's own table, read-only (name, id, text, "
                                             "dsn_env) instead of the workbench's index")


class TrigramKind(TextIndexKind):
    """``trigram``: pg_trgm fuzzy matching."""

    kind = "trigram"
    summary = "pg_trgm trigram similarity (PostgreSQL), in [0, 1]; higher is better"
    Params = TrigramParams
    lane_class = TrigramLane
    columns = (("body", "text"),)
