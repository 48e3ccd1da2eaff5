"""A remote reranker: :class:`HttpScorer`, a :class:`workbench.reranking.scorers.PairScorer` over HTTP.

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

from collections.abc import Sequence
from typing import Any

import numpy as np

from workbench.errors import ConfigError, RerankError
from workbench.io.http import HttpFailure, JsonClient, check_key_env, check_number, check_url, clip, finite_number, loads

_SERVE = "`workbench services up reranker --model FOLDER`"
_SHAPE = '{"results": [{"index": i, "relevance_score": s}, ...]}'
#: The default cap of an answer, in MiB (1,000 results take about 60 KB).
MAX_RESPONSE_MB = 16.0


def _number(name: str, value: Any, *, low: float, strict: bool, integer: bool) -> None:
    check_number(f"http reranker {name}", value, low=low, strict=strict, integer=integer)


class HttpScorer:
    """A :class:`workbench.reranking.scorers.PairScorer` whose scores come from a rerank server over HTTP.

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
        check_url(url, "http reranker url", 'url = "http://127.0.0.1:8787/rerank"')
        if not isinstance(model, str):
            raise ConfigError(f"http reranker model must be a string, got {model!r}")
        _number("batch_size", batch_size, low=0, strict=True, integer=True)
        _number("timeout_s", timeout_s, low=0, strict=True, integer=False)
        _number("retries", retries, low=0, strict=False, integer=True)
        _number("backoff_s", backoff_s, low=0, strict=False, integer=False)
        _number("max_response_mb", max_response_mb, low=0, strict=True, integer=False)
        check_key_env(api_key_env, "http reranker")
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
        self._client: JsonClient | None = None

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
        if self._client is not None:
            self._client.close()
            self._client = None

    def _error(self, where: str, what: str, fix: str) -> RerankError:
        if "`workbench" not in fix:
            fix += f" (the workbench's own server: {_SERVE})"
        return RerankError(f"reranker at {self.url}: {where}: {what}; {fix}")

    def _post(self, query: str, batch: list[str], where: str) -> list[float]:
        """Scores of one batch, in its order, after up to ``retries`` further attempts."""
        payload: dict[str, Any] = {"query": query, "documents": batch, "return_documents": False}
        if self.model:
            payload = {"model": self.model, **payload}
        if self._client is None:
            self._client = JsonClient(timeout_s=self.timeout_s, retries=self.retries, backoff_s=self.backoff_s,
                                      api_key_env=self.api_key_env, max_response_mb=self.max_response_mb)
        try:
            answer = self._client.post(self.url, payload)
        except HttpFailure as exc:
            if exc.stage == "too_large":
                raise self._error(where, str(exc), "raise max_response_mb if the server's answers are this large, "
                                  "or check that the url is its rerank endpoint") from None
            if exc.stage == "refused":
                raise self._error(where, str(exc), self._refused_fix(exc.status or 0)) from None
            if exc.stage == "request":
                raise self._error(where, str(exc), "check the url") from None
            fix = "is the server up? start one with " + _SERVE + (" (or raise timeout_s)"
                                                                 if exc.error_class == "timeout" else "")
            raise self._error(where, str(exc), fix) from None
        return self._parse(answer.body, len(batch), where, answer.came)

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
            body = loads(raw)
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
            number = finite_number(value)
            if number is None:
                raise bad(f"the score of index {idx} is {clip(repr(value), 40)}, not a finite number")
            scores[idx] = number
        if len(scores) != n:
            raise bad(f"{len(scores)} results for {n} documents")
        return [scores[i] for i in range(n)]

