"""The rooms of the call path, each on its own: the request value, the tool-schema cache, rounds,
the lease, a route's tasks, the replay decision, the requestState boundary and the background task
groups."""

from __future__ import annotations

import asyncio
import time
from types import SimpleNamespace
from typing import Any, cast

import pytest

from gateway.calls import rounds
from gateway.calls.context import CallContext, Caller
from gateway.calls.core import CallCore
from gateway.calls.lease import Expiry, Lease, LeaseOwner
from gateway.calls.replayer import Replayer
from gateway.calls.request import Call, CallRequest
from gateway.calls.resends import Resends
from gateway.calls.route import RouteRuntime
from gateway.calls.schemas import ToolSchemas
from gateway.calls.transcript import ReplayGuard, Step, plan
from gateway.config.load import parse_config
from gateway.errors import GatewayError, HoldLost, InvalidParams, InvalidRequestState
from gateway.holds.registry import Hold, HoldRegistry, Pending
from gateway.legacy.session import FinalResponse
from gateway.observability.metrics.registry import Metrics
from gateway.owned import TaskGroup
from gateway.state.boundary import RequestStateBoundary
from gateway.state.claims import Claims, RequestIdentity
from gateway.state.codec import MAX_TOKEN_LENGTH, KeyRing
from gateway.translate import capabilities as caps

KEY = b"k" * 32


def _route(**holds: Any) -> RouteRuntime:
    settings = parse_config(
        {
            "state": {"keys": ["k" * 32]},
            "routes": [{"name": "r", "path": "/mcp", "backend": {"url": "http://127.0.0.1:1/mcp"}, "holds": holds}],
        },
        env={},
    )
    return RouteRuntime(settings.routes[0], pool=cast(Any, None), credentials=cast(Any, None))


def _call(method: str = "tools/call", params: dict[str, Any] | None = None, principal: str | None = "alice") -> Call:
    request = CallRequest(method, params or {"name": "t", "arguments": {"a": 1}}, {"elicitation": {}})
    return Call(_route(), request, Caller(principal, {}))


def _boundary(refusals: list[str] | None = None, replica: str = "one") -> RequestStateBoundary:
    sink = refusals if refusals is not None else []
    return RequestStateBoundary(KeyRing([KEY]), replica_id=replica, ttl=600, count_refusal=sink.append)


# -- the request value ---------------------------------------------------------------------------


def test_the_request_carries_no_json_rpc_id_and_knows_what_a_state_binds() -> None:
    request = CallRequest("resources/read", {"uri": "file:///a", "requestState": "s", "inputResponses": {"k": {}}})
    assert not hasattr(request, "id")
    assert request.identity == RequestIdentity.of("resources/read", {"uri": "file:///a"})
    assert request.identity.target == "file:///a"
    assert (request.request_state, dict(request.input_responses)) == ("s", {"k": {}})


def test_a_derived_call_keeps_route_and_caller_but_no_sink_or_observer() -> None:
    async def sink(_notification: Any) -> None: ...

    class Observer:
        def held(self, hold_id: str, round_: int) -> None: ...

    call = Call(_route(), CallRequest("tools/call"), Caller("alice", {}), sink, Observer())
    listing = call.with_request(CallRequest("tools/list"))
    assert (listing.route, listing.caller) == (call.route, call.caller)
    assert (listing.on_notification, listing.observer) == (None, None)


# -- the tool-schema cache -----------------------------------------------------------------------


async def test_tool_schemas_are_listed_once_per_credential_across_pages() -> None:
    listed: list[Call] = []

    async def list_tools(call: Call) -> dict[str, Any]:
        listed.append(call)
        if "cursor" not in call.request.params:
            return {"tools": [{"name": "a", "inputSchema": {"type": "object"}}], "nextCursor": "p2"}
        return {"tools": [{"name": "b", "inputSchema": {"type": "object", "x": 1}}, {"name": "no-schema"}]}

    schemas = ToolSchemas(list_tools)
    call = _call()
    assert await schemas.input_schema(call, "b") == {"type": "object", "x": 1}
    assert await schemas.input_schema(call, "a") == {"type": "object"}
    assert await schemas.input_schema(call, "no-schema") is None
    assert [c.request.method for c in listed] == ["tools/list", "tools/list"], "cached after one listing"
    assert await schemas.input_schema(_call(principal="bob"), "a") == {"type": "object"}
    assert len(listed) == 4, "another credential lists anew"


