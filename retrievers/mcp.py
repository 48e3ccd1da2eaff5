"""The ``mcp`` lane: one tool of an MCP server through the official ``mcp`` SDK, over streamable HTTP (``url``) or
stdio (``command``); the tool's structured answer (or its first text content, as JSON) is read like an HTTP answer,
AICharya's ``{ok, result | error}`` envelope understood. What live lanes share is :mod:`retrievers._live`'s.

**Bounds.** An answer is read up to :data:`MAX_ANSWER_BYTES` (the ``http`` lane's default cap,
:data:`workbench.io.http.MAX_RESPONSE_MB`): past it that one query fails as ``too_large`` (not retried: the same
call gets the same answer) and the others are answered. Over streamable HTTP a JSON answer's body stops there (an
SSE event too); over stdio each line the server writes does (:class:`_CappedLines`: the SDK joins a line's chunks
without a limit, and an endless answer grew the client to 1 GB in 8 s). A stdio line that is not UTF-8 is
decoded with U+FFFD in place of its bad bytes (it ended the session for every query), and an answer nested
deeper than the JSON parser recurses fails its own query only.
"""

from __future__ import annotations

import codecs
import json
import logging
import re
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Optional

from pydantic import Field

from retrievers import _live
from retrievers._live import LiveLane, LiveParams, check_common, crosswalk_extra, experiment_folder, reason
from workbench.errors import RemoteError
from workbench.io.http import MAX_RESPONSE_MB, loads
from workbench.live import mapping
from workbench.registry import RetrieverKind
from workbench.types import Query

#: The largest answer an ``mcp`` lane reads, in bytes (the ``http`` lane's default cap).
MAX_ANSWER_BYTES = int(MAX_RESPONSE_MB * 2**20)
#: What a query whose answer passes :data:`MAX_ANSWER_BYTES` is told (the stdio and HTTP transports both carry it).
TOO_LARGE = f"the answer is larger than {MAX_RESPONSE_MB:g} MiB ({MAX_ANSWER_BYTES} bytes), the most an mcp lane reads"
#: The codec a stdio server's stdout is read with (:class:`_CappedLines`).
STDOUT_CODEC = "workbench-mcp-stdout"


class McpParams(LiveParams):
    """``kind = "mcp"``."""

    url: Optional[str] = Field(None, min_length=1, description="the MCP server's streamable-HTTP endpoint, e.g. "
                                                               "http://127.0.0.1:8790/mcp")
    command: Optional[list[str]] = Field(None, min_length=1, description="a command that speaks MCP over stdio, "
                                                                         "e.g. [\"workbench\", \"serve\", "
                                                                         "\"--stdio\", ...]")
    env: dict[str, str] = Field(default_factory=dict, description="environment of the stdio command (${VAR} "
                                                                  "takes ours); only these and a safe default set "
                                                                  "reach it")
    tool: str = Field("search", min_length=1, description="the tool to call")
    arguments: dict[str, Any] = Field(default_factory=lambda: {"query": "{query}", "k": "{k}"},
                                      description="the tool's arguments (a template like an http body)")


