"""Issue 20: metrics that read rightly from a pod's first scrape, and one backend error per request.

* every route's labelled counters exist at 0 on a fresh gateway's ``/metrics``, for each fixed label
  set (backend-error causes, forward outcomes, the route's auth-refusal reasons, the per-route hold
  and round families), so the first burst after a pod starts is an increase ``rate()`` can see;
* a ``tools/call`` against a dead backend meets it twice (the tool-schema lookup, then the call)
  and adds exactly 1 to ``mrtr_gateway_backend_errors_total``.
"""

from __future__ import annotations

import socket
from typing import Any

import aiohttp
from fake_backend import FakeBackend
from harness import BareClient, route, running_gateway
from prometheus_client.parser import text_string_to_metric_families

from gateway import keys
from gateway.auth.gate import TRUSTED_HEADER_REASONS
from gateway.auth.verify import REASONS as JWT_REASONS
from gateway.errors import BACKEND_CAUSES
from gateway.observability.metrics.forwards import FORWARD_OUTCOMES
from gateway.observability.metrics.registry import Metrics

Backend = tuple[FakeBackend, str]
PER_ROUTE = (
    "mrtr_gateway_hold_expirations_total",
    "mrtr_gateway_input_rounds_total",
    "mrtr_gateway_backend_initializations_total",
    "mrtr_gateway_call_rounds_count",
    "mrtr_gateway_hold_age_seconds_count",
)


def dead_url() -> str:
    """A loopback URL nothing listens on (the port was bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/mcp"


async def scrape(http: aiohttp.ClientSession, url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    async with http.get(url) as resp:
        assert resp.status == 200
        text = await resp.text()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict[tuple[str, frozenset[tuple[str, str]]], float], name: str, **labels: str) -> float | None:
    return samples.get((name, frozenset(labels.items())))


async def test_a_fresh_gateway_exposes_every_route_counter_at_zero(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    jwt_auth: dict[str, Any] = {
        "jwt": {"issuer": "https://issuer.test", "audience": ["https://gateway.test"], "jwks_url": dead_url()}
    }
    header_auth = {"trusted_header": {"header": "X-Forwarded-User", "proxies": ["10.0.0.0/8"]}}
    routes = [
        route("open", "/open", url),
        route("short", "/short", url, auth=jwt_auth),
        route("proxied", "/proxied", url, auth=header_auth),
    ]
    async with running_gateway(routes) as gw:
        samples = await scrape(http, gw.url("/metrics"))
    reasons = {"open": frozenset[str](), "short": JWT_REASONS, "proxied": TRUSTED_HEADER_REASONS}
    for name in ("open", "short", "proxied"):
        for family in PER_ROUTE:
            assert value(samples, family, route=name) == 0, (family, name)
        for cause in BACKEND_CAUSES:
            assert value(samples, "mrtr_gateway_backend_errors_total", route=name, reason=cause) == 0, (name, cause)
        for outcome in FORWARD_OUTCOMES:
            assert value(samples, "mrtr_gateway_forwards_total", route=name, outcome=outcome) == 0, (name, outcome)
        refusals = {
            dict(labels)["reason"]
            for (family, labels) in samples
            if family == "mrtr_gateway_auth_refusals_total" and dict(labels)["route"] == name
        }
        assert refusals == reasons[name], name
        assert all(
            value(samples, "mrtr_gateway_auth_refusals_total", route=name, reason=reason) == 0
            for reason in reasons[name]
        )


async def test_a_failed_call_counts_one_backend_error(http: aiohttp.ClientSession) -> None:
    async with running_gateway([route("dead", "/mcp", dead_url())]) as gw:
        metrics: Metrics = gw.app[keys.METRICS]

        def errors() -> float:
            return sum(
                s.value
                for f in metrics.backend_errors.collect()
                for s in f.samples
                if s.name == "mrtr_gateway_backend_errors_total" and s.labels["route"] == "dead"
            )

        assert errors() == 0
        reply = await BareClient(http, gw.url()).call_tool("add", {"a": 1, "b": 2})
        assert reply.status == 502
        assert reply.body["error"]["data"] == {"reason": "backend_unavailable", "cause": "connect_failed"}
        # The schema lookup (tools/list) and the call both met the dead backend: one client request, one error.
        assert errors() == 1
        assert (
            metrics.registry.get_sample_value(
                "mrtr_gateway_backend_errors_total", {"route": "dead", "reason": "connect_failed"}
            )
            == 1
        )
        await BareClient(http, gw.url()).call_tool("add", {"a": 1, "b": 2})
        assert errors() == 2, "each client request counts its own"
