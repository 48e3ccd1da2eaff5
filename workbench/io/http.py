"""One bounded JSON-over-HTTP client for every remote service the workbench calls.

The remote reranker (:mod:`workbench.reranking.http`), the ``openai`` embedder and the ``http`` retriever lane all
speak JSON over HTTP to a server the workbench does not control. They share these rules (one definition each):

* **a deadline per attempt**: ``timeout_s`` covers connecting, sending, waiting and reading the whole answer. A
  watchdog shuts the attempt's sockets when it passes, so a server trickling its answer a byte at a time cannot
  hold the caller (requests' own timeout is per read, not a deadline);
* **a cap on the answer**: at most ``max_response_mb`` MiB is read; a larger ``Content-Length`` is refused
  before anything is read, a chunked answer as soon as the chunks pass the cap;
* **retries** after a connection error, a timeout, HTTP 429 and 5xx except 501 and 505, with exponential
  backoff (``backoff_s``, doubled each time) or, when the server says so, its ``Retry-After`` (seconds or an
  HTTP date, RFC 9110 §10.2.3), capped at ``max_retry_after_s``; never after another 4xx or an answer too large;
* **secrets from the environment**: ``api_key_env`` names a variable whose value is sent as
  ``Authorization: Bearer …``; it is read at each request and never stored, logged or put in a message;
* **no credentials in URLs** (the URL names caches and MLflow runs), and redirects are not followed (a
  redirect to another host would carry the bearer token there).

Failures are :class:`HttpFailure`: a one-line message plus ``error_class`` (``connect``, ``timeout``,
``http_401``, ``http_403``, ``http_404``, ``http_4xx``, ``http_429``, ``http_5xx``, ``too_large``,
``not_json``), which the live lanes count per query.
"""

from __future__ import annotations

import email.utils
import json
import math
import os
import re
import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
from requests.adapters import HTTPAdapter
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from workbench.errors import ConfigError

#: Failures worth another attempt, besides HTTP 429 and 5xx: no connection, no answer in time, a cut answer.
TRANSIENT = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)
#: The default cap of an answer, in MiB.
MAX_RESPONSE_MB = 16.0
#: The longest ``Retry-After`` honoured by default, in seconds (a longer one is cut to this).
MAX_RETRY_AFTER_S = 60.0
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


class WatchedAdapter(HTTPAdapter):
    """requests' adapter whose connections (direct or through a proxy) report their sockets to the watchdog
    of :func:`deadline`."""

    _pools = {"http": _WatchedHTTPPool, "https": _WatchedHTTPSPool}

    def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
        super().init_poolmanager(*args, **kwargs)
        self.poolmanager.pool_classes_by_scheme = self._pools

    def proxy_manager_for(self, proxy: str, **kwargs: Any) -> Any:
        manager = super().proxy_manager_for(proxy, **kwargs)
        manager.pool_classes_by_scheme = self._pools
        return manager


def watched_session(pool: int = 10) -> requests.Session:
    """A requests session whose connections obey :func:`deadline` (``pool``: connections kept per host)."""
    session = requests.Session()
    adapter = WatchedAdapter(pool_connections=pool, pool_maxsize=pool)
    session.mount("http://", adapter)
    session.mount("https://", adapter)
    return session


@contextmanager
def deadline(seconds: float) -> Iterator[threading.Event]:
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


class TooLarge(Exception):
    """An answer over the cap (never retried: the same request gets the same answer)."""


def read_capped(resp: requests.Response, cap: int, limit: str) -> bytes:
    """The answer's body, read in chunks; :class:`TooLarge` (with ``limit`` in its text) past ``cap`` bytes
    (by the ``Content-Length`` before anything is read, else as soon as the chunks pass it)."""
    length = (resp.headers.get("Content-Length") or "").strip()
    if length.isdigit() and int(length) > cap:
        raise TooLarge(f"{int(length)} bytes, {limit}")
    body = bytearray()
    for chunk in resp.iter_content(_CHUNK):
        body += chunk
        if len(body) > cap:
            raise TooLarge(limit)
    return bytes(body)