async def test_a_failed_tool_listing_is_not_cached_and_lets_the_call_through() -> None:
    async def failing(_call: Call) -> dict[str, Any]:
        raise GatewayError("down", reason="backend_unavailable")

    call = _call()
    assert await ToolSchemas(failing).input_schema(call, "a") is None
    assert call.route.tool_schemas.get("-") is None


# -- rounds --------------------------------------------------------------------------------------


def _held(registry: HoldRegistry[Any], context: Any) -> Hold[Any]:
    hold: Hold[Any] = Hold(
        id=registry.new_id(),
        route="r",
        principal=None,
        method="tools/call",
        target="t",
        args_digest="d",
        deadline=time.monotonic() + 60,
        context=context,
    )
    hold.pending["elicit-1"] = Pending(7, "elicitation/create", {})
    hold.pending["sample-2"] = Pending(8, "sampling/createMessage", {})
    registry.add(hold)
    return registry.take(hold.id, 0)


async def _never(_hold: Any) -> None: ...


def test_answers_are_checked_per_request_kind_and_unknown_keys_ignored() -> None:
    registry: HoldRegistry[Any] = HoldRegistry(max_holds=5, max_per_principal=5, retry_after=1, on_expire=_never)
    hold = _held(registry, object())
    answers = rounds.checked_answers(hold, {"elicit-1": {"action": "decline"}, "other": {"x": 1}})
    assert answers == {"elicit-1": {"action": "decline"}}
    assert hold.busy, "a valid retry keeps its claim"


async def test_a_malformed_answer_releases_the_claim_so_the_round_can_be_retried() -> None:
    registry: HoldRegistry[Any] = HoldRegistry(max_holds=5, max_per_principal=5, retry_after=1, on_expire=_never)
    boundary = _boundary()
    metrics = Metrics()
    resends = Resends(
        group=TaskGroup("test"), metrics=metrics, max_entries=10, max_bytes=1 << 20, max_answer_bytes=1 << 20
    )
    core = CallCore(
        backend=cast(Any, None),
        registry=registry,
        boundary=boundary,
        metrics=metrics,
        replayer=cast(Any, None),
        resends=resends,
    )
    hold = _held(registry, object())
    registry.put_back(hold, next_round=True, deadline=time.monotonic() + 60)
    call = _call(params={"name": "t", "inputResponses": {"elicit-1": {"action": "maybe"}}})
    token = boundary.seal(
        route="r",
        identity=RequestIdentity.of("tools/call", {"name": "t"}),
        principal=None,
        hold_id=hold.id,
        round_=1,
        lifetime=60,
        not_after=time.monotonic() + 300,
    )
    claims = boundary.open("r", "tools/call", {"name": "t", "requestState": token}, None)
    with pytest.raises(InvalidParams) as refused:
        await core.resume(call, claims)
    assert refused.value.reason == "bad_input_response"
    assert not hold.busy
    assert registry.take(hold.id, 1) is hold
    assert set(hold.pending) == {"elicit-1", "sample-2"}, "nothing taken off the round"


def test_url_consent_waits_for_every_answer_and_a_decline_ends_the_call() -> None:
    registry: HoldRegistry[Any] = HoldRegistry(max_holds=5, max_per_principal=5, retry_after=1, on_expire=_never)
    hold = _held(registry, cast(CallContext, object()))
    assert rounds.consent(hold, {"elicit-1": {"action": "accept"}}) == "waiting", "one still pending"
    assert rounds.consent(hold, {"sample-2": {"action": "decline"}}) == "declined"
    assert hold.pending == {}


