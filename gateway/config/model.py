"""The user-facing YAML schema.

Strict on purpose (``extra="forbid"``): a misspelt option in a gateway config is a silent outage
waiting to happen, so an unknown key is an error that names its YAML path. This module imports
nothing else from the package; :mod:`gateway.config.load` turns the validated model into the runtime
settings the rest of the gateway reads.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


PositiveSeconds = Annotated[float, Field(gt=0, le=86_400)]

_HOST_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?", re.ASCII)


def check_host(host: str) -> str:
    """Refuse what no resolver accepts (spaces, empty labels, stray characters) at check time, not at the
    first connection: an IP address (IPv6 without brackets here) or a DNS name of letters, digits, ``-``, ``_``."""
    if not host:
        raise ValueError("the host is empty")
    if any(c.isspace() for c in host):
        raise ValueError(f"the host {host!r} contains a space")
    try:
        ipaddress.ip_address(host)
    except ValueError:
        labels = host.removesuffix(".").split(".")
        if len(host) > 253 or not all(_HOST_LABEL.fullmatch(label) for label in labels):
            raise ValueError(f"the host {host!r} is not a valid host name or IP address") from None
    return host


def check_http_url(url: str, *, base_only: bool = False) -> str:
    """An absolute http(s) URL whose host and port could be connected to; ``base_only``: no path or query."""
    if any(c.isspace() or ord(c) < 0x20 or c == "\x7f" for c in url):
        raise ValueError("must not contain spaces or control characters")
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError("must be an absolute http:// or https:// URL")
    hostport = parts.netloc.rpartition("@")[2]
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        raise ValueError(f"the port in {hostport!r} must be a number from 1 to 65535")
    check_host(parts.hostname or "")
    if parts.fragment or url.endswith("#"):
        raise ValueError("must not have a #fragment (it is never sent to the server)")
    if base_only and (parts.path not in ("", "/") or parts.query or url.endswith("?")):
        raise ValueError("must be a base URL like http://10.1.2.3:8080 (scheme, host, port; no path)")
    return url


def _looks_like_origin(value: str) -> bool:
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return False
    return bool(parts.scheme and parts.hostname) and parts.path in ("", "/") and not (parts.query or parts.fragment)


class ListenConfig(_Strict):
    """Where the gateway accepts client traffic."""

    host: str = Field("0.0.0.0", description="Interface to bind. Use 127.0.0.1 for local-only.")  # noqa: S104
    port: int = Field(8080, ge=0, le=65535, description="TCP port (0 picks a free one).")
    max_body_bytes: int = Field(
        4 * 1024 * 1024, ge=1024, description="Largest request body accepted; larger bodies get HTTP 413."
    )
    body_timeout: PositiveSeconds = Field(
        30,
        description="Seconds a client may take to send a request body; a slower or stalled one gets HTTP 408 and "
        "its connection is closed.",
    )
    allowed_origins: list[str] | None = Field(
        None,
        description=(
            "Browser origins allowed to call the gateway besides loopback ones, e.g. https://app.example.com, "
            "or '*' for any. A request with any other Origin header gets HTTP 403 on every route endpoint "
            "(DNS-rebinding protection). Loopback origins (localhost, 127.0.0.0/8, [::1]) are always allowed; "
            "an origin that merely equals the Host header is not. Default: null, loopback origins only. "
            "Requests without an Origin header (non-browser clients) are never refused by this."
        ),
    )

    max_header_bytes: int = Field(
        8190,
        ge=1024,
        le=65536,
        description=(
            "Longest request line and header field accepted, in bytes; a longer one gets HTTP 400 before the "
            "request reaches a handler."
        ),
    )
    max_headers: int = Field(
        100, ge=16, le=1000, description="Most header lines one request may carry; more get HTTP 400."
    )
    max_connections: int = Field(
        1000,
        ge=1,
        description=(
            "Most client connections open at once; past it a new connection gets one HTTP 503 and is closed. "
            "Keep it below the process's open-file limit minus the backend connections."
        ),
    )

    # Operations: graceful drain and where /metrics is served.
    drain_timeout: PositiveSeconds = Field(
        20,
        description=(
            "Seconds a replica told to stop (SIGTERM) keeps serving the retries of calls it holds before it shuts "
            "down: /readyz turns 503 at once, new interactive calls get a retryable 503 (data.reason 'draining'), "
            "and the drain ends as soon as nothing is held or in flight. Holds still left then expire as on any "
            "shutdown. Keep the pod's terminationGracePeriodSeconds above preStop + drain_timeout + 10 s."
        ),
    )
    metrics_port: int | None = Field(
        None,
        ge=1,
        le=65535,
        description=(
            "Serve /metrics on this port (on listen.host) instead of the client port, e.g. to keep it off the "
            "public Service. Default: null, /metrics on listen.port."
        ),
    )

    @field_validator("allowed_origins")
    @classmethod
    def _origins(cls, origins: list[str] | None) -> list[str] | None:
        for origin in origins or []:
            if origin not in ("*", "null") and not _looks_like_origin(origin):
                raise ValueError(f"{origin!r} is not an origin (scheme://host[:port], no path), nor '*'")
        return origins

    @field_validator("host")
    @classmethod
    def _bindable(cls, host: str) -> str:
        return check_host(host)


class StateConfig(_Strict):
    """Sealing keys for requestState (AES-256-GCM via HKDF)."""

    keys: list[str] = Field(
        default_factory=list,
        description=(
            "Secrets, each at least 32 bytes. The first seals, every one unseals. To rotate: add the new key "
            "at the end of every replica's list first, then move it to the front, then drop the old one after "
            "the hold TTL, so that no replica ever meets a token sealed with a key it does not know. "
            "Overridden by the MRTR_GATEWAY_STATE_KEYS environment variable (comma-separated). Not together "
            "with keys_file. Generate one with `mrtr-gateway gen-key`."
        ),
    )
    keys_file: str | None = Field(
        None,
        description=(
            "Read the keys from this path instead of `keys` (e.g. a mounted Kubernetes Secret): a file holding "
            "the list (comma- or newline-separated, the first seals), or a directory holding one key per file, "
            "taken in file-name order (hidden files such as Kubernetes' ..data are skipped). Re-read on SIGHUP "
            "and every reload_interval seconds; a changed list replaces the ring without dropping held calls, "
            "and a list that does not validate is logged and ignored. MRTR_GATEWAY_STATE_KEYS overrides it."
        ),
    )
    reload_interval: float = Field(
        10,
        ge=0,
        le=3600,
        description="Seconds between checks of keys_file for a changed list (0: only on SIGHUP).",
    )
    ttl: PositiveSeconds = Field(
        600, description="Upper bound on a requestState's lifetime in seconds (a hold's TTL caps it further)."
    )

    @field_validator("keys")
    @classmethod
    def _long_enough(cls, keys: list[str]) -> list[str]:
        check_state_keys(keys)
        return keys

    @model_validator(mode="after")
    def _one_source(self) -> StateConfig:
        if self.keys and self.keys_file:
            raise ValueError("set keys or keys_file, not both")
        return self


def check_state_keys(keys: list[str]) -> None:
    """Every key at least 32 bytes, none repeated (the ring would refuse both anyway, later and less clearly)."""
    for index, key in enumerate(keys):
        if len(key.encode()) < 32:
            raise ValueError(
                f"key #{index} is {len(key.encode())} bytes; each key must be at least 32 bytes "
                "(generate one with `mrtr-gateway gen-key`)"
            )
        if key in keys[:index]:
            raise ValueError(f"key #{index} repeats key #{keys.index(key)}; remove the duplicate")


class CacheHints(_Strict):
    """Caching hints the gateway adds to cacheable 2026-07-28 results (legacy servers have none)."""

    ttl_ms: int = Field(0, ge=0, description="ttlMs put on cacheable results. 0 = do not reuse.")
    scope: Literal["public", "private"] = Field(
        "private", description="cacheScope put on cacheable results. 'private' is the safe default."
    )


class BackendLimitsConfig(_Strict):
    """Bounds on what one backend may send; past one, the call fails with a backend error
    (``backend_flood`` or ``malformed_response``) and the session is closed."""

    max_message_bytes: int = Field(
        16 * 1024 * 1024,
        ge=1024,
        description="Largest backend message: one SSE event (with any comments before it), one JSON response "
        "body, one stdio line.",
    )
    max_round_requests: int = Field(
        64, ge=1, description="Most server requests (elicitation, sampling, roots) gathered into one input round."
    )
    max_round_messages: int = Field(
        1024, ge=1, description="Most backend messages (requests and notifications) received while a round gathers."
    )
    max_round_bytes: int = Field(
        8 * 1024 * 1024, ge=1024, description="Most bytes of backend messages received while a round gathers."
    )
    max_queued_messages: int = Field(
        1024, ge=1, description="Most unread backend messages kept for one call (e.g. while it is held)."
    )
    max_queued_bytes: int = Field(
        16 * 1024 * 1024, ge=1024, description="Most bytes of unread backend messages kept for one call."
    )
    stream_idle_timeout: PositiveSeconds = Field(
        300,
        description="Seconds the standalone GET stream of a streamable-HTTP session may stay silent (not even a "
        "comment) before it is reopened.",
    )
    stream_reconnects: int = Field(
        5,
        ge=1,
        le=100,
        description="Consecutive reopenings of the GET stream that deliver no message before it is given up "
        "(jittered, doubling backoff between them, up to 5 s).",
    )


class BackendConfig(_Strict):
    """The legacy MCP server behind a route."""

    # transport comes first: the checks of url, command, env, cwd and headers depend on it, and
    # pydantic validates fields in declaration order (info.data holds the fields validated so far).
    transport: Literal["streamable-http", "sse", "stdio"] = Field(
        "streamable-http",
        description="Legacy transport: 'streamable-http' (2025-03-26 and later), 'sse' (the 2024-11-05 HTTP+SSE "
        "transport; url is then the SSE stream's URL) or 'stdio' (the gateway runs `command`, one child process "
        "per backend session, and speaks newline-delimited JSON-RPC on its stdin/stdout).",
    )
    url: str | None = Field(
        None,
        validate_default=True,
        description="The legacy server's MCP endpoint (streamable-http) or SSE URL (sse). Required for those "
        "transports; not allowed for stdio.",
    )
    command: list[str] | None = Field(
        None,
        validate_default=True,
        min_length=1,
        description='stdio only, and required there: the server\'s argv, e.g. ["python", "server.py"]. The '
        "program is looked up on PATH; no shell is involved.",
    )
    env: dict[str, str] = Field(
        default_factory=dict,
        description="stdio only: environment variables of the server process, added to a minimal environment "
        "inherited from the gateway (PATH, HOME, LANG).",
    )
    cwd: str | None = Field(
        None, description="stdio only: working directory of the server process. Default: the gateway's."
    )
    timeout: PositiveSeconds = Field(
        30, description="Seconds the backend may stay silent during one call before it counts as unavailable."
    )
    connect_timeout: PositiveSeconds = Field(
        5, description="Seconds to establish a TCP connection (stdio: to start the server process)."
    )
    protocol_version: Literal["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"] | None = Field(
        None, description="Pin the handshake revision offered to the backend. Default: the newest."
    )
    headers: dict[str, str] = Field(
        default_factory=dict,
        description="Extra headers sent on every backend request (e.g. an API key). Not allowed for stdio.",
    )
    forward_authorization: bool = Field(
        True, description="Forward the client's Authorization header to the backend (no effect for stdio)."
    )
    max_sessions: int = Field(
        256, ge=1, description="Upper bound on open backend sessions for this route (stdio: server processes)."
    )
    session_idle: PositiveSeconds = Field(
        300,
        description="Seconds an unused backend session is kept before it is closed (DELETE; stdio: the process "
        "is stopped).",
    )
    limits: BackendLimitsConfig = Field(default_factory=BackendLimitsConfig)

    @field_validator("url")
    @classmethod
    def _url_for_transport(cls, url: str | None, info: ValidationInfo) -> str | None:
        transport = info.data.get("transport")  # absent when transport itself is invalid
        if url is None:
            if transport in ("streamable-http", "sse"):
                raise ValueError(f"required when transport is {transport}")
            return url
        if transport == "stdio":
            raise ValueError("not allowed when transport is stdio (the server is run from `command`)")
        return check_http_url(url)

    @field_validator("command")
    @classmethod
    def _command_for_transport(cls, command: list[str] | None, info: ValidationInfo) -> list[str] | None:
        transport = info.data.get("transport")
        if command is None:
            if transport == "stdio":
                raise ValueError("required when transport is stdio (the server's argv)")
            return command
        if transport is not None and transport != "stdio":
            raise ValueError("only allowed when transport is stdio")
        if not command[0].strip():
            raise ValueError("the first item (the program to run) must not be empty")
        return command

    @field_validator("env", "cwd")
    @classmethod
    def _stdio_only(cls, value: dict[str, str] | str | None, info: ValidationInfo) -> dict[str, str] | str | None:
        transport = info.data.get("transport")
        if value and transport is not None and transport != "stdio":
            raise ValueError("only allowed when transport is stdio")
        return value

    @field_validator("headers")
    @classmethod
    def _http_only(cls, headers: dict[str, str], info: ValidationInfo) -> dict[str, str]:
        if headers and info.data.get("transport") == "stdio":
            raise ValueError("not allowed when transport is stdio (there is no HTTP request to carry them)")
        return headers


class HoldPolicy(_Strict):
    """How long a legacy exchange waiting for client input is kept."""

    ttl: PositiveSeconds = Field(300, description="Seconds a held exchange waits for the client's retry.")
    max_rounds: int = Field(
        10,
        ge=1,
        le=100,
        description="Most input rounds one call may take. Every retry that is answered with another round "
        "counts, including a retry that answers nothing.",
    )
    max_duration: PositiveSeconds = Field(
        1800,
        description="Absolute limit, in seconds from its first round, on how long one call may be held. Each retry "
        "re-arms the hold's ttl, but never past this; a replayed call keeps the original call's limit.",
    )
    batch_window: float = Field(
        0.01,
        ge=0,
        le=5,
        description=(
            "Seconds the backend may stay quiet after a server request before the round is sent, so requests "
            "it sends together share one round. Each round costs this much latency; raise it for backends whose "
            "requests arrive spread out (the round is still correct if one comes late: it becomes the next round)."
        ),
    )
    on_lost: Literal["error", "replay"] = Field(
        "error",
        description=(
            "When a retry's hold is gone (its replica died): 'error' answers the hold_lost error and the client "
            "starts over; 'replay' re-runs the call on a fresh backend session and answers the server's requests "
            "from the answers sealed in the requestState. Only for routes whose tools are safe to run again."
        ),
    )


JwtAlgorithm = Literal["RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"]
"""Asymmetric signature algorithms only: no ``none`` and no HMAC (``HS*``), so a public key can never
be used as a shared secret."""


def _default_algorithms() -> list[JwtAlgorithm]:
    return ["RS256", "ES256"]


class JwtConfig(_Strict):
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


class TrustedHeaderConfig(_Strict):
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


class ResourceMetadataConfig(_Strict):
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


class AuthConfig(_Strict):
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


class RootConfig(_Strict):
    """One root the gateway gives a backend that asks ``roots/list`` while no call is in flight."""

    uri: str = Field(description="The root's URI; must start with file:// (as every legacy revision requires).")
    name: str | None = Field(None, description="Human-readable name for the root.")

    @field_validator("uri")
    @classmethod
    def _file_uri(cls, uri: str) -> str:
        if not uri.startswith("file://") or any(c.isspace() for c in uri):
            raise ValueError("must be a file:// URI without spaces, e.g. file:///workspace")
        return uri


class RouteConfig(_Strict):
    """One public MCP endpoint mapped to one legacy backend."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$", description="Route id (logs, metrics).")
    path: str = Field(description="Public path the 2026-07-28 endpoint is served on, e.g. /mcp.")
    backend: BackendConfig
    cache: CacheHints = Field(default_factory=CacheHints)
    holds: HoldPolicy = Field(default_factory=HoldPolicy)
    auth: AuthConfig | None = Field(
        None,
        description="Verified principals (JWT or a trusted proxy header). Default: null, the principal is the raw "
        "Authorization header and is not verified.",
    )
    roots: list[RootConfig] | None = Field(
        None,
        description=(
            "Roots the gateway answers itself when the backend asks roots/list while no call is in flight "
            "(many servers ask right after the session starts and cache the answer), for a route that fronts "
            "one workspace. Default: null, such a request waits for the next interactive call and is asked of "
            "its client in the call's first round (before the call is sent), or expires after holds.ttl. "
            "Requests made during a call always go to that call's client."
        ),
    )

    @field_validator("path")
    @classmethod
    def _abs_path(cls, path: str) -> str:
        if not path.startswith("/") or any(c.isspace() for c in path) or path in ("/healthz", "/readyz", "/metrics"):
            raise ValueError("must start with '/', contain no spaces and not be /healthz, /readyz or /metrics")
        if "?" in path or "#" in path:
            raise ValueError("must be a plain path without a query ('?') or fragment ('#'); routes match the path")
        return path


