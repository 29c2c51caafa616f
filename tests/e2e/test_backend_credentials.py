"""Backend credentials (routes[].backend.auth) against a real authorization server.

The authorization server is npm oidc-provider (tests/authz/server.mjs, see tests/authz_server.py).
The backend is the in-process fake legacy server behind a small *guarded* proxy that acts as a
resource server: it records every backend HTTP request's ``Authorization``, verifies the bearer JWT
(signature from the authorization server's JWKS, ``aud`` = the backend's URL, ``exp``) and answers
401 to anything else, so every request the gateway makes is checked, not only the tool's answer.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import jwt
import pytest
from aiohttp import web
from authz_server import CLIENT_ID, CLIENT_SECRET, AuthorizationServer, authorization_server, claims_of
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from fake_backend import FakeBackend
from harness import BareClient, accept, listen_request, relay, route, running_gateway, serving

from gateway.backend_auth import credentials
from gateway.config.load import ConfigError

Backend = tuple[FakeBackend, str]

ISSUER = "https://issuer.test"
AUDIENCE = "https://gateway.test/mcp"
CLIENT_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
CLIENT_PEM = (
    CLIENT_KEY.public_key()
    .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    .decode()
)
SECRET_ENV = "MRTR_TEST_BACKEND_CLIENT_SECRET"
LEEWAY = 1
"""Seconds of skew the guard allows: the server's exp is whole seconds, the gateway's clock is not."""


def client_token(sub: str = "alice", exp: float = 300) -> str:
    now = time.time()
    claims = {
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": sub,
        "iat": int(now),
        "exp": int(now + exp),
        "jti": uuid.uuid4().hex,
    }
    return jwt.encode(claims, CLIENT_KEY, algorithm="RS256")


@dataclass
class Seen:
    method: str
    authorization: str | None
    valid: bool


@dataclass
class Guard:
    """The guarded backend: its URL (the resource), what it saw, and how it behaves."""

    url: str = ""
    keys: jwt.PyJWKSet | None = None
    issuer: str = ""
    seen: list[Seen] = field(default_factory=list)
    refuse_next: int = 0
    """Answer 401 to this many more requests, whatever they carry (a revoked token)."""

    def check(self, authorization: str | None) -> bool:
        if self.keys is None:
            return True  # modes without tokens: recorded, not verified
        scheme, _, token = (authorization or "").partition(" ")
        if scheme != "Bearer":
            return False
        try:
            kid = jwt.get_unverified_header(token).get("kid")
            key = next(k for k in self.keys.keys if k.key_id == kid)
            jwt.decode(token, key.key, algorithms=["RS256"], audience=self.url, issuer=self.issuer, leeway=LEEWAY)
        except (jwt.PyJWTError, StopIteration):
            return False
        return True


@asynccontextmanager
async def guarded(backend_url: str) -> AsyncIterator[Guard]:
    guard = Guard()

    async def forward(request: web.Request) -> web.StreamResponse:
        authorization = request.headers.get("Authorization")
        valid = guard.check(authorization)
        body = await request.read()
        method = json.loads(body).get("method", "answer") if body else request.method
        guard.seen.append(Seen(method if isinstance(method, str) else "batch", authorization, valid))
        if not valid or guard.refuse_next > 0:
            guard.refuse_next = max(guard.refuse_next - 1, 0)
            return web.Response(status=401, headers={"WWW-Authenticate": 'Bearer error="invalid_token"'})
        return await relay(request, backend_url)  # Authorization included: the fake backend's whoami tells it

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", forward)
    async with serving(app) as base:
        guard.url = base + "/mcp"
        yield guard


@asynccontextmanager
async def token_world(backend_url: str, token_ttl: int = 300) -> AsyncIterator[tuple[Guard, AuthorizationServer]]:
    """The guarded backend and an authorization server whose tokens are for it."""
    async with (
        guarded(backend_url) as guard,
        authorization_server(
            guard.url,
            subject_public_pem=CLIENT_PEM,
            subject_issuer=ISSUER,
            subject_audience=AUDIENCE,
            token_ttl=token_ttl,
        ) as authz,
    ):
        guard.keys, guard.issuer = await authz.jwks(), authz.url
        yield guard, authz


def jwt_route(backend_url: str, **backend_auth: Any) -> dict[str, Any]:
    auth = {"jwt": {"issuer": ISSUER, "audience": [AUDIENCE], "keys": [CLIENT_PEM], "leeway": 5}}
    backend: dict[str, Any] = {"auth": backend_auth} if backend_auth else {}
    return route("demo", "/mcp", backend_url, auth=auth, backend=backend)


def token_auth(mode: str, authz: AuthorizationServer, **extra: Any) -> dict[str, Any]:
    return {
        "mode": mode,
        "token_url": authz.token_url,
        "client_id": CLIENT_ID,
        "client_secret": {"env": SECRET_ENV},
        **extra,
    }


@pytest.fixture(autouse=True)
def _client_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(SECRET_ENV, CLIENT_SECRET)


class TokenClock:
    """The gateway's clock of backend token lifetimes (``gateway.backend_auth.credentials.clock``),
    standing still until the test moves it on."""

    def __init__(self) -> None:
        self.now = time.monotonic()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def token_clock(monkeypatch: pytest.MonkeyPatch) -> TokenClock:
    """The clock of the gateways the test starts (set before they start: a route takes it when built)."""
    clock = TokenClock()
    monkeypatch.setattr(credentials, "clock", clock)
    return clock


async def two_rounds(client: BareClient) -> str:
    first = await client.call_tool("ask_two")
    assert first.result["resultType"] == "input_required", first.body
    (key,) = first.result["inputRequests"]
    second = await client.retry("ask_two", first.result["requestState"], {key: accept(name="Ada")})
    assert second.result["resultType"] == "input_required", second.body
    (key,) = second.result["inputRequests"]
    final = await client.retry("ask_two", second.result["requestState"], {key: accept(color="teal")})
    return final.text


def assert_every_request_was_the_backends(guard: Guard, client_tokens: list[str]) -> None:
    assert guard.seen, "the backend saw no request"
    for seen in guard.seen:
        assert seen.valid, f"{seen.method}: the backend got an invalid token"
        assert seen.authorization is not None
        token = seen.authorization.removeprefix("Bearer ")
        assert token not in client_tokens
        assert claims_of(token)["aud"] == guard.url


@pytest.mark.parametrize("mode", ["client_credentials", "token_exchange"])
async def test_every_backend_request_of_a_two_round_call_carries_an_audience_bound_token(
    mode: str, fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with (
        token_world(url) as (guard, authz),
        running_gateway([jwt_route(guard.url, **token_auth(mode, authz))]) as gw,
    ):
        mine = client_token()
        client = BareClient(http, gw.url(), authorization=f"Bearer {mine}")
        assert await two_rounds(client) == "name=Ada;color=teal"
        whoami = (await client.call_tool("whoami")).text.removeprefix("Bearer ")
        assert claims_of(whoami)["aud"] == guard.url
        if mode == "token_exchange":
            assert claims_of(whoami)["exchanged_sub"] == "alice"
        assert_every_request_was_the_backends(guard, [mine])
        methods = {s.method for s in guard.seen}
        assert {"initialize", "tools/call", "answer"} <= methods
        stats = await authz.stats()
        assert stats[mode] == 1, stats  # one token, reused by every request


async def test_an_expired_backend_token_is_refreshed_without_the_client_noticing(
    fake_backend: Backend, http: aiohttp.ClientSession, token_clock: TokenClock
) -> None:
    _, url = fake_backend
    async with (
        token_world(url, token_ttl=2) as (guard, authz),
        running_gateway([jwt_route(guard.url, **token_auth("client_credentials", authz))]) as gw,
    ):
        client = BareClient(http, gw.url(), authorization=f"Bearer {client_token()}")
        assert (await client.call_tool("add", {"a": 1, "b": 2})).text == "3"
        token_clock.advance(2.2)  # past the backend token's 2 s lifetime (its expires_in)
        assert (await client.call_tool("add", {"a": 2, "b": 2})).text == "4"
        assert (await authz.stats())["client_credentials"] == 2
        assert all(s.valid for s in guard.seen)
        assert guard.seen[-1].authorization != guard.seen[0].authorization  # the new token was used


@pytest.mark.parametrize("mode", ["client_credentials", "token_exchange"])
async def test_a_call_held_past_the_backend_tokens_lifetime_answers_with_a_fresh_token(
    mode: str, fake_backend: Backend, http: aiohttp.ClientSession, token_clock: TokenClock
) -> None:
    _, url = fake_backend
    async with (
        token_world(url, token_ttl=2) as (guard, authz),
        running_gateway([jwt_route(guard.url, **token_auth(mode, authz))]) as gw,
    ):
        mine = client_token()
        client = BareClient(http, gw.url(), authorization=f"Bearer {mine}")
        first = await client.call_tool("ask_city")
        (key,) = first.result["inputRequests"]
        token_clock.advance(2.5)  # the token the call started with expires (2 s lifetime)
        final = await client.retry("ask_city", first.result["requestState"], {key: accept(city="Oslo")})
        assert final.result["resultType"] == "complete", final.body
        assert "Oslo" in final.text
        assert_every_request_was_the_backends(guard, [mine])
        answers = [s for s in guard.seen if s.method == "answer"]
        assert answers
        assert answers[-1].authorization != guard.seen[0].authorization
        assert (await authz.stats())[mode] == 2


async def test_a_backend_401_refetches_the_token_and_retries_exactly_once(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with (
        token_world(url) as (guard, authz),
        running_gateway([jwt_route(guard.url, **token_auth("client_credentials", authz))]) as gw,
    ):
        client = BareClient(http, gw.url(), authorization=f"Bearer {client_token()}")
        assert (await client.call_tool("add", {"a": 1, "b": 2})).text == "3"
        before = len(guard.seen)
        guard.refuse_next = 1  # the backend revoked the token
        assert (await client.call_tool("add", {"a": 2, "b": 2})).text == "4"
        assert (await authz.stats())["client_credentials"] == 2
        refused, retried = guard.seen[before], guard.seen[before + 1]
        assert refused.method == retried.method == "tools/call"
        assert refused.authorization != retried.authorization

        before = len(guard.seen)
        guard.refuse_next = 10  # refused again: one retry only, then a fixed backend error
        reply = await client.call_tool("add", {"a": 3, "b": 3})
        assert reply.status == 502
        assert reply.error["data"]["reason"] == "backend_unavailable"
        assert len([s for s in guard.seen[before:] if s.method == "tools/call"]) == 2
        assert (await authz.stats())["client_credentials"] == 3


async def test_the_token_endpoints_error_detail_never_reaches_the_client(
    fake_backend: Backend, http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, url = fake_backend
    monkeypatch.setenv(SECRET_ENV, "not-the-secret")
    async with (
        token_world(url) as (guard, authz),
        running_gateway([jwt_route(guard.url, **token_auth("client_credentials", authz))]) as gw,
    ):
        client = BareClient(http, gw.url(), authorization=f"Bearer {client_token()}")
        reply = await client.call_tool("add", {"a": 1, "b": 2})
        assert reply.status == 502
        assert reply.error == {
            "code": -32603,
            "message": "Backend unavailable",
            "data": {"reason": "backend_unavailable", "cause": "backend_auth"},
        }
        text = json.dumps(reply.body) + json.dumps(reply.headers)
        assert "invalid_client" not in text
        assert "authentication" not in text
        assert guard.seen == []  # nothing went upstream without a credential
        again = await client.call_tool("add", {"a": 1, "b": 2})
        assert again.error["data"]["cause"] == "backend_auth"
        assert (await authz.stats())["refused"] == 1  # the failure is remembered (failure_cache)


async def test_a_handshake_era_client_on_a_jwt_route_never_passes_its_token_either(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with (
        token_world(url) as (guard, authz),
        running_gateway([jwt_route(guard.url, **token_auth("client_credentials", authz))]) as gw,
    ):
        mine = client_token()
        wire = OldClient(http, gw.url(), f"Bearer {mine}")
        await wire.initialize()
        answer = await wire.request("tools/call", {"name": "whoami", "arguments": {}})
        backend_saw = answer["result"]["content"][0]["text"].removeprefix("Bearer ")
        assert claims_of(backend_saw)["aud"] == guard.url
        assert_every_request_was_the_backends(guard, [mine])


async def test_without_backend_auth_a_jwt_routes_backend_gets_no_authorization_at_all(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with guarded(url) as guard, running_gateway([jwt_route(guard.url)]) as gw:
        mine = client_token()
        client = BareClient(http, gw.url(), authorization=f"Bearer {mine}")
        assert (await client.call_tool("whoami")).text == "none"
        wire = OldClient(http, gw.url(), f"Bearer {mine}")
        await wire.initialize()
        answer = await wire.request("tools/call", {"name": "whoami", "arguments": {}})
        assert answer["result"]["content"][0]["text"] == "none"
        assert all(s.authorization is None for s in guard.seen)


async def test_header_mode_from_an_environment_variable(
    fake_backend: Backend, http: aiohttp.ClientSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, url = fake_backend
    monkeypatch.setenv("MRTR_TEST_BACKEND_KEY", "Bearer static-backend-key")
    config = jwt_route(url, mode="header", value={"env": "MRTR_TEST_BACKEND_KEY"})
    async with running_gateway([config]) as gw:
        client = BareClient(http, gw.url(), authorization=f"Bearer {client_token()}")
        assert (await client.call_tool("whoami")).text == "Bearer static-backend-key"


async def test_header_mode_from_a_file_follows_the_file_when_it_changes(
    fake_backend: Backend, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    _, url = fake_backend
    secret = tmp_path / "backend-key"
    secret.write_text("Bearer key-one\n")
    config = route(
        "demo", "/mcp", url, backend={"auth": {"mode": "header", "value": {"file": str(secret)}, "reload_interval": 0}}
    )
    async with running_gateway([config]) as gw:
        client = BareClient(http, gw.url(), authorization="Bearer the-clients-own")
        assert (await client.call_tool("whoami")).text == "Bearer key-one"
        replacement = tmp_path / "backend-key.new"
        replacement.write_text("Bearer key-two\n")
        replacement.replace(secret)  # as a Secret volume is updated: a new file swapped in
        assert (await client.call_tool("whoami")).text == "Bearer key-two"


async def test_a_header_secret_that_cannot_be_read_stops_the_start(fake_backend: Backend, tmp_path: Path) -> None:
    _, url = fake_backend
    config = route("demo", "/mcp", url, backend={"auth": {"mode": "header", "value": {"file": str(tmp_path / "none")}}})
    with pytest.raises(ConfigError, match=r"routes\[0\]\.backend\.auth\.value: file .* is missing or empty"):
        async with running_gateway([config]):
            pass


def test_passthrough_without_the_acknowledgement_refuses_to_start(tmp_path: Path) -> None:
    config = tmp_path / "gateway.yaml"
    config.write_text(
        "state: {keys: [test-key-0123456789abcdef0123456789abcdef]}\n"
        "routes:\n"
        "  - {name: a, path: /mcp, backend: {url: 'http://127.0.0.1:9/mcp', auth: {mode: passthrough}}}\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "gateway", "check-config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode != 0
    assert "routes[0].backend.auth" in done.stderr + done.stdout
    assert "acknowledge_token_passthrough: true" in done.stderr + done.stdout


@dataclass
class OldClient:
    """A handshake-era (2025-11-25) streamable-HTTP client on the wire."""

    http: aiohttp.ClientSession
    url: str
    authorization: str
    session_id: str | None = None

    def headers(self) -> dict[str, str]:
        sent = {
            "Accept": "application/json, text/event-stream",
            "Content-Type": "application/json",
            "Authorization": self.authorization,
        }
        if self.session_id is not None:
            sent |= {"Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": "2025-11-25"}
        return sent

    async def _post(self, message: dict[str, Any]) -> tuple[aiohttp.ClientResponse, list[dict[str, Any]]]:
        async with self.http.post(self.url, data=json.dumps(message), headers=self.headers()) as resp:
            text = await resp.text()
        found = [json.loads(line[5:]) for line in text.splitlines() if line.startswith("data:") and line[5:].strip()]
        if not found and text.strip().startswith("{"):
            found = [json.loads(text)]
        return resp, found

    async def initialize(self) -> None:
        params = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "old", "version": "0"}}
        resp, _ = await self._post({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params})
        assert resp.status == 200
        self.session_id = resp.headers["Mcp-Session-Id"]
        resp, _ = await self._post({"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert resp.status == 202

    async def request(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        resp, messages = await self._post({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        assert resp.status == 200, messages
        return messages[-1]


async def test_a_listen_stream_ends_when_the_clients_token_expires(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([jwt_route(url)]) as gw:
        body, headers = listen_request(authorization=f"Bearer {client_token(exp=2)}")
        started = time.monotonic()
        async with http.post(gw.url(), data=body, headers=headers) as resp:
            assert resp.content_type == "text/event-stream"
            async with asyncio.timeout(10):
                await resp.read()  # returns when the gateway ends the stream
        assert time.monotonic() - started < 5
