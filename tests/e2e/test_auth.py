"""Verified principals (routes[].auth): bearer JWTs checked against a JWKS served by a local aiohttp
server (keys made here with cryptography), static keys, the trusted-header mode, RFC 9728 metadata,
and the principal flowing into hold bindings and hold caps."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import json
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import aiohttp
import jwt
import pytest
from aiohttp import web
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from fake_backend import FakeBackend
from harness import BareClient, accept, route, running_gateway, running_replicas

from gateway import keys

Backend = tuple[FakeBackend, str]

ISSUER = "https://issuer.test"
AUDIENCE = "https://gateway.test/mcp"
RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
OTHER_RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
FIXED_BODY = {"error": "invalid_token", "error_description": "A valid bearer token is required"}


def public_jwk(private: Any, kid: str) -> dict[str, Any]:
    algorithm = jwt.algorithms.RSAAlgorithm if isinstance(private, rsa.RSAPrivateKey) else jwt.algorithms.ECAlgorithm
    jwk: dict[str, Any] = json.loads(algorithm.to_jwk(private.public_key()))
    return {**jwk, "kid": kid, "use": "sig"}


def public_pem(private: Any) -> str:
    pem: str = (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    return pem


def token(
    sub: str = "alice",
    *,
    key: Any = RSA_KEY,
    alg: str = "RS256",
    kid: str | None = "rsa-1",
    iss: str = ISSUER,
    aud: str = AUDIENCE,
    exp: float | None = 300,
    nbf: float | None = None,
) -> str:
    now = time.time()
    claims: dict[str, Any] = {"iss": iss, "aud": aud, "sub": sub, "iat": int(now), "jti": uuid.uuid4().hex}
    if exp is not None:
        claims["exp"] = int(now + exp)
    if nbf is not None:
        claims["nbf"] = int(now + nbf)
    headers = {"kid": kid} if kid is not None else {}
    return jwt.encode(claims, key, algorithm=alg, headers=headers)


@dataclass
class Jwks:
    url: str
    keys: list[dict[str, Any]]
    fetches: int = 0
    body: bytes | None = None
    paths: list[str] = field(default_factory=list)


@asynccontextmanager
async def jwks_server(*initial: dict[str, Any]) -> AsyncIterator[Jwks]:
    served = Jwks("", list(initial))

    async def serve(request: web.Request) -> web.Response:
        served.fetches += 1
        if served.body is not None:
            return web.Response(body=served.body, content_type="application/json")
        return web.json_response({"keys": served.keys})

    app = web.Application()
    app.router.add_get("/jwks.json", serve)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    served.url = f"http://127.0.0.1:{runner.addresses[0][1]}/jwks.json"
    try:
        yield served
    finally:
        await runner.cleanup()


REFRESH = 0.05
"""jwks_min_refresh of the tests that need a refetch: short, and waited out explicitly."""


async def past_refresh_interval(since: float) -> None:
    """Return once REFRESH has passed on the gateway's clock (time.monotonic) since ``since``.

    ``since`` is read after the gateway answered, so after its last fetch attempt: once this
    returns, the next request with an unknown kid may fetch again, however fast the machine is.
    """
    while (left := since + REFRESH - time.monotonic()) > 0:
        await asyncio.sleep(left)  # deliberate: waits out jwks_min_refresh, the interval under test


def jwt_route(url: str, jwks_url: str | None = None, **jwt_options: Any) -> dict[str, Any]:
    options: dict[str, Any] = {"issuer": ISSUER, "audience": [AUDIENCE], "leeway": 5, **jwt_options}
    if jwks_url is not None:
        options["jwks_url"] = jwks_url
    auth = {
        "jwt": options,
        "resource_metadata": {"resource": AUDIENCE, "authorization_servers": [ISSUER], "scopes_supported": ["mcp"]},
    }
    return route("demo", "/mcp", url, auth=auth)


METADATA = 'resource_metadata="https://gateway.test/.well-known/oauth-protected-resource/mcp"'


async def test_a_valid_token_reaches_the_gateway_but_the_backend_never_sees_the_clients_authorization(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    # MCP 2026-07-28 authorization: a server MUST NOT pass through the token it received.
    _, url = fake_backend
    async with (
        jwks_server(public_jwk(RSA_KEY, "rsa-1"), public_jwk(EC_KEY, "ec-1")) as jwks,
        running_gateway([jwt_route(url, jwks.url)]) as gw,
    ):
        rsa_token = token()
        client = BareClient(http, gw.url(), authorization=f"Bearer {rsa_token}")
        assert (await client.call_tool("add", {"a": 2, "b": 3})).text == "5"
        assert rsa_token not in (await client.call_tool("whoami")).text
        ec_token = token("bob", key=EC_KEY, alg="ES256", kid="ec-1")
        reply = await client.call_tool("add", {"a": 1, "b": 1}, authorization=f"bearer {ec_token}")
        assert reply.text == "2"
    assert jwks.fetches == 1


async def test_an_acknowledged_passthrough_route_still_sends_the_clients_authorization(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    config = jwt_route(url)
    config["backend"]["auth"] = {"mode": "passthrough", "acknowledge_token_passthrough": True}
    config["auth"]["jwt"]["keys"] = [public_pem(RSA_KEY)]
    async with running_gateway([config]) as gw:
        rsa_token = token()
        client = BareClient(http, gw.url(), authorization=f"Bearer {rsa_token}")
        assert (await client.call_tool("whoami")).text == f"Bearer {rsa_token}"
        async with http.get(gw.base + "/metrics") as resp:
            assert 'mrtr_gateway_backend_token_passthrough{route="demo"} 1.0' in await resp.text()


def _bad_tokens() -> dict[str, str | None]:
    # The classic algorithm-confusion forgery, built by hand (PyJWT refuses to make it).
    def b64(data: bytes) -> str:
        return base64.urlsafe_b64encode(data).rstrip(b"=").decode()

    claims = {"iss": ISSUER, "aud": AUDIENCE, "sub": "mallory", "exp": int(time.time()) + 300}
    signing_input = b64(json.dumps({"alg": "HS256", "kid": "rsa-1"}).encode()) + "." + b64(json.dumps(claims).encode())
    mac = hmac.new(public_pem(RSA_KEY).encode(), signing_input.encode(), hashlib.sha256).digest()
    hs_confusion = signing_input + "." + b64(mac)
    unsigned = jwt.encode(
        {"iss": ISSUER, "aud": AUDIENCE, "sub": "mallory", "exp": int(time.time()) + 300},
        None,  # type: ignore[arg-type]  # an unsigned token is what the test sends
        algorithm="none",
    )
    valid = token()
    head, payload, _ = valid.split(".")
    return {
        "missing": None,
        "not bearer": "Basic YWxpY2U6cHc=",
        "empty bearer": "Bearer ",
        "expired": "Bearer " + token(exp=-60),
        "not yet valid": "Bearer " + token(nbf=120),
        "wrong issuer": "Bearer " + token(iss="https://evil.test"),
        "wrong audience": "Bearer " + token(aud="https://other.test/mcp"),
        "alg not allowed": "Bearer " + token(alg="RS512"),
        "HS256 with the public key as secret": "Bearer " + hs_confusion,
        "alg none": "Bearer " + unsigned,
        "ES256 header on an RSA kid": "Bearer " + token(key=EC_KEY, alg="ES256", kid="rsa-1"),
        "unknown kid": "Bearer " + token(kid="rotated-away"),
        "signed by another key": "Bearer " + token(key=OTHER_RSA_KEY),
        "no exp": "Bearer " + token(exp=None),
        "no sub": "Bearer " + token(sub=""),
        "signature stripped": f"Bearer {head}.{payload}.",
        "garbage": "Bearer not-a-jwt",
        "garbage segments": "Bearer e30.e30.e30",
    }


# Minted when each test runs (times are relative to now), named at collection.
BAD_TOKEN_NAMES = list(_bad_tokens())


@pytest.mark.parametrize("name", BAD_TOKEN_NAMES)
async def test_a_bad_or_missing_token_gets_401_with_a_bearer_challenge(
    fake_backend: Backend, http: aiohttp.ClientSession, name: str
) -> None:
    backend, url = fake_backend
    async with (
        jwks_server(public_jwk(RSA_KEY, "rsa-1"), public_jwk(EC_KEY, "ec-1")) as jwks,
        running_gateway([jwt_route(url, jwks.url, algorithms=["RS256", "ES256"])]) as gw,
    ):
        credential = _bad_tokens()[name]
        headers = {"Authorization": credential} if credential is not None else {}
        reply = await BareClient(http, gw.url()).call_tool("add", {"a": 1, "b": 2}, headers=headers)
        refusals = gw.app[keys.METRICS].auth_refusals.collect()[0].samples
    assert reply.status == 401
    assert reply.body == FIXED_BODY
    challenge = reply.headers["WWW-Authenticate"]
    assert challenge.startswith("Bearer ")
    assert METADATA in challenge
    assert ('error="invalid_token"' in challenge) == (name != "missing")
    assert backend.initialize_count == 0
    assert sum(s.value for s in refusals if s.name.endswith("_total")) == 1


async def test_clock_skew_within_leeway_is_accepted(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    _, url = fake_backend
    async with (
        jwks_server(public_jwk(RSA_KEY, "rsa-1")) as jwks,
        running_gateway([jwt_route(url, jwks.url, leeway=60)]) as gw,
    ):
        client = BareClient(http, gw.url())
        late = await client.call_tool("add", {"a": 1, "b": 1}, authorization="Bearer " + token(exp=-20))
        early = await client.call_tool("add", {"a": 1, "b": 1}, authorization="Bearer " + token(nbf=20))
    assert late.text == early.text == "2"


async def test_unknown_kids_refetch_the_jwks_at_most_once_per_interval(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with (
        jwks_server(public_jwk(RSA_KEY, "rsa-1")) as jwks,
        running_gateway([jwt_route(url, jwks.url, jwks_min_refresh=3600)]) as gw,
    ):
        client = BareClient(http, gw.url())
        assert (await client.call_tool("add", {"a": 1, "b": 1}, authorization="Bearer " + token())).text == "2"
        for index in range(20):
            reply = await client.call_tool("add", {"a": 1, "b": 1}, authorization="Bearer " + token(kid=f"k{index}"))
            assert reply.status == 401
    assert jwks.fetches == 1


async def test_a_rotated_in_key_is_fetched_when_a_token_names_its_kid(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with (
        jwks_server(public_jwk(RSA_KEY, "rsa-1")) as jwks,
        running_gateway([jwt_route(url, jwks.url, jwks_min_refresh=REFRESH)]) as gw,
    ):
        client = BareClient(http, gw.url())
        assert (await client.call_tool("add", {"a": 1, "b": 1}, authorization="Bearer " + token())).text == "2"
        await past_refresh_interval(time.monotonic())
        jwks.keys.append(public_jwk(OTHER_RSA_KEY, "rsa-2"))
        rotated = "Bearer " + token(key=OTHER_RSA_KEY, kid="rsa-2")
        assert (await client.call_tool("add", {"a": 2, "b": 2}, authorization=rotated)).text == "4"
    assert jwks.fetches == 2


async def test_an_oversized_or_broken_jwks_verifies_nothing(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    _, url = fake_backend
    async with jwks_server(public_jwk(RSA_KEY, "rsa-1")) as jwks:
        jwks.body = json.dumps({"keys": [public_jwk(RSA_KEY, "rsa-1")], "pad": "x" * 4096}).encode()
        async with running_gateway([jwt_route(url, jwks.url, jwks_max_bytes=1024, jwks_min_refresh=REFRESH)]) as gw:
            client = BareClient(http, gw.url(), authorization="Bearer " + token())
            assert (await client.call_tool("add", {"a": 1, "b": 1})).status == 401
            assert jwks.fetches == 1
            await past_refresh_interval(time.monotonic())
            jwks.body = b"{not json"
            assert (await client.call_tool("add", {"a": 1, "b": 1})).status == 401
            assert jwks.fetches == 2
            await past_refresh_interval(time.monotonic())
            jwks.body = None
            assert (await client.call_tool("add", {"a": 1, "b": 1})).text == "2"
            assert jwks.fetches == 3


async def test_static_pem_and_jwk_keys_verify_without_any_fetch(
    fake_backend: Backend, http: aiohttp.ClientSession, tmp_path: Any
) -> None:
    _, url = fake_backend
    pem_file = tmp_path / "issuer.pem"
    pem_file.write_text(public_pem(RSA_KEY))
    static = jwt_route(url, keys=[json.dumps(public_jwk(EC_KEY, "ec-1"))], key_files=[str(pem_file)])
    async with running_gateway([static]) as gw:
        client = BareClient(http, gw.url())
        rsa_reply = await client.call_tool("add", {"a": 1, "b": 1}, authorization="Bearer " + token(kid=None))
        ec_token = token(key=EC_KEY, alg="ES256", kid="ec-1")
        ec_reply = await client.call_tool("add", {"a": 1, "b": 2}, authorization="Bearer " + ec_token)
        forged = await client.call_tool(
            "add", {"a": 1, "b": 1}, authorization="Bearer " + token(key=OTHER_RSA_KEY, kid=None)
        )
    assert (rsa_reply.text, ec_reply.text, forged.status) == ("2", "3", 401)


async def test_protected_resource_metadata_is_served_at_both_well_known_paths(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with (
        jwks_server(public_jwk(RSA_KEY, "rsa-1")) as jwks,
        running_gateway([jwt_route(url, jwks.url)]) as gw,
    ):
        documents = []
        for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
            async with http.get(gw.url(path)) as resp:
                assert resp.status == 200
                documents.append(await resp.json())
    assert (
        documents[0]
        == documents[1]
        == {
            "resource": AUDIENCE,
            "authorization_servers": [ISSUER],
            "bearer_methods_supported": ["header"],
            "scopes_supported": ["mcp"],
        }
    )


async def test_a_state_sealed_for_one_verified_principal_is_refused_for_another(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with (
        jwks_server(public_jwk(RSA_KEY, "rsa-1")) as jwks,
        running_gateway([jwt_route(url, jwks.url)]) as gw,
    ):
        alice = BareClient(http, gw.url(), authorization="Bearer " + token("alice"))
        result = (await alice.call_tool("ask_city")).result
        state = result["requestState"]
        (key,) = result["inputRequests"]
        answer = {key: accept(city="Paris")}
        stolen = await alice.retry("ask_city", state, answer, authorization="Bearer " + token("bob"))
        assert stolen.status == 400
        assert stolen.error["message"] == "Invalid or expired requestState"
        # A refreshed token of the same (issuer, subject) is the same principal.
        done = await alice.retry("ask_city", state, answer, authorization="Bearer " + token("alice"))
        assert done.text == "city=Paris"
        assert len(gw.app[keys.HOLDS]) == 0


async def test_holds_are_capped_per_verified_principal_not_per_token(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with (
        jwks_server(public_jwk(RSA_KEY, "rsa-1")) as jwks,
        running_gateway([jwt_route(url, jwks.url)], limits={"max_holds_per_principal": 1}) as gw,
    ):
        client = BareClient(http, gw.url())
        first = await client.call_tool("ask_city", authorization="Bearer " + token("alice"))
        assert first.result["resultType"] == "input_required"
        second = await client.call_tool("ask_city", authorization="Bearer " + token("alice"))
        assert second.status == 503
        assert second.error["data"]["cause"] == "principal_hold_limit"
        bob = await client.call_tool("ask_city", authorization="Bearer " + token("bob"))
        assert bob.result["resultType"] == "input_required"


# --- trusted header -----------------------------------------------------------------------------


def header_route(url: str, proxies: list[str]) -> dict[str, Any]:
    return route("demo", "/mcp", url, auth={"trusted_header": {"header": "X-Forwarded-User", "proxies": proxies}})


async def test_a_trusted_header_is_honoured_from_a_listed_proxy(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([header_route(url, ["127.0.0.0/8", "::1/128"])]) as gw:
        alice = BareClient(http, gw.url(), authorization="Bearer same-for-everyone")
        result = (await alice.call_tool("ask_city", headers={"X-Forwarded-User": "alice"})).result
        (key,) = result["inputRequests"]
        answer = {key: accept(city="Oslo")}
        as_bob = await alice.retry("ask_city", result["requestState"], answer, headers={"X-Forwarded-User": "bob"})
        assert as_bob.error["message"] == "Invalid or expired requestState"
        nobody = await alice.retry("ask_city", result["requestState"], answer)
        assert nobody.status == 403
        done = await alice.retry("ask_city", result["requestState"], answer, headers={"X-Forwarded-User": "alice"})
        assert done.text == "city=Oslo"


async def test_a_trusted_header_from_any_other_peer_is_refused(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    backend, url = fake_backend
    async with running_gateway([header_route(url, ["10.0.0.0/8"])]) as gw:
        client = BareClient(http, gw.url())
        reply = await client.call_tool("add", {"a": 1, "b": 1}, headers={"X-Forwarded-User": "root"})
        refusals = {
            s.labels["reason"]: s.value
            for s in gw.app[keys.METRICS].auth_refusals.collect()[0].samples
            if s.name.endswith("_total") and s.value  # every reason's series exists at 0 (issue 20)
        }
    assert reply.status == 403
    assert reply.body["error"] == "forbidden"
    assert refusals == {"untrusted_peer": 1}
    assert backend.initialize_count == 0


# --- anonymous callers ----------------------------------------------------------------------------


async def test_anonymous_callers_share_one_explicit_hold_budget(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    limits = {"max_holds_anonymous": 2, "max_holds_per_principal": 5}
    async with running_gateway([route("demo", "/mcp", url)], limits=limits) as gw:
        anonymous = BareClient(http, gw.url())
        held = [(await anonymous.call_tool("ask_city")).result for _ in range(2)]
        assert all(r["resultType"] == "input_required" for r in held)
        third = await anonymous.call_tool("ask_city")
        assert third.status == 503
        assert third.error["data"]["cause"] == "anonymous_hold_limit"
        # A caller with a credential has its own budget, past the anonymous one.
        named = BareClient(http, gw.url(), authorization="Bearer carol")
        for _ in range(3):
            assert (await named.call_tool("ask_city")).result["resultType"] == "input_required"
        (key,) = held[0]["inputRequests"]
        assert (await anonymous.retry("ask_city", held[0]["requestState"], {key: accept(city="X")})).text == "city=X"
        assert (await anonymous.call_tool("ask_city")).result["resultType"] == "input_required"


async def test_a_trusted_header_travels_over_the_signed_replica_hop(fake_backend: Backend) -> None:
    """The proxy is 127.0.0.2; the replicas reach each other from 127.0.0.1, outside `proxies`:
    the owner honours the header of a forwarded retry because the hop is signed, and a direct
    request from 127.0.0.1 with the same header is still refused."""
    _, url = fake_backend
    trusted = route(
        "demo", "/mcp", url, auth={"trusted_header": {"header": "X-Forwarded-User", "proxies": ["127.0.0.2"]}}
    )
    proxy = aiohttp.TCPConnector(local_addr=("127.0.0.2", 0))
    user = {"X-Forwarded-User": "alice"}
    async with (
        aiohttp.ClientSession(connector=proxy) as via_proxy,
        aiohttp.ClientSession() as direct,
        running_replicas(2, [trusted]) as (a, b),
    ):
        first = (await BareClient(via_proxy, a.url()).call_tool("ask_city", headers=user)).result
        (key,) = first["inputRequests"]
        answer = {key: accept(city="Rome")}
        bypass = await BareClient(direct, b.url()).retry("ask_city", first["requestState"], answer, headers=user)
        assert bypass.status == 403
        as_bob = await BareClient(via_proxy, b.url()).retry(
            "ask_city", first["requestState"], answer, headers={"X-Forwarded-User": "bob"}
        )
        assert as_bob.error["message"] == "Invalid or expired requestState"
        done = await BareClient(via_proxy, b.url()).retry("ask_city", first["requestState"], answer, headers=user)
        assert done.text == "city=Rome"
        assert b.app[keys.METRICS].forwards.labels("demo", "forwarded")._value.get() == 1
