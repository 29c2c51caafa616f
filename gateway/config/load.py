"""Load the YAML file into :class:`Settings`, the normalized runtime model.

Errors are :class:`ConfigError` with one line per problem, each naming the YAML path of the bad
field (``routes[0].backend.url: must be an absolute http:// or https:// URL``) so that
``mrtr-gateway check-config`` can be used in CI before a rollout. What a file gets wrong is caught
here rather than at the first call:

* YAML errors name the file, line and column; a key set twice in one mapping is an error (plain
  YAML keeps the last one silently, so a second ``port:`` would win unseen);
* a value of the wrong type is shown (truncated, and never for secret fields: keys, headers, env);
* credentials in URLs never reach an output: :func:`redact_url` is applied to every URL printed.

State keys come from, in this order: ``MRTR_GATEWAY_STATE_KEYS`` (comma-separated), the file or
directory named by ``state.keys_file`` (:func:`read_key_file`, re-read while running by
:mod:`gateway.key_reload`), or ``state.keys``.
"""

from __future__ import annotations

import json
import os
import re
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import yaml
from pydantic import ValidationError

from gateway.config.model import GatewayConfig, RouteConfig, check_state_keys

STATE_KEYS_ENV = "MRTR_GATEWAY_STATE_KEYS"
REPLICA_ID_ENV = "MRTR_GATEWAY_REPLICA_ID"
ADVERTISE_URL_ENV = "MRTR_GATEWAY_ADVERTISE_URL"

PLACEHOLDER_MARK = "REPLACE-ME"
"""Marks a key that only stands in for a real one (the example file's): ``serve`` refuses it."""

_SHOWN_VALUE_CHARS = 60
_SECRET_FIELDS = frozenset({"keys", "headers", "env"})


class ConfigError(Exception):
    """The configuration cannot be used; ``str()`` is a user-facing, multi-line explanation."""


@dataclass(frozen=True, slots=True)
class Settings:
    """What the running gateway reads: the validated file plus resolved secrets and identity."""

    config: GatewayConfig
    state_keys: tuple[bytes, ...]
    replica_id: str
    state_keys_file: Path | None = None
    """Where the keys were read from, when that is a file the gateway can re-read (state.keys_file)."""

    @property
    def routes(self) -> list[RouteConfig]:
        return self.config.routes

    def placeholder_keys(self) -> list[int]:
        """Positions of keys that are placeholders (contain :data:`PLACEHOLDER_MARK`), not secrets."""
        return [i for i, key in enumerate(self.state_keys) if PLACEHOLDER_MARK.encode() in key.upper()]