class McpLane(LiveLane):
    """The ``mcp`` lane (module docstring): one session per :meth:`search` batch, calls in parallel on it."""

    def __init__(self, name: str, params: McpParams, ds: Any, base: Path | None = None) -> None:
        super().__init__(name, params, ds, f"lanes.{name}", base)
        self.headers = mapping.resolve_headers(params.headers, f"lanes.{name}")
        self.env = mapping.resolve_headers(params.env, f"lanes.{name}.env")

    def _server(self, errlog):
        from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

        if self.params.url:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            # identity: the cap counts the bytes that arrive, and a compressed answer could inflate past it
            client = create_mcp_http_client(headers={"Accept-Encoding": "identity", **self.headers})
            client.event_hooks["response"].append(_cap_answer)
            return streamable_http_client(self.params.url, http_client=client, max_sse_event_size=MAX_ANSWER_BYTES)
        cmd = self.params.command
        # the SDK decodes stdout with the codec it is given: ours caps each line, and replaces bytes that are not
        # UTF-8 (a strict decoder ended the session at the first one)
        return stdio_client(StdioServerParameters(command=cmd[0], args=list(cmd[1:]),
                                                  env={**get_default_environment(), **self.env},
                                                  encoding=STDOUT_CODEC, encoding_error_handler="replace"),
                            errlog=errlog)

    def _fetch_all(self, queries: list[Query], k: int):
        import anyio

        # a stdio server's stderr goes to a file (its tail explains a failed start), and the SDK's traceback per
        # stdout line that is not JSON-RPC is counted instead of logged (a chatty server wrote 47 MB in 15 s)
        with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog, _stdout_noise() as noise:
            try:
                got = anyio.run(self._session, queries, k, errlog)
            except Exception as exc:  # noqa: BLE001 - the server cannot be reached at all: every query fails alike
                what = f"{self.params.url or ' '.join(self.params.command or [])}: {reason(exc)}"
                said = _tail(errlog)
                if said:
                    what += f"; its stderr ended with: {said}"
                if noise.count:
                    what += f"; {noise.describe()}"
                err = RemoteError(f"{self.where}: cannot open an MCP session with {what}", "connect")
                return [(q, err, 0.0) for q in queries]
        if noise.count:
            self.last_notes.append(f"{self.where}: {noise.describe()}")
        return got

    async def _session(self, queries: list[Query], k: int, errlog):
        import anyio
        from mcp.client.client import Client

        out: list[tuple[Query, Any, float]] = []
        limiter = anyio.CapacityLimiter(self.params.concurrency)
        async with Client(self._server(errlog), cache=None, read_timeout_seconds=self.params.timeout_s) as client:
            async def one(q: Query) -> None:
                async with limiter:
                    await anyio.to_thread.run_sync(self.limiter.wait)
                    t0 = time.perf_counter()
                    try:
                        got = await self._call(client, q, k)
                    except Exception as exc:  # noqa: BLE001 - whatever one answer does, it ends its own query only
                        got = RemoteError(f"{self.where}: tool {self.params.tool}: {reason(exc)}", "malformed")
                    out.append((q, got, (time.perf_counter() - t0) * 1000))

            async with anyio.create_task_group() as tg:
                for q in queries:
                    tg.start_soon(one, q)
        return out

    async def _call(self, client: Any, q: Query, k: int) -> Any:
        import anyio

        args = mapping.render(self.params.arguments, self.values(q, k))
        last: Exception | None = None
        for _attempt in range(self.params.retries + 1):
            try:
                with anyio.fail_after(self.params.timeout_s):
                    result = await client.call_tool(self.params.tool, args)
            except TimeoutError:
                last = RemoteError(f"{self.where}: tool {self.params.tool}: no answer within "
                                   f"{self.params.timeout_s:g} s (timeout_s)", "timeout")
                continue
            except Exception as exc:  # noqa: BLE001 - the SDK's errors (MCPError, transport) end this query only
                if TOO_LARGE in str(exc):  # the same call gets the same answer: not retried
                    return RemoteError(f"{self.where}: tool {self.params.tool}: {TOO_LARGE}; ask for fewer hits (k) "
                                       "or make the server's answer smaller", "too_large")
                last = RemoteError(f"{self.where}: tool {self.params.tool}: {reason(exc)}", "mcp_error")
                continue
            if getattr(result, "is_error", False):
                text = " ".join(c.text for c in result.content if getattr(c, "text", None))[:200]
                return RemoteError(f"{self.where}: tool {self.params.tool} failed: {text}", "tool_error")
            structured = getattr(result, "structured_content", None)
            if structured is not None:
                return structured.get("result", structured) if set(structured) == {"result"} else structured
            texts = [c.text for c in result.content if getattr(c, "text", None)]
            try:
                return loads(texts[0]) if texts else None  # ValueError for nesting deeper than the parser recurses
            except ValueError as exc:
                return RemoteError(f"{self.where}: tool {self.params.tool} answered text that is not JSON "
                                   f"({str(exc)[:80]}): {texts[0][:120]!r}", "not_json")
        return last


