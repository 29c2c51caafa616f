"""The user-facing YAML schema: the top level and its routes.

Strict on purpose (``extra="forbid"``): a misspelt option in a gateway config is a silent outage
waiting to happen, so an unknown key is an error that names its YAML path. The sections live in their
own modules (:mod:`~gateway.config.sections` for gateway-wide ones, :mod:`~gateway.config.backend` and
:mod:`~gateway.config.auth` for a route's), all re-exported here so ``from gateway.config.model import X``
keeps working. The config package imports nothing else from the gateway; :mod:`gateway.config.load`
turns the validated model into the runtime settings the rest of the gateway reads.
"""

from __future__ import annotations

from pydantic import Field, field_validator, model_validator

from gateway.config.auth import AuthConfig, JwtAlgorithm, JwtConfig, ResourceMetadataConfig, TrustedHeaderConfig
from gateway.config.backend import BackendConfig, BackendLimitsConfig, CacheHints, HoldPolicy
from gateway.config.backend_auth import BackendAuthConfig, SecretRef
from gateway.config.checks import PositiveSeconds, Strict, check_host, check_http_url, check_state_keys
from gateway.config.sections import LimitsConfig, ListenConfig, LoggingConfig, ReplicasConfig, StateConfig
from gateway.config.tasks import TasksPolicy

__all__ = [
    "AuthConfig",
    "BackendAuthConfig",
    "BackendConfig",
    "BackendLimitsConfig",
    "CacheHints",
    "GatewayConfig",
    "HoldPolicy",
    "JwtAlgorithm",
    "JwtConfig",
    "LimitsConfig",
    "ListenConfig",
    "LoggingConfig",
    "PositiveSeconds",
    "ReplicasConfig",
    "ResourceMetadataConfig",
    "RootConfig",
    "RouteConfig",
    "SecretRef",
    "StateConfig",
    "TasksPolicy",
    "TrustedHeaderConfig",
    "check_host",
    "check_http_url",
    "check_state_keys",
]


class RootConfig(Strict):
    """One root the gateway gives a backend that asks ``roots/list`` while no call is in flight."""

    uri: str = Field(description="The root's URI; must start with file:// (as every legacy revision requires).")
    name: str | None = Field(None, description="Human-readable name for the root.")

    @field_validator("uri")
    @classmethod
    def _file_uri(cls, uri: str) -> str:
        if not uri.startswith("file://") or any(c.isspace() for c in uri):
            raise ValueError("must be a file:// URI without spaces, e.g. file:///workspace")
        return uri


class RouteConfig(Strict):
    """One public MCP endpoint mapped to one legacy backend."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$", description="Route id (logs, metrics).")
    path: str = Field(description="Public path the 2026-07-28 endpoint is served on, e.g. /mcp.")
    backend: BackendConfig
    cache: CacheHints = Field(default_factory=CacheHints)
    holds: HoldPolicy = Field(default_factory=HoldPolicy)
    tasks: TasksPolicy = Field(
        default_factory=TasksPolicy,
        description="Tasks (io.modelcontextprotocol/tasks) the gateway makes of this route's tool calls. Default: off.",
    )
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

    @model_validator(mode="after")
    def _no_token_forwarding_on_jwt_routes(self) -> RouteConfig:
        # A jwt route never sends its client's token upstream: backend.auth says what is sent instead.
        backend = self.backend
        jwt_route = self.auth is not None and self.auth.jwt is not None
        if jwt_route and backend.forward_authorization and "forward_authorization" in backend.model_fields_set:
            raise ValueError(
                "backend.forward_authorization: true is refused on an auth.jwt route: the client's token is "
                "no longer sent upstream; use backend.auth (mode client_credentials, token_exchange or header, "
                "or passthrough with acknowledge_token_passthrough: true) and drop forward_authorization"
            )
        if backend.auth.mode == "token_exchange" and not jwt_route:
            raise ValueError("backend.auth.mode token_exchange needs auth.jwt (a verified client token to exchange)")
        return self

    @field_validator("path")
    @classmethod
    def _abs_path(cls, path: str) -> str:
        if not path.startswith("/") or any(c.isspace() for c in path) or path in ("/healthz", "/readyz", "/metrics"):
            raise ValueError("must start with '/', contain no spaces and not be /healthz, /readyz or /metrics")
        if "?" in path or "#" in path:
            raise ValueError("must be a plain path without a query ('?') or fragment ('#'); routes match the path")
        return path


class GatewayConfig(Strict):
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
