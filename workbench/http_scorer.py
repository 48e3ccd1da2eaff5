"""A remote reranker: :class:`HttpScorer`, a :class:`workbench.scorers.PairScorer` over HTTP.

It speaks the common rerank JSON shape (Cohere, Jina, Hugging Face TEI's answer, and the workbench's own
server for a local cross-encoder, :mod:`workbench.services.reranker`). One request per batch of at most
``batch_size`` texts::

    POST {url}
    {"model": "...", "query": "...", "documents": ["...", ...], "return_documents": false}

(``model`` is left out when empty), answered with, in any order, one result per document, ``index`` being
the document's position in the batch::

    {"results": [{"index": 0, "relevance_score": 0.93}, ...]}      Cohere, Jina, the workbench's server
    [{"index": 0, "score": 0.93}, ...]                               TEI's bare list

Every failure is a :class:`workbench.errors.RerankError` (one line: the URL, the batch, what came back,
the fix) carrying ``partial``, the scores of the batches that succeeded before it.

Bounds: each attempt has a deadline, ``timeout_s`` for the whole of it (connecting, sending, waiting and
reading the answer: a watchdog shuts the connection's socket when it passes, so a server trickling its answer a
byte at a time cannot hold the caller), and an answer is read in chunks up to ``max_response_mb`` (a larger one
is refused by its ``Content-Length`` before it is read, or as soon as the chunks pass the cap).
"""

from __future__ import annotations

import json
import math
import os
import re
import socket
import threading
import time
from contextlib import contextmanager
from typing import Any, Iterator, Sequence
from urllib.parse import urlsplit

import numpy as np
import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from workbench.errors import ConfigError, RerankError

#: Failures worth another attempt, besides HTTP 429 and 5xx: no connection, no answer in time, a cut answer.
_TRANSIENT = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)
_SERVE = "`workbench services up reranker --model FOLDER`"
_SHAPE = '{"results": [{"index": i, "relevance_score": s}, ...]}'
#: The default cap of an answer, in MiB (1,000 results take about 60 KB).
MAX_RESPONSE_MB = 16.0
_CHUNK = 64 * 1024


# --- the deadline: the sockets an attempt uses are shut when it passes ---------------------------------------

_watched = threading.local()  # .sockets: the list the current attempt's watchdog shuts, in this thread


def _watch(sock: Any) -> None:
    sockets = getattr(_watched, "sockets", None)
    if sockets is not None and sock is not None:
        sockets.append(sock)


class _Watched:
    """A urllib3 connection mixin: its socket (new or reused) is handed to the current attempt's watchdog."""

    def connect(self) -> None:
        super().connect()  # type: ignore[misc]
        _watch(self.sock)  # type: ignore[attr-defined]

    def request(self, *args: Any, **kwargs: Any) -> None:
        _watch(self.sock)  # type: ignore[attr-defined]
        super().request(*args, **kwargs)  # type: ignore[misc]


class _WatchedHTTPConnection(_Watched, HTTPConnection):
    """urllib3's HTTP connection, watched (see :class:`_Watched`)."""


class _WatchedHTTPSConnection(_Watched, HTTPSConnection):
    """urllib3's HTTPS connection, watched (see :class:`_Watched`)."""


class _WatchedHTTPPool(HTTPConnectionPool):
    ConnectionCls = _WatchedHTTPConnection


class _WatchedHTTPSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedHTTPSConnection


class _WatchedAdapter(HTTPAdapter):
    """requests' adapter whose connections (direct or through a proxy) report their sockets to the watchdog."""

    _pools = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = self._pools

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **kwargs)
        manager.pool_classes_by_scheme = self._pools
        return manager


@contextmanager
def _deadline(seconds: float) -> Iterator[threading.Event]:
    """Within the block, the sockets this thread's requests use are shut (both ways) ``seconds`` from now,
    which ends any blocked read or write on them; the event yielded is set when that happened."""
    sockets: list[Any] = []
    fired = threading.Event()

    def fire() -> None:
        fired.set()
        for sock in list(sockets):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed

    timer = threading.Timer(seconds, fire)
    timer.daemon = True
    _watched.sockets = sockets
    timer.start()
    try:
        yield fired
    finally:
        timer.cancel()
        _watched.sockets = None


class _TooLarge(Exception):
    """An answer over the cap (never retried: the same request gets the same answer)."""


def _clip(text: str, n: int = 200) -> str:
    """The first ``n`` characters of ``text`` on one line."""
    return " ".join(text[:n].split()) or "(empty body)"


def _number(name: str, value: Any, *, low: float, strict: bool, integer: bool) -> None:
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value) \
            or value < low or (strict and value == low):
        what = ("a positive" if strict else "a non-negative") + (" integer" if integer else " number")
        raise ConfigError(f"http reranker {name} must be {what}, got {value!r}")