class LimitsConfig(_Strict):
    """Global bounds that keep memory flat under abuse."""

    max_holds: int = Field(10_000, ge=1, description="Most held exchanges across all routes.")
    max_holds_per_principal: int = Field(100, ge=1, description="Most held exchanges per principal.")
    max_holds_anonymous: int = Field(
        100,
        ge=1,
        description="Most held exchanges of all callers without a principal together (no Authorization on a route "
        "without auth): anonymous callers share this one budget.",
    )
    retry_after: int = Field(5, ge=1, description="Retry-After seconds sent with HTTP 503 when a bound is hit.")
    max_listen_streams: int = Field(
        1000, ge=1, description="Most subscriptions/listen streams open at once, across all routes."
    )
    max_listen_streams_per_principal: int = Field(
        16, ge=1, description="Most subscriptions/listen streams one client credential may hold open at once."
    )
    tool_schema_cache_entries: int = Field(
        1000,
        ge=1,
        description="Per route, most cached tool lists (one per distinct client credential, kept 60 s) used to "
        "check Mcp-Param-* headers; the least recently used is dropped first.",
    )
    replay_memory: int = Field(
        100_000,
        ge=1,
        description="Most replayed calls one replica remembers (about 100 bytes each) so that a replay token runs "
        "once. Entries leave when no token of their call can still be valid; when every entry is still live, "
        "further replays get HTTP 503 rather than risk running a call twice.",
    )


