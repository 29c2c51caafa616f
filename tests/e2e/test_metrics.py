"""/metrics as operators scrape it (issue 11 item 4): prometheus_client's aiohttp handler with
Accept negotiation and gzip, an optional port of its own, the process/platform/GC collectors and
build info, per-route holds, rounds per call, hold age, backend latency apart from request latency,
event-loop lag and sessions by state (forwards and replays: test_forward_counts.py)."""

from __future__ import annotations

import asyncio
import gzip
import time

import aiohttp
from fake_backend import FakeBackend
from harness import BareClient, accept, route, running_gateway
from prometheus_client.parser import text_string_to_metric_families

from gateway import keys
from gateway.observability import loop_lag
from gateway.observability.metrics.registry import Metrics
from gateway.server import serve_metrics

Backend = tuple[FakeBackend, str]


def sample(metrics: Metrics, name: str, **labels: str) -> float:
    value = metrics.registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


async def test_metrics_negotiates_openmetrics_and_gzip(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        async with http.get(gw.url("/metrics"), headers={"Accept-Encoding": "identity"}) as resp:
            assert resp.status == 200
            assert resp.headers["Content-Type"].startswith("text/plain; version=0.0.4")
            plain = await resp.text()
        assert "# EOF" not in plain
        om = "application/openmetrics-text; version=1.0.0; charset=utf-8"
        async with http.get(gw.url("/metrics"), headers={"Accept": om, "Accept-Encoding": "identity"}) as resp:
            assert resp.headers["Content-Type"].startswith("application/openmetrics-text")
            assert (await resp.text()).rstrip().endswith("# EOF")
        async with http.get(gw.url("/metrics"), headers={"Accept-Encoding": "gzip"}, auto_decompress=False) as resp:
            assert resp.headers["Content-Encoding"] == "gzip"
            unzipped = gzip.decompress(await resp.read()).decode()
        assert "mrtr_gateway_requests_total" in unzipped


async def test_process_platform_gc_and_build_info_are_exported(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw, http.get(gw.url("/metrics")) as resp:
        families = {f.name for f in text_string_to_metric_families(await resp.text())}
    assert {"process_resident_memory_bytes", "process_open_fds", "python_info", "python_gc_collections"} <= families
    assert "mrtr_gateway_build_info" in families
    metrics: Metrics = gw.app[keys.METRICS]
    (build,) = [s for f in metrics.build_info.collect() for s in f.samples]
    assert build.value == 1
    assert set(build.labels) == {"version", "python"}


async def test_holds_per_route_rounds_and_hold_age(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    _, url = fake_backend
    async with running_gateway([route("one", "/one", url), route("two", "/two", url)]) as gw:
        metrics: Metrics = gw.app[keys.METRICS]
        client = BareClient(http, gw.url("/one"))
        first = (await client.call_tool("ask_two")).result
        assert sample(metrics, "mrtr_gateway_holds_by_route", route="one") == 1
        assert sample(metrics, "mrtr_gateway_holds_by_route", route="two") == 0
        assert metrics.registry.get_sample_value("mrtr_gateway_holds_by_route", {"route": "two"}) == 0, (
            "every configured route is reported, also with nothing held"
        )
        (k1,) = first["inputRequests"]
        second = (await client.retry("ask_two", first["requestState"], {k1: accept(name="Ada")})).result
        assert sample(metrics, "mrtr_gateway_hold_age_seconds_count", route="one") == 1
        assert sample(metrics, "mrtr_gateway_call_rounds_count", route="one") == 0, "the call is still held"
        (k2,) = second["inputRequests"]
        done = await client.retry("ask_two", second["requestState"], {k2: accept(color="red")})
        assert done.text == "name=Ada;color=red"
        assert sample(metrics, "mrtr_gateway_holds_by_route", route="one") == 0
        assert sample(metrics, "mrtr_gateway_hold_age_seconds_count", route="one") == 2
        assert sample(metrics, "mrtr_gateway_call_rounds_count", route="one") == 1
        assert sample(metrics, "mrtr_gateway_call_rounds_sum", route="one") == 2
        assert sample(metrics, "mrtr_gateway_call_rounds_bucket", route="one", le="1.0") == 0
        assert sample(metrics, "mrtr_gateway_call_rounds_bucket", route="one", le="2.0") == 1


async def test_backend_latency_is_timed_per_backend_turn_apart_from_request_latency(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        metrics: Metrics = gw.app[keys.METRICS]
        client = BareClient(http, gw.url())
        assert (await client.call_tool("add", {"a": 1, "b": 2})).text == "3"
        backend = "mrtr_gateway_backend_request_seconds_count"
        assert sample(metrics, backend, route="demo", method="tools/call") == 1
        first = (await client.call_tool("ask_two")).result
        assert sample(metrics, backend, route="demo", method="tools/call") == 2, "the backend asked: one turn"
        (k1,) = first["inputRequests"]
        second = (await client.retry("ask_two", first["requestState"], {k1: accept(name="Ada")})).result
        (k2,) = second["inputRequests"]
        await client.retry("ask_two", second["requestState"], {k2: accept(color="red")})
        # Three backend turns (ask, ask, answer); the client's think time between them is in none.
        assert sample(metrics, backend, route="demo", method="tools/call") == 4
        # One request-latency observation per response, labelled with how it ended.
        counts = {
            outcome: sample(
                metrics, "mrtr_gateway_request_seconds_count", route="demo", method="tools/call", outcome=outcome
            )
            for outcome in ("complete", "input_required", "other")
        }
        assert counts == {"complete": 2, "input_required": 2, "other": 0}
        assert sum(counts.values()) == 4


async def test_backend_sessions_by_state(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as gw:
        metrics: Metrics = gw.app[keys.METRICS]
        name = "mrtr_gateway_backend_sessions_by_state"
        assert sample(metrics, name, route="demo", state="idle") == 0
        client = BareClient(http, gw.url())
        first = (await client.call_tool("ask_city")).result
        assert sample(metrics, name, route="demo", state="interactive") == 1
        (key,) = first["inputRequests"]
        await client.retry("ask_city", first["requestState"], {key: accept(city="Oslo")})
        assert sample(metrics, name, route="demo", state="interactive") == 0
        assert sample(metrics, name, route="demo", state="idle") == 1
        states = {s.labels["state"] for f in metrics.live.collect() if f.name == name for s in f.samples}
        assert states == {"idle", "interactive", "shared", "listen", "opening"}


async def test_event_loop_lag_sees_a_stalled_loop() -> None:
    seen: list[float] = []
    stalled = asyncio.Event()

    def observe(lag: float) -> None:
        seen.append(lag)
        if lag >= 0.04:
            stalled.set()

    task = asyncio.create_task(loop_lag.measure(observe, interval=0.01))
    try:
        await asyncio.sleep(0)  # let the task ask for its first wake-up
        # deliberate: block the loop, the lag under test (well past the 0.04 s looked for: uvloop's
        # clock reads in whole milliseconds, cached at the start of each loop iteration)
        time.sleep(0.1)
        async with asyncio.timeout(10):
            await stalled.wait()
    finally:
        task.cancel()
    assert all(lag >= 0 for lag in seen)


async def test_event_loop_lag_task_lives_with_the_app(fake_backend: Backend) -> None:
    _, url = fake_backend

    def lag_tasks() -> list[asyncio.Task[object]]:
        return [t for t in asyncio.all_tasks() if t.get_name() == "event-loop-lag" and not t.done()]

    async with running_gateway([route("demo", "/mcp", url)]):
        assert len(lag_tasks()) == 1
    assert lag_tasks() == []


async def test_metrics_on_a_port_of_their_own(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)], listen={"metrics_port": 1}) as gw:
        async with http.get(gw.url("/metrics")) as resp:
            assert resp.status == 404, "not on the client port when metrics_port is set"
        runner = await serve_metrics(gw.app, "127.0.0.1", 0)
        try:
            port = runner.addresses[0][1]
            async with http.get(f"http://127.0.0.1:{port}/metrics") as resp:
                assert resp.status == 200
                assert "mrtr_gateway_requests_total" in await resp.text()
            async with http.get(f"http://127.0.0.1:{port}/mcp") as resp:
                assert resp.status == 404, "the metrics port serves nothing else"
        finally:
            await runner.cleanup()


def test_request_latency_has_a_bounded_outcome_and_callers_without_it_still_work() -> None:
    metrics = Metrics()
    metrics.request_seconds.labels("demo", "tools/call").observe(0.1)  # written before the label existed
    metrics.request_seconds.labels("demo", "tools/call", "input_required").observe(0.1)
    metrics.request_seconds.labels("demo", "tools/call", "x" * 10_000).observe(0.1)  # never a new series
    count = "mrtr_gateway_request_seconds_count"
    assert sample(metrics, count, route="demo", method="tools/call", outcome="input_required") == 1
    assert sample(metrics, count, route="demo", method="tools/call", outcome="other") == 2
