"""Input rounds: what a held call asks its client, and what a retry's answers mean.

The call core (:mod:`gateway.calls.core`) holds a paused call and opens its rounds; these functions
shape them, with no I/O and no collaborators: a new hold for a call (:func:`new_hold`), the questions
of a batch of server requests (:func:`ask`) or of a legacy -32042 (:func:`ask_urls`), a retry's
answers checked against what they answer (:func:`checked_answers`), a url-mode round's consent
(:func:`consent`), and the ``input_required`` result (:func:`input_required`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Literal

from gateway.calls.context import CallContext
from gateway.calls.request import Call
from gateway.calls.transcript import Step, checked_answer
from gateway.holds.registry import Hold, Pending
from gateway.legacy.session import JsonObj, ServerRequest
from gateway.state.claims import request_digest
from gateway.translate import inputs, results


def new_hold(ctx: CallContext, call: Call, hold_id: str, principal: str | None) -> Hold[CallContext]:
    """A hold for the call, claimed (busy) by the call that creates it; round 0 until sealed.

    Its absolute deadline is the route's ``holds.max_duration`` from now, or a replayed call's
    original deadline; its key counter continues after every key a replayed call had used."""
    limits = ctx.route.config.holds
    now = time.monotonic()
    not_after = now + limits.max_duration
    if ctx.replay is not None and ctx.replay.until is not None:
        not_after = min(not_after, now + (ctx.replay.until - time.time()))
    identity = call.request.identity
    return Hold(
        id=hold_id,
        route=ctx.route.name,
        principal=principal,
        method=identity.method,
        target=identity.target,
        args_digest=identity.args_digest,
        deadline=time.monotonic() + limits.ttl,
        context=ctx,
        round=0,
        busy=True,
        log=list(ctx.replayed),
        counter=ctx.replay.key_base if ctx.replay is not None else 0,
        not_after=not_after,
        max_rounds=limits.max_rounds,
    )


def ask(hold: Hold[CallContext], ctx: CallContext, batch: list[ServerRequest], *, logged: bool) -> None:
    """Put ``batch`` to the client as the round being opened. ``logged=False``: requests asked before
    the call was sent stay out of the replay log (a replayed call runs on a fresh session that asks
    them anew)."""
    group = hold.next_group()
    for server_request in batch:
        entry, elicitation_id = inputs.input_request(server_request.method, server_request.params)
        digest = request_digest(server_request.method, server_request.params)
        # A question a lost owner had asked keeps its key when a replay asks it again.
        key = ctx.replay.key_for(digest) if ctx.replay is not None else None
        key = key or hold.next_key(inputs.input_key, server_request.method)
        question = Pending(server_request.id, server_request.method, entry, elicitation_id)
        hold.ask(key, question, Step(server_request.method, key, digest, group, None) if logged else None)


def ask_urls(hold: Hold[CallContext], elicitations: list[JsonObj]) -> None:
    """Put a legacy -32042's URL interactions to the client as url-mode elicitations."""
    for item in elicitations:
        params = {"mode": "url", "message": str(item.get("message", "")), "url": item["url"]}
        entry, _ = inputs.input_request("elicitation/create", params)
        key = hold.next_key(inputs.input_key, "elicitation/create")
        hold.ask(key, Pending(-1, "elicitation/create", entry, str(item.get("elicitationId") or "")))


def checked_answers(hold: Hold[CallContext], responses: Mapping[str, Any]) -> dict[str, JsonObj]:
    """The retry's answers to the requests of ``hold`` (:func:`answers_to`)."""
    return answers_to(hold.pending, responses)


def answers_to(pending: Mapping[str, Pending], responses: Mapping[str, Any]) -> dict[str, JsonObj]:
    """The client's answers to the questions ``pending`` (a hold's, a task's), each checked against
    the kind of request it answers (:func:`~gateway.calls.transcript.checked_answer`; unknown keys
    ignored); a malformed one raises :class:`~gateway.errors.InvalidParams`."""
    return {key: checked_answer(key, p.method, responses[key]) for key, p in pending.items() if key in responses}


def consent(hold: Hold[CallContext], answers: dict[str, JsonObj]) -> Literal["accepted", "waiting", "declined"]:
    """A url-mode round's answers, taken off the round: ``accepted`` when every URL interaction was
    (re-send the call), ``waiting`` while some are still unanswered (ask again), else ``declined``."""
    for key, answer in answers.items():
        hold.take_answer(key, answer)
    if hold.pending:
        return "waiting"
    if any(a.get("action") != "accept" for a in answers.values()):
        return "declined"
    return "accepted"


def input_required(ctx: CallContext, hold: Hold[CallContext], token: str) -> JsonObj:
    """The ``input_required`` result of the round ``token`` seals: the questions still pending."""
    result: JsonObj = {
        "resultType": "input_required",
        "inputRequests": {key: p.request for key, p in hold.pending.items()},
        "requestState": token,
    }
    init = ctx.session.initialize_result if not ctx.released else {}
    return results.with_server_info(result, results.server_info_of(init))
