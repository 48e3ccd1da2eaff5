"""A local rerank server for a cross-encoder folder, speaking the rerank JSON shape that
:class:`workbench.http_scorer.HttpScorer` (and Cohere / Jina clients) send.

Endpoints (FastAPI on uvicorn):

* ``POST /rerank`` and its alias ``POST /v1/rerank``: ``{"query": str, "documents": [str, ...], "model": str
  (optional), "top_n": int (optional), "return_documents": bool (optional)}`` →
  ``{"model": model_id, "results": [{"index": i, "relevance_score": s}, ...]}``, best score first (ties by
  index), the first ``top_n`` only when given; ``"document": {"text": ...}`` in each result with
  ``return_documents``. ``index`` is the document's position in the request; ``relevance_score`` the
  cross-encoder's (:class:`workbench.scorers.CrossEncoderScorer`: a probability in [0, 1]). No document,
  no result. Errors: 422 a body of another shape, 413 more than ``max_documents`` documents, 400 a
  ``model`` naming another model than the one served (empty or absent is accepted).
* ``GET /health`` → ``{"status": "ok", "model": model_id, "requests": n}``, ``n`` the rerank requests
  scored since the start.

Requests are scored one at a time (the model is not shared between threads). Start it with
``workbench services up reranker --model FOLDER`` or ``python -m workbench.services.reranker --model
FOLDER [--port 8787] [--host 127.0.0.1] [--max-length 256]``; it runs in the foreground until Ctrl-C
(or SIGTERM). No authentication: it binds 127.0.0.1 unless told otherwise.
"""

from __future__ import annotations

import socket
import sys
import threading
from pathlib import Path
from typing import Any, Callable, Sequence

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, Field

from workbench.errors import ServiceError, WorkbenchError
from workbench.scorers import CrossEncoderScorer, PairScorer, check_cross_encoder_folder

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


def create_app(scorer: PairScorer, *, names: Sequence[str] = (), max_documents: int = MAX_DOCUMENTS) -> FastAPI:
    """The FastAPI application serving ``scorer`` (see the module's docstring for the endpoints).

    Args:
        scorer: scores the pairs; its ``model_id`` is the ``model`` the server answers with.
        names: other names a request's ``model`` may give for it (e.g. the model folder's name).
        max_documents: documents per request at most (more: HTTP 413).
    """
    app = FastAPI(title="workbench reranker", docs_url=None, redoc_url=None, openapi_url=None)
    served = {scorer.model_id, *names}
    lock = threading.Lock()
    state = {"requests": 0}

    @app.get("/health")
    def health() -> dict:
        return {"status": "ok", "model": scorer.model_id, "requests": state["requests"]}

    def rerank(req: RerankRequest) -> dict:
        if req.model and req.model not in served:
            raise HTTPException(400, f"this server serves {scorer.model_id}, not {req.model!r}; leave model empty "
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
          log: Callable[[str], None] = _stderr) -> None:
    """Serve the cross-encoder of ``model_folder`` on ``http://host:port`` until Ctrl-C / SIGTERM (blocks).

    The folder is checked before the port is bound, the port bound before the model is loaded (so both
    mistakes are said at once), and the model loaded and run once before the first request is taken; then
    ``log`` gets one line with the URL to put in an experiment.

    Args:
        model_folder: a sentence-transformers CrossEncoder folder (:func:`check_cross_encoder_folder`).
        host: the address to listen on.
        port: the TCP port (0: a free one, said in the line logged).
        max_length: word pieces per (query, document) pair (:class:`CrossEncoderScorer`).
        log: where the ready line goes (default stderr).

    Raises:
        ConfigError: the folder is not a cross-encoder, or does not load (the message of
            :func:`check_cross_encoder_folder`), or ``max_length`` is not a positive integer.
        ServiceError: the port is in use or the address cannot be bound.
    """
    import uvicorn

    folder = check_cross_encoder_folder(model_folder)
    scorer = CrossEncoderScorer(folder, max_length=max_length)
    sock = _bind(host, port)
    try:
        scorer.score("warm up", ["warm up"])  # loads the model now: a folder that does not load fails here
        app = create_app(scorer, names=(folder.name,))
        sock.listen(128)  # from here connections wait in the backlog until uvicorn takes them
        where = f"[{host}]" if ":" in host else host
        url = f"http://{where}:{sock.getsockname()[1]}/rerank"
        log(f"reranker {scorer.model_id} listening at {url} (Ctrl-C stops it); in an experiment:\n"
            f'[rerankers.remote]\nkind = "http"\nurl = "{url}"\nmodel = "{scorer.model_id}"   # keys the '
            "pair-score cache: another model served at this URL is another model")
        uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off")).run(sockets=[sock])
    finally:
        sock.close()


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m workbench.services.reranker --model FOLDER [--port N] [--host H] [--max-length N]``: exit 0
    after Ctrl-C, 2 with one line on stderr when the folder or the port is wrong."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m workbench.services.reranker", description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="cross-encoder folder")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=DEFAULT_PORT)
    ap.add_argument("--max-length", type=int, default=256)
    args = ap.parse_args(argv)
    try:
        serve(args.model, args.host, args.port, args.max_length)
    except WorkbenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
