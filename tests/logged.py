"""Log lines a test looks for, recorded as a module's structlog logger writes them."""

from __future__ import annotations

from typing import Any

import pytest


def logged(monkeypatch: pytest.MonkeyPatch, logger: Any, event: str, field: str) -> list[Any]:
    """The ``field`` of every ``event`` line ``logger`` logs at info from now on (each is still logged)."""
    values: list[Any] = []
    info = logger.info

    def record(name: str, **fields: Any) -> Any:
        if name == event:
            values.append(fields[field])
        return info(name, **fields)

    monkeypatch.setattr(logger, "info", record)
    return values
