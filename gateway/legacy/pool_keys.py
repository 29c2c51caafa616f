"""The capabilities half of a backend session pool's key, remembered per shape.

A pool keys sessions by the client's normalized capabilities in canonical JSON
(:func:`~gateway.translate.capabilities.cache_key`). Every call computes that key, and encoding it
costs more than the rest of a lease; yet a call's normalized capabilities take one of few small
shapes. So the key is remembered by the dict's ``repr`` (exact: equal reprs are equal dicts; two
insertion orders are merely two entries), in a table that is emptied when full.
"""

from __future__ import annotations

from gateway.legacy.session import JsonObj
from gateway.translate import capabilities as caps

MAX_SHAPES = 64
"""Distinct shapes remembered before the table is emptied (bounded memory)."""

_keys: dict[str, str] = {}


def caps_key(normalized: JsonObj) -> str:
    """:func:`~gateway.translate.capabilities.cache_key` of ``normalized``, remembered."""
    shape = repr(normalized)
    key = _keys.get(shape)
    if key is None:
        if len(_keys) >= MAX_SHAPES:
            _keys.clear()
        key = _keys[shape] = caps.cache_key(normalized)
    return key