class _AnswerTooLarge(Exception):
    """An HTTP answer past :data:`MAX_ANSWER_BYTES` (raised as the SDK's ``httpx2.StreamError`` subclass, which it
    turns into an error of that one request)."""


async def _cap_answer(response: Any) -> None:
    """httpx2 response hook: a JSON answer's body is read up to :data:`MAX_ANSWER_BYTES`, then the read fails
    (by its ``Content-Length`` before anything is read). An SSE stream is left to the SDK's per-event cap."""
    import httpx2

    if response.headers.get("content-type", "").lower().startswith("text/event-stream"):
        return

    class TooLarge(_AnswerTooLarge, httpx2.StreamError):
        pass

    declared = (response.headers.get("content-length") or "").strip()
    inner = response.stream

    class Capped(httpx2.AsyncByteStream):
        async def __aiter__(self):
            if declared.isdigit() and int(declared) > MAX_ANSWER_BYTES:
                raise TooLarge(f"{TOO_LARGE} (it declares {int(declared)})")
            read = 0
            async for chunk in inner:
                read += len(chunk)
                if read > MAX_ANSWER_BYTES:
                    raise TooLarge(TOO_LARGE)
                yield chunk

        async def aclose(self) -> None:
            await inner.aclose()

    response.stream = Capped()


_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,200}")')


class _CappedLines(codecs.IncrementalDecoder):
    """UTF-8 for a stdio server's stdout, whole lines at a time, each at most :data:`MAX_ANSWER_BYTES`.

    The SDK reads stdout through the incremental decoder of the encoding it is given and joins the text into lines
    without a limit. This decoder hands it complete lines only; a line that passes the cap is dropped, its rest
    skipped up to its newline, and in its place comes a JSON-RPC error for the request it answers (the ``id`` near
    its start), so that one call fails with :data:`TOO_LARGE` and the others go on. A line naming no id (or
    that is a server's own request) is dropped alone. Bytes that are not UTF-8 follow ``errors`` (the lane passes
    ``"replace"``).
    """

    def __init__(self, errors: str = "strict") -> None:
        super().__init__(errors)
        self._line = bytearray()
        self._skipping = False

    def decode(self, input: Any, final: bool = False) -> str:  # noqa: A002 - codecs' own parameter name (a Buffer)
        data = bytes(input)
        out: list[str] = []
        start = 0
        while start < len(data):
            newline = data.find(b"\n", start)
            end = len(data) if newline < 0 else newline + 1
            piece, start = data[start:end], end
            if self._skipping:
                self._skipping = newline < 0
                continue
            self._line += piece
            if len(self._line) > MAX_ANSWER_BYTES:
                out.append(_too_large_line(bytes(self._line[:512])))
                self._line.clear()
                self._skipping = newline < 0
            elif newline >= 0:
                out.append(self._line.decode("utf-8", self.errors))
                self._line.clear()
        if final and self._line:
            out.append(self._line.decode("utf-8", self.errors))
            self._line.clear()
        return "".join(out)

    def reset(self) -> None:
        self._line.clear()
        self._skipping = False


def _too_large_line(head: bytes) -> str:
    """The JSON-RPC error line that stands for an answer past the cap whose first bytes are ``head`` (``""`` when
    they name no request id, or are a request of the server's own)."""
    found = _ID.search(head)
    if found is None or b'"method"' in head[:found.start()]:
        return ""
    try:
        request_id = json.loads(found.group(1))
    except ValueError:
        return ""
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "error": {"code": -32000, "message": TOO_LARGE}}) + "\n"


