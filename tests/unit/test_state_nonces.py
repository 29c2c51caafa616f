"""The AES-GCM nonces of version-2 tokens: a per-process counter from a random start, never a repeat.

What :func:`gateway.state.codec.next_nonce` promises: 12 bytes, consecutive within a run, no repeat within a
run (including across the wrap from ``2**96 - 1`` to ``0``, across threads and across key rings),
a fresh random start on every restart and in the child of every fork, and that the codec seals
version-2 tokens with it (version 1 keeps drawing ``os.urandom``, as the release it stands in for).
"""

from __future__ import annotations

import itertools
import os
import select
import threading
from collections.abc import Iterator

import pytest
from state_oracle import NOW, OLD, make_claims

from gateway.keyset import b64url_decode_strict
from gateway.state import codec
from gateway.state.codec import KeyRing

LAST = 2**96 - 1


@pytest.fixture(autouse=True)
def fresh_run() -> Iterator[None]:
    """Every test leaves the process on a fresh random run, as after a restart."""
    yield
    codec.restart_nonces()


def as_int(nonce: bytes) -> int:
    return int.from_bytes(nonce, "big")


def nonce_of(token: str) -> bytes:
    """The nonce of a token: bytes 4..16 after the key id."""
    return b64url_decode_strict(token[3:])[4:16]


def test_a_run_counts_up_by_one_in_twelve_bytes_without_a_repeat() -> None:
    drawn = [codec.next_nonce() for _ in range(100_000)]
    assert {len(nonce) for nonce in drawn} == {12}
    assert len(set(drawn)) == len(drawn)
    first = as_int(drawn[0])
    assert [as_int(nonce) for nonce in drawn] == [(first + i) % 2**96 for i in range(len(drawn))]


def test_the_run_wraps_from_the_last_nonce_to_zero_without_a_repeat() -> None:
    codec.restart_nonces(LAST - 1)
    drawn = [codec.next_nonce() for _ in range(4)]
    assert drawn == [
        b"\xff" * 11 + b"\xfe",
        b"\xff" * 12,
        bytes(12),
        bytes(11) + b"\x01",
    ]


def test_a_restart_draws_a_fresh_random_start() -> None:
    starts = set()
    for _ in range(20):
        codec.restart_nonces()
        starts.add(as_int(codec.next_nonce()))
    # 20 uniform 96-bit draws: equal or adjacent only with probability ~2**-88.
    ordered = sorted(starts)
    assert len(ordered) == 20
    assert all(b - a > 1 for a, b in itertools.pairwise(ordered))


def test_threads_sharing_the_run_never_draw_the_same_nonce() -> None:
    drawn: list[list[bytes]] = [[] for _ in range(4)]

    def draw(into: list[bytes]) -> None:
        for _ in range(20_000):
            into.append(codec.next_nonce())

    threads = [threading.Thread(target=draw, args=(into,)) for into in drawn]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
        assert not thread.is_alive()
    every = [nonce for into in drawn for nonce in into]
    assert len(set(every)) == len(every) == 80_000


@pytest.mark.skipif(not hasattr(os, "fork"), reason="os.fork is POSIX-only")
def test_a_forked_child_starts_a_run_of_its_own() -> None:
    """Without the fork hook the child would continue the parent's run: its first nonce would be
    the one the parent draws next, and both would seal with it."""
    codec.next_nonce()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report its first nonce and leave at once (no pytest teardown)
        try:
            os.write(write_end, codec.next_nonce())
        finally:
            os._exit(0)
    os.close(write_end)
    try:
        parent_next = codec.next_nonce()
        ready, _, _ = select.select([read_end], [], [], 30)
        assert ready, "the forked child did not report its nonce"
        child_first = os.read(read_end, 64)
    finally:
        os.close(read_end)
        os.waitpid(pid, 0)
    assert len(child_first) == 12
    assert child_first != parent_next
    # A fresh random start: nowhere near the parent's run.
    assert abs(as_int(child_first) - as_int(parent_next)) > 2**32


def test_v2_seals_draw_consecutive_nonces_of_the_run_across_rings() -> None:
    first, second = KeyRing([OLD]), KeyRing([OLD])
    tokens = [first.seal(make_claims()), second.seal(make_claims()), first.seal(make_claims())]
    drawn = [as_int(nonce_of(token)) for token in tokens]
    assert drawn == [drawn[0], (drawn[0] + 1) % 2**96, (drawn[0] + 2) % 2**96]
    assert all(ring.unseal(token, now=NOW) == make_claims() for ring in (first, second) for token in tokens)


def test_v2_seals_go_on_across_the_wrap() -> None:
    ring = KeyRing([OLD])
    codec.restart_nonces(LAST)
    tokens = [ring.seal(make_claims()) for _ in range(2)]
    assert [nonce_of(token) for token in tokens] == [b"\xff" * 12, bytes(12)]
    assert all(ring.unseal(token, now=NOW) == make_claims() for token in tokens)


def test_v1_seals_keep_drawing_random_nonces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Version 1 stands in for the release that drew ``os.urandom(12)`` per token: it still does."""
    calls: list[int] = []

    def urandom(n: int) -> bytes:
        calls.append(n)
        return bytes(range(n))

    monkeypatch.setattr(os, "urandom", urandom)
    token = KeyRing([OLD], seal_version=1).seal(make_claims())
    assert calls == [12]
    assert nonce_of(token) == bytes(range(12))
