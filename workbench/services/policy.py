"""The one policy of every port the workbench serves: the dashboard (``workbench dashboard``), the rerank
service (``workbench services up reranker``) and any later server (``workbench serve``).

* **Loopback by default.** Each binds ``127.0.0.1`` unless told otherwise (:func:`is_loopback`).
* **Tokens beyond loopback** (:func:`require_tokens_off_loopback`): any other address (``0.0.0.0``, ``::``, a
  LAN address) is refused at start, before a port is bound, unless the service has tokens configured (the
  dashboard: access or rater tokens; the rerank service: a bearer token in :data:`RERANK_TOKEN_ENV`).
* **Host and Origin checked** (:class:`Guard`, the DNS-rebinding defence): a request whose ``Host`` names
  none of the names the service answers to (:func:`allowed_names`: the loopback names, the bound address —
  for a wildcard bind every address of the machine and its host name — and the names the user allows with
  ``--allow-host`` or :data:`ALLOWED_HOSTS_ENV`) is refused with 403, and so is one whose ``Origin`` is
  neither the ``Host`` itself nor a name the user allowed (a page of another site, or another port of this
  machine, cannot drive it). A request without ``Origin`` (a program, not a browser) passes this check.
* **Bounded requests**: a body larger than :attr:`Bounds.max_body_bytes` is refused with 413 — at once when
  its ``Content-Length`` says so (nothing is read), else as soon as the streamed body passes the limit; the
  head and the body must arrive within :attr:`Bounds.read_timeout_s` (408, or the connection closed while
  the head is still incomplete: :func:`uvicorn_config`); errors never echo the body.
* **Connections that send nothing cannot hold the port** (:func:`uvicorn_config`): while the port is full
  (:attr:`Bounds.max_connections`), each new connection makes room by closing one that has no request in
  progress (never sent a byte, a head still arriving, or idle between requests) — of the peer address holding
  the most connections, the longest-waiting first. 64 idle sockets (no token needed: the token is checked only on
  a request) locked ``workbench serve`` for 30 s, and a client could repeat it forever (issue #41); now the
  sockets give way to the next client.

One ASGI middleware (:class:`Guard`) enforces the checks for both Starlette/FastAPI applications: the rerank
service's app and the dashboard's Streamlit app (``dashboards/serve.py``, an ``st.App`` with this middleware).
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import ipaddress
import logging
import os
import re
import socket
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

from workbench.errors import ConfigError

#: Names that always reach a loopback bind (what a browser on this machine sends as ``Host``).
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: Wildcard bind addresses: every interface of the machine.
WILDCARDS = ("0.0.0.0", "::", "")
#: More names every served port answers to, comma-separated (e.g. the name a reverse proxy forwards).
ALLOWED_HOSTS_ENV = "WORKBENCH_ALLOWED_HOSTS"
#: The bearer token of the rerank service (required when it is set, and to bind beyond loopback).
RERANK_TOKEN_ENV = "WORKBENCH_RERANK_TOKEN"
#: How the option that allows one more name is spelled in messages.
ALLOW_OPTION = "--allow-host NAME"

Scope = Mapping[str, Any]
Receive = Callable[[], Awaitable[dict]]
Send = Callable[[dict], Awaitable[None]]


@dataclass(frozen=True)
class Bounds:
    """What one request may cost a served port.

    Attributes:
        max_body_bytes: the largest request body, in bytes (larger: HTTP 413).
        read_timeout_s: seconds the request's head and body may take to arrive, in all (longer: the
            connection is closed, or HTTP 408 once the head is in).
        max_connections: concurrent connections and requests at most (None: no limit). While it is reached, a
            new connection closes one without a request in progress (:func:`uvicorn_config`); when every
            connection has one, a new request gets HTTP 503.
        max_head_bytes: the largest request head (request line and headers), in bytes (larger: HTTP 400).
    """

    max_body_bytes: int
    read_timeout_s: float
    max_connections: int | None = 64
    max_head_bytes: int = 16 * 1024

    def __post_init__(self) -> None:
        for name in ("max_body_bytes", "read_timeout_s", "max_head_bytes"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise ConfigError(f"{name} must be a positive number, got {value!r}")
        if self.max_connections is not None and (isinstance(self.max_connections, bool)
                                                 or not isinstance(self.max_connections, int)
                                                 or self.max_connections < 1):
            raise ConfigError(f"max_connections must be a positive integer or None, got {self.max_connections!r}")


#: The rerank service's bounds: 1,000 documents of 16 KB fit in the body.
RERANK_BOUNDS = Bounds(max_body_bytes=16 * 1024 * 1024, read_timeout_s=30.0, max_connections=64)
#: The dashboard's HTTP bounds (its pages take no upload; the WebSocket has Streamlit's own message limit; each
#: open browser tab holds one connection).
DASHBOARD_BOUNDS = Bounds(max_body_bytes=1024 * 1024, read_timeout_s=30.0, max_connections=256)


# ------------------------------------------------------------------------------------------------ addresses

def is_loopback(host: str | None) -> bool:
    """Whether serving on ``host`` is reachable from this machine only.

    ``None`` or ``""`` (every interface), ``0.0.0.0`` and ``::`` are not; a name is loopback when every
    address it resolves to is.
    """
    if not host:
        return False
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    addrs = {cast(str, info[4][0]) for info in infos}  # an IP address string for the inet families
    return bool(addrs) and all(ipaddress.ip_address(a.split("%")[0]).is_loopback for a in addrs)


def _usable(addr: str) -> bool:
    try:
        ip = ipaddress.ip_address(addr.split("%")[0])
    except ValueError:
        return False
    return not (ip.is_loopback or ip.is_link_local or ip.is_unspecified or ip.is_multicast)


def machine_addresses(ipv6: bool = True) -> list[str]:
    """This machine's non-loopback, non-link-local addresses, IPv4 first (may be empty)."""
    found: list[str] = []
    try:
        import psutil

        for addrs in psutil.net_if_addrs().values():
            for a in addrs:
                if a.family == socket.AF_INET or (ipv6 and a.family == socket.AF_INET6):
                    found.append(a.address)
    except Exception:  # psutil missing or refused: fall back to the resolver and the default route
        try:
            found += [cast(str, info[4][0]) for info in socket.getaddrinfo(socket.gethostname(), None)]
        except OSError:
            pass
        for family, probe in ((socket.AF_INET, "192.0.2.1"), (socket.AF_INET6, "2001:db8::1")):
            if family == socket.AF_INET6 and not ipv6:
                continue
            try:  # connecting a UDP socket sends nothing; it only picks the outgoing address
                with socket.socket(family, socket.SOCK_DGRAM) as s:
                    s.connect((probe, 9))
                    found.append(s.getsockname()[0])
            except OSError:
                pass
    usable = [a for a in dict.fromkeys(found) if _usable(a)]
    return sorted(usable, key=lambda a: (":" in a, a))


