"""The ``mcp`` lane: one tool of an MCP server through the official ``mcp`` SDK, over streamable HTTP (``url``) or
stdio (``command``); the tool's structured answer (or its first text content, as JSON) is read like an HTTP answer,
AICharya's ``{ok, result | error}`` envelope understood. What live lanes share is :mod:`retrievers._live`'s.
"""

from __future__ import annotations

import json
import logging
import tempfile
import time
from contextlib import contextmanager
from typing import Any, Optional

from pydantic import Field

from retrievers import _live
from retrievers._live import LiveLane, LiveParams, check_common, reason
from workbench.errors import RemoteError
from workbench.live import mapping
from workbench.registry import RetrieverKind
from workbench.types import Query


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

    def __init__(self, name: str, params: McpParams, ds: Any) -> None:
        super().__init__(name, params, ds, f"lanes.{name}")
        self.headers = mapping.resolve_headers(params.headers, f"lanes.{name}")
        self.env = mapping.resolve_headers(params.env, f"lanes.{name}.env")

    def _server(self, errlog):
        from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

        if self.params.url:
            from mcp.client.streamable_http import streamable_http_client
            from mcp.shared._httpx_utils import create_mcp_http_client

            return streamable_http_client(self.params.url, http_client=create_mcp_http_client(headers=self.headers))
        cmd = self.params.command
        return stdio_client(StdioServerParameters(command=cmd[0], args=list(cmd[1:]),
                                                  env={**get_default_environment(), **self.env}), errlog=errlog)

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
                    got = await self._call(client, q, k)
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
                return json.loads(texts[0]) if texts else None
            except ValueError:
                return RemoteError(f"{self.where}: tool {self.params.tool} answered text that is not JSON: "
                                   f"{texts[0][:120]!r}", "not_json")
        return last


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


@contextmanager
def _stdout_noise():
    sdk = logging.getLogger("mcp.client.stdio")
    noise = _StdoutNoise()
    sdk.addFilter(noise)
    try:
        yield noise
    finally:
        sdk.removeFilter(noise)


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

    def open(self, name: str, params: McpParams, ds, res) -> McpLane:
        """The lane (a session opens per batch of queries)."""
        return McpLane(name, params, ds)

    def check(self, params: McpParams, experiment) -> str:
        """Exactly one of ``url`` and ``command``; the arguments template; JMESPath; ``id_map``."""
        if (params.url is None) == (params.command is None):
            return "needs exactly one of url (streamable HTTP) and command (stdio)"
        if params.url is not None and not params.url.startswith(("http://", "https://")):
            return f"url = {params.url!r} must start with http:// or https://"
        return mapping.check_template(params.arguments, "arguments") or check_common(params)
