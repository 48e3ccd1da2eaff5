"""The served MCP tool refuses an argument it does not take (a typo would otherwise be answered unfiltered)."""

from __future__ import annotations

import asyncio

import pytest
from fixtures.searcher import StandInSearcher

from workbench.live.serve import mcp_server


def test_the_search_tool_refuses_an_unknown_argument_and_says_so_in_its_schema():
    from mcp.server.mcpserver.exceptions import ToolError

    searcher = StandInSearcher()
    server = mcp_server(searcher)
    tools = asyncio.run(server.list_tools())
    schema = next(t for t in tools if t.name == "search").input_schema
    assert schema.get("additionalProperties") is False and set(schema["properties"]) == {"query", "k", "filters"}
    with pytest.raises(ToolError, match="filter"):
        asyncio.run(server.call_tool("search", {"query": "the soul", "k": 2, "filter": {"chapter": 2}}))
    assert searcher.calls == []  # the typo never reached the search
    asyncio.run(server.call_tool("search", {"query": "the soul", "k": 2, "filters": {"chapter": 2}}))
    assert searcher.calls == [("the soul", 2, {"chapter": 2})]
