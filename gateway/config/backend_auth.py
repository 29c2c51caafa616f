"""``routes[].backend.auth``: the credential the gateway sends its backend (never the client's token
on an ``auth.jwt`` route unless ``passthrough`` is acknowledged). See README "Backend credentials"."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from gateway.config.checks import PositiveSeconds, Strict, check_http_url

BackendAuthMode = Literal["none", "header", "client_credentials", "token_exchange", "passthrough"]

_TOKEN_MODES = ("client_credentials", "token_exchange")
_TOKEN_KEYS = ("token_url", "client_id", "client_secret", "resource", "audience", "scope")


class SecretRef(Strict):
    """Where a secret comes from: an environment variable, or a file (re-read when it changes)."""

    env: str | None = Field(None, min_length=1, description="Name of an environment variable holding the secret.")
    file: str | None = Field(
        None,
        min_length=1,
        description="Path of a file holding the secret (e.g. a mounted Kubernetes Secret); surrounding whitespace "
        "is stripped. Re-read at most every reload_interval seconds, and at once after the backend answers 401.",
    )

    @model_validator(mode="after")
    def _exactly_one(self) -> SecretRef:
        if (self.env is None) == (self.file is None):
            raise ValueError("set exactly one of env or file")
        return self


class BackendAuthConfig(Strict):
    """The credential sent to the backend on every backend HTTP request, resolved per request."""

    mode: BackendAuthMode = Field(
        "none",
        description="'none': no gateway credential (routes without auth.jwt keep forwarding the client's "
        "Authorization, see forward_authorization); 'header': a static secret header; 'client_credentials': an "
        "OAuth 2.0 client-credentials token; 'token_exchange': an RFC 8693 token exchanged for the verified client "
        "token; 'passthrough': the client's own Authorization (needs acknowledge_token_passthrough).",
    )
    header_name: str = Field(
        "Authorization",
        pattern=r"^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,64}$",
        description="header mode: the header's name. Default: Authorization.",
    )
    value: SecretRef | None = Field(None, description="header mode, required: the header's whole value.")
    token_url: str | None = Field(
        None, description="client_credentials / token_exchange, required: the token endpoint."
    )
    client_id: str | None = Field(
        None, min_length=1, description="client_credentials / token_exchange, required: the gateway's client id."
    )
    client_secret: SecretRef | None = Field(
        None, description="client_credentials / token_exchange, required: the gateway's client secret."
    )
    client_auth: Literal["client_secret_basic", "client_secret_post"] = Field(
        "client_secret_basic", description="How the client authenticates at the token endpoint."
    )
    resource: str | None = Field(
        None, description="RFC 8707 resource sent with every token request. Default: the backend's url."
    )
    audience: str | None = Field(None, description="Optional `audience` parameter of the token request.")
    scope: str | None = Field(None, description="Optional `scope` parameter of the token request.")
    token_timeout: PositiveSeconds = Field(10, description="Seconds one token request may take in all.")
    max_token_response_bytes: int = Field(
        64 * 1024, ge=1024, le=1024 * 1024, description="Largest token endpoint response read."
    )
    failure_cache: float = Field(
        5, ge=0, le=300, description="Seconds a failed token request is remembered (and not repeated) per key."
    )
    reload_interval: float = Field(
        10, ge=0, le=3600, description="Seconds between re-reads of a secret file (0: read it on every request)."
    )
    acknowledge_token_passthrough: bool = Field(
        False,
        description="passthrough mode, required: true acknowledges that the client's token is sent upstream, "
        "which the MCP authorization spec forbids (the backend must be the token's audience too).",
    )

    @model_validator(mode="after")
    def _keys_of_mode(self) -> BackendAuthConfig:
        mode = self.mode
        problems = []
        if mode == "header" and self.value is None:
            problems.append("mode header needs `value` (env or file)")
        if mode != "header" and self.value is not None:
            problems.append("`value` is only for mode header")
        if mode in _TOKEN_MODES:
            missing = [k for k in ("token_url", "client_id", "client_secret") if getattr(self, k) is None]
            if missing:
                problems.append(f"mode {mode} needs {', '.join(missing)}")
        else:
            extra = [k for k in _TOKEN_KEYS if getattr(self, k) is not None]
            if extra:
                problems.append(f"{', '.join(extra)}: only for client_credentials and token_exchange")
        if mode == "passthrough" and not self.acknowledge_token_passthrough:
            problems.append(
                "mode passthrough sends the client's token to the backend, which the MCP authorization spec "
                "forbids; set acknowledge_token_passthrough: true to accept that, or choose another mode"
            )
        if mode != "passthrough" and self.acknowledge_token_passthrough:
            problems.append("acknowledge_token_passthrough is only for mode passthrough")
        if problems:
            raise ValueError("; ".join(problems))
        for url in (self.token_url, self.resource):
            if url is not None:
                check_http_url(url)
        return self
