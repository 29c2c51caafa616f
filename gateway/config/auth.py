"""The auth section of a route: JWT verification, a trusted proxy header, protected-resource metadata."""

from __future__ import annotations

import ipaddress
import re
from typing import Literal

from pydantic import Field, field_validator, model_validator

from gateway.config.checks import PositiveSeconds, Strict

JwtAlgorithm = Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
"""Asymmetric signature algorithms only: no ``none`` and no HMAC (``HS*``), so a public key can never
be used as a shared secret."""


def _default_algorithms() -> list[JwtAlgorithm]:
    return ["RS256", "ES256"]


class JwtConfig(Strict):
    """Verify a bearer JWT on every request of the route (signature, issuer, audience, expiry)."""

    issuer: str = Field(min_length=1, description="Required `iss` claim, compared exactly.")
    audience: list[str] = Field(
        min_length=1,
        description="Accepted `aud` values (at least one); a token whose audience names none of them is refused. "
        "Use this route's public URL (the resource in the protected-resource metadata).",
    )
    jwks_url: str | None = Field(
        None,
        description="The issuer's JWKS URL (http:// or https://). Keys are cached and refetched at most every "
        "jwks_min_refresh seconds when a token names an unknown `kid`. Either this or keys/key_files.",
    )
    keys: list[str] = Field(
        default_factory=list,
        description="Static verification keys: PEM public keys or JWK JSON objects (a JWKS JSON document also "
        "works). Each JWK's `kid` is matched against the token's.",
    )
    key_files: list[str] = Field(
        default_factory=list, description="Files holding static keys in the same formats, read at start-up."
    )
    algorithms: list[JwtAlgorithm] = Field(
        default_factory=_default_algorithms,
        min_length=1,
        description="Accepted `alg` values. Only asymmetric algorithms exist here: `none` and HS* are refused.",
    )
    leeway: float = Field(30, ge=0, le=300, description="Seconds of clock skew allowed on `exp` and `nbf`.")
    jwks_cache_ttl: PositiveSeconds = Field(300, description="Seconds a fetched JWKS is used before it is refetched.")
    jwks_min_refresh: PositiveSeconds = Field(
        30, description="Fewest seconds between two JWKS fetches (bounds the fetches tokens with unknown kids cause)."
    )
    jwks_timeout: PositiveSeconds = Field(5, description="Seconds one JWKS fetch may take.")
    jwks_max_bytes: int = Field(
        256 * 1024, ge=1024, le=16 * 1024 * 1024, description="Largest JWKS document accepted, in bytes."
    )

    @field_validator("jwks_url")
    @classmethod
    def _jwks_url(cls, url: str | None) -> str | None:
        if url is not None and not re.match(r"^https?://[^/\s]+", url):
            raise ValueError("must be an absolute http:// or https:// URL")
        return url

    @model_validator(mode="after")
    def _one_key_source(self) -> JwtConfig:
        if (self.jwks_url is None) == (not self.keys and not self.key_files):
            raise ValueError("set either jwks_url or keys/key_files (exactly one source of verification keys)")
        return self


class TrustedHeaderConfig(Strict):
    """Take the principal from a header set by a trusted reverse proxy that authenticated the client."""

    header: str = Field(
        pattern=r"^[A-Za-z0-9-]{1,64}$", description="Header carrying the authenticated user, e.g. X-Forwarded-User."
    )
    proxies: list[str] = Field(
        min_length=1,
        description="Peer addresses (CIDRs, e.g. 10.0.0.0/8 or 127.0.0.1/32) the header is honoured from. A request "
        "from any other peer is refused with HTTP 403, with or without the header.",
    )

    @field_validator("proxies")
    @classmethod
    def _cidrs(cls, proxies: list[str]) -> list[str]:
        for index, cidr in enumerate(proxies):
            try:
                ipaddress.ip_network(cidr, strict=False)
            except ValueError:
                raise ValueError(f"proxy #{index} ({cidr!r}) is not an IP address or CIDR") from None
        return proxies


class ResourceMetadataConfig(Strict):
    """OAuth 2.0 Protected Resource Metadata (RFC 9728) served for the route, as MCP authorization asks."""

    resource: str = Field(
        description="This route's public URL as clients see it, e.g. https://mcp.example.com/mcp. The metadata "
        "URL sent in WWW-Authenticate is its origin + /.well-known/oauth-protected-resource + its path."
    )
    authorization_servers: list[str] = Field(min_length=1, description="Issuer URLs of the authorization servers.")
    scopes_supported: list[str] | None = Field(None, description="Scopes listed in the metadata. Default: omitted.")

    @field_validator("resource")
    @classmethod
    def _resource_url(cls, url: str) -> str:
        if not re.match(r"^https?://[^/\s?#]+(/[^\s?#]*)?$", url):
            raise ValueError("must be an absolute http:// or https:// URL without query or fragment")
        return url


class AuthConfig(Strict):
    """Who the caller is. Without this block the principal is the raw Authorization header, unverified."""

    jwt: JwtConfig | None = Field(None, description="Verify bearer JWTs; the principal is (issuer, subject).")
    trusted_header: TrustedHeaderConfig | None = Field(
        None, description="Take the principal from a header set by a trusted proxy."
    )
    resource_metadata: ResourceMetadataConfig | None = Field(
        None,
        description="Serve /.well-known/oauth-protected-resource for the route and name it in WWW-Authenticate "
        "(jwt only).",
    )

    @model_validator(mode="after")
    def _one_mode(self) -> AuthConfig:
        if (self.jwt is None) == (self.trusted_header is None):
            raise ValueError("set exactly one of jwt or trusted_header")
        if self.resource_metadata is not None and self.jwt is None:
            raise ValueError("resource_metadata needs jwt (it describes bearer-token access)")
        return self