class LoggingConfig(_Strict):
    """Structured logs, written to stderr."""

    level: Literal["debug", "info", "warning", "error"] = Field("info", description="Lowest level written.")
    json_logs: bool | None = Field(None, alias="json", description="JSON lines (default: when not a TTY).")


class ReplicasConfig(_Strict):
    """How replicas reach each other: a retry that lands on a replica that does not hold its call is
    forwarded to the one that does (its address is sealed into the requestState)."""

    advertise_url: str | None = Field(
        None,
        description=(
            "Base URL other replicas use to reach this one, e.g. http://10.1.2.3:8080 (in Kubernetes: the pod "
            "IP). Overridden by MRTR_GATEWAY_ADVERTISE_URL. Unset: retries that land on another replica fail "
            "with the hold_lost error (fine for a single replica)."
        ),
    )
    forward_timeout: PositiveSeconds = Field(
        5,
        description="Seconds to connect to the owning replica before the retry fails with the hold_lost error. "
        "Once connected, the owner may stay silent for at most the route's backend.timeout.",
    )
    ca_file: str | None = Field(
        None,
        description="PEM file of the certificate authorities that sign the replicas' certificates, for an https "
        "advertise_url whose certificates a private CA issues. Default: the system's trust store. The hop must run "
        "on a private network or over TLS.",
    )

    @field_validator("advertise_url")
    @classmethod
    def _base_url(cls, url: str | None) -> str | None:
        if url is not None:
            check_http_url(url, base_only=True)
        return url.rstrip("/") if url else url


