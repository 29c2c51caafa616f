"""Send one exchange to the reference server and to the gateway, reduce both answers to their
*shape* (what the spec constrains: HTTP status, error code, result type, required fields), and
assert: the gateway's shape is what the spec asks, and the reference's shape is the same, unless
the case is listed in :data:`differences.DIFFERENCES`, where the reference is recorded as it is
(so the table goes stale loudly if the reference changes).

Shapes deliberately ignore what the spec leaves free: error messages, ``data`` beyond the
spec-defined members, server names, tool lists, whether a request is answered with one JSON body
or an SSE stream (see :data:`differences.NORMALIZATIONS`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import aiohttp
from mcp_types import jsonrpc

from conformance.differences import DIFFERENCES
from conformance.wire import SERVER_INFO, Exchange, Observed, send

Shape = dict[str, Any]
Build = Exchange | Callable[["Target"], Awaitable[Exchange]]


@dataclass(frozen=True)
class Target:
    """One server under test: ``reference`` (mcp 2.3.0 MCPServer) or ``gateway`` (+ mcp 1.30.0 FastMCP)."""

    name: str
    url: str
    http: aiohttp.ClientSession
    other_url: str | None = None
    """A second endpoint on the same server, where it has one (the gateway's second route)."""

    async def send(self, exchange: Exchange) -> Observed:
        return await send(self.http, self.url, exchange)


def _sent_id(exchange: Exchange) -> Any:
    try:
        message = json.loads(exchange.body)
    except ValueError:
        return None
    return message.get("id") if isinstance(message, dict) else None


def _cache_hints(result: Mapping[str, Any]) -> str:
    ttl, scope = result.get("ttlMs"), result.get("cacheScope")
    if ttl is None and scope is None:
        return "absent"
    valid_ttl = isinstance(ttl, int) and not isinstance(ttl, bool) and ttl >= 0
    return "valid" if valid_ttl and scope in ("public", "private") else f"invalid:{ttl!r}/{scope!r}"


def _server_info(result: Mapping[str, Any]) -> bool:
    meta = result.get("_meta")
    info = meta.get(SERVER_INFO) if isinstance(meta, dict) else None
    return isinstance(info, dict) and isinstance(info.get("name"), str) and isinstance(info.get("version"), str)


def shape(observed: Observed, sent_id: Any) -> Shape:
    """The spec-relevant outline of one answer (see the module docstring for what is left out)."""
    out: Shape = {"status": observed.status}
    final = observed.final
    if not isinstance(final, dict):
        # Refusals at the HTTP layer MAY carry a JSON-RPC error without id (streamable-http.mdx
        # §Sending Messages 5, §Security 1); what else they carry is free. A 202 MUST have no body.
        out["body"] = "no-jsonrpc"
        if observed.status == 202:
            out["emptyBody"] = not observed.raw.strip()
        return out
    out["body"] = "jsonrpc"
    out["content-type"] = observed.content_type
    if observed.content_type in ("application/json", "text/event-stream"):
        out["content-type"] = "json-or-sse"
    out["id"] = "echoed" if sent_id is not None and final.get("id") == sent_id else final.get("id", "absent")
    if isinstance(final.get("error"), dict):
        error = final["error"]
        out["error"] = error.get("code")
        data = error.get("data")
        if error.get("code") == jsonrpc.UNSUPPORTED_PROTOCOL_VERSION and isinstance(data, dict):
            out["data.supported"] = sorted(data.get("supported") or [])
        if error.get("code") == jsonrpc.MISSING_REQUIRED_CLIENT_CAPABILITY and isinstance(data, dict):
            out["data.requiredCapabilities"] = data.get("requiredCapabilities")
        return out
    result = final.get("result")
    if not isinstance(result, dict):
        out["result"] = type(result).__name__
        return out
    out["resultType"] = result.get("resultType", "absent")
    out["serverInfo"] = _server_info(result)
    out["cacheHints"] = _cache_hints(result)
    if result.get("resultType") == "input_required":
        requests = result.get("inputRequests")
        if isinstance(requests, dict):
            out["inputRequests"] = sorted(str(r.get("method")) for r in requests.values() if isinstance(r, dict))
        out["requestState"] = isinstance(result.get("requestState"), str)
    return out


@dataclass(frozen=True)
class Pair:
    reference: Target
    gateway: Target

    async def observe(self, build: Build) -> tuple[Observed, Observed, Exchange, Exchange]:
        """Send the exchange (built per target when ``build`` is a function) to both servers."""
        sent: list[Exchange] = []
        seen: list[Observed] = []
        for target in (self.reference, self.gateway):
            exchange = build if isinstance(build, Exchange) else await build(target)
            sent.append(exchange)
            seen.append(await target.send(exchange))
        return seen[0], seen[1], sent[0], sent[1]

    async def check(
        self, case: str, build: Build, expect: Shape, *, extra: Callable[[Observed], Shape] | None = None
    ) -> tuple[Observed, Observed]:
        """Assert the spec's ``expect`` on the gateway and the same shape on the reference.

        ``expect`` lists the keys the spec decides (a subset of :func:`shape` plus ``extra``'s keys);
        every other key of the shape must still be equal on both sides.
        """
        reference, gateway, ref_sent, gw_sent = await self.observe(build)
        ref_shape = shape(reference, _sent_id(ref_sent))
        gw_shape = shape(gateway, _sent_id(gw_sent))
        if extra is not None:
            ref_shape.update(extra(reference))
            gw_shape.update(extra(gateway))
        spec_view = {key: gw_shape.get(key, "missing") for key in expect}
        assert spec_view == expect, f"{case}: gateway {gw_shape} != spec {expect}\n{gateway}"
        known = DIFFERENCES.get(case)
        if known is None:
            assert ref_shape == gw_shape, f"{case}: reference {ref_shape} != gateway {gw_shape}\n{reference}"
        else:
            ref_view = {key: ref_shape.get(key, "missing") for key in known.reference}
            gw_view = {key: gw_shape.get(key, "missing") for key in known.gateway}
            assert ref_view == known.reference, (
                f"{case}: the reference no longer answers {known.reference}: {ref_shape}"
            )
            assert gw_view == known.gateway, f"{case}: the gateway no longer answers {known.gateway}: {gw_shape}"
            assert ref_shape != gw_shape, f"{case}: listed as a difference, but both answer {gw_shape}"
        return reference, gateway