_NAME = re.compile(r"(\*\.)?[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?")


def normal_name(name: str, *, what: str = "an allowed host name") -> str:
    """``name`` as it is compared with a ``Host`` header's: lower case, no brackets, no trailing dot.

    A host name (``workbench.example.org``), ``*.example.org`` (every name under it), or an IP address.

    Raises:
        ConfigError: ``name`` holds a port, a scheme, a path or a space (names it and the form expected).
    """
    if not isinstance(name, str):
        raise ConfigError(f"{what} must be a string, got {name!r}")
    value = name.strip().lower().rstrip(".")
    bare = value[1:-1] if value.startswith("[") and value.endswith("]") else value
    try:
        return str(ipaddress.ip_address(bare))
    except ValueError:
        pass
    if not _NAME.fullmatch(bare) or ".." in bare:
        raise ConfigError(f"{what} {name!r} is not a host name or an IP address; give the name alone, without "
                          "scheme, port or path (e.g. workbench.example.org, *.example.org, 10.0.0.5)")
    return bare


def env_names(env: Mapping[str, str] | None = None) -> list[str]:
    """The names :data:`ALLOWED_HOSTS_ENV` allows (comma-separated; blanks ignored).

    Raises:
        ConfigError: one is not a host name or an IP address (names the variable).
    """
    raw = (os.environ if env is None else env).get(ALLOWED_HOSTS_ENV, "")
    return [normal_name(p.strip(), what=f"{ALLOWED_HOSTS_ENV} entry") for p in raw.split(",") if p.strip()]


def allowed_names(bind: str | None, extra: Iterable[str] = ()) -> frozenset[str]:
    """The names a service bound to ``bind`` answers to in ``Host``: :data:`LOOPBACK_NAMES`, the bound
    address (for a wildcard bind, every address of the machine, its host name and its fully qualified
    name), and ``extra`` (already :func:`normal_name`-ed, e.g. ``--allow-host`` and :func:`env_names`).

    Raises:
        ConfigError: an ``extra`` name is not a host name or an IP address.
    """
    names = set(LOOPBACK_NAMES)
    host = (bind or "").strip()
    if host in WILDCARDS:
        names.update(machine_addresses(ipv6=host != "0.0.0.0"))
        for name in (socket.gethostname(), socket.getfqdn()):
            try:
                names.add(normal_name(name))
            except ConfigError:
                pass
    else:
        names.add(normal_name(host, what="the bound address"))
    names.update(normal_name(n) for n in extra)
    return frozenset(names)