def _stdout_codec(name: str) -> codecs.CodecInfo | None:
    if name != STDOUT_CODEC.replace("-", "_") and name != STDOUT_CODEC:
        return None
    utf8 = codecs.lookup("utf-8")
    return codecs.CodecInfo(utf8.encode, utf8.decode, incrementalencoder=utf8.incrementalencoder,
                            incrementaldecoder=_CappedLines, name=STDOUT_CODEC)


codecs.register(_stdout_codec)


class _StdoutNoise(logging.Filter):
    """Swallows and counts the SDK's record for each stdout line of a stdio server that is not a JSON-RPC
    message (``mcp.client.stdio``: "Failed to parse JSONRPC message from server", with a traceback)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0
        self.first = ""

    def filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith("Failed to parse JSONRPC"):
            return True
        if not self.count and record.exc_info and record.exc_info[1] is not None:
            errors = getattr(record.exc_info[1], "errors", None)
            value = errors()[0].get("input") if callable(errors) and errors() else None
            self.first = repr(str(value)[:80]) if value is not None else ""
        self.count += 1
        return False

    def describe(self) -> str:
        first = f" (the first: {self.first})" if self.first else ""
        return (f"{self.count:,} line(s) the server wrote to stdout were not MCP messages and were skipped{first}; "
                "a stdio server must write only JSON-RPC to stdout and its logs to stderr")


def _not_too_large(record: logging.LogRecord) -> bool:
    """Drops the SDK's traceback for an answer past the cap ("Error parsing JSON response"): the query's
    failure says it in one line."""
    exc = record.exc_info[1] if record.exc_info else None
    return not isinstance(exc, _AnswerTooLarge)


@contextmanager
def _stdout_noise():
    sdk = logging.getLogger("mcp.client.stdio")
    http = logging.getLogger("mcp.client.streamable_http")
    noise = _StdoutNoise()
    sdk.addFilter(noise)
    http.addFilter(_not_too_large)
    try:
        yield noise
    finally:
        sdk.removeFilter(noise)
        http.removeFilter(_not_too_large)


def _tail(errlog, keep: int = 300) -> str:
    """The last ``keep`` characters of a stdio server's stderr, on one line."""
    try:
        errlog.flush()
        size = errlog.seek(0, 2)
        errlog.seek(max(0, size - keep * 4))
        return " ".join(errlog.read().split())[-keep:]
    except (OSError, ValueError):
        return ""


class McpKind(RetrieverKind):
    """``mcp``: a search tool of an MCP server as a lane (see the module docstring)."""

    kind = "mcp"
    summary = "a search tool of an MCP server (streamable HTTP or stdio), AICharya's {ok, result} envelope understood"
    Params = McpParams
    code = (mapping, _live)
    remote = True

    def filters_natively(self, params) -> bool:
        """True when the request template sends ``{filters}`` (the system is asked to filter)."""
        return "filters" in mapping.placeholders(params.arguments)

    def cache_extra(self, params, ds, res) -> dict[str, Any]:
        """The crosswalk's digest when ``id_map = "table:FILE"`` (its rows shape the mapped candidates)."""
        return crosswalk_extra(params, res)

    def open(self, name: str, params: McpParams, ds, res) -> McpLane:
        """The lane (a session opens per batch of queries)."""
        return McpLane(name, params, ds, experiment_folder(res))

    def check(self, params: McpParams, experiment) -> str:
        """Exactly one of ``url`` and ``command``; the arguments template; JMESPath; ``id_map``."""
        if (params.url is None) == (params.command is None):
            return "needs exactly one of url (streamable HTTP) and command (stdio)"
        if params.url is not None and not params.url.startswith(("http://", "https://")):
            return f"url = {params.url!r} must start with http:// or https://"
        return mapping.check_template(params.arguments, "arguments") or check_common(params)
