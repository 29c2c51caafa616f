"""structlog as the gateway sets it up: one printer for every logger, a request's context cleared."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import structlog
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from gateway.observability.logging import configure_logging
from gateway.observability.metrics.registry import Metrics
from gateway.observability.requests import request_middleware


@pytest.fixture
def restore_logging() -> Iterator[None]:
    yield
    structlog.reset_defaults()


@pytest.mark.usefixtures("restore_logging")
def test_every_logger_writes_through_one_printer_to_the_stderr_of_configuration(
    capsys: pytest.CaptureFixture[str],
) -> None:
    configure_logging("info", json_logs=True)
    first = structlog.get_logger("a").bind()
    second = structlog.get_logger("b").bind()
    assert first._logger is second._logger
    structlog.get_logger("a").info("hello", n=1)
    (line,) = capsys.readouterr().err.splitlines()
    assert json.loads(line)["event"] == "hello"


async def test_the_request_context_is_bound_while_the_handler_runs_and_cleared_after() -> None:
    structlog.contextvars.bind_contextvars(stale="left over")
    seen: dict[str, object] = {}

    async def handler(request: web.Request) -> web.StreamResponse:
        seen.update(structlog.contextvars.get_contextvars())
        return web.Response(status=204)

    observe = request_middleware(Metrics(), "replica-0")
    request = make_mocked_request("GET", "/healthz", headers={"X-Request-Id": "req-1"})
    response = await observe(request, handler)
    assert response.status == 204
    assert seen == {"request_id": "req-1"}
    assert structlog.contextvars.get_contextvars() == {}