def require_tokens_off_loopback(service: str, host: str, has_tokens: bool, fix: str) -> None:
    """The bind rule: ``service`` may bind ``host`` beyond loopback only with tokens configured.

    Raises:
        ConfigError: ``host`` is not loopback and ``has_tokens`` is false; the message names the address,
            the service and ``fix`` (how to configure a token).
    """
    if not is_loopback(host) and not has_tokens:
        raise ConfigError(f"--host {host} would serve {service} to the network without authentication; {fix}, "
                          "or keep the default 127.0.0.1")


# ------------------------------------------------------------------------------------------------ headers

def _clip(value: str, n: int = 80) -> str:
    return repr(value if len(value) <= n else value[:n] + "…")


def _split_host(value: str) -> tuple[str, int | None] | None:
    """``(name, port)`` of a ``Host`` header or an ``Origin``'s authority; None when it is not one."""
    try:
        parts = urlsplit(f"//{value}")
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or parts.username is not None or parts.password is not None or parts.path \
            or parts.query or parts.fragment or any(c.isspace() for c in value):
        return None
    return parts.hostname.lower().rstrip("."), port


def _matches(name: str, allowed: Iterable[str]) -> bool:
    return any(name == a or (a.startswith("*.") and name.endswith(a[1:])) for a in allowed)


def host_refusal(host: str | None, allowed: frozenset[str]) -> str | None:
    """Why a request with this ``Host`` header is refused, or None when ``Host`` names an allowed name."""
    if not host:
        return "the request has no Host header"
    split = _split_host(host)
    if split is None:
        return f"Host {_clip(host)} is not a host name"
    if not _matches(split[0], allowed):
        return f"Host {_clip(host)} is not a name this server answers to (a DNS-rebinding defence)"
    return None


def origin_refusal(origin: str | None, host: str, explicit: frozenset[str]) -> str | None:
    """Why a request with this ``Origin`` is refused, or None: no ``Origin`` (not a browser), an
    ``Origin`` naming the ``Host`` itself (same host and port), or one whose name the user allowed."""
    if origin is None:
        return None
    try:
        parts = urlsplit(origin)
        port = parts.port
    except ValueError:
        return f"Origin {_clip(origin)} is not an origin"
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return f"Origin {_clip(origin)} is not a page this server answers to"
    name = parts.hostname.lower().rstrip(".")
    if _split_host(host) == (name, port) or _matches(name, explicit):
        return None
    return f"Origin {_clip(origin)} is another site than Host {_clip(host)}"


def token_digest(token: str) -> str:
    """The sha256 (hex) a bearer token is kept and compared as."""
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def bearer_ok(authorization: str | None, digest: str) -> bool:
    """Whether an ``Authorization`` header carries the bearer token whose :func:`token_digest` is ``digest``
    (compared in constant time)."""
    if not authorization or not authorization[:7].lower() == "bearer ":
        return False
    return hmac.compare_digest(token_digest(authorization[7:].strip()), digest)


# ------------------------------------------------------------------------------------------------ the guard

class _Refused(Exception):
    """A request the guard refuses while the application reads it (too large, too slow)."""

    status_code: int
    detail: str


_refusal_class: type | None = None


def _refusal(status: int, detail: str) -> Exception:
    """A :class:`_Refused` that is also Starlette's ``HTTPException``: raised from ``receive``, so that an
    application reading the body answers ``status`` through its exception middleware (FastAPI turns any
    other exception met while reading the body into a 400)."""
    global _refusal_class
    if _refusal_class is None:
        from starlette.exceptions import HTTPException

        class Refused(HTTPException, _Refused):
            pass

        _refusal_class = Refused
    return _refusal_class(status, detail)


