"""Load the YAML file into :class:`Settings`, the normalized runtime model.

Errors are :class:`ConfigError` with one line per problem, each naming the YAML path of the bad
field (``routes[0].backend.url: must be an absolute http:// or https:// URL``) so that
``mrtr-gateway check-config`` can be used in CI before a rollout.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from gateway.config.model import GatewayConfig, RouteConfig

STATE_KEYS_ENV = "MRTR_GATEWAY_STATE_KEYS"
REPLICA_ID_ENV = "MRTR_GATEWAY_REPLICA_ID"
ADVERTISE_URL_ENV = "MRTR_GATEWAY_ADVERTISE_URL"


class ConfigError(Exception):
    """The configuration cannot be used; ``str()`` is a user-facing, multi-line explanation."""


@dataclass(frozen=True, slots=True)
class Settings:
    """What the running gateway reads: the validated file plus resolved secrets and identity."""

    config: GatewayConfig
    state_keys: tuple[bytes, ...]
    replica_id: str

    @property
    def routes(self) -> list[RouteConfig]:
        return self.config.routes


def _yaml_path(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


def format_validation_error(exc: ValidationError) -> str:
    lines = []
    for err in exc.errors():
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown option (check the spelling; see config/gateway.example.yaml)"
        lines.append(f"{_yaml_path(loc)}: {msg}")
    return "\n".join(lines)


def parse_config(data: Any, *, env: dict[str, str] | None = None) -> Settings:
    """Validate already-parsed YAML data and resolve environment overrides."""
    env = dict(os.environ) if env is None else env
    if not isinstance(data, dict):
        raise ConfigError("(top level): the configuration must be a YAML mapping")
    advertise = env.get(ADVERTISE_URL_ENV)
    if advertise:
        data = {**data, "replicas": {**(data.get("replicas") or {}), "advertise_url": advertise.strip()}}
    env_keys = env.get(STATE_KEYS_ENV)
    if env_keys:
        keys = [k.strip() for k in env_keys.split(",") if k.strip()]  # a Secret often ends in a newline
        data = {**data, "state": {**(data.get("state") or {}), "keys": keys}}
    try:
        config = GatewayConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc)) from exc
    if not config.state.keys:
        raise ConfigError(
            f"state.keys: at least one key is required (or set {STATE_KEYS_ENV}); "
            "generate one with `mrtr-gateway gen-key`"
        )
    replica = config.replica_id or env.get(REPLICA_ID_ENV) or socket.gethostname()
    return Settings(
        config=config,
        state_keys=tuple(k.encode() for k in config.state.keys),
        replica_id=replica,
    )


def load_config(path: str | Path, *, env: dict[str, str] | None = None) -> Settings:
    """Read and validate a YAML config file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the file ({exc.strerror})") from exc
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
    return parse_config(data, env=env)


def json_schema() -> str:
    """The JSON schema of the YAML file, for editors (published as config/gateway.schema.json)."""
    schema = GatewayConfig.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "mrtr-gateway configuration"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
