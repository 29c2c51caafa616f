"""The benchmark's profile reader: py-spy's collapsed stacks to shares by component and function."""

from __future__ import annotations

from bench.profile import analyse, component, difference

RAW = "\n".join(
    [
        # outermost first; py-spy writes paths from the import root
        "run (gateway/server.py:10);handle (gateway/frontdoor/handler.py:5);"
        "classify (gateway/frontdoor/classify.py:7) 3",
        "run (gateway/server.py:10);handle (gateway/frontdoor/handler.py:5);select (selectors.py:468) 1",
        "run (gateway/server.py:10);_send (gateway/legacy/http_base.py:9);request (aiohttp/client.py:600) 4",
        "<module> (<frozen runpy>:88) 2",
        "not a stack line",
    ]
)


def test_self_time_is_charged_to_the_innermost_frame_component() -> None:
    report = analyse(RAW, cpu_us_per_request=1000.0)
    assert report["samples"] == 10
    shares = report["self_by_component"]
    assert shares["aiohttp client"] == {"percent": 40.0, "us_per_request": 400.0}
    assert shares["gateway.frontdoor"] == {"percent": 30.0, "us_per_request": 300.0}
    assert shares["selectors (epoll)"]["percent"] == 10.0
    assert shares["other"]["percent"] == 20.0
    assert sum(row["percent"] for row in shares.values()) == 100.0


def test_inclusive_time_counts_each_gateway_function_once_per_sample() -> None:
    functions = analyse(RAW, cpu_us_per_request=1000.0)["inclusive_gateway_functions"]
    assert functions["gateway.server:run"]["percent"] == 80.0
    assert functions["gateway.frontdoor.handler:handle"]["percent"] == 40.0
    assert functions["gateway.legacy.http_base:_send"]["us_per_request"] == 400.0
    assert "aiohttp.client:request" not in functions


def test_components_match_paths_from_the_import_root_and_absolute_ones() -> None:
    assert component("/aiohttp/web_protocol.py") == "aiohttp server"
    assert component("/usr/lib/python3.11/asyncio/selector_events.py") == "asyncio transports"
    assert component("/gateway/state/codec.py") == "gateway.state"
    assert component("/somewhere/else.py") == "other"


def test_difference_is_per_component_gateway_minus_hop_largest_first() -> None:
    hop = {"self_by_component": {"aiohttp client": {"us_per_request": 100.0}}}
    gateway = {
        "self_by_component": {
            "aiohttp client": {"us_per_request": 150.0},
            "gateway.frontdoor": {"us_per_request": 80.0},
        }
    }
    assert list(difference(hop, gateway).items()) == [("gateway.frontdoor", 80.0), ("aiohttp client", 50.0)]


def test_an_empty_profile_has_no_shares() -> None:
    assert analyse("", cpu_us_per_request=1.0) == {"samples": 0}