def redact_url(url: str) -> str:
    """``url`` fit to print: user and password replaced, query values replaced (they often carry tokens)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    netloc = parts.netloc
    if "@" in netloc:
        netloc = "<redacted>@" + netloc.rpartition("@")[2]
    query = parts.query
    if query:
        query = urlencode([(k, "<redacted>") for k, _ in parse_qsl(query, keep_blank_values=True)], safe="<>")
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def _shown_value(loc: tuple[int | str, ...], value: Any) -> str:
    if any(part in _SECRET_FIELDS for part in loc if isinstance(part, str)):
        return ""
    if isinstance(value, str) and re.match(r"^[A-Za-z][A-Za-z0-9+.-]*://", value):
        value = redact_url(value)
    text = repr(value)
    if len(text) > _SHOWN_VALUE_CHARS:
        text = text[: _SHOWN_VALUE_CHARS - 1] + "…"
    return f" (got {text})"


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
        elif err["type"] not in ("value_error", "missing") and "input" in err:
            msg += _shown_value(loc, err["input"])
        # A validator may report several problems, one per line; each line names the path.
        lines += [f"{_yaml_path(loc)}: {line}" for line in msg.splitlines()]
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
        keys = _split_keys(env_keys)
        state = data.get("state") if isinstance(data.get("state"), dict) else {}
        data = {**data, "state": {**state, "keys": keys, "keys_file": None}}
    try:
        config = GatewayConfig.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(format_validation_error(exc)) from exc
    keys_file = Path(config.state.keys_file) if config.state.keys_file else None
    if keys_file is not None:
        state_keys = read_key_file(keys_file)
    elif config.state.keys:
        state_keys = tuple(k.encode() for k in config.state.keys)
    else:
        raise ConfigError(
            f"state.keys: at least one key is required (or set state.keys_file or {STATE_KEYS_ENV}); "
            "generate one with `mrtr-gateway gen-key`"
        )
    replica = config.replica_id or env.get(REPLICA_ID_ENV) or socket.gethostname()
    return Settings(config=config, state_keys=state_keys, replica_id=replica, state_keys_file=keys_file)


def _split_keys(text: str) -> list[str]:
    # Commas or newlines; whitespace around a key is dropped (a Secret often ends in a newline).
    return [k.strip() for k in re.split(r"[,\n]", text) if k.strip()]


def read_key_file(path: Path) -> tuple[bytes, ...]:
    """The state keys in ``path``: a file holding the list, or a directory of one key per file.

    A directory is what a Kubernetes Secret mounts: one file per Secret key plus hidden ``..data``
    entries, which are skipped. Its files are taken in name order (the first seals). A file in a
    directory holding a comma or a newline is refused rather than read as one long key.
    """
    where = f"state.keys_file: {path}"
    try:
        if path.is_dir():
            files = sorted(p for p in path.iterdir() if not p.name.startswith(".") and p.is_file())
            keys = []
            for file in files:
                key = file.read_text(encoding="utf-8").strip()
                if "," in key or "\n" in key:
                    raise ConfigError(
                        f"{where}: {file.name} holds a list; in a directory each file holds one key "
                        "(point keys_file at the file itself to read a list)"
                    )
                keys.append(key)
        else:
            keys = _split_keys(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{where}: cannot read it ({exc.strerror})") from exc
    except UnicodeDecodeError:
        raise ConfigError(f"{where}: not UTF-8 text") from None
    if not keys:
        raise ConfigError(f"{where}: holds no key; generate one with `mrtr-gateway gen-key`")
    try:
        check_state_keys(keys)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return tuple(k.encode() for k in keys)


class _DuplicateKey(yaml.MarkedYAMLError):
    pass


class _StrictLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key set twice in one mapping (merge keys may still be overridden)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, yaml.Node] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue
            key = self.construct_object(key_node, deep=True)
            try:
                first = seen.get(key)
            except TypeError:  # an unhashable key: SafeLoader reports it below
                continue
            if first is not None:
                shown = str(key)[:_SHOWN_VALUE_CHARS]
                raise _DuplicateKey(
                    problem=f"duplicate key {shown!r} (first set at line {first.start_mark.line + 1})",
                    problem_mark=key_node.start_mark,
                )
            seen[key] = key_node
        return super().construct_mapping(node, deep=deep)


def _yaml_error(path: str | Path, exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}"
        context = f" ({exc.context})" if exc.context else ""
        return f"{path}: not valid YAML at {where}: {exc.problem}{context}"
    return f"{path}: not valid YAML: {exc}"


def load_config(path: str | Path, *, env: dict[str, str] | None = None) -> Settings:
    """Read and validate a YAML config file."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the file ({exc.strerror})") from exc
    except UnicodeDecodeError:
        raise ConfigError(f"{path}: not UTF-8 text") from None
    try:
        data = yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise ConfigError(_yaml_error(path, exc)) from exc
    return parse_config(data, env=env)


def json_schema() -> str:
    """The JSON schema of the YAML file, for editors (published as config/gateway.schema.json)."""
    schema = GatewayConfig.model_json_schema(by_alias=True)
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "mrtr-gateway configuration"
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"
