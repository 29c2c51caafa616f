"""Who is calling: the front door's one question, answered per route before any other work.

:meth:`AuthGates.identify` yields an :class:`Identified` principal or a finished refusal response.
The principal is a string every principal-keyed structure uses (the hold binding sealed into
``requestState``, the per-principal hold cap, the backend session pool key, listen streams); it
never reaches the client or the logs.

Three modes, per route (``routes[].auth``):

* **none** (no ``auth`` block): the principal is the raw ``Authorization`` header, unverified, or
  ``None`` (anonymous) when there is none. Anonymous callers share one budget
  (``limits.max_holds_anonymous``).
* **jwt**: a ``Bearer`` JWT verified by :mod:`gateway.auth.verify`; the principal is
  ``(issuer, subject)``, so a refreshed token keeps its holds. Missing or bad → HTTP 401 with
  ``WWW-Authenticate: Bearer …`` (``error="invalid_token"`` when a token was sent, and
  ``resource_metadata="…"`` when the route publishes RFC 9728 metadata) and a fixed body.
* **trusted_header**: the principal is a header set by a reverse proxy that authenticated the
  client. It is honoured only when the TCP peer is inside ``proxies``, or when the request came over
  the replicas' authenticated forwarding hop (the forwarding replica already judged the peer). Any
  other request is refused with HTTP 403, with or without the header.

The client's ``Authorization`` header is still what the backend receives when the route forwards it;
verification decides who the caller is, not what the backend sees.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

import aiohttp
import structlog
from aiohttp import web

from gateway.auth.jwks import JwksCache
from gateway.auth.verification_keys import BadKey, VerificationKey, parse_static_keys
from gateway.auth.verify import REASONS, JwtVerifier, KeySource, Refused, static_source
from gateway.config.load import ConfigError
from gateway.config.model import AuthConfig, ResourceMetadataConfig, RouteConfig

log = structlog.get_logger("gateway.auth")

WELL_KNOWN: Final = "/.well-known/oauth-protected-resource"
MAX_HEADER_PRINCIPAL = 256
"""Longest trusted-header value accepted as a principal (characters)."""
TRUSTED_HEADER_REASONS: Final = frozenset({"untrusted_peer", "header_missing", "header_too_long"})
"""Why a ``trusted_header`` route refuses a request (HTTP 403); JWT routes refuse with
:data:`gateway.auth.verify.REASONS` (HTTP 401). Both are the ``reason`` label of
``mrtr_gateway_auth_refusals_total``."""

_BODY_401: Final = json.dumps(
    {"error": "invalid_token", "error_description": "A valid bearer token is required"}, separators=(",", ":")
).encode()
_BODY_403: Final = json.dumps(
    {"error": "forbidden", "error_description": "This endpoint only accepts requests through its proxy"},
    separators=(",", ":"),
).encode()


@dataclass(frozen=True, slots=True)
class Identified:
    principal: str | None
    """``None``: an anonymous caller (only on routes without ``auth``)."""
    token: str | None = None
    """``auth.jwt`` routes: the verified bearer token (what ``token_exchange`` exchanges)."""
    expires: float | None = None
    """``auth.jwt`` routes: the token's ``exp`` (Unix time)."""


def metadata_url(metadata: ResourceMetadataConfig) -> str:
    """RFC 9728 §3.1: the well-known prefix inserted between the resource's origin and its path."""
    parts = urlsplit(metadata.resource)
    path = parts.path.rstrip("/")
    return f"{parts.scheme}://{parts.netloc}{WELL_KNOWN}{path}"


def metadata_document(metadata: ResourceMetadataConfig) -> dict[str, object]:
    document: dict[str, object] = {
        "resource": metadata.resource,
        "authorization_servers": list(metadata.authorization_servers),
        "bearer_methods_supported": ["header"],
    }
    if metadata.scopes_supported is not None:
        document["scopes_supported"] = list(metadata.scopes_supported)
    return document