class HttpScorer:
    """A :class:`workbench.scorers.PairScorer` whose scores come from a rerank server over HTTP.

    Args:
        url: the rerank endpoint, ``http://`` or ``https://`` (e.g. ``http://127.0.0.1:8787/rerank``); no
            ``user:password@`` in it (the URL is part of ``model_id``, hence of cache keys and MLflow).
        model: the ``model`` field of each request; left out when empty.
        batch_size: documents per request (> 0).
        timeout_s: the deadline of each attempt, in seconds (> 0): connecting, sending, waiting and reading the
            whole answer.
        retries: further attempts of a request after a connection error, a timeout, HTTP 429 or 5xx but 501 and
            505 (>= 0);
            never after another 4xx or a malformed answer.
        backoff_s: seconds before the first retry, doubled before each next one (>= 0).
        api_key_env: the name of an environment variable holding a bearer token, sent as
            ``Authorization: Bearer ...``; read at each request, never stored, logged or put in a message.
        max_response_mb: the largest answer read, in MiB (> 0); a larger one fails the batch at once.

    Attributes:
        model_id: ``"http:" + url``, plus ``"#" + model`` when a model is named. It names the endpoint, not
            the weights behind it: serve other weights at the same URL and model name, and a score cache
            keyed by this id would mix them.

    Raises:
        ConfigError: an argument is invalid (names it), or ``api_key_env`` names a variable that is unset.
    """

    def __init__(self, url: str, *, model: str = "", batch_size: int = 32, timeout_s: float = 30.0,
                 retries: int = 2, backoff_s: float = 0.5, api_key_env: str | None = None,
                 max_response_mb: float = MAX_RESPONSE_MB) -> None:
        parts = urlsplit(url) if isinstance(url, str) else None
        if parts is None or parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigError(f"http reranker url {url!r} must start with http:// or https:// and name a host, "
                              "e.g. url = \"http://127.0.0.1:8787/rerank\"")
        if parts.username is not None or parts.password is not None:
            raise ConfigError(f"http reranker url {parts.scheme}://{parts.hostname}... holds credentials; put the "
                              "token in an environment variable and name it with api_key_env")
        if not isinstance(model, str):
            raise ConfigError(f"http reranker model must be a string, got {model!r}")
        _number("batch_size", batch_size, low=0, strict=True, integer=True)
        _number("timeout_s", timeout_s, low=0, strict=True, integer=False)
        _number("retries", retries, low=0, strict=False, integer=True)
        _number("backoff_s", backoff_s, low=0, strict=False, integer=False)
        _number("max_response_mb", max_response_mb, low=0, strict=True, integer=False)
        if api_key_env is not None:
            if not isinstance(api_key_env, str) or not api_key_env.strip():
                raise ConfigError(f"http reranker api_key_env must name an environment variable, got {api_key_env!r}")
            if not os.environ.get(api_key_env, "").strip():
                raise ConfigError(f"http reranker api_key_env names {api_key_env}, which is not set; "
                                  f"export {api_key_env}=<token> before running")
        self.url = url
        self.model = model
        self.batch_size = batch_size
        self.timeout_s = float(timeout_s)
        self.retries = retries
        self.backoff_s = float(backoff_s)
        self.api_key_env = api_key_env
        self.max_response_mb = float(max_response_mb)
        self.max_response_bytes = int(max_response_mb * 2**20)
        self.model_id = f"http:{url}" + (f"#{model}" if model else "")
        self._session: requests.Session | None = None

    def score(self, query: str, texts: Sequence[str]) -> np.ndarray:
        """The server's score of ``(query, text)`` for each text: float32 ``(len(texts),)``, higher is better.

        The texts go in batches of ``batch_size``, one after the other (no request for no text).

        Raises:
            RerankError: a batch failed (after its retries); its ``partial`` maps the index in ``texts`` of
                every text of the batches scored before to its score, so a caller can keep them.
        """
        n = len(texts)
        done: dict[int, float] = {}
        starts = range(0, n, self.batch_size)
        for k, start in enumerate(starts):
            batch = [str(t) for t in texts[start:start + self.batch_size]]
            where = f"batch {k + 1} of {len(starts)} (texts {start}-{start + len(batch) - 1} of {n})"
            try:
                scores = self._post(query, batch, where)
            except RerankError as exc:
                exc.partial = dict(done)
                raise
            done.update((start + i, s) for i, s in enumerate(scores))
        return np.asarray([done[i] for i in range(n)], dtype=np.float32)

    def close(self) -> None:
        """Close the kept-alive connections (a later ``score`` opens new ones)."""
        if self._session is not None:
            self._session.close()
            self._session = None

    def _error(self, where: str, what: str, fix: str) -> RerankError:
        if "`workbench" not in fix:
            fix += f" (the workbench's own server: {_SERVE})"
        return RerankError(f"reranker at {self.url}: {where}: {what}; {fix}")

    def _post(self, query: str, batch: list[str], where: str) -> list[float]:
        """Scores of one batch, in its order, after up to ``retries`` further attempts."""
        payload: dict[str, Any] = {"query": query, "documents": batch, "return_documents": False}
        if self.model:
            payload = {"model": self.model, **payload}
        headers = {"Accept": "application/json"}
        if self.api_key_env:
            headers["Authorization"] = f"Bearer {os.environ.get(self.api_key_env, '').strip()}"
        if self._session is None:
            self._session = requests.Session()
            adapter = _WatchedAdapter()
            self._session.mount("http://", adapter)
            self._session.mount("https://", adapter)
        attempts = self.retries + 1
        late = f"no answer within {self.timeout_s:g} s (timeout_s, the deadline of each attempt)"
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                time.sleep(self.backoff_s * 2 ** (attempt - 2))
            resp = None
            with _deadline(self.timeout_s) as fired:
                try:
                    # the per-read timeout outlasts the deadline: the watchdog ends the attempt first
                    resp = self._session.post(self.url, json=payload, headers=headers, stream=True,
                                              timeout=(self.timeout_s, self.timeout_s + 1))
                    body = self._read(resp)
                except _TooLarge as exc:
                    raise self._error(where, f"the answer is {exc}", "raise max_response_mb if the server's answers "
                                      "are this large, or check that the url is its rerank endpoint") from None
                except _TRANSIENT as exc:
                    last = late if fired.is_set() or isinstance(exc, requests.Timeout) \
                        else f"no (complete) answer ({_reason(exc)})"
                    continue
                except requests.RequestException as exc:
                    if fired.is_set():
                        last = late
                        continue
                    raise self._error(where, f"the request failed ({_reason(exc)})", "check the url") from None
                finally:
                    if resp is not None:
                        resp.close()
            came = f"HTTP {resp.status_code}: {_clip(body.decode(resp.encoding or 'utf-8', 'replace'))}"
            if resp.status_code == 429 or (resp.status_code >= 500 and resp.status_code not in (501, 505)):
                last = came  # 501 / 505 say the server does not do this at all: no point asking again
                continue
            if not 200 <= resp.status_code < 300:
                raise self._error(where, f"refused ({came})", self._refused_fix(resp.status_code))
            return self._parse(body, len(batch), where, came)
        fix = "is the server up? start one with " + _SERVE + (" (or raise timeout_s)" if last is late else "")
        raise self._error(where, f"failed after {attempts} attempt{'s' * (attempts > 1)}: {last}", fix)

    def _read(self, resp: requests.Response) -> bytes:
        """The answer's body, read in chunks; :class:`_TooLarge` past ``max_response_bytes`` (by the
        ``Content-Length`` before anything is read, else as soon as the chunks pass it)."""
        cap = self.max_response_bytes
        limit = f"larger than max_response_mb = {self.max_response_mb:g} ({cap} bytes)"
        length = (resp.headers.get("Content-Length") or "").strip()
        if length.isdigit() and int(length) > cap:
            raise _TooLarge(f"{int(length)} bytes, {limit}")
        body = bytearray()
        for chunk in resp.iter_content(_CHUNK):
            body += chunk
            if len(body) > cap:
                raise _TooLarge(limit)
        return bytes(body)

    def _refused_fix(self, status: int) -> str:
        if status in (401, 403):
            return (f"check the token in ${self.api_key_env}" if self.api_key_env
                    else "set api_key_env to the variable holding the server's token")
        return "check that the url is the server's rerank endpoint and the model name it serves"

    def _parse(self, raw: bytes, n: int, where: str, came: str) -> list[float]:
        """The ``n`` scores of an answer, in document order; a :class:`RerankError` when it is not the shape."""
        def bad(why: str) -> RerankError:
            return self._error(where, f"malformed answer, {why} ({came})",
                               f"the server must answer {_SHAPE}; check that the url is its rerank endpoint")

        try:
            body = json.loads(raw)
        except ValueError:
            raise bad("not JSON") from None
        results = body.get("results") if isinstance(body, dict) else body
        if not isinstance(results, list):
            raise bad('no "results" list')
        scores: dict[int, float] = {}
        for item in results:
            if not isinstance(item, dict):
                raise bad("a result is not an object")
            idx = item.get("index")
            value = item.get("relevance_score", item.get("score"))
            if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < n:
                raise bad(f"index {idx!r} is not in 0..{n - 1}")
            if idx in scores:
                raise bad(f"index {idx} is repeated")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
                raise bad(f"the score of index {idx} is {value!r}, not a finite number")
            scores[idx] = float(value)
        if len(scores) != n:
            raise bad(f"{len(scores)} results for {n} documents")
        return [scores[i] for i in range(n)]


def _reason(exc: Exception) -> str:
    """A short reason for a requests exception (its ``[Errno ...]`` part when there is one)."""
    found = re.search(r"\[Errno -?\d+\][^'\")\]]*", str(exc))
    return f"{type(exc).__name__}: {found.group(0).strip() if found else _clip(str(exc))}"