def test_a_hold_takes_an_answer_off_its_round_and_records_it_for_a_replay() -> None:
    registry: HoldRegistry[Any] = HoldRegistry(max_holds=5, max_per_principal=5, retry_after=1, on_expire=_never)
    hold = _held(registry, object())
    hold.ask("elicit-3", Pending(9, "elicitation/create", {}), Step("elicitation/create", "elicit-3", "d3", 1, None))
    assert hold.next_group() == 2
    question = hold.take_answer("elicit-3", {"action": "accept"})
    assert (question.backend_id, question.method) == (9, "elicitation/create")
    assert "elicit-3" not in hold.pending
    assert [step.to_wire() for step in hold.log] == [
        {"m": "elicitation/create", "k": "elicit-3", "d": "d3", "n": 1, "r": {"action": "accept"}}
    ]


def test_a_transcript_step_reads_back_what_it_writes_and_tolerates_what_it_never_wrote() -> None:
    wire = {"m": "sampling/createMessage", "k": "sample-2", "d": "abc", "n": 2, "r": None}
    step = Step.from_wire(wire)
    assert step is not None
    assert list(step.to_wire().items()) == list(wire.items()), "same keys, same order"
    assert Step.from_wire(["not", "an", "object"]) is None
    odd = Step.from_wire({"m": "elicitation/create", "k": "elicit-1", "d": 7, "n": "x", "r": "yes"})
    assert odd == Step("elicitation/create", "elicit-1", None, 0, None)
    assert plan(
        [wire, 5], {"sample-2": {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}}
    )[0].answer == {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"}


# -- the lease -----------------------------------------------------------------------------------


class _Failing:
    """The backend a lease gives a session up to."""

    def __init__(self) -> None:
        self.failed_calls: list[tuple[Any, BaseException, str | None]] = []

    def failed(self, ctx: Any, exc: BaseException, *, cancel: str | None = None) -> None:
        self.failed_calls.append((ctx, exc, cancel))


async def _leave(lease: Lease, exc: BaseException, *, dropped: list[str], owner: LeaseOwner | None = None) -> None:
    async with lease:
        lease.claim(lambda: dropped.append("hold"))
        lease.cancel_on_failure("why")
        if owner is not None:
            lease.hand_over(owner)
        raise exc


async def test_a_lease_left_by_an_exception_gives_its_session_up_and_drops_the_claimed_hold() -> None:
    backend, dropped = _Failing(), list[str]()
    boom = asyncio.CancelledError()
    with pytest.raises(asyncio.CancelledError):
        await _leave(Lease(cast(Any, backend), cast(CallContext, "ctx")), boom, dropped=dropped)
    assert backend.failed_calls == [("ctx", boom, "why")]
    assert dropped == ["hold"]


async def test_a_lease_handed_over_or_left_normally_is_not_given_up() -> None:
    backend, dropped = _Failing(), list[str]()
    lease = Lease(cast(Any, backend), cast(CallContext, "ctx"))
    async with lease:
        lease.claim(lambda: dropped.append("hold"))
    handed = Lease(cast(Any, backend), cast(CallContext, "ctx"))
    expiry = Expiry()
    with pytest.raises(GatewayError):
        await _leave(handed, GatewayError("limit", reason="max_rounds"), dropped=dropped, owner=expiry)
    assert (backend.failed_calls, dropped, handed.owner) == ([], [], expiry)


# -- a route's tasks ------------------------------------------------------------------------------


class _TaskMaker:
    """A task maker that records what the core asks it, and fails the call when it must not be asked."""

    def __init__(self, *, may_be_asked: bool) -> None:
        self.may_be_asked = may_be_asked
        self.asked: list[str] = []

    def _ask(self, what: str) -> None:
        self.asked.append(what)
        assert self.may_be_asked, f"the task maker was asked {what} on a route with tasks off"

    def threshold(self, call: Call) -> float | None:
        self._ask("threshold")
        return None

    def detach(self, lease: Lease, call: Call, exchange: Any) -> dict[str, Any]:
        self._ask("detach")
        return {}

    async def pass_through(self, lease: Lease, call: Call) -> Any:
        self._ask("pass_through")
        return None


class _AnsweringBackend:
    """The backend operations one interactive call uses, its exchange answered at once."""

    class _Session:
        def attach(self, exchange: Any) -> None: ...

    class _Exchange:
        async def next(self, timeout: float) -> FinalResponse:
            return FinalResponse(result={"content": [], "isError": False})

    def lease(self, call: Call, *, exclusive: bool, task_ttl: float | None = None) -> Lease:
        return Lease(cast(Any, self), call=call, exclusive=exclusive, task_ttl=task_ttl)

    async def acquire(self, *_args: Any, **_kwargs: Any) -> Any:
        return SimpleNamespace(session=self._Session())

    async def claim_unclaimed(self, ctx: CallContext) -> list[Any]:
        return []

    async def send(self, ctx: CallContext, method: str, params: dict[str, Any]) -> Any:
        return self._Exchange()

    def finish(self, ctx: CallContext, request: CallRequest, final: FinalResponse, *, retry: bool = False) -> Any:
        return final.result

    def failed(self, ctx: CallContext, exc: BaseException, *, cancel: str | None = None) -> None: ...


def _core_with(maker: _TaskMaker) -> CallCore:
    metrics = Metrics()
    return CallCore(
        backend=cast(Any, _AnsweringBackend()),
        registry=HoldRegistry(max_holds=5, max_per_principal=5, retry_after=1, on_expire=_never),
        boundary=_boundary(),
        metrics=metrics,
        replayer=cast(Any, None),
        resends=cast(Any, None),
        task_maker=maker,
    )


def _tasks_call(*, enabled: bool) -> Call:
    settings = parse_config(
        {
            "state": {"keys": ["k" * 32]},
            "routes": [
                {
                    "name": "r",
                    "path": "/mcp",
                    "backend": {"url": "http://127.0.0.1:1/mcp"},
                    "tasks": {"enabled": enabled, "default": {"mode": "always"}},
                }
            ],
        },
        env={},
    )
    route = RouteRuntime(settings.routes[0], pool=cast(Any, None), credentials=cast(Any, None))
    declared: dict[str, Any] = {"extensions": {caps.TASKS_EXTENSION: {}}}
    return Call(route, CallRequest("tools/call", {"name": "t", "arguments": {}}, declared), Caller("alice", {}))


async def test_on_a_route_with_tasks_off_the_core_asks_the_task_maker_nothing() -> None:
    maker = _TaskMaker(may_be_asked=False)
    assert await _core_with(maker).call(_tasks_call(enabled=False)) == {"content": [], "isError": False}
    assert maker.asked == []


async def test_on_a_route_with_tasks_on_the_core_asks_the_task_maker_before_and_while_the_call_runs() -> None:
    maker = _TaskMaker(may_be_asked=True)
    assert await _core_with(maker).call(_tasks_call(enabled=True)) == {"content": [], "isError": False}
    assert maker.asked == ["threshold", "pass_through", "threshold"]


# -- the replay decision -------------------------------------------------------------------------


@pytest.mark.parametrize(("on_lost", "proven"), [("error", True), ("replay", False)])
async def test_an_owner_not_proven_gone_or_a_route_without_replay_answers_hold_lost(on_lost: str, proven: bool) -> None:
    metrics = Metrics()
    registry: HoldRegistry[Any] = HoldRegistry(max_holds=5, max_per_principal=5, retry_after=1, on_expire=_never)
    replayer = Replayer(
        backend=cast(Any, None),
        boundary=_boundary(),
        metrics=metrics,
        guard=ReplayGuard(),
        state_ttl=600,
    )
    call = Call(_route(on_lost=on_lost), CallRequest("tools/call", {"name": "t"}), Caller(None, {}))
    claims = _boundary().open("r", "tools/call", {"name": "t", "requestState": _sealed()}, None)
    given = HoldLost("owner_failed")
    with pytest.raises(HoldLost) as lost:
        replayer.start(call, claims, lambda: registry.admit(None), proven=proven, lost=given)
    assert lost.value is given
    assert metrics.state_rejections.labels("owner_elsewhere")._value.get() == 1


# -- the requestState boundary -------------------------------------------------------------------


def _sealed(boundary: RequestStateBoundary | None = None, principal: str | None = None) -> str:
    boundary = boundary or _boundary()
    return boundary.seal(
        route="r",
        identity=RequestIdentity.of("tools/call", {"name": "t"}),
        principal=boundary.principal(principal),
        hold_id="h1",
        round_=2,
        lifetime=60,
        not_after=time.monotonic() + 300,
    )


def test_the_boundary_opens_what_it_sealed_for_the_same_request_and_caller() -> None:
    boundary = _boundary()
    token = _sealed(boundary, "Bearer a")
    claims = boundary.open("r", "tools/call", {"name": "t", "requestState": token}, "Bearer a")
    assert (claims.hold_id, claims.round, claims.owner) == ("h1", 2, "one")
    assert boundary.owned_here(claims)
    assert not boundary.sealed_before_restart(claims)
    assert boundary.owner_url(claims) is None
    assert _boundary(replica="one").sealed_before_restart(claims), "another process under the same id"


def test_the_boundary_seals_every_claim_and_the_transcript_and_drops_a_transcript_that_does_not_fit() -> None:
    boundary = RequestStateBoundary(KeyRing([KEY]), replica_id="one", ttl=600, advertise_url="http://10.0.0.7:8/mcp")
    identity = RequestIdentity.of("tools/call", {"name": "t", "arguments": {"a": 1}})
    fields: dict[str, Any] = {"route": "r", "identity": identity, "principal": "tag", "hold_id": "h1", "round_": 2}
    not_after = time.monotonic() + 300
    log = [{"method": "elicitation/create", "answer": {"action": "accept", "n": 1.5}}]
    token = boundary.seal(**fields, lifetime=60, not_after=not_after, transcript=log)
    claims = KeyRing([KEY]).unseal(token)
    assert type(claims) is Claims
    assert claims.exp - claims.iat == 60
    assert (claims.aud, claims.method, claims.target, claims.args_digest) == (
        "r",
        "tools/call",
        "t",
        identity.args_digest,
    )
    assert (claims.principal, claims.hold_id, claims.round, claims.owner) == ("tag", "h1", 2, "one")
    assert claims.extra == {
        "boot": boundary.boot,
        "until": claims.extra["until"],
        "owner_url": "http://10.0.0.7:8/mcp",
        "log": log,
    }
    assert abs(claims.extra["until"] - (time.time() + 300)) < 5
    too_large = boundary.seal(**fields, lifetime=60, not_after=not_after, transcript=["x" * MAX_TOKEN_LENGTH])
    assert "log" not in KeyRing([KEY]).unseal(too_large).extra


@pytest.mark.parametrize(
    ("route", "params", "credential", "reason"),
    [
        ("other", {"name": "t"}, "Bearer a", "audience"),
        ("r", {"name": "u"}, "Bearer a", "target"),
        ("r", {"name": "t", "arguments": {"x": 1}}, "Bearer a", "arguments"),
        ("r", {"name": "t"}, "Bearer b", "principal"),
    ],
)
def test_the_boundary_refuses_with_the_fixed_error_and_counts_the_real_reason(
    route: str, params: dict[str, Any], credential: str, reason: str
) -> None:
    refusals: list[str] = []
    boundary = _boundary(refusals)
    token = _sealed(boundary, "Bearer a")
    with pytest.raises(InvalidRequestState) as refused:
        boundary.open(route, "tools/call", {**params, "requestState": token}, credential)
    assert refused.value.message == "Invalid or expired requestState"
    assert refusals == [reason]


# -- background task groups ----------------------------------------------------------------------


async def test_a_task_group_cancels_and_awaits_its_tasks_and_those_spawned_after_it_closed() -> None:
    group = TaskGroup("test")
    started = asyncio.Event()
    cancelled: list[str] = []

    async def forever(name: str) -> None:
        try:
            started.set()
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(name)
            raise

    first = group.spawn(forever("first"))
    await started.wait()
    await group.aclose()
    assert first.cancelled()
    assert cancelled == ["first"]
    late = group.spawn(forever("late"))
    with pytest.raises(asyncio.CancelledError):
        await late
    assert len(group) == 0


async def test_a_failing_task_is_logged_and_does_not_cancel_its_siblings() -> None:
    group = TaskGroup("test")
    sibling_done = asyncio.Event()

    async def fail() -> None:
        raise RuntimeError("boom")

    async def sibling() -> None:
        await asyncio.sleep(0)
        sibling_done.set()

    failed = group.spawn(fail())
    group.spawn(sibling())
    await group.wait()
    assert sibling_done.is_set()
    assert isinstance(failed.exception(), RuntimeError)
