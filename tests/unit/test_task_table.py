"""The owner's task records: bounded (finished ones evicted oldest first, a new task past the cap
refused with a clear -32603 overloaded), lastUpdatedAt moved only by real changes, swept after
their ttl and retention, and counted in the tasks metrics."""

from __future__ import annotations

import pytest
from mcp_types.jsonrpc import INTERNAL_ERROR

from gateway.errors import OVERLOADED, TaskLimitReached
from gateway.mcptasks.table import TaskRecord, TaskTable
from gateway.mcptasks.wire import create_result, detailed, iso
from gateway.observability.metrics.registry import Metrics


class Clock:
    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def table(clock: Clock, **limits: int) -> tuple[TaskTable, Metrics]:
    metrics = Metrics.create()
    bounds = {"max_tasks": 3, "max_per_principal": 2, "max_result_bytes": 1000, **limits}
    return TaskTable(**bounds, retry_after=5, metrics=metrics, clock=clock), metrics


def record(key: str, clock: Clock, principal: str | None = "p") -> TaskRecord:
    return TaskRecord(
        key=key,
        task_id=f"t1.{key}",
        route="r",
        principal=principal,
        created=clock(),
        ttl=60,
        retention=10,
        poll_interval_ms=2000,
    )


def sample(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_past_the_cap_a_new_task_is_refused_clearly_when_nothing_can_be_evicted() -> None:
    clock = Clock()
    tasks, metrics = table(clock)
    for key, principal in (("a", "p"), ("b", "q"), ("c", "s")):
        tasks.add(record(key, clock, principal))
    with pytest.raises(TaskLimitReached) as refused:
        tasks.add(record("d", clock, "t"))
    error = refused.value.to_error()
    assert error["code"] == INTERNAL_ERROR
    assert error["data"] == {"reason": OVERLOADED, "cause": "max_tasks", "retryAfter": 5}
    assert refused.value.http_status == 503
    assert sample(metrics, "mrtr_gateway_tasks_refused_total", route="r", cause="max_tasks") == 1
    assert tasks.get("d") is None


def test_finished_tasks_are_evicted_oldest_first_to_admit_a_new_one() -> None:
    clock = Clock()
    tasks, metrics = table(clock)
    records = [record(key, clock, principal) for key, principal in (("a", "p"), ("b", "q"), ("c", "s"))]
    for r in records:
        tasks.add(r)
    tasks.finish(records[1], "completed", reason="completed", result={"content": []}, size=10)
    clock.now += 1
    tasks.finish(records[0], "cancelled", reason="cancelled")
    tasks.add(record("d", clock, "t"))
    assert tasks.get("b") is None, "the one that ended first went first"
    assert tasks.get("a") is not None
    assert sample(metrics, "mrtr_gateway_tasks_evicted_total", route="r") == 1
    assert tasks.retained_bytes == 0


def test_one_principal_is_capped_on_its_own() -> None:
    clock = Clock()
    tasks, _ = table(clock, max_tasks=100)
    tasks.add(record("a", clock))
    tasks.add(record("b", clock))
    with pytest.raises(TaskLimitReached) as refused:
        tasks.add(record("c", clock))
    assert refused.value.reason == "max_tasks_per_principal"
    tasks.add(record("c", clock, principal="other"))


def test_a_result_that_cannot_be_kept_fails_its_task() -> None:
    clock = Clock()
    tasks, _ = table(clock)
    r = record("a", clock)
    tasks.add(r)
    tasks.finish(r, "completed", reason="completed", result={"x": 1}, size=5000)
    assert r.status == "failed"
    assert r.result is None
    assert r.error is not None
    assert r.error["data"] == {"reason": "result_too_large"}
    assert r.status_message == "Task lost"


def test_results_are_evicted_oldest_first_to_keep_a_new_one() -> None:
    clock = Clock()
    tasks, _ = table(clock, max_tasks=10, max_per_principal=10)
    first, second = record("a", clock), record("b", clock)
    tasks.add(first)
    tasks.add(second)
    tasks.finish(first, "completed", reason="completed", result={"x": 1}, size=600)
    tasks.finish(second, "completed", reason="completed", result={"x": 2}, size=600)
    assert tasks.get("a") is None
    assert second.status == "completed"
    assert tasks.retained_bytes == 600


def test_last_updated_moves_only_when_the_task_changes() -> None:
    clock = Clock()
    tasks, _ = table(clock)
    r = record("a", clock)
    tasks.add(r)
    created = create_result(r, None)
    assert created["createdAt"] == created["lastUpdatedAt"] == iso(clock.now)
    clock.now += 1
    tasks.progress(r, "1/2")
    assert r.updated == clock.now
    clock.now += 1
    tasks.progress(r, "1/2")
    assert r.updated == clock.now - 1, "the same message changes nothing"
    tasks.ask(r, "k1", {"method": "roots/list"})
    tasks.ask(r, "k2", {"method": "roots/list"})
    assert detailed(r, None)["inputRequests"] == {"k1": {"method": "roots/list"}, "k2": {"method": "roots/list"}}
    tasks.answered(r, ["k1"])
    assert r.status == "input_required"
    tasks.answered(r, ["k2"])
    assert r.status == "working"
    assert "inputRequests" not in detailed(r, None)


def test_a_finished_task_stays_as_it_ended() -> None:
    clock = Clock()
    tasks, metrics = table(clock)
    r = record("a", clock)
    tasks.add(r)
    assert tasks.finish(r, "completed", reason="completed", result={"content": []}, size=2)
    assert not tasks.finish(r, "cancelled", reason="cancelled")
    assert r.status == "completed"
    shape = detailed(r, None)
    assert shape["resultType"] == "complete"
    assert shape["result"] == {"content": []}
    assert sample(metrics, "mrtr_gateway_tasks", route="r", status="completed") == 1
    assert sample(metrics, "mrtr_gateway_tasks", route="r", status="working") == 0
    assert sample(metrics, "mrtr_gateway_tasks_ended_total", route="r", status="completed", reason="completed") == 1


def test_finished_tasks_are_swept_after_their_ttl_and_retention() -> None:
    clock = Clock()
    tasks, _ = table(clock)
    early, late = record("a", clock), record("b", clock)
    tasks.add(early)
    tasks.add(late)
    tasks.finish(early, "cancelled", reason="cancelled")
    clock.now += 59
    tasks.finish(late, "cancelled", reason="cancelled")
    clock.now += 1
    tasks.sweep()
    assert tasks.get("a") is None, "its ttl has passed, and its retention long ago"
    assert tasks.get("b") is not None, "finished a second ago: kept for its retention"
    clock.now += 9
    tasks.sweep()
    assert tasks.get("b") is None
    assert len(tasks) == 0


def test_running_tasks_are_never_swept_nor_evicted() -> None:
    clock = Clock()
    tasks, _ = table(clock)
    r = record("a", clock)
    tasks.add(r)
    clock.now += 10_000
    tasks.sweep()
    assert tasks.get("a") is r
    assert tasks.running == 1
