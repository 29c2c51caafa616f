"""One JSON codec for the hot paths: orjson to encode, the standard library to decode.

Why it exists. Every call the gateway carries is encoded at least once on each side (the request to
the backend, the answer to the client). The standard library's encoder costs 6-18x orjson's (a
4 MiB text result: 15.8 ms vs 2.7 ms here; 2.4 MB of small objects: 173 ms vs 9 ms) and holds the
event loop the whole time, so the gateway encodes through :func:`dumps`.

Decoding stays with the standard library, on purpose. orjson decodes an integer outside 64 bits
(``123456789012345678901234567890``) as a float, a silent change to what a transparent proxy
relays, and rejects lone surrogate escapes the standard library accepts. Telling those documents
apart costs as much as the parse saves: a digit-run scan of 1 MiB took 2.6-32 ms and a walk of the
decoded tree as long as orjson's parse, while orjson decodes a large text result no faster than the
standard library (7.1 vs 6.9 ms for 4 MiB). :func:`loads` is the one strict spelling of the
standard decoder (UTF-8 only, NaN and Infinity refused). The one exception is a client's request
body (:func:`gateway.frontdoor.parsing.decode_nested`): the front door walks it anyway for its
nesting depth, so that walk also spots a float (the only trace of an integer orjson widened) and
hands such a body to :func:`loads`.

Encoding keeps the standard library's output where orjson refuses: integers outside 64 bits,
non-string keys and lone surrogates fall back to ``json.dumps``. Output is compact UTF-8 (no ASCII
escaping), to clients and backends alike, which is what JSON on the wire is (RFC 8259 section
8.1).

Pure: stdlib plus orjson.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["dumps", "loads", "reject_constant"]


def reject_constant(name: str) -> Any:
    """`json.loads` hook: NaN and Infinity are not JSON."""
    raise ValueError(f"non-JSON constant {name}")


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Decode one UTF-8 JSON document.

    Raises ``ValueError`` (``JSONDecodeError``, ``UnicodeDecodeError``, or a NaN/Infinity
    constant) on anything that is not JSON, and ``RecursionError`` on nesting the decoder cannot
    follow.
    """
    text = data if isinstance(data, str) else (data if isinstance(data, bytes) else bytes(data)).decode("utf-8")
    return json.loads(text, parse_constant=reject_constant)


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON of the value ``json.dumps(value, separators=(",", ":"), ensure_ascii=False)`` encodes.

    Float spelling may differ (``1e+16`` vs ``1e16``), never the value. A NaN or infinite float
    (only a backend's own answer can hold one: client input refuses them) is written ``null``,
    where the standard library wrote ``NaN``, which is not JSON.
    """
    try:
        return orjson.dumps(value)
    except TypeError:
        # Integers outside 64 bits, non-string keys, lone surrogates, or a type orjson does not
        # serialize: the standard library's spelling.
        text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
        try:
            return text.encode()
        except UnicodeEncodeError:
            # a lone surrogate has no UTF-8 form; its escape is still JSON
            return json.dumps(value, separators=(",", ":")).encode()
