"""A secret from an environment variable or a file, the file re-read when it changes.

The file is the usual home of a secret on Kubernetes (a mounted Secret), which is updated in place
by swapping a symlink. As with the requestState key file (:mod:`gateway.key_reload`) the
*content* is compared, not the mtime. The file is re-read lazily, on use, at most every
``reload_interval`` seconds, and at once when the backend refused the value (HTTP 401), so a rotated
secret is picked up without a restart and without a background task. A file that cannot be read
keeps the last good value (logged, never the value itself).
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable
from pathlib import Path

import structlog

from gateway.config.backend_auth import SecretRef
from gateway.errors import BACKEND_AUTH, BackendUnavailable

log = structlog.get_logger("gateway.backend_auth")


class SecretSource:
    def __init__(
        self, ref: SecretRef, *, where: str, reload_interval: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._ref = ref
        self._where = where
        """The config path that named it (for errors and logs), e.g. ``routes[0].backend.auth.value``."""
        self._interval = reload_interval
        self._clock = clock
        self._value: str | None = None
        self._read_at = float("-inf")

    def check(self) -> None:
        """At start: refuse a missing variable or an unreadable or empty file (a config error)."""
        value = self._read_now()
        if not value:
            source = f"environment variable {self._ref.env}" if self._ref.env else f"file {self._ref.file}"
            raise ValueError(f"{self._where}: {source} is missing or empty")
        self._value, self._read_at = value, self._clock()

    async def value(self, *, fresh: bool = False) -> str:
        """The secret; a file is re-read when ``reload_interval`` has passed or ``fresh`` is asked."""
        due = self._ref.file is not None and (fresh or self._clock() - self._read_at >= self._interval)
        if due or self._value is None:
            value = await asyncio.to_thread(self._read_now)
            self._read_at = self._clock()
            if value and value != self._value:
                if self._value is not None:
                    log.info("backend_secret_reloaded", source=self._where)
                self._value = value
            elif not value:
                log.error("backend_secret_reload_failed", source=self._where, keeping=self._value is not None)
        if not self._value:
            raise BackendUnavailable(BACKEND_AUTH, f"{self._where}: no secret")
        return self._value

    def _read_now(self) -> str | None:
        if self._ref.env is not None:
            return os.environ.get(self._ref.env) or None
        assert self._ref.file is not None
        try:
            return Path(self._ref.file).read_text(encoding="utf-8").strip() or None
        except (OSError, UnicodeDecodeError):
            return None
