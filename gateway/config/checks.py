"""Building blocks every config section shares: the strict base model and the host/URL/key checks.

Kept apart so each section module (server, backend, auth, model) can import them without importing one
another; nothing here imports the rest of the package.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field


class Strict(BaseModel):
    """Unknown keys are errors (naming their YAML path) and a validated config never changes."""

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


def looks_like_origin(value: str) -> bool:
    try:
        parts = urlsplit(value)
        parts.port  # noqa: B018 - raises ValueError for a bad port
    except ValueError:
        return False
    return bool(parts.scheme and parts.hostname) and parts.path in ("", "/") and not (parts.query or parts.fragment)


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
