"""``t1.`` task ids: sealed for one route and one caller until their not_after, under the task-id
keys of the key set (the first seals, every one opens), refused with one typed reason otherwise."""

from __future__ import annotations

import os

import pytest

from gateway.frontdoor.legacy_ids import LegacySessionIds
from gateway.keyset import KeySet, Label, b64url_decode_strict, b64url_nopad
from gateway.mcptasks.ids import TaskClaims, TaskIdRejected, TaskIds

OLD = b"o" * 32
NEW = b"n" * 32
NOW_MS = 1_800_000_000_000


def claims(principal: str | None = "tag-a", not_after_ms: int = NOW_MS + 60_000) -> TaskClaims:
    return TaskClaims.new(
        owner="replica-1",
        owner_url="http://10.0.0.1:8080",
        boot="boot-1",
        principal=principal,
        created_ms=NOW_MS,
        not_after_ms=not_after_ms,
    )


def refusal(ids: TaskIds, task_id: object, *, route: str = "r", principal: str | None = "tag-a") -> str:
    with pytest.raises(TaskIdRejected) as refused:
        ids.open(task_id, route=route, principal=principal, now_ms=NOW_MS)
    return refused.value.reason


def test_an_id_opens_for_its_route_and_caller_with_every_claim() -> None:
    ids = TaskIds(KeySet([OLD]))
    sealed = claims()
    task_id = ids.seal("r", sealed)
    assert task_id.startswith("t1.")
    assert ids.open(task_id, route="r", principal="tag-a", now_ms=NOW_MS) == sealed
    assert len(b64url_decode_strict(sealed.key)) == 16


def test_two_tasks_never_share_a_key_or_an_id() -> None:
    ids = TaskIds(KeySet([OLD]))
    first, second = claims(), claims()
    assert first.key != second.key
    assert ids.seal("r", first) != ids.seal("r", first), "a fresh nonce per seal"


def test_anonymous_tasks_are_bound_to_no_principal() -> None:
    ids = TaskIds(KeySet([OLD]))
    task_id = ids.seal("r", claims(principal=None))
    assert ids.open(task_id, route="r", principal=None, now_ms=NOW_MS).principal is None
    assert refusal(ids, task_id, principal="tag-a") == "wrong_principal"


def test_a_tampered_id_is_refused() -> None:
    ids = TaskIds(KeySet([OLD]))
    raw = bytearray(b64url_decode_strict(ids.seal("r", claims())[3:]))
    raw[20] ^= 1
    assert refusal(ids, "t1." + b64url_nopad(bytes(raw))) == "bad_tag"


def test_an_id_of_another_route_is_refused() -> None:
    ids = TaskIds(KeySet([OLD]))
    assert refusal(ids, ids.seal("other", claims())) == "bad_tag"


def test_an_id_of_another_principal_is_refused() -> None:
    ids = TaskIds(KeySet([OLD]))
    assert refusal(ids, ids.seal("r", claims()), principal="tag-b") == "wrong_principal"


def test_an_expired_id_is_refused_at_its_not_after() -> None:
    ids = TaskIds(KeySet([OLD]))
    assert refusal(ids, ids.seal("r", claims(not_after_ms=NOW_MS))) == "expired"


@pytest.mark.parametrize(
    "bad",
    ["", "t1.", "t1.!!!", "v2.abc", "t1." + "A" * 2000, "t1." + b64url_nopad(os.urandom(20)), 42, None],
)
def test_what_is_no_task_id_is_malformed(bad: object) -> None:
    assert refusal(TaskIds(KeySet([OLD])), bad) == "malformed"


def test_random_bytes_of_a_plausible_length_are_refused_by_the_tag() -> None:
    assert refusal(TaskIds(KeySet([OLD])), "t1." + b64url_nopad(os.urandom(120))) == "bad_tag"


def test_the_first_key_seals_and_every_key_opens() -> None:
    keys = KeySet([OLD])
    ids = TaskIds(keys)
    before = ids.seal("r", claims())
    keys.replace([NEW, OLD])
    after = ids.seal("r", claims())
    assert ids.open(before, route="r", principal="tag-a", now_ms=NOW_MS).owner == "replica-1"
    assert ids.open(after, route="r", principal="tag-a", now_ms=NOW_MS).owner == "replica-1"
    assert refusal(TaskIds(KeySet([OLD])), after) == "bad_tag", "sealed by the new first key"
    keys.replace([NEW])
    assert refusal(ids, before) == "bad_tag", "the retired key no longer opens"


def test_no_other_token_format_opens_as_a_task_id() -> None:
    keys = KeySet([OLD])
    session_id = LegacySessionIds(keys).open("r", "backend-1", None)
    assert refusal(TaskIds(keys), "t1." + session_id[3:]) == "bad_tag"
    assert keys[Label.TASK_ID] != keys[Label.LEGACY_SESSION]
