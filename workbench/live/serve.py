"""``workbench serve``: one config of an experiment, on one dataset, as an HTTP search API and an MCP server.

A team shadows a tuned config before it ships by pointing its clients (or the workbench's own ``http`` and
``mcp`` lanes) at it. One port serves both:

* ``GET /search?q=TEXT&k=10`` or ``POST /search`` with ``{"query": TEXT, "k": 10}``;
* ``POST /mcp``: the MCP streamable-HTTP endpoint (the official ``mcp`` SDK), one tool ``search(query, k,
  filters)``; ``workbench serve --stdio`` speaks MCP over standard input and output instead (no port);
* ``GET /health``;
* ``GET /fetch?id=DOC_ID`` or ``POST /fetch`` with ``{"doc_id": ...}``, and the MCP tool ``fetch(doc_id)``: a hit's
  document (its address and texts), what an assistant asks for after a search;
* ``POST /click`` with ``{"query_id": ..., "doc_id": ...}``: a reader opened a hit (with ``--ubi-log`` only).

With ``--ubi-log DIR`` (off by default) each answered search is written as a UBI query and each click or
follow-up fetch as a UBI event (:mod:`workbench.traffic.log`: hashed clients, sessions, rotated files); a
search's ``result`` then carries its ``query_id``, which ``/click`` names. With ``--interleave A,B`` each search
shows one list made of both configs' rankings (team-draft, or balanced: :mod:`workbench.traffic.interleave`); the
log keeps which config each hit came from, and ``workbench logs compare`` credits the clicks and says which won.

Every answer is AICharya's envelope (``../shared/seeds/000_*``)::

    {"ok": true, "result": {"config": ..., "dataset": ..., "query": ..., "hits": [
        {"rank": 1, "doc_id": "bg2.47", "address": "BG 2.47", "score": 0.0327, "tiebreak": 0.81}, ...]}}
    {"ok": false, "error": {"code": "invalid_argument" | "not_found" | "dependency_failed", "message": ...}}

Hits are the config's run for that query exactly as ``eval`` computes it (the same lanes, depth, fusion,
rerank stage and ``top_k``), scores as JSON numbers that read back to the same floats, best first with ties in
the run's order; ``k`` cuts the list (at most ``top_k``). On a dataset of time-span documents a config with
``window_ms = N`` adds to each hit its ``window``: the passages of the same parent within ± N ms, the hit
included, in time order, ``[{"doc_id", "start_ms", "end_ms"}, ...]`` (the window stage,
:class:`workbench.eval.spans.Transcript`; AICharya's ``transcript_window``).

The served-port policy (:mod:`workbench.services.policy`) holds: loopback by default, Host and Origin checked,
bodies bounded; beyond loopback only with the dashboard's access tokens (``workbench dashboard token add``),
sent as ``Authorization: Bearer TOKEN``. The port's own refusals (401, 403, 413, 503 …) are envelopes too. A
request it cannot answer as asked is a 400, never a quietly different answer: an unknown parameter or key, or one
given twice (``?q=a&q=b``, ``{"query": "a", "query": "b"}``, at any depth of the body).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workbench.errors import ConfigError, WorkbenchError
from workbench.services import policy
from workbench.services.policy import Bounds

#: Interleaving methods of ``serve --interleave`` (:mod:`workbench.traffic.interleave`).
INTERLEAVE_METHODS = ("team-draft", "balanced")
#: Envelope error codes (AICharya's).
INVALID, NOT_FOUND, DEPENDENCY = "invalid_argument", "not_found", "dependency_failed"
#: The longest query text served, in characters.
MAX_QUERY_CHARS = 2000
#: The request bounds of the search port (a query and its filters are small).
SERVE_BOUNDS = Bounds(max_body_bytes=256 * 1024, read_timeout_s=30.0, max_connections=64)


class BadRequest(Exception):
    """A request the server refuses (``code`` is an envelope code)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class Served:
    """What ``serve`` serves: the experiment file, the config and dataset names."""

    experiment: Path
    config: str
    dataset: str


