"""OAuth 2.0 tokens for the backend: one token request (bounded in time and size) and a cache.

The cache keeps each token under a key that is never the token itself (client credentials: a
constant per route; token exchange: a SHA-256 digest of the client's token). A token is used until
80 % of its lifetime, capped by ``expires_in`` and by the client token's ``exp``; the first request
after that refreshes it, with one refresh in flight per key (a lock per key: the others wait for
it and then read the cache), so no background task is needed. A failed request is remembered for
``failure_cache`` seconds (a negative cache: a broken authorization server is not hammered by
every call); meanwhile a still-valid older token is used, or the call fails ``backend_auth``.

The authorization server's error (``error``, ``error_description``, HTTP status) goes to the log,
never to the client: every failure is ``BackendUnavailable(BACKEND_AUTH)``.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TypeVar
from urllib.parse import quote_plus

import aiohttp
import structlog

from gateway.errors import BACKEND_AUTH, BackendUnavailable
from gateway.http_errors import CLIENT_FAILURES

log = structlog.get_logger("gateway.backend_auth")

REFRESH_AT = 0.8
"""Fraction of a token's lifetime after which the next use refreshes it."""
DEFAULT_LIFETIME = 60.0
"""Seconds a token is used when the server gave no ``expires_in``."""
MAX_ENTRIES = 10_000
"""Most tokens (and remembered failures) kept per route."""


@dataclass(frozen=True, slots=True)
class Token:
    value: str
    refresh_at: float
    expires: float
    """Monotonic clock times: refresh on use after ``refresh_at``; never used after ``expires``."""


@dataclass(frozen=True, slots=True)
class TokenEndpoint:
    """Where and how tokens are asked for (one per route)."""

    url: str
    client_id: str
    client_auth: str
    timeout: float
    max_bytes: int
    where: str
    """The route's name, for the log."""


async def request_token(
    http: aiohttp.ClientSession, endpoint: TokenEndpoint, form: dict[str, str], secret: str
) -> tuple[str, float | None]:
    """POST ``form`` to the token endpoint: (access_token, expires_in). Every failure is logged with
    the server's detail and raised as ``backend_auth``."""
    form = dict(form)
    headers = {"Accept": "application/json"}
    if endpoint.client_auth == "client_secret_basic":
        # RFC 6749 §2.3.1: id and secret are form-urlencoded before Basic encoding.
        headers["Authorization"] = aiohttp.encode_basic_auth(quote_plus(endpoint.client_id), quote_plus(secret))
    else:
        form.update(client_id=endpoint.client_id, client_secret=secret)
    grant = form.get("grant_type", "")
    try:
        async with asyncio.timeout(endpoint.timeout):
            async with http.post(endpoint.url, data=form, headers=headers, allow_redirects=False) as resp:
                status = resp.status
                raw = await _read_bounded(resp.content, endpoint.max_bytes)
    except (*CLIENT_FAILURES, ValueError) as exc:
        log.warning("backend_token_failed", route=endpoint.where, grant=grant, detail=type(exc).__name__)
        raise BackendUnavailable(BACKEND_AUTH, f"token endpoint: {type(exc).__name__}") from None
    try:
        body = json.loads(raw)
    except ValueError:
        body = None
    if status != 200 or not isinstance(body, dict):
        error = body.get("error") if isinstance(body, dict) else None
        description = body.get("error_description") if isinstance(body, dict) else None
        log.warning(
            "backend_token_refused",
            route=endpoint.where,
            grant=grant,
            status=status,
            error=str(error)[:100] if error else None,
            description=str(description)[:300] if description else None,
        )
        raise BackendUnavailable(BACKEND_AUTH, f"token endpoint answered HTTP {status}")
    token, token_type, expires_in = body.get("access_token"), body.get("token_type"), body.get("expires_in")
    if not isinstance(token, str) or not token or not isinstance(token_type, str) or token_type.lower() != "bearer":
        log.warning("backend_token_failed", route=endpoint.where, grant=grant, detail="no bearer access_token")
        raise BackendUnavailable(BACKEND_AUTH, "token endpoint: no bearer access_token")
    lifetime = float(expires_in) if isinstance(expires_in, int | float) and expires_in > 0 else None
    return token, lifetime


async def _read_bounded(content: aiohttp.StreamReader, limit: int) -> bytes:
    chunks: list[bytes] = []
    size = 0
    while chunk := await content.read(64 * 1024):
        size += len(chunk)
        if size > limit:
            raise ValueError("token response too large")
        chunks.append(chunk)
    return b"".join(chunks)


def lifetime_of(expires_in: float | None, cap: float | None, now: float, wall_now: float) -> tuple[float, float]:
    """(refresh_at, expires) on the monotonic clock for a token valid ``expires_in`` seconds and never
    past the wall-clock time ``cap`` (the client token's ``exp``)."""
    lifetime = expires_in if expires_in is not None else DEFAULT_LIFETIME
    if cap is not None:
        lifetime = min(lifetime, cap - wall_now)
    lifetime = max(lifetime, 0.0)
    return now + REFRESH_AT * lifetime, now + lifetime


class TokenCache:
    """Tokens by key; one refresh in flight per key; failures remembered briefly."""

    def __init__(self, failure_cache: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._failure_cache = failure_cache
        self._clock = clock
        self._tokens: dict[str, Token] = {}
        self._failed: dict[str, float] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.fetches = 0
        """Token requests made (tests read it)."""

    async def get(self, key: str, fetch: Callable[[], Awaitable[Token]]) -> str:
        token = self._tokens.get(key)
        if token is not None and self._clock() < token.refresh_at:
            return token.value
        lock = self._locks.setdefault(key, asyncio.Lock())
        try:
            async with lock:
                return await self._refresh(key, fetch)
        finally:
            if not lock.locked():
                self._locks.pop(key, None)

    async def _refresh(self, key: str, fetch: Callable[[], Awaitable[Token]]) -> str:
        now = self._clock()
        token = self._tokens.get(key)
        if token is not None and now < token.refresh_at:
            return token.value  # refreshed by the request this one waited for
        usable = token.value if token is not None and now < token.expires else None
        if now < self._failed.get(key, float("-inf")):
            if usable is not None:
                return usable
            raise BackendUnavailable(BACKEND_AUTH, "token endpoint failed recently")
        try:
            self.fetches += 1
            fresh = await fetch()
        except BackendUnavailable:
            _bounded_put(self._failed, key, self._clock() + self._failure_cache)
            if usable is not None:
                return usable
            raise
        self._failed.pop(key, None)
        _bounded_put(self._tokens, key, fresh)
        return fresh.value

    def invalidate(self, key: str, value: str) -> None:
        """The backend refused ``value`` (HTTP 401): forget it, unless it was already replaced."""
        token = self._tokens.get(key)
        if token is not None and token.value == value:
            del self._tokens[key]


V = TypeVar("V")


def _bounded_put(entries: dict[str, V], key: str, value: V) -> None:
    entries.pop(key, None)
    if len(entries) >= MAX_ENTRIES:
        del entries[next(iter(entries))]  # the oldest entry
    entries[key] = value