class Guard:
    """ASGI middleware enforcing the policy in front of an application (HTTP and WebSocket).

    Args:
        app: the ASGI application behind it.
        service: what the messages call it ("the rerank service").
        allowed: the names ``Host`` may give (:func:`allowed_names`).
        explicit: the names the user allowed (an ``Origin`` naming one passes though it is not the ``Host``).
        bounds: body size and read time (:class:`Bounds`).
        token_sha256: when given, every request must carry ``Authorization: Bearer TOKEN`` whose sha256 this
            is (HTTP 401 otherwise).
        token_env: the variable the token comes from, named in the 401 message.
        bearer_check: instead of (or beside) ``token_sha256``, a function judging the presented bearer token
            (``workbench serve``: the home's access tokens, :func:`workbench.dashboard.auth.check_token`).
        body_fix: what the 413 message advises.
        envelope: refusals as AICharya's JSON envelope ``{"ok": false, "error": {"code", "message"}}``
            (``workbench serve``, whose every answer is one) instead of plain text.
        log: where a failure of ``bearer_check`` is told (one line, once until it changes; default: this
            module's logger at WARNING).

    Refusals: 403 (``Host`` or ``Origin``; a WebSocket handshake is refused with 403 before it is accepted),
    401 (token), 413 (body too large), 408 (body too slow), 503 (``bearer_check`` raised ``ConfigError``: the
    tokens cannot be read or trusted, e.g. a token file made readable by others; its message, naming the file
    and the fix, is the answer, not a 500 with a traceback per request); a short reason that never holds the
    body.
    """

    def __init__(self, app: Any, *, service: str, allowed: frozenset[str], explicit: frozenset[str] = frozenset(),
                 bounds: Bounds, token_sha256: str | None = None, token_env: str | None = None,
                 body_fix: str = "send less in one request",
                 bearer_check: Callable[[str], bool] | None = None, envelope: bool = False,
                 log: Callable[[str], None] | None = None) -> None:
        self.app = app
        self.service = service
        self.allowed = frozenset(allowed)
        self.explicit = frozenset(explicit)
        self.bounds = bounds
        self.token_sha256 = token_sha256
        self.token_env = token_env
        self.body_fix = body_fix
        self.bearer_check = bearer_check
        self.envelope = envelope
        self.log = log or logging.getLogger(__name__).warning
        self._told: str | None = None  # the token problem last logged (logged again only when it changes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope.get("type")
        if kind not in ("http", "websocket"):
            return await self.app(scope, receive, send)
        raw = [(k.decode("latin-1").lower(), v.decode("latin-1")) for k, v in scope.get("headers", [])]
        headers = dict(raw)
        host = headers.get("host")
        why: str | None
        if sum(k == "host" for k, _ in raw) > 1 or sum(k == "origin" for k, _ in raw) > 1:
            why = "the request has more than one Host or Origin header"
        else:
            why = host_refusal(host, self.allowed) or origin_refusal(headers.get("origin"), host or "", self.explicit)
        if why:
            return await self._refuse(kind, send, 403, f"{self.service} refused the request: {why}; open it by an "
                                      f"address it serves, or allow the name with {ALLOW_OPTION} or "
                                      f"{ALLOWED_HOSTS_ENV}")
        try:
            checked = self.bearer_check is None or self._checked(headers.get("authorization"))
        except ConfigError as exc:  # the tokens cannot be read or trusted: every request fails alike, so one line
            problem = " ".join(str(exc).split())
            if problem != self._told:
                self._told = problem
                self.log(f"{self.service} refuses every request until this is fixed: {problem}")
            return await self._refuse(kind, send, 503, f"{self.service} cannot check access tokens: {problem}")
        self._told = None  # (fixed, if it was broken: a later failure is told again)
        if (self.token_sha256 and not bearer_ok(headers.get("authorization"), self.token_sha256)) or not checked:
            where = f"the token in its ${self.token_env}" if self.token_env else "an access token of its home"
            return await self._refuse(kind, send, 401, f"{self.service} needs 'Authorization: Bearer TOKEN' with "
                                      f"{where}", [(b"www-authenticate", b"Bearer")])
        if kind == "websocket":
            return await self.app(scope, receive, send)
        limit = self.bounds.max_body_bytes
        length = headers.get("content-length")
        if length is not None and length.strip().isdigit() and int(length) > limit:
            return await self._refuse(kind, send, 413, self._too_large(int(length)))
        await self._bounded(scope, receive, send)

    def _checked(self, authorization: str | None) -> bool:
        scheme, _, token = (authorization or "").partition(" ")
        check = cast(Callable[[str], bool], self.bearer_check)  # called only when a check is set
        return scheme.lower() == "bearer" and bool(token.strip()) and bool(check(token.strip()))

    def _too_large(self, n: int | None) -> str:
        size = f"{n} bytes" if n is not None else "more"
        return (f"{self.service} takes request bodies of {self.bounds.max_body_bytes} bytes at most, this one has "
                f"{size}; {self.body_fix}")

    async def _bounded(self, scope: Scope, receive: Receive, send: Send) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.bounds.read_timeout_s
        limit = self.bounds.max_body_bytes
        state = {"read": 0, "done": False, "started": False, "refused": False}

        async def guarded_receive() -> dict:
            if state["done"]:  # the body is in: what follows is the wait for a disconnect, not bounded
                return await receive()
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0.0))
            except TimeoutError:
                state["refused"] = True
                raise _refusal(408, f"{self.service} got no complete request body within "
                                    f"{self.bounds.read_timeout_s:g} s") from None
            if message.get("type") == "http.request":
                state["read"] += len(message.get("body", b""))
                if state["read"] > limit:
                    state["refused"] = True
                    raise _refusal(413, self._too_large(None))
                state["done"] = not message.get("more_body", False)
            else:
                state["done"] = True
            return message

        async def tracked_send(message: dict) -> None:
            if message.get("type") == "http.response.start":
                state["started"] = True
                if state["refused"]:  # whoever answers the refusal: the rest of the body is not read, the
                    # connection ends with the answer (else the server reads and drops it to the end)
                    message = {**message, "headers": [*[(k, v) for k, v in message.get("headers", [])
                                                        if k.lower() != b"connection"],
                                                      (b"connection", b"close")]}
            await send(message)

        try:
            await self.app(scope, guarded_receive, tracked_send)
        except _Refused as exc:  # the application let it through: answer it here if nothing was sent yet
            if not state["started"]:
                await self._refuse("http", send, exc.status_code, exc.detail)

    async def _refuse(self, kind: str, send: Send, status: int, text: str,
                      extra: list[tuple[bytes, bytes]] | None = None) -> None:
        if kind == "websocket":  # closed before it is accepted: the server answers the handshake with 403
            await send({"type": "websocket.close", "code": 1008, "reason": text[:120]})
            return
        if self.envelope:
            from workbench._infra.jsonout import dumps

            code = "dependency_failed" if status >= 500 else "not_found" if status == 404 else "invalid_argument"
            body = dumps({"ok": False, "error": {"code": code, "message": text}}).encode("utf-8")
            ctype = b"application/json"
        else:
            body, ctype = (text + "\n").encode("utf-8"), b"text/plain; charset=utf-8"
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", ctype),
                                (b"content-length", str(len(body)).encode()), (b"connection", b"close"),
                                *(extra or [])]})
        await send({"type": "http.response.body", "body": body})


