"""Every place the gateway may answer differently from the reference server, with the spec text
that decides. ``docs/conformance.md`` reproduces this table.

:data:`DIFFERENCES` is keyed by exchange name (the ``case`` a test passes to ``Pair.check``). Each
entry records what the reference (mcp 2.3.0 ``MCPServer``) answers today, and cites the spec line the
gateway follows instead; the suite fails if the reference changes its answer (the entry is stale)
or starts to follow the spec (the entry is no longer a difference).

:data:`NORMALIZATIONS` are the parts of an answer the suite never compares because the spec leaves
them to the implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Difference:
    reference: dict[str, Any]
    """What the reference answers (keys as in ``differential.shape``)."""
    gateway: dict[str, Any]
    """What the gateway answers instead."""
    spec: str
    """Why the gateway's answer is the one the spec allows or asks for, and where it says so."""


DIFFERENCES: dict[str, Difference] = {
    "MCP-Protocol-Version missing": Difference(
        reference={"status": 400, "error": -32600, "id": None},
        gateway={"status": 400, "error": -32020, "id": "echoed"},
        spec="streamable-http.mdx §Server Validation: a missing required standard header (MCP-Protocol-Version) "
        "is a validation failure, 400 + -32020. The reference takes the MAY of §Protocol Version Header (treat "
        "a header-less request as 2025-03-26) and answers as a session-era server; the body here carries "
        "2026-07-28 `_meta`, so the gateway does not guess an older era.",
    ),
    "Mcp-Name with DEL character": Difference(
        reference={"status": 400, "error": -32020, "id": "echoed"},
        gateway={"status": 400, "body": "not-jsonrpc"},
        spec="RFC 9110 §5.5: DEL is not a field-value character, so the message is not valid HTTP and the "
        "gateway's HTTP parser answers 400 before any JSON-RPC is read (RFC 9112 §2.2). streamable-http.mdx "
        "§Server Validation asks for 400 on invalid characters; the -32020 body needs a parser that accepts "
        "invalid HTTP, as the reference's does.",
    ),
}

NORMALIZATIONS: tuple[tuple[str, str], ...] = (
    (
        "Error `message` text and `data` members other than the spec-defined `supported`/`requested` "
        "(-32022) and `requiredCapabilities` (-32021)",
        "basic/index.mdx §Error Responses: `message` is free text, `data` MAY hold anything",
    ),
    (
        "A request answered with one JSON object or with an SSE stream ending in the response",
        "basic/transports/streamable-http.mdx §Sending Messages 6: the server MUST return either",
    ),
    (
        "Server name and version in `_meta.io.modelcontextprotocol/serverInfo` (only presence is compared)",
        "basic/index.mdx §_meta, per-response protocol fields",
    ),
    (
        "`inputRequests` keys and `requestState` bytes (only the request kinds and presence are compared)",
        "basic/patterns/mrtr.mdx §InputRequiredResult: keys are server-assigned, state is opaque",
    ),
    (
        "Tool, prompt and resource lists beyond the shared contract (the legacy peer has extra tools)",
        "server/tools.mdx §Listing Tools: the set is the server's",
    ),
)
