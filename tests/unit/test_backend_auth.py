"""Backend credentials without a network: the token cache (single flight, early refresh, negative
cache, 401 invalidation, lifetime caps), secret files, and the config's refusals."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from gateway.backend_auth.secrets import SecretSource
from gateway.backend_auth.tokens import REFRESH_AT, Token, TokenCache, lifetime_of
from gateway.config.load import ConfigError, parse_config
from gateway.config.model import SecretRef
from gateway.errors import BackendUnavailable

KEY = "test-key-0123456789abcdef0123456789abcdef"


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fetcher(clock: Clock, lifetime: float = 100.0) -> tuple[list[int], Any]:
    calls: list[int] = []

    async def fetch() -> Token:
        calls.append(1)
        await asyncio.sleep(0.01)  # deliberate: a fetch takes a moment, so concurrent callers overlap it
        refresh_at, expires = lifetime_of(lifetime, None, clock(), 0.0)
        return Token(f"token-{len(calls)}", refresh_at, expires)

    return calls, fetch


async def test_concurrent_uses_share_one_token_request() -> None:
    clock = Clock()
    cache = TokenCache(failure_cache=5, clock=clock)
    calls, fetch = fetcher(clock)
    tokens = await asyncio.gather(*(cache.get("k", fetch) for _ in range(20)))
    assert set(tokens) == {"token-1"}
    assert len(calls) == 1


async def test_a_token_is_refreshed_on_use_after_80_percent_of_its_lifetime() -> None:
    clock = Clock()
    cache = TokenCache(failure_cache=5, clock=clock)
    calls, fetch = fetcher(clock, lifetime=100)
    assert await cache.get("k", fetch) == "token-1"
    clock.now += 100 * REFRESH_AT - 1
    assert await cache.get("k", fetch) == "token-1"
    clock.now += 2
    assert await cache.get("k", fetch) == "token-2"
    assert len(calls) == 2


async def test_a_failure_is_remembered_and_a_still_valid_token_is_used_meanwhile() -> None:
    clock = Clock()
    cache = TokenCache(failure_cache=5, clock=clock)
    calls, fetch = fetcher(clock, lifetime=100)
    assert await cache.get("k", fetch) == "token-1"
    clock.now += 90  # past the refresh point, still valid

    async def broken() -> Token:
        calls.append(1)
        raise BackendUnavailable("backend_auth", "down")

    assert await cache.get("k", broken) == "token-1"
    assert await cache.get("k", broken) == "token-1"  # not asked again within failure_cache
    assert len(calls) == 2
    clock.now += 20  # expired, and the failure forgotten: asked again, and it fails
    with pytest.raises(BackendUnavailable) as failed:
        await cache.get("k", broken)
    assert failed.value.reason == "backend_auth"
    with pytest.raises(BackendUnavailable):
        await cache.get("k", broken)  # remembered: no third request
    assert len(calls) == 3


async def test_a_401_forgets_only_the_token_that_was_refused() -> None:
    clock = Clock()
    cache = TokenCache(failure_cache=5, clock=clock)
    _, fetch = fetcher(clock)
    await cache.get("k", fetch)
    cache.invalidate("k", "some-older-token")
    assert await cache.get("k", fetch) == "token-1"
    cache.invalidate("k", "token-1")
    assert await cache.get("k", fetch) == "token-2"


def test_a_token_lives_no_longer_than_the_client_token_it_was_exchanged_for() -> None:
    assert lifetime_of(300, None, 10.0, 5000.0) == (10.0 + 240, 310.0)
    assert lifetime_of(300, 5060.0, 10.0, 5000.0) == (10.0 + 48, 70.0)
    assert lifetime_of(None, None, 0.0, 0.0)[1] == 60.0
    assert lifetime_of(300, 4000.0, 10.0, 5000.0) == (10.0, 10.0)  # already expired: never used


async def test_a_secret_file_is_reread_when_it_changes_and_kept_when_it_vanishes(tmp_path: Path) -> None:
    path = tmp_path / "secret"
    path.write_text("one\n")
    source = SecretSource(SecretRef(file=str(path)), where="routes[0].backend.auth.value", reload_interval=0)
    source.check()
    assert await source.value() == "one"
    path.write_text("two")
    assert await source.value() == "two"
    path.unlink()
    assert await source.value() == "two"


def test_a_missing_secret_names_its_config_path() -> None:
    source = SecretSource(
        SecretRef(env="MRTR_TEST_SURELY_UNSET"), where="routes[3].backend.auth.value", reload_interval=0
    )
    with pytest.raises(ValueError, match=r"routes\[3\]\.backend\.auth\.value: environment variable"):
        source.check()


def config_error(backend: dict[str, Any], auth: dict[str, Any] | None = None) -> str:
    route: dict[str, Any] = {"name": "r", "path": "/mcp", "backend": backend}
    if auth is not None:
        route["auth"] = auth
    with pytest.raises(ConfigError) as info:
        parse_config({"state": {"keys": [KEY]}, "routes": [route]}, env={})
    return str(info.value)


JWT = {"jwt": {"issuer": "https://issuer.test", "audience": ["https://gw.test/mcp"], "jwks_url": "https://i.test/j"}}
URL = "http://127.0.0.1:8000/mcp"
TOKEN = {"token_url": "https://auth.test/token", "client_id": "gw", "client_secret": {"env": "X"}}


@pytest.mark.parametrize(
    ("backend", "auth", "expected"),
    [
        ({"url": URL, "auth": {"mode": "passthrough"}}, None, "acknowledge_token_passthrough: true"),
        ({"url": URL, "forward_authorization": True}, JWT, "use backend.auth"),
        ({"url": URL, "auth": {"mode": "token_exchange", **TOKEN}}, None, "token_exchange needs auth.jwt"),
        ({"url": URL, "auth": {"mode": "client_credentials"}}, None, "needs token_url, client_id, client_secret"),
        ({"url": URL, "auth": {"mode": "header"}}, None, "mode header needs `value`"),
        ({"url": URL, "auth": {"mode": "none", "token_url": "https://a.test/t"}}, None, "only for client_credentials"),
        (
            {"url": URL, "headers": {"Authorization": "x"}, "auth": {"mode": "client_credentials", **TOKEN}},
            None,
            "must not set 'authorization'",
        ),
        (
            {"transport": "stdio", "command": ["x"], "auth": {"mode": "header", "value": {"env": "X"}}},
            None,
            "only mode none is allowed when transport is stdio",
        ),
        ({"url": URL, "auth": {"mode": "header", "value": {"env": "X", "file": "/x"}}}, None, "exactly one"),
    ],
    ids=[
        "passthrough-unacknowledged",
        "forward-on-jwt",
        "exchange-without-jwt",
        "token-keys-missing",
        "header-value-missing",
        "stray-token-key",
        "header-conflict",
        "stdio",
        "two-sources",
    ],
)
def test_backend_auth_mistakes_are_refused_naming_the_path(
    backend: dict[str, Any], auth: dict[str, Any] | None, expected: str
) -> None:
    message = config_error(backend, auth)
    assert "routes[0]" in message
    assert expected in message


def test_the_defaults_keep_forwarding_on_routes_without_jwt_and_an_explicit_false_stays_valid() -> None:
    parse_config({"state": {"keys": [KEY]}, "routes": [{"name": "r", "path": "/mcp", "backend": {"url": URL}}]}, env={})
    route = {"name": "r", "path": "/mcp", "backend": {"url": URL, "forward_authorization": False}, "auth": JWT}
    parse_config({"state": {"keys": [KEY]}, "routes": [route]}, env={})
