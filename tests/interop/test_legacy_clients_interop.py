"""Issue 4 item 6 with real peers: the official mcp 2.3.0 client pinned to ``mode="legacy"`` talks
through the gateway to the mcp 1.30.0 FastMCP server as if nothing stood between them (inline
elicitation on the POST stream, ``roots/list`` on the GET stream), while a 2026-07-28 client on the
same route gets the same tool through MRTR rounds. One route, both eras."""

from __future__ import annotations

import anyio
import pytest
from harness import route, running_gateway
from mcp.client import Client

from interop.flows import FLOW_TIMEOUT, LEGACY_VERSION, MODERN_VERSION, ROOTS, Recorder, text_of

pytestmark = pytest.mark.interop


async def test_legacy_and_modern_clients_share_one_route(legacy_server: str) -> None:
    async with running_gateway([route("legacy", "/mcp", legacy_server)]) as gw:
        old, new = Recorder(), Recorder()
        with anyio.fail_after(FLOW_TIMEOUT):
            async with Client(
                gw.url(), mode="legacy", elicitation_callback=old.elicit, list_roots_callback=old.roots
            ) as legacy:
                assert legacy.protocol_version == LEGACY_VERSION
                assert {"add", "ask_city", "show_roots"} <= {tool.name for tool in (await legacy.list_tools()).tools}
                assert text_of(await legacy.call_tool("add", {"a": 2, "b": 3})) == "5"
                assert text_of(await legacy.call_tool("ask_city", {})) == "city=Paris"
                assert old.counts() == (1, 0, 0)
                assert text_of(await legacy.call_tool("show_roots", {})) == "roots=" + ",".join(ROOTS)
                assert old.counts() == (1, 0, 1)

                async with Client(
                    gw.url(), mode=MODERN_VERSION, elicitation_callback=new.elicit, list_roots_callback=new.roots
                ) as modern:
                    assert modern.protocol_version == MODERN_VERSION
                    assert text_of(await modern.call_tool("ask_city", {})) == "city=Paris"
                assert new.counts() == (1, 0, 0)

                assert text_of(await legacy.call_tool("add", {"a": 1, "b": 1})) == "2", "still served after"