class GatewayConfig(_Strict):
    """Top level of the YAML file."""

    listen: ListenConfig = Field(default_factory=ListenConfig)
    state: StateConfig = Field(default_factory=StateConfig)
    limits: LimitsConfig = Field(default_factory=LimitsConfig)
    logging: LoggingConfig = Field(default_factory=LoggingConfig)
    replicas: ReplicasConfig = Field(default_factory=ReplicasConfig)
    replica_id: str | None = Field(
        None,
        description="This replica's id, sealed into requestState (default: MRTR_GATEWAY_REPLICA_ID or hostname).",
    )
    routes: list[RouteConfig] = Field(min_length=1)

    @field_validator("routes")
    @classmethod
    def _unique_routes(cls, routes: list[RouteConfig]) -> list[RouteConfig]:
        # Every duplicate is reported (one per line), so fixing a name does not reveal a hidden path clash.
        problems = []
        for label in ("name", "path"):
            first_seen: dict[str, int] = {}
            for index, route in enumerate(routes):
                value = getattr(route, label)
                if value in first_seen:
                    problems.append(f"duplicate {label} {value!r}: routes[{first_seen[value]}] and routes[{index}]")
                else:
                    first_seen[value] = index
        if problems:
            raise ValueError("\n".join(problems))
        return routes