# ------------------------------------------------------------------------------------------------ uvicorn

def _h11_with_head_deadline(timeout_s: float) -> type:
    """uvicorn's h11 protocol, closing a connection whose next request's head has not arrived within
    ``timeout_s`` seconds of the connection (or of the previous response): uvicorn bounds only the idle
    time between requests, not a head sent a byte at a time.

    And while the port is full (``limit_concurrency`` connections), a new connection makes room: it closes one
    connection that has no request in progress (it never sent a byte, its head is still arriving, or it is
    idle between requests), of the peer address that holds the most connections, the one waiting longest. A
    connection that sent nothing has asked for nothing, so idle sockets (the token is checked only on a
    request) can no longer hold the port against a client that sends one; a connection with a request in
    progress is never closed for it."""
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeadDeadline(H11Protocol):
        waiting_since = 0.0

        def _arm(self) -> None:
            waiting_after = self.cycle  # a new request replaces it once its head is in
            self.waiting_since = self.loop.time()

            def expire() -> None:
                if self.cycle is waiting_after and not self.transport.is_closing() \
                        and self.transport.get_protocol() is self:  # not once upgraded to a WebSocket
                    self.transport.close()

            self.loop.call_later(timeout_s, expire)

        def _waiting(self) -> bool:
            """No request in progress on this connection (and it is still this protocol's, open)."""
            return (self.cycle is None or self.cycle.response_complete) and not self.transport.is_closing() \
                and self.transport.get_protocol() is self

        def _make_room(self) -> None:
            limit = self.limit_concurrency
            if limit is None or len(self.connections) < limit:
                return
            held = Counter(_peer(c) for c in self.connections)
            waiting = [c for c in self.connections if c is not self and isinstance(c, HeadDeadline) and c._waiting()]
            if waiting:
                victim = max(waiting, key=lambda c: (held[_peer(c)], -c.waiting_since))
                self.connections.discard(victim)  # counted out now: its connection_lost comes later
                victim.transport.close()

        def connection_made(self, transport):
            super().connection_made(transport)
            self._arm()
            self._make_room()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._arm()

    return HeadDeadline


