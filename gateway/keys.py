"""Every typed ``web.AppKey`` of the gateway application, in one place."""

from __future__ import annotations

from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web

from gateway.auth import AuthGates
from gateway.calls import CallDriver, RouteRuntime
from gateway.config.load import Settings
from gateway.drain import Drain
from gateway.frontdoor.origin import OriginPolicy
from gateway.holds.registry import HoldRegistry
from gateway.listen import ListenHubs
from gateway.observability.metrics import Metrics
from gateway.replicas.auth import ForwardSigner
from gateway.state.codec import KeyRing
from gateway.state.reload import KeyFileWatcher
from gateway.translate.cursors import Cursors

if TYPE_CHECKING:  # the passthrough module reads these keys, so it cannot be imported here
    from gateway.frontdoor.legacy_passthrough import PassthroughSessions

SETTINGS = web.AppKey("settings", Settings)
METRICS = web.AppKey("metrics", Metrics)
HTTP_CLIENT = web.AppKey("http_client", aiohttp.ClientSession)
ROUTES = web.AppKey("routes", dict[str, RouteRuntime])
DRIVER = web.AppKey("driver", CallDriver)
HOLDS = web.AppKey("holds", HoldRegistry)
READY = web.AppKey("ready", dict[str, bool])
PASSTHROUGH: web.AppKey[PassthroughSessions] = web.AppKey("legacy_passthrough")
LISTEN_HUBS = web.AppKey("listen_hubs", ListenHubs)
FORWARD_SIGNER = web.AppKey("forward_signer", ForwardSigner)
ORIGINS = web.AppKey("origin_policy", OriginPolicy)
CURSORS = web.AppKey("cursors", Cursors)
AUTH = web.AppKey("auth", AuthGates)
PRINCIPAL: web.RequestKey[str | None] = web.RequestKey("principal")
"""The principal :class:`~gateway.auth.AuthGates` identified for this request (``None``: anonymous)."""
KEYRING = web.AppKey("keyring", KeyRing)
KEY_WATCHER = web.AppKey("key_watcher", KeyFileWatcher)
DRAIN = web.AppKey("drain", Drain)
