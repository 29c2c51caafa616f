"""Parsing the front-door ladder needs, apart from its rungs: header lines folded by name, the
Accept negotiation (RFC 9110 §12.5.1), the JSON content type, JSON-RPC ids, nesting depth, and a
short summary of a schema validation error, and the decoding of a request body. Pure: no aiohttp."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from functools import lru_cache
from types import MappingProxyType
from typing import Any, Final

import orjson
from pydantic import ValidationError

from gateway import fastjson

REASON_LIMIT: Final = 200
"""Longest ``data.reason`` a schema validation summary keeps."""
ACCEPT_MEMO_CHARS: Final = 256
"""Accept headers up to this length have their verdict remembered (:func:`accepts`)."""
TASK_METHODS: Final = frozenset({"tasks/get", "tasks/update", "tasks/cancel"})
"""The tasks extension's methods (``io.modelcontextprotocol/tasks``): ``tasks/result`` and ``tasks/list``
were removed from it and stay unknown to the ladder (-32601). Whether a route offers them is decided
after the ladder (:mod:`gateway.frontdoor.modern`)."""
NAME_IF_PRESENT: Final = MappingProxyType(dict.fromkeys(TASK_METHODS, "taskId"))
"""Methods whose ``Mcp-Name``, when sent, must equal a body value; a missing one passes the ladder
(docs/conformance.md A1; a route's ``tasks.require_name_header`` refuses it after the ladder)."""


def fold(headers: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
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

    A client sends the same Accept on every request, so the verdict for a short one is remembered
    (a bounded memo: a long or ever-changing header is parsed each time, never stored).
    """
    lines = tuple(accept_lines)
    if sum(len(line) for line in lines) <= ACCEPT_MEMO_CHARS:
        return _accepts_remembered(lines)
    return _accepts(lines)


@lru_cache(maxsize=128)
def _accepts_remembered(accept_lines: tuple[str, ...]) -> tuple[bool, bool]:
    return _accepts(accept_lines)


def _accepts(accept_lines: Sequence[str]) -> tuple[bool, bool]:
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
    return _scan(value, limit, floats=False) is _TOO_DEEP


_CLEAN: Final = 0
_TOO_DEEP: Final = 1
_FLOAT: Final = 2


def _scan(value: Any, limit: int, *, floats: bool) -> int:
    """One walk of a decoded document: :data:`_TOO_DEEP` at the first array/object nested deeper
    than ``limit``, :data:`_FLOAT` (when ``floats``) at the first float, else :data:`_CLEAN`.
    Only what a JSON decoder builds is expected: dict, list, str, int, float, bool, None."""
    if type(value) is not dict and type(value) is not list:
        return _FLOAT if floats and type(value) is float else _CLEAN
    stack: list[tuple[Any, int]] = [(value, 1)]
    push, pop = stack.append, stack.pop
    while stack:
        node, depth = pop()
        if depth > limit:
            return _TOO_DEEP
        for child in node.values() if type(node) is dict else node:
            kind = type(child)
            if kind is dict or kind is list:
                push((child, depth + 1))
            elif floats and kind is float:
                return _FLOAT
    return _CLEAN


def decode_nested(body: bytes, limit: int) -> tuple[Any, bool]:
    """``(fastjson.loads(body), nesting_exceeds(that, limit))``, the same values and the same errors,
    mostly for less: orjson parses, and the standard library's answer is taken where the two could
    differ.

    orjson parses a request body in about half the standard library's time (a 1 MiB argument: the
    largest single cost of carrying it), but it is not the gateway's decoder (see
    :mod:`gateway.fastjson`): it refuses what the standard library accepts (lone surrogate
    escapes, ``1e400``) and reads an integer beyond 64 bits as a float. So a body orjson refuses,
    and a body whose tree holds any float (which may have been such an integer) or nests too deep
    (a refusal, whose id must be the standard library's), is decoded again by the standard
    library, which then decides everything. What orjson accepts without a float is decoded alike
    by both. The walk that finds floats is the nesting check's own.
    """
    try:
        decoded = orjson.loads(body)
    except orjson.JSONDecodeError:
        decoded = fastjson.loads(body)
        return decoded, nesting_exceeds(decoded, limit)
    if _scan(decoded, limit, floats=True) is _CLEAN:
        return decoded, False
    decoded = fastjson.loads(body)
    return decoded, nesting_exceeds(decoded, limit)


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
