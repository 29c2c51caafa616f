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

from mcp_types import jsonrpc


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
        reference={"status": 400, "error": jsonrpc.INVALID_REQUEST, "id": None},
        gateway={"status": 400, "error": jsonrpc.HEADER_MISMATCH, "id": "echoed"},
        spec="streamable-http.mdx §Server Validation: a missing required standard header (MCP-Protocol-Version) "
        "is a validation failure, 400 + -32020. The reference takes the MAY of §Protocol Version Header (treat "
        "a header-less request as 2025-03-26) and answers as a session-era server; the body here carries "
        "2026-07-28 `_meta`, so the gateway does not guess an older era.",
    ),
    "Mcp-Name with DEL character": Difference(
        reference={"status": 400, "error": jsonrpc.HEADER_MISMATCH, "id": "echoed"},
        gateway={"status": 400, "body": "no-jsonrpc"},
        spec="RFC 9110 §5.5: DEL is not a field-value character, so the message is not valid HTTP and the "
        "gateway's HTTP parser answers 400 before any JSON-RPC is read (RFC 9112 §2.2). streamable-http.mdx "
        "§Server Validation asks for 400 on invalid characters; the -32020 body needs a parser that accepts "
        "invalid HTTP, as the reference's does.",
    ),
    "GET on the endpoint": Difference(
        reference={"status": 400, "error": jsonrpc.INVALID_REQUEST},
        gateway={"status": 405, "body": "no-jsonrpc"},
        spec="streamable-http.mdx §Earlier Streamable HTTP Revisions: HTTP GET or DELETE to the MCP endpoint "
        "SHOULD get 405 Method Not Allowed. The reference answers as a 2025-11-25 server missing its session id.",
    ),
    "DELETE on the endpoint": Difference(
        reference={"status": 400, "error": jsonrpc.INVALID_REQUEST},
        gateway={"status": 405, "body": "no-jsonrpc"},
        spec="streamable-http.mdx §Earlier Streamable HTTP Revisions: as for GET, 405.",
    ),
    "Accept application/json only": Difference(
        reference={"status": 406},
        gateway={"status": 200, "resultType": "complete"},
        spec="streamable-http.mdx §Sending Messages 2 binds the client to list both types but gives the server no "
        "rule; §Sending Messages 6 lets the server answer with application/json, which this client accepts, so "
        "refusing is not required (RFC 9110 §15.5.7: 406 is for when no acceptable representation exists).",
    ),
    "Content-Type missing": Difference(
        reference={"status": 400, "body": "no-jsonrpc"},
        gateway={"status": 415, "body": "no-jsonrpc"},
        spec="The spec names no status for a body that is not application/json; RFC 9110 §15.5.16 names 415 "
        "Unsupported Media Type for exactly this. Both refuse with a 4xx.",
    ),
    "Content-Type text/plain": Difference(
        reference={"status": 400, "body": "no-jsonrpc"},
        gateway={"status": 415, "body": "no-jsonrpc"},
        spec="As for a missing Content-Type: RFC 9110 §15.5.16.",
    ),
    "body contains NaN": Difference(
        reference={"status": 200, "resultType": "complete"},
        gateway={"status": 400, "error": jsonrpc.PARSE_ERROR},
        spec="basic/index.mdx §Messages: messages MUST follow JSON-RPC 2.0, which is JSON (RFC 8259 §6: NaN and "
        "Infinity are not permitted). The reference's parser accepts the NaN literal; a body that is not JSON "
        "is a Parse error.",
    ),
    "jsonrpc member is 1.0": Difference(
        reference={"status": 400, "error": jsonrpc.INVALID_REQUEST, "id": None},
        gateway={"status": 400, "error": jsonrpc.INVALID_REQUEST, "id": "echoed"},
        spec="basic/index.mdx §Error Responses: an error MUST carry the request's id unless it could not be read; "
        "here it could. The reference answers id null.",
    ),
    "params is an array": Difference(
        reference={"status": 400, "error": jsonrpc.INVALID_REQUEST, "id": None},
        gateway={"status": 400, "error": jsonrpc.INVALID_REQUEST, "id": "echoed"},
        spec="basic/index.mdx §Error Responses: the id was readable, so it is echoed.",
    ),
    "posted JSON-RPC result response": Difference(
        reference={"status": 400, "error": jsonrpc.INVALID_REQUEST, "id": None},
        gateway={"status": 400, "error": jsonrpc.INVALID_REQUEST, "id": "echoed"},
        spec="streamable-http.mdx §Sending Messages 4: the client MUST NOT post responses; both refuse with "
        "-32600. basic/index.mdx §Error Responses: the message's id was readable, so the gateway returns it.",
    ),
    "posted JSON-RPC error response": Difference(
        reference={"status": 400, "error": jsonrpc.INVALID_REQUEST, "id": None},
        gateway={"status": 400, "error": jsonrpc.INVALID_REQUEST, "id": "echoed"},
        spec="As for a posted result response.",
    ),
    "retry with an unknown extra key": Difference(
        reference={"status": 400, "error": jsonrpc.INVALID_PARAMS},
        gateway={"status": 200, "resultType": "complete", "text": "city=Paris"},
        spec="basic/patterns/mrtr.mdx §Error Handling: if additional, unexpected parameters are provided in "
        "InputResponses, the server SHOULD ignore what it does not recognize. The reference refuses the retry.",
    ),
    "method is not a string": Difference(
        reference={"status": 400, "error": jsonrpc.INVALID_REQUEST, "id": None},
        gateway={"status": 400, "error": jsonrpc.INVALID_REQUEST, "id": "echoed"},
        spec="basic/index.mdx §Error Responses: the id was readable, so it is echoed.",
    ),
    "tools/call without a name": Difference(
        reference={"status": 400, "error": jsonrpc.INVALID_PARAMS},
        gateway={"status": 400, "error": jsonrpc.HEADER_MISMATCH},
        spec="The request is both malformed (no params.name: -32602) and contradicted by its Mcp-Name header "
        "(streamable-http.mdx §Server Validation: -32020); the spec orders neither check first. The gateway "
        "validates the routing headers before the params, so a proxy and the server agree on the refusal.",
    ),
    "initialize with a handshake-era header and a 2026-07-28 envelope": Difference(
        reference={"status": 200, "resultType": "absent"},
        gateway={"status": 400, "error": jsonrpc.HEADER_MISMATCH, "id": "echoed"},
        spec="streamable-http.mdx §Protocol Version Header: the header MUST match the envelope's "
        "`io.modelcontextprotocol/protocolVersion`, else 400 + HeaderMismatch (-32020); versioning.mdx "
        "§Backward Compatibility: a request carrying modern `_meta` is served as 2026-07-28. The reference "
        "lets the header alone pick the era and runs a legacy handshake.",
    ),
    "tools/list with a handshake-era header and a 2026-07-28 envelope": Difference(
        reference={"status": 400, "error": jsonrpc.INVALID_REQUEST, "id": None},
        gateway={"status": 400, "error": jsonrpc.HEADER_MISMATCH, "id": "echoed"},
        spec="streamable-http.mdx §Protocol Version Header: the header MUST match the envelope's version, else "
        "400 + HeaderMismatch (-32020). The reference lets the header alone pick the era and answers as a "
        "session-era server (missing session id).",
    ),
    "unknown tool": Difference(
        reference={"status": 200, "resultType": "complete"},
        gateway={"error": jsonrpc.INVALID_PARAMS},
        spec="server/tools.mdx §Error Handling: an unknown tool is a protocol error, returned as a JSON-RPC "
        "error (-32602 in the spec's example). The reference answers a tool result with isError.",
    ),
    "invalid cursor": Difference(
        reference={"status": 200, "resultType": "complete"},
        gateway={"error": jsonrpc.INVALID_PARAMS},
        spec="server/utilities/pagination.mdx §Error Handling: invalid cursors SHOULD result in -32602. The "
        "reference ignores the cursor and lists from the start.",
    ),
    "unknown prompt": Difference(
        reference={"status": 200, "error": jsonrpc.INTERNAL_ERROR},
        gateway={"error": jsonrpc.INVALID_PARAMS},
        spec="server/prompts.mdx §Error Handling: an invalid prompt name SHOULD be -32602; the reference "
        "answers -32603 Internal error.",
    ),
    "prompt missing a required argument": Difference(
        reference={"status": 200, "error": jsonrpc.INTERNAL_ERROR},
        gateway={"error": jsonrpc.INVALID_PARAMS},
        spec="server/prompts.mdx §Error Handling: missing required arguments SHOULD be -32602; the reference "
        "answers -32603 Internal error.",
    ),
    "loopback Origin": Difference(
        reference={"status": 403},
        gateway={"status": 200, "resultType": "complete"},
        spec="streamable-http.mdx §Security 1: a present and *invalid* Origin gets 403; which origins are valid is "
        "the server's policy. The gateway's default accepts loopback origins (a browser page served from the "
        "same machine) and refuses all others; the reference accepts only loopback origins that name a port.",
    ),
}

NORMALIZATIONS: tuple[tuple[str, str], ...] = (
    (
        "Error `message` text and `data` members other than `supported`/`requested` (-32022) and "
        "`requiredCapabilities` (-32021)",
        "basic/index.mdx §Error Responses: free text, `data` MAY hold anything",
    ),
    (
        "A request answered with one JSON object or with an SSE stream",
        "streamable-http.mdx §Sending Messages 6: either",
    ),
    (
        "The body of an HTTP-level refusal (403, 405, 406, 413, 415) that carries no JSON-RPC error",
        "streamable-http.mdx §Sending Messages 5, §Security 1: it MAY carry a JSON-RPC error without id",
    ),
    (
        "Server name and version in `serverInfo` (presence is compared)",
        "basic/index.mdx §_meta, per-response fields",
    ),
    (
        "`inputRequests` keys and `requestState` bytes (kinds and presence are compared)",
        "mrtr.mdx §InputRequiredResult: server-assigned, opaque",
    ),
    (
        "Tool, prompt and resource lists beyond the shared contract",
        "server/tools.mdx §Listing Tools: the set is the server's",
    ),
)
