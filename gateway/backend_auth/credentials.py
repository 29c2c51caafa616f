"""Per route: what the backend is sent as credentials, decided per backend HTTP request.

:class:`RouteCredentials` is built once per route when the app starts. For each call it gives a
:class:`BackendCredential` (or none), which the backend session asks for headers on every HTTP
request it makes, so a call held across rounds longer than a token's lifetime still answers with a
valid token, and which it tells when the backend answered 401 (one refetch and one retry).

Modes (``routes[].backend.auth.mode``):

* ``none``: no credential of the gateway's. The client's ``Authorization`` is forwarded only on a
  route without ``auth.jwt`` whose ``backend.forward_authorization`` is true (the default).
* ``header``: a static secret header, from an environment variable or a file (:mod:`.secrets`).
* ``client_credentials``: the gateway's own OAuth token (one per route, RFC 8707 ``resource``).
* ``token_exchange``: an RFC 8693 token exchanged for the caller's verified token (one per client
  token, capped by its ``exp``), so the backend learns who calls without seeing their token.
* ``passthrough``: the client's own ``Authorization`` (explicitly acknowledged in the config).
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from typing import Protocol

import aiohttp
import structlog

from gateway.backend_auth.secrets import SecretSource
from gateway.backend_auth.tokens import Token, TokenCache, TokenEndpoint, lifetime_of, request_token
from gateway.config.load import ConfigError
from gateway.config.model import RouteConfig
from gateway.errors import BACKEND_AUTH, BackendUnavailable

log = structlog.get_logger("gateway.backend_auth")

TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"  # noqa: S105 - a URN, not a secret
ACCESS_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:access_token"  # noqa: S105 - a URN
_CLIENT_KEY = "client_credentials"
MAX_SUBJECTS = 10_000
"""Most callers whose latest client token is remembered per token_exchange route."""
clock: Callable[[], float] = time.monotonic
"""The monotonic clock a route's token lifetimes are measured on, taken when its credentials are
built (a test puts a fake one here before the app starts)."""


def secret_source(route: RouteConfig, index: int) -> SecretSource | None:
    """The secret of ``route``'s backend auth mode (header value or client secret), if it has one."""
    auth = route.backend.auth
    ref, name = (auth.value, "value") if auth.mode == "header" else (auth.client_secret, "client_secret")
    if ref is None:
        return None
    return SecretSource(ref, where=f"routes[{index}].backend.auth.{name}", reload_interval=auth.reload_interval)


def check_secrets(routes: list[RouteConfig]) -> None:
    """At start: every route's backend secret can be read (else a :class:`ConfigError` naming it)."""
    for index, route in enumerate(routes):
        source = secret_source(route, index)
        if source is not None:
            try:
                source.check()
            except ValueError as exc:
                raise ConfigError(str(exc)) from None


class BackendCredential(Protocol):
    """Credentials of one backend HTTP request, asked for again on every request."""

    async def headers(self) -> dict[str, str]: ...

    async def refused(self, sent: dict[str, str]) -> bool:
        """The backend answered 401 to ``sent``: forget it; whether one retry may succeed."""
        ...


class OutboundHeaders(dict[str, str]):
    """The headers a backend is sent on a caller's behalf (the route's ``backend.headers``, and the
    client's ``Authorization`` where it is forwarded), with the credential the backend session
    resolves on each request. A ``dict`` so that it travels through the session pool unchanged."""

    def __init__(self, headers: dict[str, str], credential: BackendCredential | None = None) -> None:
        super().__init__(headers)
        self.credential = credential