class RouteGate:
    """The identification policy of one route."""

    def __init__(
        self,
        route: RouteConfig,
        http: Callable[[], aiohttp.ClientSession],
        static: list[VerificationKey] | None = None,
        on_refusal: Callable[[str, str], None] = lambda route, reason: None,
    ) -> None:
        self.route = route
        self._on_refusal = on_refusal
        auth: AuthConfig | None = route.auth
        self._verifier: JwtVerifier | None = None
        self._proxies: list[ipaddress.IPv4Network | ipaddress.IPv6Network] = []
        self._metadata_param = ""
        self.jwks: JwksCache | None = None
        if auth is None:
            return
        if auth.jwt is not None:
            jwt_config = auth.jwt
            source: KeySource
            if jwt_config.jwks_url is not None:
                self.jwks = JwksCache(
                    http,
                    jwt_config.jwks_url,
                    ttl=jwt_config.jwks_cache_ttl,
                    min_refresh=jwt_config.jwks_min_refresh,
                    timeout=jwt_config.jwks_timeout,
                    max_bytes=jwt_config.jwks_max_bytes,
                )
                source = self.jwks.keys_for
            else:
                source = static_source(static or [])
            self._verifier = JwtVerifier(jwt_config, source)
        if auth.trusted_header is not None:
            self._proxies = [ipaddress.ip_network(p, strict=False) for p in auth.trusted_header.proxies]
        if auth.resource_metadata is not None:
            self._metadata_param = f'resource_metadata="{metadata_url(auth.resource_metadata)}"'

    @property
    def refusal_reasons(self) -> frozenset[str]:
        """Every reason this route's policy can refuse with (none without ``auth``)."""
        auth = self.route.auth
        if auth is None:
            return frozenset()
        return TRUSTED_HEADER_REASONS if auth.trusted_header is not None else REASONS

    async def identify(self, request: web.Request, *, forwarded: bool) -> Identified | web.Response:
        auth = self.route.auth
        if auth is None:
            return Identified(request.headers.get("Authorization") or None)
        if auth.trusted_header is not None:
            return self._trusted(request, auth.trusted_header.header, forwarded=forwarded)
        assert self._verifier is not None  # the config model requires jwt or trusted_header
        credential = request.headers.get("Authorization", "")
        scheme, _, token = credential.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return self._unauthorized("missing" if not credential else "malformed", token_sent=bool(credential))
        verdict = await self._verifier.verify(token.strip())
        if isinstance(verdict, Refused):
            return self._unauthorized(verdict.reason, token_sent=True)
        return Identified(verdict.principal, token.strip(), verdict.expires)

    def _trusted(self, request: web.Request, header: str, *, forwarded: bool) -> Identified | web.Response:
        if not forwarded and not self._from_proxy(request.remote):
            return self._forbidden("untrusted_peer")
        value = request.headers.get(header, "").strip()
        if not value or len(value) > MAX_HEADER_PRINCIPAL:
            return self._forbidden("header_missing" if not value else "header_too_long")
        return Identified("header:" + value)

    def _from_proxy(self, remote: str | None) -> bool:
        if remote is None:
            return False
        try:
            address = ipaddress.ip_address(remote.split("%", 1)[0])
        except ValueError:
            return False
        return any(address in network for network in self._proxies)

    def _unauthorized(self, reason: str, *, token_sent: bool) -> web.Response:
        log.info("auth_refused", route=self.route.name, reason=reason)
        self._on_refusal(self.route.name, reason)
        # RFC 6750 §3.1: no error code when the request carried no token at all.
        params = ['error="invalid_token"'] if token_sent else []
        if self._metadata_param:
            params.append(self._metadata_param)
        challenge = "Bearer " + ", ".join(params) if params else "Bearer"
        return web.Response(
            status=401,
            body=_BODY_401,
            content_type="application/json",
            headers={"WWW-Authenticate": challenge},
        )

    def _forbidden(self, reason: str) -> web.Response:
        log.info("auth_refused", route=self.route.name, reason=reason)
        self._on_refusal(self.route.name, reason)
        return web.Response(status=403, body=_BODY_403, content_type="application/json")


def static_keys(routes: list[RouteConfig]) -> dict[str, list[VerificationKey]]:
    """Route path → its parsed static JWT keys; a key that cannot be used is a
    :class:`~gateway.config.load.ConfigError` naming the route and the key (``check-config`` runs this)."""
    parsed: dict[str, list[VerificationKey]] = {}
    for index, route in enumerate(routes):
        jwt_config = route.auth.jwt if route.auth is not None else None
        if jwt_config is None or jwt_config.jwks_url is not None:
            continue
        try:
            parsed[route.path] = parse_static_keys(jwt_config.keys, jwt_config.key_files)
        except BadKey as exc:
            raise ConfigError(f"routes[{index}].auth.jwt.{exc}") from exc
    return parsed


class AuthGates:
    """Every route's :class:`RouteGate`, and the RFC 9728 documents the routes publish."""

    def __init__(
        self,
        routes: list[RouteConfig],
        http: Callable[[], aiohttp.ClientSession],
        on_refusal: Callable[[str, str], None] = lambda route, reason: None,
    ) -> None:
        """Raises :class:`~gateway.config.load.ConfigError` when a static key cannot be used."""
        static = static_keys(routes)
        self.by_path = {route.path: RouteGate(route, http, static.get(route.path), on_refusal) for route in routes}

    async def identify(self, request: web.Request, path: str, *, forwarded: bool) -> Identified | web.Response:
        return await self.by_path[path].identify(request, forwarded=forwarded)

    def metadata_paths(self) -> dict[str, dict[str, object]]:
        """Well-known path → metadata document: the path-suffixed form for each publishing route, and
        the bare root form when exactly one route publishes (with several it would be ambiguous)."""
        documents = {
            WELL_KNOWN + route.path.rstrip("/"): metadata_document(route.auth.resource_metadata)
            for route in (gate.route for gate in self.by_path.values())
            if route.auth is not None and route.auth.resource_metadata is not None
        }
        if len(documents) == 1:
            documents[WELL_KNOWN] = next(iter(documents.values()))
        return documents


def metadata_handler(document: dict[str, object]) -> Callable[[web.Request], Awaitable[web.Response]]:
    payload = json.dumps(document, separators=(",", ":")).encode()

    async def serve(request: web.Request) -> web.Response:
        return web.Response(body=payload, content_type="application/json", headers={"Cache-Control": "max-age=300"})

    return serve
