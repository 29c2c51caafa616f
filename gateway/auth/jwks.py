"""The issuer's JWKS, fetched over HTTP and cached, with every fetch bounded.

An unauthenticated client chooses the ``kid`` of the tokens it sends, so "refetch on an unknown
kid" must not become "one outbound request per hostile request":

* one fetch at a time (concurrent callers wait for it instead of starting their own);
* at most one fetch every ``jwks_min_refresh`` seconds, whatever the tokens say; in between, an
  unknown kid is simply unknown;
* each fetch has a total timeout, no redirects, and a size bound on the body read;
* a failed fetch keeps the last good key set (a key-server outage must not log every user out),
  and the failure goes to the log, never to the client.

Keys are refreshed in the background of requests only: nothing is fetched until a token needs it.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable

import aiohttp
import structlog

from gateway.auth.verification_keys import BadKey, VerificationKey, parse_jwks
from gateway.http_errors import CLIENT_FAILURES

log = structlog.get_logger("gateway.auth")


class JwksCache:
    """``http`` returns the shared client session (it exists only once the app has started)."""

    def __init__(
        self,
        http: Callable[[], aiohttp.ClientSession],
        url: str,
        *,
        ttl: float,
        min_refresh: float,
        timeout: float,
        max_bytes: int,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._http = http
        self._url = url
        self._ttl = ttl
        self._min_refresh = min_refresh
        self._timeout = timeout
        self._max_bytes = max_bytes
        self._clock = clock
        self._keys: list[VerificationKey] = []
        self._fetched_at: float | None = None
        self._attempted_at: float | None = None
        self._lock = asyncio.Lock()
        self.fetches = 0
        """Fetch attempts so far (tests and logs read it)."""

    def _fresh(self, now: float) -> bool:
        return self._fetched_at is not None and now - self._fetched_at < self._ttl

    def _may_fetch(self, now: float) -> bool:
        return self._attempted_at is None or now - self._attempted_at >= self._min_refresh

    async def keys_for(self, kid: str | None) -> list[VerificationKey]:
        """Keys that may carry ``kid`` (every key when the token names none)."""
        if not self._fresh(self._clock()) or not self._matching(kid):
            async with self._lock:
                now = self._clock()
                # Re-check under the lock: a concurrent caller may have just refreshed.
                if (not self._fresh(now) or not self._matching(kid)) and self._may_fetch(now):
                    await self._refresh(now)
        return self._matching(kid)

    def _matching(self, kid: str | None) -> list[VerificationKey]:
        if kid is None:
            return list(self._keys)
        return [k for k in self._keys if k.kid == kid]

    async def _refresh(self, now: float) -> None:
        self._attempted_at = now
        self.fetches += 1
        try:
            keys, skipped = parse_jwks(json.loads(await self._fetch()))
        except (*CLIENT_FAILURES, ValueError, BadKey) as exc:
            # Keep the last good set; the reason is for operators only.
            log.warning("jwks_fetch_failed", url=self._url, error=type(exc).__name__, detail=str(exc)[:200])
            return
        if skipped:
            log.info("jwks_keys_skipped", url=self._url, skipped=skipped)
        self._keys = keys
        self._fetched_at = self._clock()

    async def _fetch(self) -> bytes:
        timeout = aiohttp.ClientTimeout(total=self._timeout)
        async with self._http().get(
            self._url, timeout=timeout, allow_redirects=False, headers={"Accept": "application/json"}
        ) as response:
            if response.status != 200:
                raise ValueError(f"HTTP {response.status}")
            if (response.content_length or 0) > self._max_bytes:
                raise ValueError("JWKS larger than jwks_max_bytes")
            body = bytearray()
            async for chunk in response.content.iter_chunked(64 * 1024):
                body += chunk
                if len(body) > self._max_bytes:
                    raise ValueError("JWKS larger than jwks_max_bytes")
            return bytes(body)
