"""The typed ``web.AppKey`` handles of the gateway application.

Route handlers do not look services up here: they are handed the :class:`FrontDoor` built in
:func:`gateway.app.build_app`. These keys are for the application's own plumbing (operational
endpoints, the server, the CLI) and for tests that inspect a running app.
"""

from __future__ import annotations

import aiohttp
from aiohttp import web

from gateway.calls.context import CallContext
from gateway.calls.route import RouteRuntime
from gateway.config.load import Settings
from gateway.connections import ConnectionActivity
from gateway.drain import Drain
from gateway.frontdoor.door import FrontDoor
from gateway.holds.registry import HoldRegistry
from gateway.key_reload import KeyFileWatcher
from gateway.listen.hub import ListenHubs
from gateway.observability.metrics.registry import Metrics
from gateway.owned import TaskGroup
from gateway.replicas.auth import ForwardSigner
from gateway.state.codec import KeyRing

SETTINGS = web.AppKey("settings", Settings)
METRICS = web.AppKey("metrics", Metrics)
READY = web.AppKey("ready", dict[str, bool])
DOOR = web.AppKey("front_door", FrontDoor)
ROUTES = web.AppKey("routes", dict[str, RouteRuntime])
HOLDS: web.AppKey[HoldRegistry[CallContext]] = web.AppKey("holds")
LISTEN_HUBS = web.AppKey("listen_hubs", ListenHubs)
FORWARD_SIGNER = web.AppKey("forward_signer", ForwardSigner)
KEY_WATCHER = web.AppKey("key_watcher", KeyFileWatcher)
DRAIN = web.AppKey("drain", Drain)
HTTP_CLIENT = web.AppKey("http_client", aiohttp.ClientSession)
HOP_CLIENT = web.AppKey("hop_client", aiohttp.ClientSession)
KEYRING = web.AppKey("keyring", KeyRing)
BACKGROUND = web.AppKey("background_tasks", TaskGroup)
CONNECTIONS = web.AppKey("connections", ConnectionActivity)
MCP_TASKS = web.AppKey("mcp_tasks", TaskGroup)
"""The runners of the tasks this replica owns (:mod:`gateway.mcptasks`)."""
