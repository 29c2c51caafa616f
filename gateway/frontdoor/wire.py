"""Parsing the front-door ladder needs, apart from its rungs: header lines folded by name, the
Accept negotiation (RFC 9110 §12.5.1), the JSON content type, JSON-RPC ids, nesting depth, and a
short summary of a schema validation error. Pure: no aiohttp."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from pydantic import ValidationError

REASON_LIMIT: Final = 200
"""Longest ``data.reason`` a schema validation summary keeps."""


def fold(headers: Sequence[tuple[str, str]]) -> dict[str, list[str]]:
    """Group raw header lines by lowercase name, keeping every copy; values lose edge OWS."""
    folded: dict[str, list[str]] = {}
    for name, value in headers:
        folded.setdefault(name.lower(), []).append(value.strip(" \t"))
    return folded


def accepts(accept_lines: Sequence[str]) -> tuple[bool, bool]:
    """`(allows application/json, allows text/event-stream)` for the Accept header lines.

    The most specific matching media range decides (`type/subtype` over `type/*` over `*/*`),
    and a range with `q=0` refuses (RFC 9110 §12.5.1). A missing Accept allows nothing: the spec
    makes clients list their types.
    """
    ranges: list[tuple[str, str, float]] = []
    for line in accept_lines:
        for item in line.split(","):
            media, *parameters = item.split(";")
            main, _, sub = media.strip().lower().partition("/")
            if not main or not sub:
                continue
            quality = 1.0
            for parameter in parameters:
                key, _, value = parameter.partition("=")
                if key.strip().lower() == "q":
                    try:
                        quality = float(value.strip())
                    except ValueError:
                        quality = 1.0
            ranges.append((main, sub, quality))

    def allows(main: str, sub: str) -> bool:
        best_rank, best_quality = -1, 0.0
        for range_main, range_sub, quality in ranges:
            if (range_main, range_sub) == (main, sub):
                rank = 2
            elif (range_main, range_sub) == (main, "*"):
                rank = 1
            elif (range_main, range_sub) == ("*", "*"):
                rank = 0
            else:
                continue
            if rank > best_rank or (rank == best_rank and quality > best_quality):
                best_rank, best_quality = rank, quality
        return best_rank >= 0 and best_quality > 0

    return allows("application", "json"), allows("text", "event-stream")


def is_json_content_type(content_type_lines: Sequence[str]) -> bool:
    if len(content_type_lines) != 1:
        return False
    media = content_type_lines[0].split(";", 1)[0]
    return media.strip().lower() == "application/json"


def nesting_exceeds(value: Any, limit: int) -> bool:
    """Whether ``value`` nests arrays/objects deeper than ``limit`` (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, dict):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def id_of(decoded: Any) -> str | int | None:
    request_id = decoded.get("id") if isinstance(decoded, dict) else None
    return request_id if is_request_id(request_id) else None


def is_request_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def summarize(exc: ValidationError) -> str:
    """One short line for `data.reason`: where the first error is and what it is, never the input."""
    errors = exc.errors(include_url=False, include_input=False, include_context=False)
    if not errors:
        return "invalid params"
    first = errors[0]
    loc = first["loc"][1:] if first["loc"][:1] == ("params",) else first["loc"]
    location = ".".join(str(part) for part in loc) or "params"
    text = f"{location}: {first['msg']}"
    if len(errors) > 1:
        text += f" (and {len(errors) - 1} more)"
    return text if len(text) <= REASON_LIMIT else text[:REASON_LIMIT] + "..."
