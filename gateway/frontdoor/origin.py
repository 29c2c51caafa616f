"""Origin validation at the front door (pure; transports/streamable-http.mdx §Security & Endpoint).

"Servers MUST validate the Origin header on all incoming connections to prevent DNS rebinding
attacks. If the Origin header is present and invalid, servers MUST respond with HTTP 403." The
check runs on every request to a route (POST, GET, DELETE; listen streams and old clients'
streams too), before the body is read. Requests without ``Origin`` (every non-browser client)
are not affected.

What is valid:

* an origin listed in ``listen.allowed_origins`` (compared as scheme, host and port, so
  ``https://App.example.com:443`` is ``https://app.example.com``); ``"*"`` allows every origin;
* a loopback origin (``localhost``, ``127.0.0.0/8``, ``[::1]``, any scheme and port): a page served
  from the user's own machine, such as a local inspector, can reach its processes without a
  browser anyway.

What is not, by default: an origin that is merely the same as the ``Host`` the request was sent to.
Under DNS rebinding the attacker's page *is* same-origin with the host name it chose (it made that
name resolve to the gateway), so "same origin as Host" is exactly what a rebinding attack
presents; a browser application served from the gateway's own public name lists that origin.
The literal ``null`` origin (sandboxed frames, ``file:``) is refused unless listed.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from typing import Final
from urllib.parse import urlsplit

ANY: Final = "*"
_DEFAULT_PORTS: Final = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def normalize(origin: str) -> str | None:
    """``scheme://host[:port]`` lower-cased with the default port dropped; None if not an origin."""
    if origin == "null":
        return "null"
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if not parts.scheme or not parts.hostname or parts.path not in ("", "/") or parts.query or parts.fragment:
        return None
    if parts.username is not None or parts.password is not None:
        return None
    scheme, host = parts.scheme.lower(), parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    if port is None or port == _DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{host}"
    return f"{scheme}://{host}:{port}"


def is_loopback(origin: str) -> bool:
    try:
        host = urlsplit(origin).hostname
    except ValueError:
        return False
    if host is None:
        return False
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class OriginPolicy:
    """The origins one gateway accepts (built once from ``listen.allowed_origins``)."""

    def __init__(self, allowed: Iterable[str] | None) -> None:
        listed = list(allowed or [])
        self.any = ANY in listed
        self._allowed = frozenset(n for n in (normalize(o) for o in listed if o != ANY) if n is not None)

    def allows(self, origin: str | None) -> bool:
        if origin is None or self.any:
            return True
        normal = normalize(origin)
        if normal is None:
            return False
        return normal in self._allowed or (normal != "null" and is_loopback(normal))