class Searcher:
    """One config on one dataset, answering one query at a time (lanes open once; calls serialised, as the lane
    protocol asks: an instance is used by one thread at a time).

    Args:
        experiment: the experiment TOML.
        config: a config name of it.
        dataset: a dataset name (default: the experiment's first).
        home: the workbench home.
        log: progress lines.

    Raises:
        ConfigError: an unknown config or dataset (names what there is), a reranker that cannot load.
        WorkbenchError: the dataset cannot be built, a service cannot start.
    """

    def __init__(self, experiment: Path, config: str, dataset: str | None, home: Path,
                 log: Callable[[str], None] = lambda _m: None, *, interleave: str | None = None,
                 method: str = "team-draft") -> None:
        from workbench.data import catalog
        from workbench.eval.spans import transcript
        from workbench.experiment.config import load_experiment
        from workbench.experiment.runner import Engine

        exp = load_experiment(experiment)
        if config not in exp.configs:
            raise ConfigError(f"unknown config {config!r}; {experiment} defines: {', '.join(exp.configs)}")
        name = dataset or exp.datasets[0]
        if name not in exp.datasets:
            raise ConfigError(f"dataset {name!r} is not one of {experiment}'s datasets ({', '.join(exp.datasets)}); "
                              "pass -d with one of them")
        if interleave is not None and interleave not in exp.configs:
            raise ConfigError(f"unknown config {interleave!r} to interleave with; {experiment} defines: "
                              f"{', '.join(exp.configs)}")
        if interleave == config:
            raise ConfigError(f"--interleave names {config} twice; interleave two different configs (A,B)")
        if method not in INTERLEAVE_METHODS:
            raise ConfigError(f"interleaving method {method!r} is not one of {', '.join(INTERLEAVE_METHODS)}")
        self.exp, self.cfg = exp, exp.configs[config]
        #: The config interleaved with ``cfg`` (``serve --interleave A,B``: ``cfg`` is A), or None.
        self.other = exp.configs[interleave] if interleave is not None else None
        self.method = method
        self.served = Served(Path(experiment), config, name)
        self.ds = catalog.ensure(name, catalog.load_definitions(), home=home, log=log)
        self.engine = Engine(exp, home, progress=False, log=log)
        cfgs = [self.cfg, *([self.other] if self.other is not None else [])]
        self.engine.check_rerankers([name], [c.rerank.reranker for c in cfgs if c.rerank is not None])
        needed = list(dict.fromkeys(n for c in cfgs for n in (*c.lanes, *exp.reranker_lanes(c))))
        self.lanes = {n: self.engine.lane(self.ds, exp.lanes[n]) for n in needed}
        self.docs = {d.doc_id: d for d in self.ds.documents}
        self.transcript = transcript(self.ds.documents, self.cfg.window_ms)
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        #: The UBI log (``serve --ubi-log``), or None: nothing is recorded.
        self.traffic: Any = None
        self._log = log
        self._log_failed = False

    def search(self, text: Any, k: Any = 10, filters: Any = None) -> dict[str, Any]:
        """The config's top ``k`` for ``text``: the ``result`` of the envelope (module docstring).

        Raises:
            BadRequest: ``invalid_argument`` for a text that is not a non-empty string of at most
                :data:`MAX_QUERY_CHARS` characters, a ``k`` that is not a positive integer, or a filter that does
                not parse or names a facet or value the dataset lacks (:mod:`workbench.io.facets`);
                ``dependency_failed`` when a lane's service fails.

        A filter is applied as in an evaluation: by each lane that can (SQL, OpenSearch), and after the fact
        for the others (:func:`workbench.experiment.runner.filter_hits`).
        """
        from workbench.experiment.runner import config_run, filter_hits
        from workbench.io.facets import check_filter, parse_filter
        from workbench.text.query import clean
        from workbench.types import Query

        if not isinstance(text, str) or not text.strip():
            raise BadRequest(INVALID, "query must be a non-empty string")
        if len(text) > MAX_QUERY_CHARS:
            raise BadRequest(INVALID, f"query has {len(text)} characters; at most {MAX_QUERY_CHARS}")
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise BadRequest(INVALID, f"k must be a positive integer, got {str(k)[:20]!r}")
        try:
            flt = parse_filter(filters if filters != [] else None)
        except ValueError as exc:
            raise BadRequest(INVALID, str(exc)[:300]) from None
        problem = check_filter(flt, self.ds.facet_index.values, self.served.dataset) if flt is not None else ""
        if not problem and flt is not None and not self.ds.facet_index.admitted(flt.text):
            # a contradictory range, a bound beyond every value: a client's mistake, not an honest empty answer
            problem = f"filter {flt.text} admits no document of {self.served.dataset}; loosen it"
        if problem:
            raise BadRequest(INVALID, problem[:300])
        k = min(k, self.cfg.top_k if self.other is None else min(self.cfg.top_k, self.other.top_k))
        q = Query(f"s{next(self._ids)}", clean(text), "paraphrase", "und", "test", filter=flt.text if flt else "")
        try:
            with self._lock:
                runs = {n: filter_hits(lane.search([q], self.exp.depth), [q], self.ds.facet_index)[0]
                        for n, lane in self.lanes.items()}
                ranked = list(config_run(self.cfg, runs, self.ds, self.engine, [q]).get_hits(q.query_id)[:k])
                if self.other is not None:
                    ranked_b = list(config_run(self.other, runs, self.ds, self.engine, [q]).get_hits(q.query_id)[:k])
        except WorkbenchError as exc:
            raise BadRequest(DEPENDENCY, " ".join(str(exc).split())[:500]) from None
        mixed = None
        if self.other is not None:  # one list of both, each hit with its own config's scores
            import random

            from workbench.traffic.interleave import balanced, team_draft

            mix = team_draft if self.method == "team-draft" else balanced
            ranked_a = ranked
            mixed = mix([h.doc_id for h in ranked], [h.doc_id for h in ranked_b], k, random.Random())
            a_by_id, b_by_id = {h.doc_id: h for h in ranked}, {h.doc_id: h for h in ranked_b}
            ranked = [b_by_id[d] if t == "B" else a_by_id[d] for d, t in zip(mixed.hits, mixed.teams, strict=True)]
        hits = []
        for rank, h in enumerate(ranked, start=1):
            d = self.docs.get(h.doc_id)
            hits.append({"rank": rank, "doc_id": h.doc_id, "address": d.address if d else "", "score": h.score,
                         # a hit the tie-break lane lacks carries -inf there, which JSON cannot: null
                         "tiebreak": h.tiebreak if math.isfinite(h.tiebreak) else None,
                         **({"window": self.transcript.window_records(h.doc_id, self.cfg.window_ms)}
                            if self.transcript is not None else {})})
        out: dict[str, Any] = {"config": self.served.config, "dataset": self.served.dataset, "query": text, "hits": hits}
        if mixed is not None:  # what the log needs to credit clicks (not shown to readers: dropped by answer())
            out["_interleave"] = {"a": self.cfg.name, "b": self.other.name if self.other else "",
                                  "method": mixed.method, "teams": list(mixed.teams), "a_first": mixed.a_first,
                                  "a_hits": [h.doc_id for h in ranked_a], "b_hits": [h.doc_id for h in ranked_b]}
        return out

    def answer(self, text: Any, k: Any = 10, filters: Any = None, client: str = "") -> dict[str, Any]:
        """:meth:`search` in the envelope: ``{"ok": true, "result": ...}`` or ``{"ok": false, "error": ...}``;
        never raises for a request. With a UBI log the search is recorded for ``client`` (a raw client key:
        :mod:`workbench.traffic.log`) and the result carries its ``query_id``."""
        def run() -> dict[str, Any]:
            result = self.search(text, k, filters)
            mixed = result.pop("_interleave", None)
            if self.traffic is not None:
                qid = self._record(lambda: self.traffic.searched(
                    client, text, [h["doc_id"] for h in result["hits"]],
                    {"k": k, **({"filters": json.dumps(filters, ensure_ascii=False)} if filters else {}),
                     **({"interleave": mixed} if mixed else {})}))
                if qid is not None:
                    result["query_id"] = qid
            return result

        return self._envelope(run)

    def fetch(self, doc_id: Any, client: str = "") -> dict[str, Any]:
        """A hit's document: ``{"doc_id", "address", "work_id", "texts": [{field, language, script, text,
        source}]}``; with a UBI log, recorded as the follow-up of the client's latest search that showed it.

        Raises:
            BadRequest: ``invalid_argument`` for an id that is not a non-empty string; ``not_found`` for an id
                the dataset lacks.
        """
        if not isinstance(doc_id, str) or not doc_id.strip():
            raise BadRequest(INVALID, "doc_id must be a non-empty string (a hit's doc_id)")
        d = self.docs.get(doc_id)
        if d is None:
            raise BadRequest(NOT_FOUND, f"no document {doc_id[:100]!r} in {self.served.dataset}")
        if self.traffic is not None:
            self._record(lambda: self.traffic.fetched(client, doc_id))
        return {"doc_id": d.doc_id, "address": d.address, "work_id": d.work_id,
                "texts": [t.to_json() for t in d.texts]}

    def click(self, query_id: Any, doc_id: Any) -> dict[str, Any]:
        """Record that a reader opened hit ``doc_id`` of search ``query_id``: ``{"query_id", "doc_id",
        "position"}``.

        Raises:
            BadRequest: ``invalid_argument`` for ids that are not non-empty strings, or a ``doc_id`` that search did
                not show; ``not_found`` when logging is off or the search is not known (too old, never served).
        """
        if self.traffic is None:
            raise BadRequest(NOT_FOUND, "clicks are recorded only with a UBI log: start serve with --ubi-log DIR")
        if not isinstance(query_id, str) or not query_id.strip() or not isinstance(doc_id, str) or not doc_id.strip():
            raise BadRequest(INVALID, 'give {"query_id": ..., "doc_id": ...}: the query_id of a search\'s result and '
                                      "one of its hits' doc_id")
        try:
            ev = self.traffic.clicked(query_id, doc_id)
        except KeyError:
            raise BadRequest(NOT_FOUND, f"no search {query_id[:100]!r} is known to this server (a query_id from a "
                                        "search's result, since it started)") from None
        except LookupError:
            raise BadRequest(INVALID, f"search {query_id[:100]!r} did not show {doc_id[:100]!r}") from None
        except OSError as exc:
            raise BadRequest(DEPENDENCY, f"the UBI log cannot be written: {exc}") from None
        return {"query_id": ev.query_id, "doc_id": ev.object_id, "position": ev.position}

    def _record(self, write: Callable[[], Any]) -> Any:
        """Run a log write; a failure (a full disk) costs no answer: it is said once and the answer goes out."""
        try:
            return write()
        except OSError as exc:
            if not self._log_failed:
                self._log_failed = True
                self._log(f"the UBI log cannot be written ({exc}); answers go on without it")
            return None

    def _envelope(self, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``run()``'s result in the envelope (module docstring); never raises."""
        try:
            env = {"ok": True, "result": run()}
        except BadRequest as exc:
            env = {"ok": False, "error": {"code": exc.code, "message": str(exc)}}
        except Exception as exc:  # noqa: BLE001 - a bug or a lane's own failure: one answer, not a dead server
            env = {"ok": False, "error": {"code": DEPENDENCY, "message": f"{type(exc).__name__}: "
                                                                         f"{' '.join(str(exc).split())[:300]}"}}
        return _encodable(env)

    def answer_fetch(self, doc_id: Any, client: str = "") -> dict[str, Any]:
        """:meth:`fetch` in the envelope; never raises."""
        return self._envelope(lambda: self.fetch(doc_id, client))

    def answer_click(self, query_id: Any, doc_id: Any) -> dict[str, Any]:
        """:meth:`click` in the envelope; never raises."""
        return self._envelope(lambda: self.click(query_id, doc_id))


class _TwiceGiven(ValueError):
    """A JSON object of a request gives ``key`` twice."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _once(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """``json.loads``' ``object_pairs_hook``: the object, or :class:`_TwiceGiven` for a key given twice (the
    parser would keep the last and answer a request that was not asked)."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _TwiceGiven(key)
        out[key] = value
    return out


