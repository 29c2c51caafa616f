"""gateway.owned.TaskGroup used as a block: leaving it, however, ends every task spawned into it."""

from __future__ import annotations

import asyncio

import pytest

from gateway.owned import TaskGroup


async def _forever(started: asyncio.Event) -> None:
    started.set()
    await asyncio.Event().wait()


async def test_leaving_the_block_ends_every_task() -> None:
    started = asyncio.Event()
    async with TaskGroup("block") as tasks:
        task = tasks.spawn(_forever(started))
        await started.wait()
    assert task.cancelled()
    assert len(tasks) == 0


async def _fail_inside(tasks: TaskGroup, started: asyncio.Event) -> asyncio.Task[None]:
    async with tasks:
        task = tasks.spawn(_forever(started))
        await started.wait()
        raise LookupError(task)


async def test_leaving_the_block_by_an_error_ends_every_task_and_lets_the_error_through() -> None:
    with pytest.raises(LookupError) as raised:
        await _fail_inside(TaskGroup("block"), asyncio.Event())
    task = raised.value.args[0]
    assert task.cancelled()


async def test_a_task_spawned_after_the_block_is_cancelled_at_its_first_wait() -> None:
    async with TaskGroup("block") as tasks:
        pass
    ran: list[str] = []

    async def late() -> None:
        ran.append("started")
        await asyncio.sleep(0)
        ran.append("went on")

    task = tasks.spawn(late())
    await asyncio.gather(task, return_exceptions=True)
    assert task.cancelled()
    assert ran == ["started"]
