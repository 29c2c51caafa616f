"""Retries that land on a replica that does not hold their call are forwarded to the owner."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import json
import ssl
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from fake_backend import FakeBackend
from harness import MODERN, TEST_KEY, BareClient, _free_port, accept, route, running_gateway, running_replicas
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS

from gateway import keys
from gateway.app import build_app
from gateway.config.load import parse_config
from gateway.errors import HOLD_LOST, HoldLost
from gateway.replicas.auth import FORWARD_HEADER
from gateway.replicas.forward import OWNER_FAILED

Backend = tuple[FakeBackend, str]


async def test_a_retry_on_another_replica_is_forwarded_to_the_owner(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url)]) as (a, b):
        first = (await BareClient(http, a.url(), authorization="Bearer u").call_tool("ask_two")).result
        (k1,) = first["inputRequests"]
        via_b = BareClient(http, b.url(), authorization="Bearer u")
        second = (await via_b.retry("ask_two", first["requestState"], {k1: accept(name="Ada")})).result
        assert second["resultType"] == "input_required"
        assert "Ada" in second["inputRequests"][next(iter(second["inputRequests"]))]["params"]["message"]
        (k2,) = second["inputRequests"]
        done = await via_b.retry("ask_two", second["requestState"], {k2: accept(color="red")})
        assert done.text == "name=Ada;color=red"
        assert len(a.app[keys.HOLDS]) == 0
        assert len(b.app[keys.HOLDS]) == 0
        forwarded = b.app[keys.METRICS].forwards.labels("demo", "forwarded")._value.get()
        assert forwarded == 2


async def test_forwarding_keeps_the_bindings_of_the_original_request(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url)]) as (a, b):
        first = (await BareClient(http, a.url(), authorization="Bearer alice").call_tool("ask_city")).result
        (key,) = first["inputRequests"]
        stolen = await BareClient(http, b.url(), authorization="Bearer mallory").retry(
            "ask_city", first["requestState"], {key: accept(city="x")}
        )
        assert (stolen.status, stolen.error["code"]) == (400, INVALID_PARAMS)
        done = await BareClient(http, b.url(), authorization="Bearer alice").retry(
            "ask_city", first["requestState"], {key: accept(city="Oslo")}
        )
        assert done.text == "city=Oslo"


async def test_an_unreachable_owner_is_a_clear_retryable_error(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url)]) as (a, b):
        first = (await BareClient(http, a.url()).call_tool("ask_city")).result
        (key,) = first["inputRequests"]
        assert a.runner is not None
        await a.runner.cleanup()
        reply = await BareClient(http, b.url()).retry("ask_city", first["requestState"], {key: accept(city="x")})
    assert reply.status == 502
    assert (reply.error["code"], reply.error["data"]["reason"]) == (INTERNAL_ERROR, "hold_lost")
    assert reply.error["data"]["cause"] == "owner_unreachable"


async def test_without_an_advertised_address_the_retry_gets_hold_lost(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with (
        running_gateway([route("demo", "/mcp", url)], replica_id="one") as one,
        running_gateway([route("demo", "/mcp", url)], replica_id="two") as two,
    ):
        first = (await BareClient(http, one.url()).call_tool("ask_city")).result
        (key,) = first["inputRequests"]
        reply = await BareClient(http, two.url()).retry("ask_city", first["requestState"], {key: accept(city="x")})
    assert (reply.status, reply.error["code"], reply.error["data"]["reason"]) == (502, INTERNAL_ERROR, "hold_lost")
    assert reply.error["data"]["cause"] == "owner_unreachable"


async def test_a_forged_forward_header_is_refused(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    _, url = fake_backend
    async with running_replicas(1, [route("demo", "/mcp", url)]) as (a,):
        body = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/list",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": MODERN,
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
        }
        headers = {
            "Accept": "application/json",
            "Content-Type": "application/json",
            "MCP-Protocol-Version": MODERN,
            "Mcp-Method": "tools/list",
            FORWARD_HEADER: "v1.1.AAAA",
        }
        async with http.post(a.url(), data=json.dumps(body), headers=headers) as resp:
            assert resp.status == 403


REPLAY = {"holds": {"on_lost": "replay"}}


async def test_replay_reruns_a_lost_call_with_the_pending_answer(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url, **REPLAY)]) as (a, b):
        first = (await BareClient(http, a.url()).call_tool("ask_two")).result
        (k1,) = first["inputRequests"]
        assert a.runner is not None
        await a.runner.cleanup()  # the owner dies with the held call
        via_b = BareClient(http, b.url())
        second = (await via_b.retry("ask_two", first["requestState"], {k1: accept(name="Ada")})).result
        assert second["resultType"] == "input_required", "replayed up to the next question, now held by b"
        ((k2, asked),) = second["inputRequests"].items()
        assert "Ada" in asked["params"]["message"]
        done = await via_b.retry("ask_two", second["requestState"], {k2: accept(color="red")})
        assert done.text == "name=Ada;color=red"
        assert b.app[keys.METRICS].forwards.labels("demo", "replayed")._value.get() == 1


async def test_replay_answers_earlier_rounds_from_the_sealed_log(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url, **REPLAY)]) as (a, b):
        on_a = BareClient(http, a.url())
        first = (await on_a.call_tool("ask_two")).result
        (k1,) = first["inputRequests"]
        second = (await on_a.retry("ask_two", first["requestState"], {k1: accept(name="Eve")})).result
        (k2,) = second["inputRequests"]
        assert a.runner is not None
        await a.runner.cleanup()
        done = await BareClient(http, b.url()).retry("ask_two", second["requestState"], {k2: accept(color="blue")})
    assert done.text == "name=Eve;color=blue", "the first answer came from the sealed log, the second from the retry"


async def test_without_replay_a_lost_call_is_an_error_and_nothing_reruns(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(2, [route("demo", "/mcp", url)]) as (a, b):
        first = (await BareClient(http, a.url()).call_tool("ask_city")).result
        (key,) = first["inputRequests"]
        assert a.runner is not None
        await a.runner.cleanup()
        reply = await BareClient(http, b.url()).retry("ask_city", first["requestState"], {key: accept(city="x")})
        assert (reply.error["code"], reply.error["data"]["reason"]) == (INTERNAL_ERROR, "hold_lost")
        assert b.app[keys.METRICS].forwards.labels("demo", "replayed")._value.get() == 0
        assert len(b.app[keys.HOLDS]) == 0


# --- the forwarding hop: strict, single-use, bound to its target, timed out, TLS-capable ----------


def _retry_body(state: str, responses: dict[str, Any]) -> bytes:
    params = {
        "name": "ask_city",
        "arguments": {},
        "inputResponses": responses,
        "requestState": state,
        "_meta": {
            "io.modelcontextprotocol/protocolVersion": MODERN,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {"form": {}}},
        },
    }
    return json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}).encode()


_HOP_HEADERS = {
    "Accept": "application/json, text/event-stream",
    "Content-Type": "application/json",
    "MCP-Protocol-Version": MODERN,
    "Mcp-Method": "tools/call",
    "Mcp-Name": "ask_city",
}


@pytest.mark.parametrize(
    "header",
    [
        "v1.\u00b2\u00b3.AAAA",  # str.isdigit() is True for superscript digits, int() is not
        "v2.\u00b2\u00b3.AAAAAAAAAAAAAAAAAAAAAA." + "A" * 43,
        "v2.5.AAAAAAAAAAAAAAAAAAAAAA." + "A" * 43 + "=",
    ],
)
async def test_a_malformed_forward_header_is_a_4xx_never_a_5xx(
    fake_backend: Backend, http: aiohttp.ClientSession, header: str
) -> None:
    _, url = fake_backend
    async with (
        running_replicas(1, [route("demo", "/mcp", url)]) as (a,),
        http.post(a.url(), data=_retry_body("x", {}), headers={**_HOP_HEADERS, FORWARD_HEADER: header}) as resp,
    ):
        assert resp.status == 403


async def test_a_captured_hop_runs_nothing_on_another_replica_and_only_once_on_the_owner(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_replicas(3, [route("demo", "/mcp", url, **REPLAY)]) as (a, b, c):
        first = (await BareClient(http, a.url()).call_tool("ask_city")).result
        (key,) = first["inputRequests"]
        body = _retry_body(first["requestState"], {key: accept(city="Oslo")})
        # What b sends a, as an observer of the hop would capture it.
        captured = b.app[keys.FORWARD_SIGNER].sign(
            method="POST", target=a.base, path="/mcp", body=body, credential=None
        )
        headers = {**_HOP_HEADERS, FORWARD_HEADER: captured}
        async with http.post(c.url(), data=body, headers=headers) as to_c:
            assert to_c.status == 403, "addressed to a, refused by c"
        assert c.app[keys.METRICS].forwards.labels("demo", "replayed")._value.get() == 0
        async with http.post(a.url(), data=body, headers=headers) as to_a:
            assert to_a.status == 200
            assert "city=Oslo" in await to_a.text()
        async with http.post(a.url(), data=body, headers=headers) as again:
            assert again.status == 403, "a nonce is accepted once"


@pytest.fixture
async def hung_owner() -> AsyncIterator[str]:
    """An address that accepts the hop's connection and then never answers."""
    release = asyncio.Event()

    async def hang(request: web.Request) -> web.Response:
        await release.wait()
        return web.Response(status=503)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", hang)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        release.set()
        await runner.cleanup()


