"""Rotating the requestState keys in a running gateway (state.keys_file) keeps every held call.

The file is rewritten as an operator's Secret update would be; the gateway re-reads it (a direct
check, or its own poll) and swaps the ring in place. States minted before the swap still unseal
(the old key stays in the ring during a rotation), states minted after it are sealed with the new
first key, and neither held nor in-flight calls notice.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import aiohttp
from fake_backend import FakeBackend
from harness import BareClient, accept, route, running_gateway
from mcp_types.jsonrpc import INVALID_PARAMS

from gateway import keys
from gateway.state.codec import WIRE_MESSAGE, KeyRing, StateError

Backend = tuple[FakeBackend, str]

OLD = "old-key-0123456789abcdef0123456789abcdef"
NEW = "new-key-0123456789abcdef0123456789abcdef"
WAIT = 10.0


def sealed_with(state: str, secret: str) -> bool:
    try:
        KeyRing([secret.encode()]).unseal(state)
    except StateError as exc:
        reason = exc.reason
    else:
        return True
    assert reason == "unknown_key"
    return False


async def test_rotating_old_to_new_keeps_held_and_in_flight_calls(
    fake_backend: Backend, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    _, url = fake_backend
    keys_file = tmp_path / "keys"
    keys_file.write_text(OLD, encoding="utf-8")
    state = {"keys_file": str(keys_file), "reload_interval": 0}
    async with running_gateway([route("demo", "/mcp", url)], state=state) as gw:
        client = BareClient(http, gw.url())
        held_one = (await client.call_tool("ask_city")).result
        held_two = (await client.call_tool("ask_two")).result
        assert sealed_with(held_one["requestState"], OLD)
        in_flight = asyncio.create_task(client.call_tool("slow", {"seconds": 0.5}))

        keys_file.write_text(f"{NEW},{OLD}", encoding="utf-8")  # step 2 of the recipe: new first, old kept
        assert await gw.app[keys.KEY_WATCHER].check()
        assert len(gw.app[keys.HOLDS]) == 2

        (key_one,) = held_one["inputRequests"]
        done = await client.retry("ask_city", held_one["requestState"], {key_one: accept(city="Oslo")})
        assert done.text == "city=Oslo"
        (key_two,) = held_two["inputRequests"]
        second = (await client.retry("ask_two", held_two["requestState"], {key_two: accept(name="Ada")})).result
        assert second["resultType"] == "input_required"
        assert sealed_with(second["requestState"], NEW)
        assert not sealed_with(second["requestState"], OLD)
        (key_three,) = second["inputRequests"]
        done = await client.retry("ask_two", second["requestState"], {key_three: accept(color="blue")})
        assert done.text == "name=Ada;color=blue"
        async with asyncio.timeout(WAIT):
            assert (await in_flight).result["resultType"] == "complete"

        fresh = (await client.call_tool("ask_city")).result
        assert sealed_with(fresh["requestState"], NEW)


async def test_the_poll_notices_a_changed_file(
    fake_backend: Backend, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    _, url = fake_backend
    keys_file = tmp_path / "keys"
    keys_file.write_text(OLD, encoding="utf-8")
    state = {"keys_file": str(keys_file), "reload_interval": 0.05}
    async with running_gateway([route("demo", "/mcp", url)], state=state) as gw:
        keys_file.write_text(f"{NEW}\n{OLD}\n", encoding="utf-8")
        async with asyncio.timeout(WAIT):
            await gw.app[keys.KEY_WATCHER].wait_generation(1)
        fresh = (await BareClient(http, gw.url()).call_tool("ask_city")).result
        assert sealed_with(fresh["requestState"], NEW)


async def test_a_broken_file_keeps_the_current_keys(
    fake_backend: Backend, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    _, url = fake_backend
    keys_file = tmp_path / "keys"
    keys_file.write_text(OLD, encoding="utf-8")
    state = {"keys_file": str(keys_file), "reload_interval": 0}
    async with running_gateway([route("demo", "/mcp", url)], state=state) as gw:
        client = BareClient(http, gw.url())
        held = (await client.call_tool("ask_city")).result
        watcher = gw.app[keys.KEY_WATCHER]
        for broken in ("too-short", f"{NEW},{NEW}", ""):
            keys_file.write_text(broken, encoding="utf-8")
            assert not await watcher.check()
        keys_file.unlink()
        assert not await watcher.check()
        assert watcher.generation == 0
        (key,) = held["inputRequests"]
        done = await client.retry("ask_city", held["requestState"], {key: accept(city="Rome")})
        assert done.text == "city=Rome"
        assert sealed_with((await client.call_tool("ask_city")).result["requestState"], OLD)


async def test_dropping_the_old_key_refuses_its_states(
    fake_backend: Backend, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    """Step 3 of the recipe, taken too early: the ring is what the file says, nothing is kept."""
    _, url = fake_backend
    keys_file = tmp_path / "keys"
    keys_file.write_text(OLD, encoding="utf-8")
    state = {"keys_file": str(keys_file), "reload_interval": 0}
    async with running_gateway([route("demo", "/mcp", url)], state=state) as gw:
        client = BareClient(http, gw.url())
        held = (await client.call_tool("ask_city")).result
        keys_file.write_text(NEW, encoding="utf-8")
        assert await gw.app[keys.KEY_WATCHER].check()
        (key,) = held["inputRequests"]
        refused = await client.retry("ask_city", held["requestState"], {key: accept(city="Rome")})
        assert refused.error["code"] == INVALID_PARAMS
        assert refused.error["message"] == WIRE_MESSAGE
        assert gw.app[keys.METRICS].state_rejections.labels("unknown_key")._value.get() == 1
