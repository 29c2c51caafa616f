"""The backend sections of a route: the legacy server behind it, its bounds, hold policy, cache hints."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, ValidationInfo, field_validator

from gateway.config.backend_auth import BackendAuthConfig
from gateway.config.checks import PositiveSeconds, Strict, check_http_url


class CacheHints(Strict):
    """Caching hints the gateway adds to cacheable 2026-07-28 results (legacy servers have none)."""

    ttl_ms: int = Field(0, ge=0, description="ttlMs put on cacheable results. 0 = do not reuse.")
    scope: Literal["public", "private"] = Field(
        "private", description="cacheScope put on cacheable results. 'private' is the safe default."
    )


class BackendLimitsConfig(Strict):
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


class BackendConfig(Strict):
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
    oom_score_adj: int = Field(
        1000,
        ge=-1000,
        le=1000,
        description="stdio only: the Linux OOM score adjustment of the server process (its children inherit "
        "it), set as it starts. The default, 1000, makes the servers the kernel's first choice when memory runs "
        "out, not the gateway that holds every route's calls: a killed server fails the calls on it "
        "(backend_unavailable, stream_closed) and the next call starts a new one. The kernel's fallback only: in a "
        "Burstable pod the kubelet gives the gateway nearly 1000 too, so the gateway's memory guard "
        "(limits.stdio_memory_high, stdio_memory_kill, max_memory) acts first. Raising it needs no "
        "privilege; a value below the gateway's own is refused by the kernel (logged once, the server still "
        "starts).",
    )
    max_memory: int | None = Field(
        None,
        ge=1024 * 1024,
        description="stdio only: most bytes of resident memory (RSS) one server process and the processes it "
        "started may use together, read every 0.5 s from /proc; a server over it is killed (SIGKILL to its process "
        "group; the calls on it fail with backend_unavailable, stream_closed) and the route's next call starts a "
        "new one. Default: null (no bound of the route's own; limits.stdio_memory_kill still applies).",
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
        True,
        description="Deprecated (use auth). Forward the client's Authorization header to the backend on a route "
        "without auth.jwt and with auth mode none (no effect for stdio). On an auth.jwt route the client's token is "
        "never forwarded unless auth.mode is passthrough; setting this to true there is an error.",
    )
    auth: BackendAuthConfig = Field(
        default_factory=BackendAuthConfig,
        description="The gateway's own credential for the backend, resolved on every backend HTTP request. "
        "Not allowed for stdio (the server takes credentials from its environment).",
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

    # -- session pool under load (waiting, opening, stdio spares) --
    session_wait: float = Field(
        5,
        ge=0,
        le=300,
        description="Seconds a call waits, in arrival order, for a backend session when none can be had at once "
        "(every session held and max_sessions reached, or max_opening being opened) before it is answered 503 "
        "with Retry-After. 0 refuses at once.",
    )
    max_opening: int | None = Field(
        None,
        ge=1,
        description="Most backend sessions being opened at once; more calls wait for one of them, or for a "
        "session another call releases. For stdio also the route's spares being started at once (each start "
        "also waits for limits.max_process_starts). Default: 8 for the HTTP transports, 1 for stdio (starting "
        "a server process is CPU-bound: starts in parallel slow each other and the calls being served).",
    )
    prewarm: int = Field(
        2,
        ge=0,
        description="stdio only: server processes kept started ahead of need (they count in max_sessions); a call "
        "takes one and only does the handshake. Kept while the route is in use; a failing start is retried after "
        "1 s, doubling to 5 minutes (jittered); /readyz waits for the route's first. 0 starts a process per new "
        "session on demand.",
    )

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

    @field_validator("env", "cwd", "max_memory")
    @classmethod
    def _stdio_only(
        cls, value: dict[str, str] | str | int | None, info: ValidationInfo
    ) -> dict[str, str] | str | int | None:
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

    @field_validator("auth")
    @classmethod
    def _auth_for_transport(cls, auth: BackendAuthConfig, info: ValidationInfo) -> BackendAuthConfig:
        if auth.mode == "none":
            return auth
        if info.data.get("transport") == "stdio":
            raise ValueError("only mode none is allowed when transport is stdio (set the server's env instead)")
        # One owner per header: the auth mode's header is never also a static backend.headers entry.
        owned = "authorization" if auth.mode != "header" else auth.header_name.lower()
        if any(name.lower() == owned for name in info.data.get("headers") or {}):
            raise ValueError(f"backend.headers must not set {owned!r} when auth.mode is {auth.mode}")
        return auth


class HoldPolicy(Strict):
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
        0.1,
        ge=0,
        le=5,
        description=(
            "Upper bound, in seconds, on gathering one input round after a server request. A request's rounds "
            "(tools/call NAME) are fenced: sent once a ping sent as the round starts has come back, so requests "
            "the backend sends together share one round, at the cost of one backend round trip; after three "
            "fenced rounds of one question each, a round of that request is what has already arrived (no wait); "
            "a round of two questions, or one found split, fences it again for good. This bound only matters "
            "for a backend slow to answer the ping (the round is still correct if a request comes late: it "
            "becomes the next round). 0 sends every round at once."
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