async def test_a_hung_owner_times_out_within_the_route_timeout_and_nothing_is_replayed(
    fake_backend: Backend, http: aiohttp.ClientSession, hung_owner: str
) -> None:
    _, url = fake_backend
    routes = [route("demo", "/mcp", url, backend={"timeout": 1}, **REPLAY)]
    async with (
        running_gateway(routes, replica_id="a", replicas={"advertise_url": hung_owner}) as a,
        running_gateway(routes, replica_id="b", replicas={"advertise_url": "http://127.0.0.1:9"}) as b,
    ):
        first = (await BareClient(http, a.url()).call_tool("ask_city")).result
        (key,) = first["inputRequests"]
        async with asyncio.timeout(10):
            reply = await BareClient(http, b.url()).retry("ask_city", first["requestState"], {key: accept(city="x")})
        assert reply.error["code"] == HoldLost.code
        assert (reply.error["data"]["reason"], reply.error["data"]["cause"]) == (HOLD_LOST, OWNER_FAILED)
        assert b.app[keys.METRICS].forwards.labels("demo", "replayed")._value.get() == 0
        assert len(a.app[keys.HOLDS]) == 1, "the owner may still be running it: the hold is untouched"


def _self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "replica")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "replica.pem", directory / "replica.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


async def test_the_hop_reaches_an_owner_advertised_at_an_https_address(fake_backend: Backend, tmp_path: Path) -> None:
    _, url = fake_backend
    cert_path, key_path = _self_signed(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert_path, key_path)
    client_tls = ssl.create_default_context(cafile=str(cert_path))
    port = _free_port()
    owner = f"https://127.0.0.1:{port}"
    data = {
        "state": {"keys": [TEST_KEY]},
        "replica_id": "a",
        "replicas": {"advertise_url": owner},
        "routes": [route("demo", "/mcp", url)],
    }
    runner = web.AppRunner(build_app(parse_config(data, env={})), access_log=None, shutdown_timeout=1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, ssl_context=server_tls).start()
    try:
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=client_tls)) as http,
            running_gateway(
                [route("demo", "/mcp", url)],
                replica_id="b",
                replicas={"advertise_url": "http://127.0.0.1:9", "ca_file": str(cert_path)},
            ) as b,
        ):
            first = (await BareClient(http, owner + "/mcp").call_tool("ask_city")).result
            (key,) = first["inputRequests"]
            done = await BareClient(http, b.url()).retry("ask_city", first["requestState"], {key: accept(city="Rome")})
            assert done.text == "city=Rome"
            assert b.app[keys.METRICS].forwards.labels("demo", "forwarded")._value.get() == 1
    finally:
        await runner.cleanup()
