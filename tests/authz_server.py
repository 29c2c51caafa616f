"""A real OAuth 2.0 authorization server for tests: npm ``oidc-provider`` (tests/authz/server.mjs) run
with the pinned Node 22 on a free loopback port, ready once its discovery document answers.

It serves one confidential client (client_credentials and RFC 8693 token exchange), one resource
(the backend's URL: tokens are JWTs whose ``aud`` is that URL) and counts what it issued at
``/stats``. Subject tokens for the exchange must be signed by ``subject_key`` for the given issuer
and audience (the same key the gateway's ``auth.jwt`` trusts in the tests).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import jwt
from node_tools import NODE, node_env
from waiting import eventually

SERVER = Path(__file__).resolve().parent / "authz" / "server.mjs"
CLIENT_ID = "mrtr-gateway"
CLIENT_SECRET = "test-client-secret-0123456789abcdef"  # a test fixture's secret
READY_WITHIN = 30.0
"""Seconds the server may take to answer its discovery document (Node starts in well under one)."""


@dataclass
class AuthorizationServer:
    url: str
    resource: str
    http: aiohttp.ClientSession

    @property
    def token_url(self) -> str:
        return self.url + "/token"

    async def stats(self) -> dict[str, int]:
        async with self.http.get(self.url + "/stats") as resp:
            stats: dict[str, int] = await resp.json()
            return stats

    async def jwks(self) -> jwt.PyJWKSet:
        async with self.http.get(self.url + "/jwks") as resp:
            return jwt.PyJWKSet.from_dict(await resp.json())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.asynccontextmanager
async def authorization_server(
    resource: str, *, subject_public_pem: str, subject_issuer: str, subject_audience: str, token_ttl: int = 300
) -> AsyncIterator[AuthorizationServer]:
    port = free_port()
    env = node_env() | {
        "PORT": str(port),
        "CLIENT_ID": CLIENT_ID,
        "CLIENT_SECRET": CLIENT_SECRET,
        "RESOURCE": resource,
        "TOKEN_TTL": str(token_ttl),
        "SUBJECT_PUBLIC_KEY": subject_public_pem,
        "SUBJECT_ISSUER": subject_issuer,
        "SUBJECT_AUDIENCE": subject_audience,
    }
    process = await asyncio.create_subprocess_exec(
        str(NODE), str(SERVER), env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    try:
        async with aiohttp.ClientSession() as http:
            await _ready(http, url + "/.well-known/openid-configuration", process)
            yield AuthorizationServer(url, resource, http)
    finally:
        if process.returncode is None:
            process.terminate()
        with contextlib.suppress(ProcessLookupError):
            await asyncio.wait_for(process.wait(), 10)


async def _ready(http: aiohttp.ClientSession, discovery: str, process: asyncio.subprocess.Process) -> None:
    """Poll the discovery document, at most READY_WITHIN seconds; fail early if Node exits."""

    async def answered() -> bool:
        if process.returncode is not None:
            assert process.stderr is not None
            raise RuntimeError(f"oidc-provider exited: {(await process.stderr.read()).decode()[-2000:]}")
        async with http.get(discovery, timeout=aiohttp.ClientTimeout(total=2)) as resp:
            return resp.status == 200

    await eventually(
        answered,
        what=f"oidc-provider answers {discovery}",
        timeout=READY_WITHIN,
        interval=0.1,
        ignoring=(aiohttp.ClientError, TimeoutError),
    )


def claims_of(token: str) -> dict[str, Any]:
    """The claims of a JWT, unverified (for assertions; the guarded backend verifies)."""
    claims: dict[str, Any] = jwt.decode(token, options={"verify_signature": False})
    return claims