def _twice(keys: list[str]) -> list[str]:
    """The names given more than once in ``keys``, sorted."""
    return sorted(k for k, n in Counter(keys).items() if n > 1)


_SURROGATE = re.compile("[\ud800-\udfff]")


def _encodable(value: Any) -> Any:
    """``value`` with every lone surrogate (a request's ``"\\ud800"``, echoed) replaced by U+FFFD, so the answer
    encodes as UTF-8 (it was a 500: UnicodeEncodeError while writing the JSON)."""
    if isinstance(value, str):
        return _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_encodable(k): _encodable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_encodable(v) for v in value]
    return value


def mcp_server(searcher: Searcher):
    """An MCP server (``mcp.server.mcpserver.MCPServer``) with the ``search`` tool over ``searcher``."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name="workbench", instructions=f"Search {searcher.served.dataset} with the workbench config "
                                                         f"{searcher.served.config}.")

    from mcp.server.mcpserver import Context

    async def search(query: str, k: int = 10, filters: dict[str, Any] | None = None, ctx: Any = None) -> dict[str, Any]:
        import anyio

        client = client_key(_headers(ctx))
        return await anyio.to_thread.run_sync(searcher.answer, query, k, filters, client)  # lanes block: not on the loop

    async def fetch(doc_id: str, ctx: Any = None) -> dict[str, Any]:
        import anyio

        client = client_key(_headers(ctx))
        return await anyio.to_thread.run_sync(searcher.answer_fetch, doc_id, client)

    for fn in (search, fetch):  # the SDK finds its context by the annotation, resolved in this module's globals
        fn.__annotations__["ctx"] = Context
    server.tool(name="search", description="Search the corpus; returns {ok, result: {hits: [{rank, doc_id, address, "
                                           "score, tiebreak}]}} or {ok: false, error: {code, message}}.")(search)
    server.tool(name="fetch", description="Fetch a hit's document by its doc_id (from search): {ok, result: {doc_id, "
                                          "address, work_id, texts: [{field, language, script, text, source}]}}.")(fetch)

    # an argument the tool does not take ("filter" for "filters") is refused, not ignored: the answer would come
    # back unfiltered. The SDK builds the arguments model with pydantic's default (extra keys ignored) and has no
    # public hook for it; the tool's own model is tightened here (its input schema then says
    # additionalProperties: false), and a test holds the SDK to it.
    for name in ("search", "fetch"):
        tool = server._tool_manager.get_tool(name)
        if tool is None:  # registered above; an SDK that changed this is caught by the tests
            raise RuntimeError(f"the MCP SDK did not register the {name} tool")
        args = tool.fn_metadata.arg_model
        args.model_config["extra"] = "forbid"
        args.model_rebuild(force=True)
        tool.parameters = args.model_json_schema(by_alias=True)  # what tools/list shows: additionalProperties false
    return server


def _headers(ctx: Any) -> Mapping[str, str] | None:
    """An MCP call's HTTP headers, or None (stdio, or a call outside a request: the SDK raises there)."""
    try:
        return ctx.headers if ctx is not None else None
    except (ValueError, AttributeError):
        return None


