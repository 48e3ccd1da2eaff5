"""The ``http`` lane: a live JSON search API (``GET`` a URL template, or ``POST`` a JSON body template, per query).

The transport is :class:`workbench.io.http.JsonClient` (a deadline per attempt, a response cap, retries honouring
429 and ``Retry-After``, no redirects followed); what live lanes share (templates, JMESPath hits, id mapping,
failures, snapshots) is :mod:`retrievers._live`'s and :mod:`workbench.live.mapping`'s.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import Field

from retrievers import _live
from retrievers._live import LiveLane, LiveParams, check_common, crosswalk_extra, experiment_folder
from workbench.errors import RemoteError
from workbench.live import mapping
from workbench.registry import RetrieverKind
from workbench.types import Query


class HttpParams(LiveParams):
    """``kind = "http"``."""

    url: str = Field(min_length=1, description="URL template: {query}, {k}, {filters} are percent-encoded into it")
    method: Literal["GET", "POST"] = Field("GET", description="GET the URL, or POST body to it")
    body: Optional[dict[str, Any]] = Field(None, description="POST body template (a table): \"{query}\", "
                                                             "\"{k}\" take their values with their types")
    backoff_s: float = Field(0.5, ge=0, le=600, description="seconds before the first retry, doubled each time")
    max_response_mb: float = Field(16.0, gt=0, le=4096, description="the largest answer read, in MiB")


class HttpLane(LiveLane):
    """The ``http`` lane (module docstring)."""

    def __init__(self, name: str, params: HttpParams, ds: Any, base: Path | None = None) -> None:
        super().__init__(name, params, ds, f"lanes.{name}", base)
        from workbench.io.http import JsonClient, check_url

        check_url(mapping.render(params.url, self.values(Query("q", "q", "term", "und", "test"), 1), url=True),
                  f"lanes.{name}.url", 'url = "https://…/search?q={query}"')
        self.client = JsonClient(timeout_s=params.timeout_s, retries=params.retries, backoff_s=params.backoff_s,
                                 max_response_mb=params.max_response_mb,
                                 headers=mapping.resolve_headers(params.headers, f"lanes.{name}"))

    def _one(self, q: Query, k: int) -> tuple[Query, Any, float]:
        from workbench.io.http import HttpFailure

        values = self.values(q, k)
        url = mapping.render(self.params.url, values, url=True)
        self.limiter.wait()
        t0 = time.perf_counter()
        try:
            if self.params.method == "GET":
                answer = self.client.get(url)
            else:
                answer = self.client.post(url, mapping.render(self.params.body or {}, values))
            got: Any = answer.json()
        except HttpFailure as exc:
            got = RemoteError(f"{self.where}: {self.params.url.split('?')[0]}: {exc}", exc.error_class)
        return q, got, (time.perf_counter() - t0) * 1000

    def _fetch_all(self, queries: list[Query], k: int):
        if self.params.concurrency == 1:
            return [self._one(q, k) for q in queries]
        with ThreadPoolExecutor(self.params.concurrency, thread_name_prefix=f"http-{self.name}") as pool:
            return list(pool.map(lambda q: self._one(q, k), queries))


class HttpKind(RetrieverKind):
    """``http``: a live JSON search API as a lane (see the module docstring)."""

    kind = "http"
    summary = "a live search API over HTTP (URL or body template, JMESPath hits, id mapping, snapshot-keyed cache)"
    Params = HttpParams
    code = (mapping, _live)
    remote = True

    def filters_natively(self, params) -> bool:
        """True when the request template sends ``{filters}`` (the system is asked to filter)."""
        return "filters" in mapping.placeholders([params.url, params.body or {}])

    def cache_extra(self, params, ds, res) -> dict[str, Any]:
        """The crosswalk's digest when ``id_map = "table:FILE"`` (its rows shape the mapped candidates)."""
        return crosswalk_extra(params, res)

    def open(self, name: str, params: HttpParams, ds, res) -> HttpLane:
        """The lane (headers' variables are read now: an unset one fails before any query)."""
        return HttpLane(name, params, ds, experiment_folder(res))

    def check(self, params: HttpParams, experiment) -> str:
        """Templates, JMESPath expressions and ``id_map`` (at load, before anything runs)."""
        if params.method == "GET" and params.body is not None:
            return "body is set but method is GET; set method = \"POST\" or drop body"
        if params.method == "POST" and params.body is None:
            return "method is POST but there is no body template; add body = {query = \"{query}\", k = \"{k}\"}"
        if not params.url.startswith(("http://", "https://")):
            return f"url = {params.url!r} must start with http:// or https://"
        unknown = sorted(mapping.placeholders(params.url) - set(mapping.PLACEHOLDERS))
        if unknown:
            return mapping.check_template(params.url, "url")
        problem = mapping.check_template(params.url if params.method == "GET" else params.body,
                                         "url" if params.method == "GET" else "body")
        return problem or check_common(params)


