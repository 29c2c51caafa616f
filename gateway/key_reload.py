"""Re-read the requestState keys from ``state.keys_file`` while the gateway runs.

Why. Keys live in a mounted Secret so that they stay put across upgrades and every replica shares
them. Rotating them must not need a restart: a restart ends every held call of the pod. So the
gateway re-reads the file and replaces its keys in place, following the rotation recipe in
:mod:`gateway.state.codec` (``[old, new]`` everywhere, then ``[new, old]``, then ``[new]``).

When. On :meth:`KeyFileWatcher.request` (the ``serve`` command wires SIGHUP to it) and every
``state.reload_interval`` seconds. The file's *content* is compared, not its mtime: Kubernetes
updates a Secret volume by swapping a symlink, and a rewrite within one mtime tick would be missed.

What changes. The new secrets replace the gateway's one :class:`~gateway.keyset.KeySet` in one
synchronous step, and every token format (requestState, principal tags, old clients' session ids,
cursors, the replica hop) asks it for its keys, so no request sees half a rotation. Holds and in-flight
calls are not touched: they keep no key, only the state the client echoes, which the old secret
(still in the ring during a rotation) unseals; new states are sealed with the new first secret.

Failure. A file that cannot be read or does not validate keeps the current keys; the reason is
logged (``state_keys_reload_failed``, never key material) and the next trigger tries again.

The task is owned by the application's cleanup context (see :mod:`gateway.app`). Not in
:mod:`gateway.state`, which is pure: this reads a file.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence
from pathlib import Path

import structlog

from gateway.config.load import ConfigError, read_key_file

log = structlog.get_logger("gateway.state")

Apply = Callable[[Sequence[bytes]], None]


class KeyFileWatcher:
    def __init__(self, path: Path, current: Sequence[bytes], apply: Apply, describe: Callable[[], str]) -> None:
        self._path = path
        self._current = tuple(current)
        self._apply = apply
        self._describe = describe
        self._wake = asyncio.Event()
        self._changed = asyncio.Condition()
        self.generation = 0
        """How many times a changed key list was applied."""

    def request(self) -> None:
        """Re-read the file soon (signal handlers call this; it never blocks)."""
        self._wake.set()

    async def check(self) -> bool:
        """Re-read the file now; apply it if its keys changed. Whether they were applied."""
        try:
            secrets = await asyncio.to_thread(read_key_file, self._path)
        except ConfigError as exc:
            log.error("state_keys_reload_failed", reason=str(exc), keeping=self._describe())
            return False
        if secrets == self._current:
            return False
        try:
            self._apply(secrets)
        except (TypeError, ValueError) as exc:  # deny-on-error: KeySet refused them; keep the old keys
            log.error("state_keys_reload_failed", reason=str(exc), keeping=self._describe())
            return False
        self._current = secrets
        self.generation += 1
        log.info("state_keys_reloaded", keys=self._describe(), path=str(self._path))
        async with self._changed:
            self._changed.notify_all()
        return True

    async def wait_generation(self, generation: int) -> None:
        """Return once at least ``generation`` reloads were applied (callers bound the wait)."""
        async with self._changed:
            await self._changed.wait_for(lambda: self.generation >= generation)

    async def run(self, interval: float) -> None:
        """Check on every :meth:`request`, and every ``interval`` seconds unless it is 0."""
        while True:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(interval or None):
                    await self._wake.wait()
            self._wake.clear()
            await self.check()
