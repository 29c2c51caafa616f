"""Gateway-wide sections: where it listens, its state keys, its global limits, logging, replicas."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, field_validator, model_validator

from gateway.config.checks import (
    PositiveSeconds,
    Strict,
    check_host,
    check_http_url,
    check_state_keys,
    looks_like_origin,
)


class ListenConfig(Strict):
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
    max_connections: int | None = Field(
        None,
        ge=1,
        description=(
            "Most client connections open at once. At the cap the connection idle longest (waiting at least 10 s "
            "for its next request) is closed to admit a new one; if none is, the new connection's request gets "
            "HTTP 503 with Retry-After (data.reason 'overloaded', data.cause 'max_connections') and the "
            "connection is closed. Default: null, a third of the open-file soft limit (ulimit -n) minus 256, "
            "between 64 and 10000, leaving the rest for backend connections and stdio pipes."
        ),
    )

    # Operations: graceful drain and where /metrics is served.
    ready_requires_all_routes: bool = Field(
        False,
        description=(
            "/readyz answers 503 while any stdio route's backend cannot start (state backend_failing). Default: "
            "false, one broken route does not take the replica out of service; /readyz still waits for every "
            "stdio route's first process (state starting) and lists each route's state in its body."
        ),
    )
    drain_timeout: PositiveSeconds = Field(
        20,
        description=(
            "Seconds a replica told to stop (SIGTERM) keeps serving the retries of calls it holds before it shuts "
            "down: /readyz turns 503 at once, new interactive calls get a retryable 503 (data.reason 'draining'), "
            "and the drain ends as soon as nothing is held or in flight. Holds still left then expire as on any "
            "shutdown. Keep the pod's terminationGracePeriodSeconds above preStop + drain_timeout + 10 s."
        ),
    )
    event_loop: Literal["auto", "asyncio", "uvloop"] = Field(
        "auto",
        description=(
            "The event loop that serves everything: 'uvloop' (the uvloop extra, pip install "
            "'mrtr-gateway[uvloop]'; the container image has it), 'asyncio' (the standard library's), or 'auto', "
            "uvloop when it is installed, else asyncio. uvloop measured 4-9 % less CPU per pass-through call "
            "in the benchmark, latency within the spread (README, Benchmark). 'uvloop' without it installed is a "
            "configuration error at start."
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
            if origin not in ("*", "null") and not looks_like_origin(origin):
                raise ValueError(f"{origin!r} is not an origin (scheme://host[:port], no path), nor '*'")
        return origins

    @field_validator("host")
    @classmethod
    def _bindable(cls, host: str) -> str:
        return check_host(host)


class StateConfig(Strict):
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
    seal_version: Literal[1, 2] = Field(
        2,
        description=(
            "Token version this replica seals requestState as: 2 (the default, a binary layout) or 1 (JSON, as "
            "releases before 2 sealed it). Every replica reads both. Only for a rolling upgrade from a release "
            "that reads version 1 only: roll out with 1, then, once no old replica remains, with 2 "
            "(docs/operations.md)."
        ),
    )

    @field_validator("keys")
    @classmethod
    def _long_enough(cls, keys: list[str]) -> list[str]:
        check_state_keys(keys)
        return keys

    @field_validator("seal_version", mode="before")
    @classmethod
    def _seal_version(cls, value: object) -> object:
        # Before pydantic's coercion: YAML true, 1.0 or "1" must not quietly pick a token format.
        if type(value) is not int or value not in (1, 2):
            raise ValueError(f"must be 1 or 2 (an integer), not {value!r}")
        return value

    @model_validator(mode="after")
    def _one_source(self) -> StateConfig:
        if self.keys and self.keys_file:
            raise ValueError("set keys or keys_file, not both")
        return self


class LimitsConfig(Strict):
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
    max_process_starts: int | None = Field(
        None,
        ge=1,
        description=(
            "Most stdio server processes being started at once across all routes (spares and calls' own); a start "
            "holds its place from exec until the server answers. Default: null, the number of CPUs the gateway may "
            "use (its affinity mask, as a container's cpuset sets it)."
        ),
    )
    stdio_memory_high: float = Field(
        0.85,
        gt=0,
        le=1,
        description="Fraction of the container's memory limit (its cgroup's, as the kubelet reads it: usage minus "
        "inactive file cache) at or above which no new stdio server process is started: a call that needs one gets "
        "HTTP 503 with Retry-After (data.reason 'overloaded', data.cause 'memory_high') and spares wait; calls on "
        "running processes go on. Checked at every start and every 0.5 s. No effect without a container memory "
        "limit.",
    )
    stdio_memory_kill: float = Field(
        0.95,
        gt=0,
        le=1,
        description="Fraction of the container's memory limit at or above which the gateway kills (SIGKILL to its "
        "process group) the stdio server whose process tree has the most resident memory, one every 0.5 s while it "
        "stays there, so that the kernel's OOM killer does not pick the gateway; the calls on it fail with "
        "backend_unavailable (stream_closed). At least stdio_memory_high. No effect without a container memory "
        "limit.",
    )
    max_tasks: int = Field(
        10_000,
        ge=1,
        description="Most tasks one replica keeps, running and finished, across all routes. At the cap the finished "
        "task that ended first is evicted; if none is finished, a call that would become a task gets HTTP 503 + "
        "Retry-After (data.reason 'overloaded', data.cause 'max_tasks').",
    )
    max_tasks_per_principal: int = Field(
        100,
        ge=1,
        description="Most tasks of one principal (all anonymous callers together count as one), as max_tasks "
        "(data.cause 'max_tasks_per_principal').",
    )
    max_task_result_bytes: int = Field(
        256 * 1024 * 1024,
        ge=1024,
        description="Most bytes of results the finished tasks of one replica keep; finished tasks are evicted oldest "
        "first to make room, and a result that cannot fit ends its task failed (data.reason result_too_large).",
    )
    resend_memory_entries: int = Field(
        10_000,
        ge=1,
        description="Most retries one replica remembers the answer of, so that a resend (the same requestState, "
        "inputResponses and principal, sent again because its answer did not arrive) gets the same answer; each is "
        "kept for its route's holds.ttl, the oldest dropped first.",
    )
    resend_memory_bytes: int = Field(
        64 * 1024 * 1024,
        ge=0,
        description="Most bytes of answers kept for resends on one replica; the oldest are dropped first. 0 keeps "
        "none: a resend of an answered retry then gets HTTP 409, data.reason already_answered.",
    )
    resend_answer_max_bytes: int = Field(
        1024 * 1024,
        ge=0,
        description="Largest answer kept for resends; a resend of a retry with a larger answer gets HTTP 409, "
        "data.reason already_answered.",
    )
    replay_memory: int = Field(
        100_000,
        ge=1,
        description="Most replayed calls one replica remembers (about 100 bytes each) so that a replay token runs "
        "once. Entries leave when no token of their call can still be valid; when every entry is still live, "
        "further replays get HTTP 503 rather than risk running a call twice.",
    )

    @model_validator(mode="after")
    def _kill_at_or_above_high(self) -> LimitsConfig:
        if self.stdio_memory_kill < self.stdio_memory_high:
            raise ValueError("stdio_memory_kill must be at least stdio_memory_high")
        return self


class LoggingConfig(Strict):
    """Structured logs, written to stderr."""

    level: Literal["debug", "info", "warning", "error"] = Field("info", description="Lowest level written.")
    json_logs: bool | None = Field(None, alias="json", description="JSON lines (default: when not a TTY).")


class ReplicasConfig(Strict):
    """How replicas reach each other over an authenticated hop: a retry that lands on a replica that
    does not hold its call is forwarded to the one that does (its address is sealed into the
    requestState), and so are tasks/get, tasks/update and tasks/cancel for a task another replica
    owns (its address is sealed into the task id)."""

    advertise_url: str | None = Field(
        None,
        description=(
            "Base URL other replicas use to reach this one, e.g. http://10.1.2.3:8080 (in Kubernetes: the pod "
            "IP). Overridden by MRTR_GATEWAY_ADVERTISE_URL. Sealed into the requestStates and task ids this replica "
            "issues. Unset (fine for a single replica): retries that land on another replica fail with the hold_lost "
            "error, and tasks/* requests for this replica's tasks that land on another replica are refused as "
            "retryable until the task id expires (-32603, data.reason overloaded, data.cause owner_unknown, HTTP 503 "
            "with Retry-After)."
        ),
    )
    forward_timeout: PositiveSeconds = Field(
        5,
        description="Seconds the owning replica has to accept a forwarded request's connection and acknowledge it "
        "(HTTP 100 Continue, sent by its HTTP server as soon as it reads the request). Past it, a forwarded retry "
        "fails with the hold_lost error (data.cause owner_unreachable without a connection, owner_unresponsive "
        "without the acknowledgement: a stopped or stalled process); once acknowledged, the owner may stay silent for "
        "at most the route's backend.timeout. A forwarded tasks/* request: without a connection the owner is gone "
        "and the task is answered failed (error data.reason owner_gone); without the acknowledgement, or when the "
        "owner fails or stays silent after it (past forward_timeout for tasks/get and tasks/cancel, past the route's "
        "backend.timeout for tasks/update), the task may still be running: refused as retryable (-32603, "
        "data.reason overloaded, data.cause owner_unresponsive or owner_failed, HTTP 503 with Retry-After).",
    )
    ca_file: str | None = Field(
        None,
        description="PEM file of the certificate authorities that sign the replicas' certificates, for an https "
        "advertise_url whose certificates a private CA issues. Default: the system's trust store. The hop carries "
        "clients' requests and credentials (forwarded retries and tasks/* requests): run it on a private network or "
        "over TLS.",
    )

    @field_validator("advertise_url")
    @classmethod
    def _base_url(cls, url: str | None) -> str | None:
        if url is not None:
            check_http_url(url, base_only=True)
        return url.rstrip("/") if url else url
