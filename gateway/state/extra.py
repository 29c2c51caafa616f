"""The ``extra`` claim of a version-2 requestState: compact JSON, written fast and read back exactly.

orjson writes it (a twentieth of the standard encoder's cost, and every real round carries an
``extra``: the sealing process's boot id and the call's deadline). What orjson refuses (an integer
beyond 64 bits, a lone surrogate) the standard library writes as ASCII JSON, and the plaintext's
method byte says so (:mod:`gateway.state.codec`), so each is read back by the decoder that reads it
exactly: orjson would turn such an integer into a float and refuses a lone surrogate's escape.

Pure: stdlib plus orjson.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, cast

import orjson

from gateway.state.refusal import StateError

__all__ = ["extra_json", "extra_of"]

_ENCODE_STANDARD: Final = json.JSONEncoder(separators=(",", ":"), allow_nan=False).encode
_orjson_dumps: Final = orjson.dumps
_orjson_loads: Final = orjson.loads


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-JSON constant {name}")


_DECODE_STANDARD: Final = json.JSONDecoder(parse_constant=_reject_constant).decode


def extra_of(data: bytes, standard: int) -> dict[str, Any]:
    """The ``extra`` of a version-2 plaintext: a non-empty JSON object, else ``bad_claims``.

    Read with the decoder that reads exactly what was written: orjson for what orjson wrote, the
    standard library for its ASCII JSON (orjson would turn an integer beyond 64 bits into a float
    and refuses a lone surrogate's escape).
    """
    try:
        decoded: object = _DECODE_STANDARD(data.decode("ascii")) if standard else _orjson_loads(data)
    except ValueError:  # JSONDecodeError, orjson.JSONDecodeError, UnicodeDecodeError, NaN
        raise StateError("bad_claims", "extra is not JSON") from None
    except RecursionError:
        raise StateError("bad_claims", "extra is nested too deeply") from None
    if type(decoded) is not dict or not decoded:
        raise StateError("bad_claims", "extra must be a non-empty object")
    if standard:
        # The flag is set only for what orjson refuses, so a state has one plaintext.
        try:
            _orjson_dumps(decoded)
        except TypeError:
            pass
        else:
            raise StateError("bad_claims", "extra orjson writes is flagged as the standard library's")
    return cast("dict[str, Any]", decoded)


def extra_json(extra: Mapping[str, Any]) -> tuple[bytes, bool]:
    """Compact JSON of a non-empty ``extra``, and whether it is the standard library's.

    orjson writes it (a twentieth of the standard encoder's cost); what orjson refuses (an integer
    beyond 64 bits, a lone surrogate, a non-string key) the standard library writes as ASCII JSON.
    Either way it is decoded again, as unseal will, and must come back equal: JSON silently turns a
    tuple into a list, an integer key into a string and (orjson) a NaN into null. ``ValueError``
    for anything that does not survive.
    """
    as_dict = extra if type(extra) is dict else dict(extra)
    try:
        try:
            encoded, standard = _orjson_dumps(as_dict), False
        except TypeError:  # orjson.JSONEncodeError
            encoded, standard = _ENCODE_STANDARD(as_dict).encode("ascii"), True
        back = _DECODE_STANDARD(encoded.decode("ascii")) if standard else _orjson_loads(encoded)
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValueError(f"refusing to seal claims that do not survive JSON: {exc}") from exc
    if back != as_dict:
        raise ValueError(
            "refusing to seal claims that do not survive JSON: extra must hold only JSON-native values "
            "(dict with str keys, list, finite numbers, ...)"
        )
    return encoded, standard
