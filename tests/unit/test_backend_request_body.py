"""How a backend request body is handed to aiohttp: whole up to WHOLE_BODY_BYTES (one write, no
warning), in pieces beyond it (the event loop gets a turn between them)."""

from __future__ import annotations

import io
import warnings

import aiohttp.payload

from gateway.legacy.http_base import WHOLE_BODY_BYTES, _request_body


def test_a_small_body_is_the_bytes_themselves() -> None:
    body = b'{"jsonrpc":"2.0"}'
    assert _request_body(body) is body


def test_a_body_over_a_mebibyte_is_still_sent_whole_and_warns_nobody() -> None:
    body = b"x" * (aiohttp.payload.TOO_LARGE_BYTES_BODY + 250)  # a 1 MiB argument and its envelope
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        before = list(warnings.filters)
        sent = _request_body(body)
        assert warnings.filters == before  # the silencing did not outlive the call
    assert isinstance(sent, aiohttp.payload.BytesPayload)
    assert sent.size == len(body)
    # outside the one payload, aiohttp's own warning still fires
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        aiohttp.payload.BytesPayload(body)
    assert any(issubclass(w.category, ResourceWarning) for w in seen)


def test_a_body_past_the_whole_limit_goes_in_pieces() -> None:
    body = b"x" * (WHOLE_BODY_BYTES + 1)
    sent = _request_body(body)
    assert isinstance(sent, io.BytesIO)
    assert sent.getvalue() == body
