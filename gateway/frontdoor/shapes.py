"""Rung 15 of the ladder, the params shape: the schema's own model decides, a fast lane proves.

The shape of a request's params is whatever the 2026-07-28 schema's pydantic model for its method
accepts (:func:`mcp_types.methods.validate_client_request`). Building that model costs more than
the rest of the ladder together for a ``tools/call``: the envelope's capabilities, client info and
every argument pass through nested models, on every request, although a client sends the same
``_meta`` on each of its requests and a tool's arguments are an object of anything.

So :func:`shape_is_known_valid` answers one question cheaply: *is this shape certainly valid?*
``True`` only when it can prove the model would accept; ``False`` whenever it cannot tell, and then
the caller runs the model, whose verdict and error text are the only ones a client ever hears. A
refusal therefore never comes from here, and the refusals stay exactly the model's.

What it can prove, for ``tools/call`` (``CallToolRequestParams``: unknown keys ignored):

* ``name`` is a string; ``arguments`` absent, null or an object (JSON object keys are strings);
  ``requestState`` absent, null or a string;
* ``_meta`` is an envelope the model already accepted (:class:`EnvelopeVerdicts`), recognized by
  its canonical encoding: keys sorted, the value spelled exactly (``1`` and ``1.0`` and ``true``
  differ), so two envelopes with one encoding are the same JSON value and get the same verdict.
  The model validates ``_meta`` on its own (no validator of the params looks at it together with
  a sibling), so its verdict can be kept apart from the rest of the params.

Every other method, or an envelope that cannot be encoded canonically (an integer beyond 64 bits, a
lone surrogate), goes to the model. The differential test (``tests/unit/test_shapes.py``) holds the
lane to the model on random and hostile shapes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson
from mcp_types.methods import CLIENT_REQUESTS
from pydantic import BaseModel, ValidationError

__all__ = ["EnvelopeVerdicts", "shape_is_known_valid"]

ENVELOPE_KEY_BYTES: Final = 2048
"""Longest canonical ``_meta`` encoding remembered (a real envelope is a few hundred bytes)."""
ENVELOPES_REMEMBERED: Final = 256
"""Distinct valid envelopes remembered per protocol version (oldest forgotten first)."""


def _envelope_model(version: str) -> type[BaseModel] | None:
    """The model ``tools/call`` validates its ``_meta`` with at ``version`` (None if there is none)."""
    key: tuple[str, str] = ("tools/call", version)
    request = CLIENT_REQUESTS.get(key)
    field = request.model_fields.get("params") if request is not None else None
    params = field.annotation if field is not None else None
    if not (isinstance(params, type) and issubclass(params, BaseModel)):
        return None
    meta = params.model_fields.get("meta")
    model = meta.annotation if meta is not None else None
    return model if isinstance(model, type) and issubclass(model, BaseModel) else None


class EnvelopeVerdicts:
    """Envelopes (``_meta`` objects) the schema's model accepted, by canonical encoding, bounded.

    Only acceptances are kept: a refused envelope is refused again by the model itself, with its
    own message, and a client cycling refused envelopes cannot push accepted ones out.
    """

    def __init__(self, model: type[BaseModel], limit: int = ENVELOPES_REMEMBERED) -> None:
        self._model = model
        self._limit = limit
        self._accepted: dict[bytes, None] = {}

    def accepts(self, meta: Any) -> bool:
        """Whether the model accepts ``meta``; False also when it cannot be encoded canonically."""
        if type(meta) is not dict:
            return False
        try:
            key = orjson.dumps(meta, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # orjson.JSONEncodeError: big integers, lone surrogates
            return False
        if key in self._accepted:
            return True
        try:
            self._model.model_validate(meta, by_name=False)
        except ValidationError:
            return False
        if len(key) <= ENVELOPE_KEY_BYTES:
            if len(self._accepted) >= self._limit:
                del self._accepted[next(iter(self._accepted))]
            self._accepted[key] = None
        return True


_VERDICTS: Final[dict[str, EnvelopeVerdicts]] = {}


def _verdicts(version: str) -> EnvelopeVerdicts | None:
    verdicts = _VERDICTS.get(version)
    if verdicts is None:
        model = _envelope_model(version)
        if model is None:
            return None
        verdicts = _VERDICTS[version] = EnvelopeVerdicts(model)
    return verdicts


def shape_is_known_valid(method: str, version: str, shape: Mapping[str, Any]) -> bool:
    """True only when the schema's model for ``method`` at ``version`` certainly accepts ``shape``
    (a request's params without ``inputResponses``); False when the model must decide."""
    if method != "tools/call":
        return False
    if type(shape.get("name")) is not str:
        return False
    arguments = shape.get("arguments")
    if arguments is not None and (type(arguments) is not dict or not all(type(k) is str for k in arguments)):
        return False
    request_state = shape.get("requestState")
    if request_state is not None and type(request_state) is not str:
        return False
    verdicts = _verdicts(version)
    return verdicts is not None and verdicts.accepts(shape.get("_meta"))
