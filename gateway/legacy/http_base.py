"""What the two HTTP transports (streamable HTTP and HTTP+SSE) share: the client, the backend URL,
the headers sent, same-origin redirects, bounded body reads and timeouts."""

from __future__ import annotations

import asyncio
import io
import warnings
from typing import Any, Self

import aiohttp
import aiohttp.payload
from yarl import URL

from gateway import fastjson
from gateway.backend_auth.credentials import BackendCredential, OutboundHeaders
from gateway.config.model import RouteConfig
from gateway.errors import BackendUnavailable
from gateway.legacy.base import LegacySessionBase, route_options
from gateway.legacy.limits import BackendLimits
from gateway.legacy.session import JsonObj
from gateway.legacy.wire import read_bounded

MAX_REDIRECTS = 3
WHOLE_BODY_BYTES = 2 * 1024 * 1024
"""Request bodies up to this size are handed to aiohttp whole (see :func:`_request_body`)."""
_REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})


def _request_body(encoded: bytes) -> bytes | aiohttp.payload.Payload | io.BytesIO:
    """What aiohttp is given to send ``encoded``: the bytes, in one write, up to
    :data:`WHOLE_BODY_BYTES`; beyond it a file-like view, written in 64 KiB pieces with a turn of
    the event loop between them, so that a very large argument never holds the loop for long.

    One write holds the loop about 0.2 ms per MiB on loopback, less than decoding the same body
    cost; the pieces cost a 1 MiB body ~0.5 ms more. aiohttp warns about any bytes body over
    1 MiB (its general advice, for bodies of any size); up to :data:`WHOLE_BODY_BYTES` that hold
    is measured and accepted, so that warning is silenced for this one payload only.
    """
    if len(encoded) > WHOLE_BODY_BYTES:
        return io.BytesIO(encoded)
    if len(encoded) <= aiohttp.payload.TOO_LARGE_BYTES_BODY:
        return encoded
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ResourceWarning)
        return aiohttp.payload.BytesPayload(encoded)


def _origin(url: URL) -> tuple[str, str | None, int | None]:
    return (url.scheme, url.host, url.port)


class HttpSessionBase(LegacySessionBase):
    """What the two HTTP transports add: the shared client, the backend URL, the headers sent."""

    __slots__ = ("_base_headers", "_credential", "_http", "_origin", "_target", "_timeouts", "_url")

    def __init__(
        self,
        http: aiohttp.ClientSession,
        url: str,
        *,
        capabilities: JsonObj,
        headers: dict[str, str],
        timeout: float,
        connect_timeout: float,
        offer_version: str | None = None,
        limits: BackendLimits | None = None,
        credential: BackendCredential | None = None,
    ) -> None:
        self._http = http
        if credential is None and isinstance(headers, OutboundHeaders):
            credential = headers.credential
        self._credential = credential
        """The gateway's credential for the backend, asked for on every request (``backend.auth``)."""
        self._url = url
        self._target = URL(url)
        """``url`` parsed once: every request of the session goes there."""
        self._origin = _origin(self._target)
        self._base_headers = dict(headers)
        # Immutable, so built once per session rather than per request.
        self._timeouts = (
            aiohttp.ClientTimeout(total=None, connect=connect_timeout, sock_connect=connect_timeout),
            aiohttp.ClientTimeout(total=timeout, connect=connect_timeout),
        )
        super().__init__(
            capabilities=capabilities,
            timeout=timeout,
            connect_timeout=connect_timeout,
            offer_version=offer_version,
            limits=limits,
        )

    @classmethod
    def for_route(
        cls, http: aiohttp.ClientSession, route: RouteConfig, capabilities: JsonObj, headers: dict[str, str]
    ) -> Self:
        """An unopened session on ``route``'s backend, declaring ``capabilities`` at its handshake."""
        assert route.backend.url is not None  # the config requires it for HTTP transports
        return cls(http, route.backend.url, headers=headers, **route_options(route, capabilities))

    async def _send(self, method: str, url: str | URL, *, what: str, **kwargs: Any) -> aiohttp.ClientResponse:
        """One backend HTTP request, with the route's credential (``backend.auth``) resolved now.

        A 401 from the backend makes the credential forget what was sent and, if a new one may
        help (a refetched token, a rotated secret file), the request is sent once more.
        The caller releases the response.
        """
        target = self._target if url is self._url else URL(url)
        body = kwargs.pop("json", None)
        encoded = None if body is None else fastjson.dumps(body)
        credential = self._credential
        if credential is None:
            return await self._follow(method, target, encoded, what=what, **kwargs)
        headers = kwargs.pop("headers", None) or {}
        sent = await credential.headers()
        resp = await self._follow(method, target, encoded, what=what, headers={**headers, **sent}, **kwargs)
        if resp.status != 401 or not await credential.refused(sent):
            return resp
        resp.release()
        sent = await credential.headers()
        return await self._follow(method, target, encoded, what=what, headers={**headers, **sent}, **kwargs)

    async def _follow(
        self, method: str, target: URL, encoded: bytes | None, *, what: str, **kwargs: Any
    ) -> aiohttp.ClientResponse:
        """Send, following redirects only within the backend URL's origin.

        The route's ``backend.headers`` and the backend credential were meant for the backend
        URL's origin: a redirect elsewhere fails with ``redirect_refused`` and nothing is sent
        there. Only 307/308 are followed (they keep the method and the body, which a JSON-RPC
        POST needs), at most :data:`MAX_REDIRECTS` times.
        """
        origin = self._origin
        for _ in range(MAX_REDIRECTS + 1):
            if encoded is not None:
                kwargs["data"] = _request_body(encoded)
            resp = await self._http.request(method, target, allow_redirects=False, **kwargs)
            if resp.status not in _REDIRECT_STATUSES:
                return resp
            location = resp.headers.get("Location")
            resp.release()
            try:
                following = target.join(URL(location)) if location else None
            except ValueError:
                following = None
            if following is None or _origin(following) != origin:
                raise BackendUnavailable("redirect_refused", f"{what}: HTTP {resp.status} to another origin")
            if resp.status not in (307, 308):
                raise BackendUnavailable("bad_status", f"{what} answered HTTP {resp.status}")
            target = following.with_fragment(None)
        raise BackendUnavailable("bad_status", f"{what}: more than {MAX_REDIRECTS} redirects")

    async def _read_body(self, resp: aiohttp.ClientResponse, *, what: str) -> bytes:
        """A whole backend response body, at most ``max_message_bytes``, read within the timeout."""
        limit = self._limits.max_message_bytes
        if resp.content_length is not None and resp.content_length > limit:
            raise BackendUnavailable("malformed_response", f"{what}: response over {limit} bytes")
        async with asyncio.timeout(self._timeout):
            return await read_bounded(resp.content, limit, what=what)

    def _client_timeout(self, *, total: bool) -> aiohttp.ClientTimeout:
        """``total``: the whole exchange within the backend timeout; else only connecting is bounded
        (a stream is read for as long as the call runs, each wait bounded by its reader)."""
        return self._timeouts[total]
