"""Issue 3 behaviour through the gateway against the fake legacy server: rounds, holds,
requestState security, expiry, bounds, url mode."""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator

import aiohttp
import pytest
from fake_backend import FakeBackend
from harness import SAMPLED, BareClient, GatewayHandle, accept, route, running_gateway
from mcp_types.jsonrpc import INTERNAL_ERROR, INVALID_PARAMS, MISSING_REQUIRED_CLIENT_CAPABILITY
from waiting import eventually

from gateway import keys

Backend = tuple[FakeBackend, str]


@pytest.fixture
async def gateway(fake_backend: Backend) -> AsyncIterator[GatewayHandle]:
    """The gateway most tests here use: one route, ``demo`` at ``/mcp``, in front of the fake backend."""
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url)]) as handle:
        yield handle


@pytest.fixture
def client(gateway: GatewayHandle, http: aiohttp.ClientSession) -> BareClient:
    """A bare client of :func:`gateway`'s route."""
    return BareClient(http, gateway.url())


async def test_one_elicitation_round(gateway: GatewayHandle, client: BareClient) -> None:
    first = await client.call_tool("ask_city")
    result = first.result
    assert result["resultType"] == "input_required"
    ((key, request),) = result["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    assert set(request) == {"method", "params"}
    assert "elicitationId" not in request["params"]
    done = await client.retry("ask_city", result["requestState"], {key: accept(city="Paris")})
    assert done.result["resultType"] == "complete"
    assert done.text == "city=Paris"
    assert len(gateway.app[keys.HOLDS]) == 0


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_decline_and_cancel_go_upstream_as_they_are(client: BareClient, action: str) -> None:
    result = (await client.call_tool("ask_city")).result
    (key,) = result["inputRequests"]
    done = await client.retry("ask_city", result["requestState"], {key: {"action": action}})
    assert done.text == f"action={action}"


async def test_elicitation_and_sampling_sent_together_share_one_round(client: BareClient) -> None:
    result = (await client.call_tool("ask_and_sample")).result
    methods = sorted(r["method"] for r in result["inputRequests"].values())
    assert methods == ["elicitation/create", "sampling/createMessage"]
    answers = {
        k: accept(city="Oslo") if r["method"] == "elicitation/create" else SAMPLED
        for k, r in result["inputRequests"].items()
    }
    done = await client.retry("ask_and_sample", result["requestState"], answers)
    assert done.text == "city=Oslo;sampled=short"


async def test_missing_answers_are_asked_again_in_the_same_hold(client: BareClient) -> None:
    result = (await client.call_tool("ask_and_sample")).result
    elicit_key = next(k for k, r in result["inputRequests"].items() if r["method"] == "elicitation/create")
    sample_key = next(k for k in result["inputRequests"] if k != elicit_key)
    partial = await client.retry(
        "ask_and_sample", result["requestState"], {elicit_key: accept(city="Rome"), "unknown-key": {"x": 1}}
    )
    again = partial.result
    assert again["resultType"] == "input_required"
    assert list(again["inputRequests"]) == [sample_key]
    assert again["requestState"] != result["requestState"]
    stale = await client.retry("ask_and_sample", result["requestState"], {sample_key: SAMPLED})
    assert stale.error["code"] == INVALID_PARAMS
    done = await client.retry("ask_and_sample", again["requestState"], {sample_key: SAMPLED})
    assert done.text == "city=Rome;sampled=short"


async def test_roots_requested_on_the_get_stream_become_a_round(client: BareClient) -> None:
    result = (await client.call_tool("show_roots")).result
    ((key, request),) = result["inputRequests"].items()
    assert request == {"method": "roots/list"}
    done = await client.retry("show_roots", result["requestState"], {key: {"roots": [{"uri": "file:///a"}]}})
    assert done.text == "roots=file:///a"


async def test_backend_ping_during_a_call_is_answered_by_the_gateway(client: BareClient) -> None:
    reply = await client.call_tool("ping_me")
    assert reply.text == "pong"


async def test_url_required_error_becomes_url_elicitation_and_call_is_reissued(client: BareClient) -> None:
    result = (await client.call_tool("url_login")).result
    ((key, request),) = result["inputRequests"].items()
    assert request["method"] == "elicitation/create"
    assert request["params"]["mode"] == "url"
    assert request["params"]["url"].startswith("https://")
    assert "elicitationId" not in request["params"]
    done = await client.retry("url_login", result["requestState"], {key: {"action": "accept"}})
    assert done.text == "logged-in"


async def test_url_required_error_without_url_capability_is_relayed_as_an_error(client: BareClient) -> None:
    reply = await client.call_tool("url_login", capabilities={"elicitation": {}})
    assert (reply.status, reply.error["code"]) == (400, MISSING_REQUIRED_CLIENT_CAPABILITY)
    assert reply.error["data"] == {"requiredCapabilities": {"elicitation": {"url": {}}}}


@pytest.mark.parametrize("action", ["decline", "cancel"])
async def test_a_declined_url_interaction_ends_the_call_with_the_backends_error(
    gateway: GatewayHandle, client: BareClient, action: str
) -> None:
    # The backend answered the call with -32042 and the user did not complete the interaction, so
    # that answer stands: relayed as the backend's error (-32603 outside its own hop, HTTP 200).
    result = (await client.call_tool("url_login")).result
    (key,) = result["inputRequests"]
    reply = await client.retry("url_login", result["requestState"], {key: {"action": action}})
    assert (reply.status, reply.error["code"], reply.error.get("data")) == (200, INTERNAL_ERROR, None)
    assert len(gateway.app[keys.HOLDS]) == 0


def _tamper(state: str) -> str:
    prefix, blob = state.split(".", 1)
    raw = bytearray(base64.urlsafe_b64decode(blob + "=" * (-len(blob) % 4)))
    raw[len(raw) // 2] ^= 0x01
    return prefix + "." + base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode()


async def test_refused_states_leave_the_hold_usable_with_the_right_state(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    routes = [route("demo", "/mcp", url), route("other", "/other", url)]
    async with running_gateway(routes) as gw:
        client = BareClient(http, gw.url(), authorization="Bearer alice")
        result = (await client.call_tool("ask_city")).result
        state = result["requestState"]
        (key,) = result["inputRequests"]
        answer = {key: accept(city="Paris")}
        refused = [
            await client.retry("ask_city", _tamper(state), answer),
            await client.retry("ask_city", state, answer, authorization="Bearer mallory"),
            await client.retry("ask_city", state, answer, authorization=""),
            await BareClient(http, gw.url("/other"), authorization="Bearer alice").retry("ask_city", state, answer),
            await client.retry("ask_city", state, answer, arguments={"extra": 1}),
            await client.retry("ask_city", state[:3] + "!" + state[4:], answer),  # not base64url
            # v2 is the format sealed now (issue 10): an unknown version is v3, and a v2 body under
            # the previous format's prefix never decrypts.
            await client.retry("ask_city", "v3." + state[3:], answer),
            await client.retry("ask_city", "v1." + state[3:], answer),
        ]
        for reply in refused:
            assert reply.status == 400
            assert reply.error["code"] == INVALID_PARAMS
            assert reply.error["message"] == "Invalid or expired requestState"
        wrong_tool = await client.call_tool(
            "add", {"a": 1, "b": 2}, extra={"inputResponses": answer, "requestState": state}
        )
        assert wrong_tool.error["code"] == INVALID_PARAMS
        done = await client.retry("ask_city", state, answer)
        assert done.text == "city=Paris"
        resent = await client.retry("ask_city", state, answer)
        assert resent.result == done.result, "a resend gets the first answer again (issue 26)"
        reused = await client.retry("ask_city", state, {key: accept(city="Rome")})
        assert reused.error["code"] == INVALID_PARAMS, "the same state with other answers is refused"
        metrics = gw.app[keys.METRICS]
        reasons = {s.labels["reason"] for s in metrics.state_rejections.collect()[0].samples if s.value}
    assert {"decrypt_failed", "principal", "audience", "arguments", "malformed", "bad_version"} <= reasons


async def test_an_older_rounds_state_is_refused(client: BareClient) -> None:
    first = (await client.call_tool("ask_two")).result
    (k1,) = first["inputRequests"]
    second = (await client.retry("ask_two", first["requestState"], {k1: accept(name="Ada")})).result
    ((k2, request),) = second["inputRequests"].items()
    assert "Ada" in request["params"]["message"]
    replay = await client.retry("ask_two", first["requestState"], {k1: accept(name="Eve")})
    assert replay.error["code"] == INVALID_PARAMS
    done = await client.retry("ask_two", second["requestState"], {k2: accept(color="red")})
    assert done.text == "name=Ada;color=red"


async def test_malformed_input_responses_are_invalid_params_and_keep_the_hold(client: BareClient) -> None:
    result = (await client.call_tool("ask_city")).result
    (key,) = result["inputRequests"]
    bad = await client.retry("ask_city", result["requestState"], {key: {"action": "perhaps"}})
    assert bad.error["code"] == INVALID_PARAMS
    assert bad.error["message"] != "Invalid or expired requestState"
    done = await client.retry("ask_city", result["requestState"], {key: accept(city="Oslo")})
    assert done.text == "city=Oslo"


async def test_input_responses_without_state_start_a_new_call(client: BareClient) -> None:
    reply = await client.call_tool("ask_city", extra={"inputResponses": {"elicit-1": accept(city="X")}})
    assert reply.result["resultType"] == "input_required"


async def test_hold_expiry_cancels_the_backend_elicitation_and_frees_the_session(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    backend, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url, holds={"ttl": 0.3})]) as gw:
        client = BareClient(http, gw.url())
        result = (await client.call_tool("ask_city")).result
        pool = gw.app[keys.ROUTES]["/mcp"].pool
        await eventually(
            lambda: {"action": "cancel"} in [r.get("result") for r in backend.received_responses],
            what="the backend got a cancel answer",
        )
        await eventually(
            lambda: len(gw.app[keys.HOLDS]) == 0 and pool.leased_count == 0, what="no hold and no leased session"
        )
        (key,) = result["inputRequests"]
        late = await client.retry("ask_city", result["requestState"], {key: accept(city="Late")})
        assert late.error["code"] == INVALID_PARAMS
        again = await client.call_tool("add", {"a": 1, "b": 1})
        assert again.text == "2"
    assert backend.initialize_count == 1


async def test_hold_bounds_refuse_new_interactive_calls_with_503(
    fake_backend: Backend, http: aiohttp.ClientSession
) -> None:
    _, url = fake_backend
    async with running_gateway(
        [route("demo", "/mcp", url)], limits={"max_holds": 5, "max_holds_per_principal": 1, "retry_after": 7}
    ) as gw:
        alice = BareClient(http, gw.url(), authorization="Bearer alice")
        held = (await alice.call_tool("ask_city")).result
        refused = await alice.call_tool("ask_city")
        assert refused.status == 503
        assert refused.headers["Retry-After"] == "7"
        assert (refused.error["code"], refused.error["data"]["reason"]) == (INTERNAL_ERROR, "overloaded")
        assert refused.error["data"]["cause"] == "principal_hold_limit"
        bob = await BareClient(http, gw.url(), authorization="Bearer bob").call_tool("ask_city")
        assert bob.result["resultType"] == "input_required"
        (key,) = held["inputRequests"]
        assert (await alice.retry("ask_city", held["requestState"], {key: accept(city="A")})).text == "city=A"
        assert (await alice.call_tool("ask_city")).result["resultType"] == "input_required"


async def test_max_rounds_ends_the_call_with_an_error(fake_backend: Backend, http: aiohttp.ClientSession) -> None:
    _, url = fake_backend
    async with running_gateway([route("demo", "/mcp", url, holds={"max_rounds": 1})]) as gw:
        client = BareClient(http, gw.url())
        first = (await client.call_tool("ask_two")).result
        (k1,) = first["inputRequests"]
        over = await client.retry("ask_two", first["requestState"], {k1: accept(name="Ada")})
        assert (over.status, over.error["code"]) == (502, INTERNAL_ERROR)
        assert (over.error["data"]["reason"], over.error["data"]["cause"]) == ("hold_lost", "max_rounds")
        await eventually(lambda: len(gw.app[keys.HOLDS]) == 0, what="no hold left")


async def test_backend_dying_while_a_call_is_held_gives_a_clear_error(http: aiohttp.ClientSession) -> None:
    from fake_backend import start_fake_backend

    runner, url = await start_fake_backend()
    async with running_gateway([route("demo", "/mcp", url, backend={"timeout": 2, "connect_timeout": 1})]) as gw:
        client = BareClient(http, gw.url())
        result = (await client.call_tool("ask_city")).result
        await runner.cleanup()
        (key,) = result["inputRequests"]
        reply = await client.retry("ask_city", result["requestState"], {key: accept(city="X")})
    assert (reply.error["code"], reply.error["data"]["reason"]) == (INTERNAL_ERROR, "backend_unavailable")
