"""A route's ``tasks`` section: when the gateway answers a ``tools/call`` with a task
(the ``io.modelcontextprotocol/tasks`` extension) instead of holding the client's request.

Off by default: until an operator sets ``enabled: true``, a client that declares the extension sees
no change (no advertisement in ``server/discover``, ``tasks/*`` answer -32601, every call runs as
before). Per tool (``tools.<name>``, falling back to ``default``) the mode is ``off`` (never a task),
``after`` (a task once the call has run ``after_ms`` without a final answer; a question asked before
that is an ordinary input round) or ``always`` (a task at once).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from gateway.config.checks import PositiveSeconds, Strict

TaskMode = Literal["off", "after", "always"]
WithoutExtension = Literal["sync", "reject"]


class TaskDefaults(Strict):
    """The mode of every tool ``tools`` does not name."""

    mode: TaskMode = Field(
        "off",
        description="off: never a task; after: a task once the call has run after_ms without a final answer (a "
        "question asked before that is an ordinary input round); always: a task at once.",
    )
    after_ms: int = Field(5000, ge=0, le=3_600_000, description="The threshold of mode after, in milliseconds.")


class ToolTasks(Strict):
    """One tool's own settings; each unset one comes from the route's."""

    mode: TaskMode | None = Field(None, description="This tool's mode (default: the route's default.mode).")
    after_ms: int | None = Field(
        None, ge=0, le=3_600_000, description="This tool's threshold (default: default.after_ms)."
    )
    without_extension: WithoutExtension | None = Field(
        None, description="This tool, called by a client that did not declare the extension (default: the route's)."
    )


@dataclass(frozen=True, slots=True)
class ToolTaskPolicy:
    """What the route's settings say of one tool."""

    mode: TaskMode
    after_ms: int
    without_extension: WithoutExtension


class TasksPolicy(Strict):
    """``routes[].tasks``: tasks the gateway makes of legacy calls."""

    enabled: bool = Field(
        False,
        description="Advertise io.modelcontextprotocol/tasks in server/discover, answer tasks/get, tasks/update and "
        "tasks/cancel, and make tasks of tools/call by the modes below. Off: clients that declare the extension see "
        "no change.",
    )
    default: TaskDefaults = Field(default_factory=TaskDefaults)
    tools: dict[str, ToolTasks] = Field(default_factory=dict, description="Per tool name: its own settings.")
    without_extension: WithoutExtension = Field(
        "sync",
        description="A tool whose mode is after or always, called by a client that did not declare the extension: "
        "sync runs it as an ordinary call (questions as input rounds); reject answers -32021 with "
        "data.requiredCapabilities, as a tasks-only server does.",
    )
    ttl: PositiveSeconds = Field(
        3600,
        description="Seconds a task may live from its creation (ttlMs); a task still running then ends failed "
        "(error data.reason ttl_elapsed). Not bounded by backend.timeout.",
    )
    retention: PositiveSeconds = Field(
        300,
        description="Seconds a finished task stays readable at least (it stays until ttl has passed too), unless "
        "limits.max_tasks or limits.max_task_result_bytes evict it earlier, oldest first.",
    )
    poll_interval_ms: int = Field(2000, ge=1, le=3_600_000, description="pollIntervalMs suggested to clients.")
    max_result_bytes: int = Field(
        1024 * 1024,
        ge=1024,
        description="Largest tool result a task keeps (its JSON); a larger one ends the task failed "
        "(error data.reason result_too_large).",
    )
    require_name_header: bool = Field(
        False,
        description="tasks/get, tasks/update and tasks/cancel without an Mcp-Name header get -32020. Default: a "
        "missing header is accepted (the task id in the body routes the request); a present one must equal "
        "params.taskId either way.",
    )

    def for_tool(self, name: str) -> ToolTaskPolicy:
        """The mode, threshold and ``without_extension`` of tool ``name`` (off for every tool while disabled)."""
        own = self.tools.get(name)
        mode = (own.mode if own is not None else None) or self.default.mode
        after_ms = own.after_ms if own is not None and own.after_ms is not None else self.default.after_ms
        without = (own.without_extension if own is not None else None) or self.without_extension
        return ToolTaskPolicy(mode if self.enabled else "off", after_ms, without)