_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069]")


def clip(text: str, n: int = 200) -> str:
    """The first ``n`` characters of ``text`` on one line, control characters (a terminal's escape sequences, bidi
    overrides) shown as ``?``: a server's words reach the user's terminal only as text."""
    return " ".join(_CONTROL.sub("?", text[:n]).split()) or "(empty body)"


def decode(body: bytes, encoding: str | None) -> str:
    """``body`` as text in the answer's declared charset, UTF-8 when it names none or one Python lacks."""
    try:
        return body.decode(encoding or "utf-8", "replace")
    except LookupError:
        return body.decode("utf-8", "replace")


def loads(raw: bytes | str) -> Any:
    """``json.loads``, with every way a hostile answer can break it (a bad encoding, nesting deep enough to
    exhaust the recursion limit) raised as ``ValueError``."""
    try:
        return json.loads(raw)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueError(str(exc)) from None


def finite_number(value: Any) -> float | None:
    """``value`` as a finite float when it is a JSON number (not a bool) that fits one, else None (an integer
    of 400 digits overflows a float and is refused, not raised)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        out = float(value)
    except OverflowError:
        return None
    return out if math.isfinite(out) else None


def reason(exc: Exception) -> str:
    """A short reason for a requests exception (its ``[Errno ...]`` part when there is one)."""
    found = re.search(r"\[Errno -?\d+\][^'\")\]]*", str(exc))
    return f"{type(exc).__name__}: {found.group(0).strip() if found else clip(str(exc))}"


def redact(text: str, secrets: list[str]) -> str:
    """``text`` with every secret in ``secrets`` (a key a server may echo back) replaced by ``***``."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait: ``delay-seconds`` or an HTTP date (RFC 9110 §10.2.3);
    None when absent or unreadable; never negative."""
    if not value:
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def is_transient_status(status: int) -> bool:
    """Whether an HTTP status is worth another attempt: 429, and 5xx except 501 and 505 (which say the server
    does not do this at all)."""
    return status == 429 or (status >= 500 and status not in (501, 505))


def status_class(status: int) -> str:
    """The error class of an HTTP status (see the module docstring)."""
    if status in (401, 403, 404, 429):
        return f"http_{status}"
    return "http_5xx" if status >= 500 else "http_4xx"


def masked_url(url: Any) -> str:
    """``url`` as messages may show it (quoted): user and password, the query string and the fragment replaced by
    ``***``, where a key is typed into a URL (``https://sk-…@host``, ``?api_key=…``); works on URLs that do not
    parse too."""
    if not isinstance(url, str):
        return repr(url)
    shown = re.sub(r"//[^/?#]*@", "//***@", url)
    shown = re.sub(r"\?.*$", "?***", shown, flags=re.S)
    return repr(re.sub(r"#.*$", "#***", shown, flags=re.S))


def check_url(url: Any, what: str, example: str) -> str:
    """``url`` when it is ``http(s)://host...`` without credentials.

    Raises:
        ConfigError: naming ``what`` (e.g. ``embedders.prod base_url``) and the fix; the URL is shown masked
            (:func:`masked_url`: a key typed into it is never printed).
    """
    try:
        parts = urlsplit(url) if isinstance(url, str) else None
        host = parts.hostname if parts is not None else None  # parses the netloc: "[::1" raises here
        port = parts.port if parts is not None else None  # noqa: F841 - a port out of range raises here
    except ValueError as exc:  # "Invalid IPv6 URL", "Port out of range 0-65535": a traceback before
        raise ConfigError(f"{what} {masked_url(url)} is not a URL ({exc}), e.g. {example}") from None
    if parts is None or parts.scheme not in ("http", "https") or not host:
        raise ConfigError(f"{what} {masked_url(url)} must start with http:// or https:// and name a host, "
                          f"e.g. {example}")
    if parts.username is not None or parts.password is not None:
        raise ConfigError(f"{what} {parts.scheme}://{parts.hostname}... holds credentials; put the token in an "
                          "environment variable and name it with api_key_env")
    return url


def check_key_env(name: str | None, what: str) -> None:
    """Raise ConfigError unless ``name`` is None or names a set, non-empty environment variable."""
    if name is None:
        return
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"{what} api_key_env must name an environment variable, got {name!r}")
    if not os.environ.get(name, "").strip():
        raise ConfigError(f"{what} api_key_env names {name}, which is not set; export {name}=<token> before running")


class HttpFailure(Exception):
    """A request that failed for good: ``str(exc)`` is one line (what came back, never the key),
    ``error_class`` its class (module docstring), ``status`` the last HTTP status or None, ``stage`` how it
    ended: ``"refused"`` (a non-transient 4xx or a redirect), ``"exhausted"`` (every attempt failed
    transiently), ``"request"`` (the request could not be made), ``"too_large"``, ``"not_json"``."""

    def __init__(self, message: str, error_class: str, status: int | None = None, stage: str = "refused") -> None:
        super().__init__(message)
        self.error_class = error_class
        self.status = status
        self.stage = stage


@dataclass(frozen=True)
class Answer:
    """A 2xx answer: ``status``, ``body`` (the bytes read), ``came`` (``"HTTP 200: <first 200 chars>"``)."""

    status: int
    body: bytes
    came: str

    def json(self) -> Any:
        """The body parsed as JSON.

        Raises:
            HttpFailure: ``not_json``."""
        try:
            return loads(self.body)
        except ValueError:
            raise HttpFailure(f"the answer is not JSON ({self.came})", "not_json", self.status, "not_json") from None


class JsonClient:
    """Bounded JSON requests with retries (the module docstring's rules); thread-safe (a session per thread).

    Args:
        timeout_s: the deadline of each attempt, in seconds (> 0).
        retries: further attempts after a transient failure (>= 0).
        backoff_s: seconds before the first retry, doubled before each next (>= 0), unless the server sends
            ``Retry-After``.
        api_key_env: the variable holding a bearer token, or None.
        max_response_mb: the largest answer read, in MiB (> 0).
        max_retry_after_s: the longest ``Retry-After`` honoured, in seconds.
        headers: further headers (values already resolved; e.g. from :func:`resolve_headers`).
        sleep: the sleeping function (tests pass a recorder).
    """

    def __init__(self, *, timeout_s: float = 30.0, retries: int = 2, backoff_s: float = 0.5,
                 api_key_env: str | None = None, max_response_mb: float = MAX_RESPONSE_MB,
                 max_retry_after_s: float = MAX_RETRY_AFTER_S, headers: Mapping[str, str] | None = None,
                 sleep: Any = time.sleep) -> None:
        self.timeout_s = float(timeout_s)
        self.retries = int(retries)
        self.backoff_s = float(backoff_s)
        self.api_key_env = api_key_env
        self.max_response_mb = float(max_response_mb)
        self.max_response_bytes = int(max_response_mb * 2**20)
        self.max_retry_after_s = float(max_retry_after_s)
        self.headers = dict(headers or {})
        self._sleep = sleep
        self._local = threading.local()
        self._sessions: list[requests.Session] = []
        self._lock = threading.Lock()

    def _session(self) -> requests.Session:
        s = getattr(self._local, "session", None)
        if s is None:
            s = watched_session()
            self._local.session = s
            with self._lock:
                self._sessions.append(s)
        return s

    def close(self) -> None:
        """Close every kept-alive connection (later requests open new ones)."""
        with self._lock:
            for s in self._sessions:
                s.close()
            self._sessions.clear()
        self._local = threading.local()

    def request(self, method: str, url: str, *, payload: Any = None) -> Answer:
        """Send ``payload`` as JSON (``method`` ``"POST"``) or nothing (``"GET"``); the first 2xx answer.

        Raises:
            HttpFailure: after the last attempt (its message says how many and what came back), at once on
                a non-transient 4xx (``http_401`` …), on an answer over the cap (``too_large``) or when the
                request cannot be made at all (``connect``).
        """
        headers = {"Accept": "application/json", **self.headers}
        secrets = [v for v in self.headers.values() if len(v) >= 8]  # resolved secret headers, hidden in messages
        if self.api_key_env:
            key = os.environ.get(self.api_key_env, '').strip()
            headers["Authorization"] = f"Bearer {key}"
            secrets.append(key)
        attempts = self.retries + 1
        late = f"no answer within {self.timeout_s:g} s (timeout_s, the deadline of each attempt)"
        last, last_class, last_status = "", "connect", None
        wait: float | None = None
        for attempt in range(1, attempts + 1):
            if attempt > 1:
                self._sleep(wait if wait is not None else self.backoff_s * 2 ** (attempt - 2))
            wait = None
            resp = None
            with deadline(self.timeout_s) as fired:
                try:
                    # the per-read timeout outlasts the deadline: the watchdog ends the attempt first
                    resp = self._session().request(method, url, json=payload, headers=headers, stream=True,
                                                   allow_redirects=False,
                                                   timeout=(self.timeout_s, self.timeout_s + 1))
                    body = read_capped(resp, self.max_response_bytes,
                                       f"larger than max_response_mb = {self.max_response_mb:g} "
                                       f"({self.max_response_bytes} bytes)")
                except TooLarge as exc:
                    raise HttpFailure(f"the answer is {exc}", "too_large", resp.status_code if resp else None,
                                      "too_large") from None
                except TRANSIENT as exc:
                    timed_out = fired.is_set() or isinstance(exc, requests.Timeout)
                    last = late if timed_out else f"no (complete) answer ({reason(exc)})"
                    last_class, last_status = ("timeout" if timed_out else "connect"), None
                    continue
                except requests.RequestException as exc:
                    if fired.is_set():
                        last, last_class, last_status = late, "timeout", None
                        continue
                    raise HttpFailure(f"the request failed ({reason(exc)})", "connect", None, "request") from None
                finally:
                    if resp is not None:
                        resp.close()
            came = f"HTTP {resp.status_code}: {clip(redact(decode(body, resp.encoding), secrets))}"
            if is_transient_status(resp.status_code):
                last, last_class, last_status = came, status_class(resp.status_code), resp.status_code
                asked = retry_after(resp.headers.get("Retry-After"))
                if asked is not None:
                    wait = min(asked, self.max_retry_after_s)
                continue
            if 300 <= resp.status_code < 400:
                raise HttpFailure(f"redirected ({came}, to {resp.headers.get('Location', '?')}); redirects are "
                                  "not followed", "http_4xx", resp.status_code)
            if not 200 <= resp.status_code < 300:
                raise HttpFailure(f"refused ({came})", status_class(resp.status_code), resp.status_code)
            return Answer(resp.status_code, body, came)
        raise HttpFailure(f"failed after {attempts} attempt{'s' * (attempts > 1)}: {last}", last_class, last_status,
                          "exhausted")

    def post(self, url: str, payload: Any) -> Answer:
        """:meth:`request` ``POST``."""
        return self.request("POST", url, payload=payload)

    def get(self, url: str) -> Answer:
        """:meth:`request` ``GET``."""
        return self.request("GET", url)


def check_number(what: str, value: Any, *, low: float, strict: bool, integer: bool) -> None:
    """Raise ConfigError naming ``what`` unless ``value`` is a finite number >= ``low`` (> when ``strict``),
    an integer when ``integer``."""
    kind = int if integer else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value) \
            or value < low or (strict and value == low):
        desc = ("a positive" if strict else "a non-negative") + (" integer" if integer else " number")
        raise ConfigError(f"{what} must be {desc}, got {value!r}")
