"""Two gateway replicas behind a load balancer with no affinity, the official client in front,
a real mcp 1.30.0 server behind: every retry that lands on the other replica is forwarded."""

from __future__ import annotations

import anyio
import pytest
from harness import round_robin, route, running_replicas
from mcp.client import Client

from gateway import keys
from interop.flows import FLOW_TIMEOUT, Recorder, text_of

pytestmark = pytest.mark.interop


async def test_multi_round_calls_survive_a_load_balancer_without_affinity(legacy_server: str) -> None:
    async with (
        running_replicas(2, [route("legacy", "/mcp", legacy_server)]) as replicas,
        round_robin([r.base for r in replicas]) as balancer,
    ):
        recorder = Recorder()
        with anyio.fail_after(FLOW_TIMEOUT):
            async with Client(
                balancer + "/mcp",
                mode="2026-07-28",
                elicitation_callback=recorder.elicit,
                sampling_callback=recorder.sample,
            ) as client:
                assert text_of(await client.call_tool("ask_two", {})) == "name=Ann;color=teal"
                assert text_of(await client.call_tool("ask_city", {})) == "city=Paris"
                assert text_of(await client.call_tool("summarize", {"text": "x"})).startswith("sampled=")
        forwarded = sum(r.app[keys.METRICS].forwards.labels("legacy", "forwarded")._value.get() for r in replicas)
        assert forwarded >= 2  # with strict alternation, retries do land on the non-owner
        assert all(len(r.app[keys.HOLDS]) == 0 for r in replicas)


async def test_many_concurrent_calls_across_replicas_keep_their_own_answers(legacy_server: str) -> None:
    results: dict[int, str] = {}

    async with (
        running_replicas(2, [route("legacy", "/mcp", legacy_server)]) as replicas,
        round_robin([r.base for r in replicas]) as balancer,
    ):

        async def one(ident: int) -> None:
            async def elicit(context: object, params: object) -> object:
                import mcp_types as types

                assert isinstance(params, types.ElicitRequestFormParams)
                (wanted,) = params.requested_schema["properties"]
                return types.ElicitResult(action="accept", content={wanted: f"{wanted}{ident}"})

            async with Client(balancer + "/mcp", mode="2026-07-28", elicitation_callback=elicit) as client:  # type: ignore[arg-type]
                results[ident] = text_of(await client.call_tool("ask_two", {}))

        with anyio.fail_after(60):
            async with anyio.create_task_group() as group:
                for ident in range(50):
                    group.start_soon(one, ident)
        assert all(len(r.app[keys.HOLDS]) == 0 for r in replicas)
    assert results == {i: f"name=name{i};color=color{i}" for i in range(50)}


async def test_a_call_whose_replica_dies_is_replayed_on_another(legacy_server: str) -> None:
    """The owner replica is stopped while the user answers; the retry lands on the other replica,
    which re-runs the FastMCP tool and answers its first question from the retry."""
    import mcp_types as types

    async with running_replicas(2, [route("legacy", "/mcp", legacy_server, holds={"on_lost": "replay"})]) as (a, b):
        asked: list[str] = []

        async def elicit(context: object, params: types.ElicitRequestParams) -> types.ElicitResult:
            assert isinstance(params, types.ElicitRequestFormParams)
            asked.append(params.message)
            if len(asked) == 1:
                assert a.runner is not None
                await a.runner.cleanup()  # the replica holding the call goes away
            (wanted,) = params.requested_schema["properties"]
            return types.ElicitResult(action="accept", content={wanted: {"name": "Ann", "color": "teal"}[wanted]})

        # The first request goes to a (which then holds the call); every later one to b.
        async with round_robin([a.base] + [b.base] * 20) as balancer:
            with anyio.fail_after(FLOW_TIMEOUT):
                async with Client(balancer + "/mcp", mode="2026-07-28", elicitation_callback=elicit) as client:
                    assert text_of(await client.call_tool("ask_two", {})) == "name=Ann;color=teal"
        assert asked == ["What is your name?", "Hello Ann, which color?"], "the user was never asked twice"
        assert b.app[keys.METRICS].forwards.labels("legacy", "replayed")._value.get() == 1