class RouteCredentials:
    """A route's backend credential policy (see the module docstring)."""

    def __init__(self, route: RouteConfig, index: int, http: aiohttp.ClientSession) -> None:
        auth = route.backend.auth
        self.mode = auth.mode
        self._route = route
        self._http = http
        jwt_route = route.auth is not None and route.auth.jwt is not None
        self.forwards_client_token = auth.mode == "passthrough" or (
            auth.mode == "none" and not jwt_route and route.backend.forward_authorization
        )
        """Whether the client's ``Authorization`` goes upstream as it came."""
        self._secret = secret_source(route, index)
        if auth.mode == "passthrough":
            log.warning("backend_token_passthrough", route=route.name)
        self._clock = clock
        self._cache = TokenCache(auth.failure_cache, self._clock)
        self._endpoint = TokenEndpoint(
            url=auth.token_url or "",
            client_id=auth.client_id or "",
            client_auth=auth.client_auth,
            timeout=auth.token_timeout,
            max_bytes=auth.max_token_response_bytes,
            where=route.name,
        )
        self._subjects: dict[str, tuple[str, float | None]] = {}
        """token_exchange: principal → its latest verified client token and that token's ``exp``."""

    def for_caller(self, principal: str | None, token: str | None, expires: float | None) -> BackendCredential | None:
        """The credential of a call by ``principal`` whose verified client token is ``token``
        (``auth.jwt`` routes; else None) expiring at ``expires`` (Unix time)."""
        if self.mode == "header":
            return _StaticHeader(self)
        if self.mode == "client_credentials":
            return _ClientCredentials(self)
        if self.mode == "token_exchange":
            if principal is None or token is None:
                return _NoSubject()
            self._remember(principal, token, expires)
            return _Exchange(self, principal)
        return None

    def _remember(self, principal: str, token: str, expires: float | None) -> None:
        known = self._subjects.get(principal)
        if known is not None and known[1] is not None and expires is not None and known[1] > expires:
            return  # an older token arrived late: keep the newer one
        self._subjects.pop(principal, None)
        if len(self._subjects) >= MAX_SUBJECTS:
            del self._subjects[next(iter(self._subjects))]
        self._subjects[principal] = (token, expires)

    async def secret(self, *, fresh: bool = False) -> str:
        assert self._secret is not None
        return await self._secret.value(fresh=fresh)

    def header_name(self) -> str:
        return self._route.backend.auth.header_name

    async def client_token(self) -> str:
        return await self._cache.get(_CLIENT_KEY, lambda: self._fetch({"grant_type": "client_credentials"}, None))

    async def exchanged_token(self, principal: str) -> tuple[str, str]:
        """(cache key, token) for ``principal``'s latest client token."""
        subject = self._subjects.get(principal)
        if subject is None or (subject[1] is not None and subject[1] <= time.time()):
            raise BackendUnavailable(BACKEND_AUTH, "the client's token expired")
        token, expires = subject
        key = hashlib.sha256(token.encode()).hexdigest()
        form = {"grant_type": TOKEN_EXCHANGE, "subject_token": token, "subject_token_type": ACCESS_TOKEN_TYPE}
        return key, await self._cache.get(key, lambda: self._fetch(form, expires))

    def invalidate(self, key: str, value: str) -> None:
        self._cache.invalidate(key, value)

    async def _fetch(self, form: dict[str, str], cap: float | None) -> Token:
        auth = self._route.backend.auth
        form = {**form, "resource": auth.resource or self._route.backend.url or ""}
        if auth.audience:
            form["audience"] = auth.audience
        if auth.scope:
            form["scope"] = auth.scope
        value, expires_in = await request_token(self._http, self._endpoint, form, await self.secret())
        refresh_at, expires = lifetime_of(expires_in, cap, self._clock(), time.time())
        return Token(value, refresh_at, expires)


class _StaticHeader:
    def __init__(self, route: RouteCredentials) -> None:
        self._route = route

    async def headers(self) -> dict[str, str]:
        return {self._route.header_name(): await self._route.secret()}

    async def refused(self, sent: dict[str, str]) -> bool:
        # A rotated file may already hold the new value: re-read it, retry only if it changed.
        return await self._route.secret(fresh=True) != sent.get(self._route.header_name())


class _ClientCredentials:
    def __init__(self, route: RouteCredentials) -> None:
        self._route = route

    async def headers(self) -> dict[str, str]:
        return {"Authorization": "Bearer " + await self._route.client_token()}

    async def refused(self, sent: dict[str, str]) -> bool:
        self._route.invalidate(_CLIENT_KEY, sent.get("Authorization", "").removeprefix("Bearer "))
        return True


class _Exchange:
    def __init__(self, route: RouteCredentials, principal: str) -> None:
        self._route = route
        self._principal = principal
        self._key: str | None = None

    async def headers(self) -> dict[str, str]:
        self._key, token = await self._route.exchanged_token(self._principal)
        return {"Authorization": "Bearer " + token}

    async def refused(self, sent: dict[str, str]) -> bool:
        if self._key is not None:
            self._route.invalidate(self._key, sent.get("Authorization", "").removeprefix("Bearer "))
        return True


class _NoSubject:
    """token_exchange without a verified client token (a route without auth.jwt): nothing to exchange."""

    async def headers(self) -> dict[str, str]:
        raise BackendUnavailable(BACKEND_AUTH, "token_exchange needs a verified client token (auth.jwt)")

    async def refused(self, sent: dict[str, str]) -> bool:
        return False
