"""Log lines a test looks for, recorded as a module's structlog logger writes them."""

from __future__ import annotations

from typing import Any

import pytest


def logged(monkeypatch: pytest.MonkeyPatch, logger: Any, event: str, field: str, *, level: str = "info") -> list[Any]:
    """The ``field`` of every ``event`` line ``logger`` logs at ``level`` from now on (each is still logged)."""
    values: list[Any] = []
    write = getattr(logger, level)

    def record(name: str, **fields: Any) -> Any:
        if name == event:
            values.append(fields[field])
        return write(name, **fields)

    monkeypatch.setattr(logger, level, record)
    return values