def client_key(headers: Mapping[str, str] | None, address: str = "") -> str:
    """The raw key of a request's client (hashed before it is logged: :mod:`workbench.traffic.log`): its
    ``X-Client-Id`` header (UBI's ``client_id``, what a front end sends), else its bearer token, else its
    User-Agent and ``address``; ``"stdio"`` for MCP over standard input and output (one client)."""
    if headers is None:
        return "stdio" if not address else f"addr:{address}"
    low = {k.lower(): v for k, v in headers.items()}
    if low.get("x-client-id", "").strip():
        return "id:" + low["x-client-id"].strip()[:200]
    if low.get("authorization", "").strip():
        return "token:" + low["authorization"].strip()
    return f"ua:{low.get('user-agent', '')[:200]}|{address}"


def http_app(searcher: Searcher, mcp: Any):
    """The Starlette app: ``/mcp`` (the MCP server's streamable HTTP, stateless, JSON answers), ``/search`` and
    ``/health``."""
    import anyio
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.requests import Request
    from starlette.responses import JSONResponse

    def status_of(envelope: Mapping[str, Any]) -> int:
        if envelope.get("ok"):
            return 200
        return {INVALID: 400, NOT_FOUND: 404}.get(envelope["error"]["code"], 502)

    def refused(message: str) -> JSONResponse:
        return JSONResponse(_encodable({"ok": False, "error": {"code": INVALID, "message": message}}),
                            status_code=400)

    @mcp.custom_route("/search", methods=["GET", "POST"])
    async def search(request: Request) -> JSONResponse:
        if request.method == "GET":
            unknown = sorted(set(request.query_params) - {"q", "k", "filters"})
            if unknown:  # a typo ("filter") would otherwise be answered unfiltered
                return refused(f"unknown parameter(s) {unknown}; /search takes q, k and filters")
            twice = _twice([key for key, _ in request.query_params.multi_items()])
            if twice:  # ?q=a&q=b: one of them would be answered silently
                return refused(f"parameter(s) {twice} given more than once; give each once")
            text, k_raw = request.query_params.get("q"), request.query_params.get("k", "10")
            k: Any = int(k_raw) if re.fullmatch(r"[0-9]{1,9}", k_raw.strip()) else k_raw  # not "²" (isdigit)
            filters = request.query_params.get("filters")  # the filter's JSON text, as in the body
        else:
            try:
                body = json.loads(await request.body(), object_pairs_hook=_once)
            except _TwiceGiven as exc:  # the parser would keep the last one: a request that was not asked
                return refused(f"the body gives key {exc.key[:80]!r} more than once; give each key once")
            except (ValueError, RecursionError):  # not JSON, or nested deeper than the parser recurses
                body = None
            if not isinstance(body, dict):
                return refused('the body must be a JSON object {"query": ..., "k": ...}')
            unknown = sorted(set(body) - {"query", "k", "filters"})
            if unknown:  # a typo ("filter") would otherwise be answered unfiltered
                return refused(f"the body has unknown key(s) {unknown}; it takes query, k and filters")
            text, k, filters = body.get("query"), body.get("k", 10), body.get("filters")
        env = await anyio.to_thread.run_sync(searcher.answer, text, k, filters, _client(request))
        return JSONResponse(env, status_code=status_of(env))

    def _client(request: Request) -> str:
        return client_key(request.headers, request.client.host if request.client else "")

    async def _body(request: Request, keys: set[str]) -> dict[str, Any] | JSONResponse:
        try:
            body = json.loads(await request.body(), object_pairs_hook=_once)
        except _TwiceGiven as exc:
            return refused(f"the body gives key {exc.key[:80]!r} more than once; give each key once")
        except (ValueError, RecursionError):
            body = None
        if not isinstance(body, dict):
            return refused(f"the body must be a JSON object with {', '.join(sorted(keys))}")
        unknown = sorted(set(body) - keys)
        if unknown:
            return refused(f"the body has unknown key(s) {unknown}; it takes {', '.join(sorted(keys))}")
        return body

    @mcp.custom_route("/fetch", methods=["GET", "POST"])
    async def fetch(request: Request) -> JSONResponse:
        if request.method == "GET":
            unknown = sorted(set(request.query_params) - {"id"})
            twice = _twice([key for key, _ in request.query_params.multi_items()])
            if unknown or twice:
                return refused("/fetch takes one parameter, id (a hit's doc_id)")
            doc_id: Any = request.query_params.get("id")
        else:
            body = await _body(request, {"doc_id"})
            if isinstance(body, JSONResponse):
                return body
            doc_id = body.get("doc_id")
        env = await anyio.to_thread.run_sync(searcher.answer_fetch, doc_id, _client(request))
        return JSONResponse(env, status_code=status_of(env))

    @mcp.custom_route("/click", methods=["POST"])
    async def click(request: Request) -> JSONResponse:
        body = await _body(request, {"query_id", "doc_id"})
        if isinstance(body, JSONResponse):
            return body
        env = await anyio.to_thread.run_sync(searcher.answer_click, body.get("query_id"), body.get("doc_id"))
        return JSONResponse(env, status_code=status_of(env))

    @mcp.custom_route("/health", methods=["GET"])
    async def health(_request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "config": searcher.served.config, "dataset": searcher.served.dataset})

    # the workbench's Guard checks Host and Origin (with the names the user allows); the SDK's own check would
    # refuse those names
    return mcp.streamable_http_app(streamable_http_path="/mcp", stateless_http=True, json_response=True,
                                   transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False))


def guarded_app(searcher: Searcher, mcp: Any, *, host: str, explicit: list[str],
                bearer: Callable[[str], bool] | None, log: Callable[[str], None] | None = None) -> policy.Guard:
    """The served port's ASGI app: :func:`http_app` behind the port policy's
    :class:`~workbench.services.policy.Guard` (``Host`` / ``Origin`` for ``host`` and the ``explicit`` names,
    :data:`SERVE_BOUNDS`, the ``bearer`` check when given: ``workbench serve``'s
    :func:`workbench.cli.serve.access_check`), its refusals as envelopes;
    ``log`` takes the one line said when the tokens cannot be checked.

    Raises:
        ConfigError: an ``explicit`` name is not a host name or an IP address.
    """
    return policy.Guard(http_app(searcher, mcp), service="the search API", allowed=policy.allowed_names(host, explicit),
                        explicit=frozenset(explicit), bounds=SERVE_BOUNDS, bearer_check=bearer,
                        body_fix="send one query per request", envelope=True, log=log)
