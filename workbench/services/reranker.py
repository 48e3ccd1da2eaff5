"""A local rerank server for a cross-encoder folder, speaking the rerank JSON shape that
:class:`workbench.reranking.http.HttpScorer` (and Cohere / Jina clients) send.

Endpoints (FastAPI on uvicorn):

* ``POST /rerank`` and its alias ``POST /v1/rerank``: ``{"query": str, "documents": [str, ...], "model": str
  (optional), "top_n": int (optional), "return_documents": bool (optional)}`` →
  ``{"model": model_id, "results": [{"index": i, "relevance_score": s}, ...]}``, best score first (ties by
  index), the first ``top_n`` only when given; ``"document": {"text": ...}`` in each result with
  ``return_documents``. ``index`` is the document's position in the request; ``relevance_score`` the
  cross-encoder's (:class:`workbench.reranking.scorers.CrossEncoderScorer`: a probability in [0, 1]). No document,
  no result. Errors: 422 a body of another shape, 413 more than ``max_documents`` documents, 400 a
  ``model`` naming another model than the one served (empty or absent is accepted).
* ``GET /health`` → ``{"status": "ok", "model": model_id, "requests": n}``, ``n`` the rerank requests
  scored since the start.

Requests are scored one at a time (the model is not shared between threads). Start it with
``workbench services up reranker --model FOLDER`` or ``python -m workbench.services.reranker --model
FOLDER [--port 8787] [--host 127.0.0.1] [--max-length 256] [--allow-host NAME]``; it runs in the foreground
until Ctrl-C (or SIGTERM).

It serves under the workbench's one policy for served ports (:mod:`workbench.services.policy`): 127.0.0.1 by
default; any other address only with a bearer token in ``$WORKBENCH_RERANK_TOKEN`` (and whenever that variable
is set, every request must carry ``Authorization: Bearer TOKEN``: 401 otherwise; the ``http`` reranker sends it
with ``api_key_env = "WORKBENCH_RERANK_TOKEN"``); ``Host`` and ``Origin`` checked (403); a body of
:data:`~workbench.services.policy.RERANK_BOUNDS` ``max_body_bytes`` at most (16 MiB: 413, at once by
``Content-Length``), the head and body within 30 s (408, or the connection closed); 64 connections at once
(503). A 422 says which field is wrong and never echoes the body.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, Field

from workbench.errors import ConfigError, ServiceError, WorkbenchError
from workbench.reranking.scorers import CrossEncoderScorer, PairScorer, check_cross_encoder_folder
from workbench.services.policy import (
    RERANK_BOUNDS,
    RERANK_TOKEN_ENV,
    Bounds,
    Guard,
    allowed_names,
    env_names,
    is_loopback,
    normal_name,
    require_tokens_off_loopback,
    token_digest,
    uvicorn_config,
)

#: The most documents one request may carry.
MAX_DOCUMENTS = 1000
DEFAULT_PORT = 8787


class RerankRequest(BaseModel):
    """The body of ``POST /rerank``; other fields are ignored."""

    query: str
    documents: list[str]
    model: str | None = None
    top_n: int | None = Field(default=None, ge=1)
    return_documents: bool = False


def trained_max_length(folder: str | Path) -> int | None:
    """The ``max_length`` a folder's ``model_card.json`` (written by ``workbench reranker train``) says it was
    trained with, or None (no card, or no such field)."""
    import json

    try:
        card = json.loads((Path(folder).expanduser() / "model_card.json").read_text(encoding="utf-8"))
        value = card["recipe"]["max_length"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _valid_text(text: str) -> str:
    """``text`` with lone surrogates (which JSON allows and UTF-8 cannot hold) replaced by U+FFFD."""
    return text.encode("utf-8", "replace").decode("utf-8") if any("\ud800" <= c <= "\udfff" for c in text) else text


def _validation_summary(errors: Sequence[Any], most: int = 5) -> str:
    """One line saying which fields of a request body are wrong and why, never their values."""
    said = []
    for err in list(errors)[:most]:
        where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "the body"
        said.append(f"{where}: {str(err.get('msg', 'invalid'))[:120]}")
    more = f" (and {len(errors) - most} more)" if len(errors) > most else ""
    return ("the body must be {\"query\": str, \"documents\": [str, ...]}; " + "; ".join(said) + more)[:1000]


def create_app(scorer: PairScorer, *, names: Sequence[str] = (), max_documents: int = MAX_DOCUMENTS) -> FastAPI:
    """The FastAPI application serving ``scorer`` (see the module's docstring for the endpoints).

    Args:
        scorer: scores the pairs; its ``model_id`` is the ``model`` the server answers with.
        names: other names a request's ``model`` may give for it (e.g. the model folder's name).
        max_documents: documents per request at most (more: HTTP 413).
    """
    app = FastAPI(title="workbench reranker", docs_url=None, redoc_url=None, openapi_url=None)
    served = {scorer.model_id, *names}

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        # FastAPI's own answer repeats each wrong value ("input"): a 300 MB string came back whole
        return JSONResponse(status_code=422, content={"detail": _validation_summary(exc.errors())})
    lock = threading.Lock()
    state = {"requests": 0}

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", "model": scorer.model_id, "requests": state["requests"]}

    def rerank(req: RerankRequest) -> dict:
        if req.model and req.model not in served:
            asked = req.model if len(req.model) <= 80 else req.model[:80] + "…"  # never echo a whole field back
            raise HTTPException(400, f"this server serves {scorer.model_id}, not {asked!r}; leave model empty "
                                     f"or name {scorer.model_id}")
        if len(req.documents) > max_documents:
            raise HTTPException(413, f"{len(req.documents)} documents in one request; at most {max_documents}: "
                                     "send them in batches")
        with lock:
            state["requests"] += 1
            query, docs = _valid_text(req.query), [_valid_text(d) for d in req.documents]
            scores = [float(s) for s in scorer.score(query, docs)] if docs else []
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], i))[:req.top_n]
        results: list[dict[str, Any]] = [{"index": i, "relevance_score": scores[i]} for i in order]
        if req.return_documents:
            for r in results:
                r["document"] = {"text": req.documents[r["index"]]}
        return {"model": scorer.model_id, "results": results}

    app.post("/rerank")(rerank)
    app.post("/v1/rerank")(rerank)
    return app


def bounds_for(max_body_mb: float | None = None, read_timeout_s: float | None = None) -> Bounds:
    """:data:`~workbench.services.policy.RERANK_BOUNDS` with the body cap (MiB) and the read time (seconds)
    given instead of its own.

    Raises:
        ConfigError: a value is not a positive number (names it).
    """
    for name, value in (("--max-body-mb", max_body_mb), ("--read-timeout-s", read_timeout_s)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                  or not 0 < value < float("inf")):
            raise ConfigError(f"{name} must be a positive number, got {value!r}")
    return replace(RERANK_BOUNDS,
                   max_body_bytes=int(max_body_mb * 2**20) if max_body_mb is not None else RERANK_BOUNDS.max_body_bytes,
                   read_timeout_s=float(read_timeout_s) if read_timeout_s is not None else RERANK_BOUNDS.read_timeout_s)


def _bind(host: str, port: int) -> socket.socket:
    """A TCP socket bound to ``host:port`` (not yet listening).

    Raises:
        ServiceError: the address is in use or cannot be bound (names it and the fix).
    """
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        sock = socket.socket(family, kind, proto)
    except OSError as exc:
        raise ServiceError(f"cannot bind the reranker to {host}:{port}: {exc.strerror or exc}; give a local address "
                           "with --host (default 127.0.0.1)") from None
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except OSError as exc:
        sock.close()
        raise ServiceError(f"cannot bind the reranker to {host}:{port}: {exc.strerror or exc} (is another server "
                           "on that port? stop it, or choose another with --port N)") from None
    return sock


def _stderr(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def serve(model_folder: str | Path, host: str = "127.0.0.1", port: int = DEFAULT_PORT, max_length: int = 256, *,
          allow_hosts: Sequence[str] = (), bounds: Bounds = RERANK_BOUNDS,
          log: Callable[[str], None] = _stderr) -> None:
    """Serve the cross-encoder of ``model_folder`` on ``http://host:port`` until Ctrl-C / SIGTERM (blocks).

    The address and the token are checked first, then the folder, then the port is bound, then the model
    loaded and run once before the first request is taken (so each mistake is said before the slow steps);
    then ``log`` gets one line with the URL to put in an experiment.

    Args:
        model_folder: a sentence-transformers CrossEncoder folder (:func:`check_cross_encoder_folder`).
        host: the address to listen on; beyond loopback only with a token in ``$WORKBENCH_RERANK_TOKEN``.
        port: the TCP port (0: a free one, said in the line logged).
        max_length: word pieces per (query, document) pair (:class:`CrossEncoderScorer`).
        allow_hosts: more names clients may give in ``Host`` / ``Origin`` (e.g. the name a reverse proxy
            forwards); ``$WORKBENCH_ALLOWED_HOSTS`` adds more.
        bounds: body size, read time and connections (:data:`~workbench.services.policy.RERANK_BOUNDS`).
        log: where the ready line goes (default stderr).

    Raises:
        ConfigError: ``host`` is beyond loopback and ``$WORKBENCH_RERANK_TOKEN`` is not set, an allowed host
            name is not a host name, the folder is not a cross-encoder or does not load (the message of
            :func:`check_cross_encoder_folder`), or ``max_length`` is not a positive integer.
        ServiceError: the port is in use or the address cannot be bound.
    """
    import uvicorn

    token = os.environ.get(RERANK_TOKEN_ENV, "").strip()
    require_tokens_off_loopback(
        "the reranker", host, bool(token),
        f"export {RERANK_TOKEN_ENV}=<a long random token> first (clients send it with "
        f'api_key_env = "{RERANK_TOKEN_ENV}")')
    explicit = frozenset([*(normal_name(n, what="--allow-host") for n in allow_hosts), *env_names()])
    allowed = allowed_names(host, explicit)
    folder = check_cross_encoder_folder(model_folder)
    scorer = CrossEncoderScorer(folder, max_length=max_length)
    sock = _bind(host, port)
    try:
        scorer.score("warm up", ["warm up"])  # loads the model now: a folder that does not load fails here
        app = Guard(create_app(scorer, names=(folder.name,)), service="the reranker", allowed=allowed,
                    explicit=explicit, bounds=bounds, token_sha256=token_digest(token) if token else None,
                    token_env=RERANK_TOKEN_ENV, body_fix="send fewer or shorter documents per request, or raise "
                                                        "--max-body-mb")
        sock.listen(128)  # from here connections wait in the backlog until uvicorn takes them
        # a wildcard bind is not a name a client can use (and the Host check refuses it): show one that is
        shown = (socket.gethostname() or "localhost") if host in ("0.0.0.0", "::", "") else host
        where = f"[{shown}]" if ":" in shown else shown
        url = f"http://{where}:{sock.getsockname()[1]}/rerank"
        access = (f"bearer token of ${RERANK_TOKEN_ENV} required" if token else "this machine only, no token")
        if not is_loopback(host):
            access += "; plain HTTP carries the token in clear: beyond a network you trust, put TLS in front"
        log(f"reranker {scorer.model_id} listening at {url} ({access}; Ctrl-C stops it); in an experiment:\n"
            f'[rerankers.remote]\nkind = "http"\nurl = "{url}"\nmodel = "{scorer.model_id}"   # keys the '
            "pair-score cache: another model served at this URL is another model"
            + (f'\napi_key_env = "{RERANK_TOKEN_ENV}"' if token else ""))
        config = uvicorn_config(app, bounds, log_level="warning", access_log=False, lifespan="off")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m workbench.services.reranker --model FOLDER [--port N] [--host H] [--max-length N]
    [--allow-host NAME]``: exit 0 after Ctrl-C, 2 with one line on stderr when the address, the token, the
    folder or the port is wrong."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m workbench.services.reranker", description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="cross-encoder folder")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    ap.add_argument("--max-length", type=int, default=256)
    ap.add_argument("--allow-host", action="append", default=[], metavar="NAME",
                    help="one more name clients may give in Host / Origin (repeatable)")
    ap.add_argument("--max-body-mb", type=float, default=RERANK_BOUNDS.max_body_bytes / 2**20,
                    help="the largest request body, in MiB (default %(default)g)")
    ap.add_argument("--read-timeout-s", type=float, default=RERANK_BOUNDS.read_timeout_s,
                    help="seconds a request's head and body may take to arrive (default %(default)g)")
    args = ap.parse_args(argv)
    try:
        bounds = bounds_for(args.max_body_mb, args.read_timeout_s)
        serve(args.model, args.host, args.port, args.max_length, allow_hosts=args.allow_host, bounds=bounds)
    except WorkbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