def _peer(protocol: Any) -> str:
    """The peer address of a uvicorn connection (``""`` when unknown, e.g. a Unix socket)."""
    client = getattr(protocol, "client", None)
    return str(client[0]) if client else ""


def uvicorn_config(app: Any, bounds: Bounds, **kwargs: Any):
    """A ``uvicorn.Config`` serving ``app`` within ``bounds``: the head within ``read_timeout_s`` (else the
    connection is closed), a head of ``max_head_bytes`` at most, ``max_connections`` at once (while full, a new
    connection closes one without a request in progress; 503 when none is), idle keep-alive connections closed
    after 5 s; ``kwargs`` go to ``uvicorn.Config`` as they are."""
    import uvicorn

    return uvicorn.Config(app, **bounded_uvicorn_kwargs(bounds), **kwargs)


def bounded_uvicorn_kwargs(bounds: Bounds) -> dict[str, Any]:
    """The ``uvicorn.Config`` options that hold a server to ``bounds``' connection rules: the head deadline and
    the room made while full (:func:`_h11_with_head_deadline`), the head size, the connection cap, a 5 s
    keep-alive."""
    return {"http": _h11_with_head_deadline(bounds.read_timeout_s),
            "h11_max_incomplete_event_size": bounds.max_head_bytes,
            "limit_concurrency": bounds.max_connections, "timeout_keep_alive": 5}


# ------------------------------------------------------------------------------------------------ JupyterLab

def jupyter_args(host: str, extra: Iterable[str] = ()) -> list[str]:
    """The options that put ``workbench notebooks`` (JupyterLab) under this policy, added to its command line.

    Jupyter Server enforces the rest itself: its token on every request, its ``Host`` check on a loopback
    bind (``allow_remote_access`` is off there; an IP address in ``Host`` passes only when it is a loopback
    one), its WebSocket ``Origin`` check, and request bodies of 512 MiB at most (``max_body_size``). These
    options give its ``Host`` check the names the user allows (``extra`` and :data:`ALLOWED_HOSTS_ENV`) beside
    ``localhost``.

    Raises:
        ConfigError: an allowed name is not a host name or an IP address.
    """
    names = ["localhost", *(normal_name(n) for n in extra), *env_names()]
    words = [n for n in dict.fromkeys(names) if not _is_ip(n)]  # Jupyter judges IP addresses by themselves
    return [f"--ServerApp.local_hostnames={n}" for n in words]


#: Where ``workbench notebooks`` reads the token it serves with off loopback (Jupyter's own variable).
JUPYTER_TOKEN_ENV = "JUPYTER_TOKEN"


def jupyter_token_config(host: str, folder: Path, env: Mapping[str, str] | None = None) -> tuple[list[str], str]:
    """Off loopback, a token Jupyter cannot be configured out of: ``(options, token)``; on loopback ``([], "")``.

    A Jupyter config file that sets an empty token (``c.IdentityProvider.token = ''``) turns every check off,
    and a bind beyond loopback then serves a root terminal to the network. So off loopback the workbench writes
    a config file of its own (mode 0600, in ``folder``) holding the token, :data:`JUPYTER_TOKEN_ENV`'s value when
    it is set and not blank, else a new random one, and passes it with ``--config``: Jupyter loads that file
    after the user's config folders, so it wins over them. The token never goes on the command line (other
    users can read a process's arguments).

    Returns:
        the options to add to JupyterLab's command line, and the token to tell the user (``""`` on loopback).

    Raises:
        StorageError: the file cannot be written.
    """
    if is_loopback(host):
        return [], ""
    import secrets

    from workbench.errors import StorageError

    env = os.environ if env is None else env
    token = (env.get(JUPYTER_TOKEN_ENV) or "").strip() or secrets.token_urlsafe(32)
    path = Path(folder) / "jupyter_token_config.py"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # never readable by others, not even briefly
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            os.fchmod(fh.fileno(), 0o600)
            fh.write(f"c.IdentityProvider.token = {token!r}\n")
    except OSError as exc:
        raise StorageError(f"cannot write {path} (the token of JupyterLab off loopback): {exc.strerror}; "
                           "free space or fix the folder's permissions") from None
    return [f"--config={path}"], token


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
        return True
    except ValueError:
        return False
