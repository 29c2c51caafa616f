"""AES-GCM nonces for version-2 requestState tokens: a counter from a random start, per process.

Why not ``os.urandom(12)`` per token. GCM's one hard rule is that a (key, nonce) pair never
repeats: a repeat leaks the authentication key and lets anyone forge tokens. Every replica shares
the sealing key, so the question is how likely two seals, anywhere, ever share a nonce. With 96
random bits per seal that is about ``Q**2 / 2**97`` for ``Q`` seals under one key (NIST SP 800-38D
caps random nonces at 2**32 seals per key for this reason), and each draw is a system call, about
a tenth of a seal's cost.

The construction here. Each process draws one random 96-bit starting point and then counts up by
one, modulo 2**96, per seal: nonce ``i`` is ``(start + i) mod 2**96``, big-endian. Within a process
no nonce repeats before 2**96 seals. Two processes collide only if their runs of nonces overlap,
and for independent uniform starts runs of ``q_a`` and ``q_b`` nonces overlap with probability at
most ``(q_a + q_b) / 2**96``. Summed over every pair, ``P`` processes (replicas, restarts and forks
over the key's whole life) sealing ``Q`` tokens in all collide with probability at most
``P * Q / 2**96``: for a million processes and 2**50 seals, under 2**-26, where random nonces are
past the birthday bound. It is the counter of SP 800-38D section 8.2.1 whose fixed field, instead
of being assigned per device, is drawn at random with the counter, so no replica needs an id.

What keeps the start fresh. A start is drawn at import (so on every process start) and again in
the child after every ``os.fork`` (:func:`os.register_at_fork`), so a pre-forking server's workers
never share a run. What it cannot see: a process whose memory is cloned while running (restoring
one VM or CRIU snapshot into several live copies) would repeat its run in each copy; such a
deployment must restart the gateway in each copy rather than resume it (docs/SECURITY.md).
``next`` on an :class:`itertools.count` is one C call, atomic under the GIL, so threads sharing a
ring never draw the same value.

Pure: stdlib only.
"""

from __future__ import annotations

import itertools
import os
from typing import Final

__all__ = ["NONCE_BYTES", "next_nonce"]

NONCE_BYTES: Final = 12
_MODULUS: Final = 1 << (8 * NONCE_BYTES)
_MASK: Final = _MODULUS - 1

_run: Final[list[itertools.count[int]]] = [itertools.count(int.from_bytes(os.urandom(NONCE_BYTES), "big"))]
"""The current run, the one item of a list so that :func:`restart` replaces it in place."""


def next_nonce() -> bytes:
    """The next 12-byte nonce of this process's run (module docstring)."""
    return (next(_run[0]) & _MASK).to_bytes(NONCE_BYTES, "big")


def restart(start: int | None = None) -> None:
    """Begin a new run at ``start`` (a fresh random point when ``None``, as after a fork).

    Only tests pass ``start``, to reach the wrap from ``2**96 - 1`` to ``0``.
    """
    first = int.from_bytes(os.urandom(NONCE_BYTES), "big") if start is None else start % _MODULUS
    _run[0] = itertools.count(first)


os.register_at_fork(after_in_child=restart)
