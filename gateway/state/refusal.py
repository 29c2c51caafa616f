"""How the requestState codec refuses a token: one exception, a closed set of reasons, one wire text.

Its own module so that the codec and the readers of each plaintext version raise the same error.
Pure: no I/O.
"""

from __future__ import annotations

from typing import Final, Literal

__all__ = ["WIRE_MESSAGE", "StateError", "StateReason"]

StateReason = Literal[
    "malformed",
    "bad_version",
    "unknown_key",
    "decrypt_failed",
    "bad_claims",
    "expired",
    "not_yet_valid",
    "audience",
    "method",
    "target",
    "arguments",
    "principal",
]
"""Why a state was refused. A closed set, so it is safe as a metric label."""

WIRE_MESSAGE: Final = "Invalid or expired requestState"
"""The only text a client ever sees for any :class:`StateError`."""


class StateError(Exception):
    """A ``requestState`` was refused.

    ``reason`` is for logs and metrics; ``detail`` (possibly empty) is extra log-only context and
    never contains token bytes or secrets. Neither goes to the client: answer with
    :data:`WIRE_MESSAGE`.
    """

    reason: StateReason
    detail: str

    def __init__(self, reason: StateReason, detail: str = "") -> None:
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason
        self.detail = detail
