"""Which of the official suite's server scenarios the gateway must pass, and the checks that do not apply
to a gateway in front of a legacy server (each with the spec lines that say why).

``docs/conformance.md`` (section "The official conformance suite") reproduces :data:`NOT_APPLICABLE`;
``test_official_suite.py`` checks that it does. Spec files are relative to
``docs/specification/2026-07-28/`` in the specification repository.
"""

from __future__ import annotations

from dataclasses import dataclass

SUITE_VERSION = "0.2.0-alpha.12"
"""The pinned ``@modelcontextprotocol/conformance`` (``tests/node-tools/package.json``)."""

REQUIRED_SCENARIOS: tuple[str, ...] = (
    "server-stateless",
    "completion-complete",
    "tools-list",
    "tools-call-simple-text",
    "tools-call-image",
    "tools-call-audio",
    "tools-call-embedded-resource",
    "tools-call-mixed-content",
    "tools-call-error",
    "tools-call-with-progress",
    "server-sse-multiple-streams",
    "resources-list",
    "resources-read-text",
    "resources-read-binary",
    "resources-templates-read",
    "sep-2164-resource-not-found",
    "prompts-list",
    "prompts-get-simple",
    "prompts-get-with-args",
    "prompts-get-embedded-resource",
    "prompts-get-with-image",
    "dns-rebinding-protection",
    "caching",
    "input-required-result-basic-elicitation",
    "input-required-result-basic-sampling",
    "input-required-result-basic-list-roots",
    "input-required-result-request-state",
    "input-required-result-multiple-input-requests",
    "input-required-result-multi-round",
    "input-required-result-missing-input-response",
    "input-required-result-non-tool-request",
    "input-required-result-result-type",
    "input-required-result-unsupported-methods",
    "input-required-result-tampered-state",
    "input-required-result-capability-check",
    "input-required-result-ignore-extra-params",
    "input-required-result-validate-input",
)
"""The server scenarios ``conformance list --requirements 2026-07-28`` names (frozen at the release)."""

TASKS_SCENARIOS: tuple[str, ...] = (
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
)
"""The tasks extension's server scenarios (``source.extensionId`` ``io.modelcontextprotocol/tasks``). The
``--requirements 2026-07-28`` run runs them unscored; one started by name must go without ``--spec-version``,
which skips them ("extension scenario, not on the spec timeline"). Their fixture tools are ``add_task_tools``
in ``tests/peers/conformance_fixture.py``; the route config that makes the gateway create tasks for them is
``suite.TASKS_ROUTE_CONFIG``."""

EXTRA_SCENARIOS: tuple[str, ...] = (
    "json-schema-2020-12",
    "http-header-validation",
    "http-custom-header-server-validation",
    *TASKS_SCENARIOS,
)
"""Scenarios the suite runs with ``--requirements 2026-07-28`` but does not score (pending, extension), that
the fixture server supports and the gateway must pass too."""

SCENARIOS: tuple[str, ...] = REQUIRED_SCENARIOS + EXTRA_SCENARIOS


@dataclass(frozen=True)
class NotApplicable:
    """One check of one scenario that a gateway in front of a legacy server cannot meet, and why not."""

    scenario: str
    check: str
    """The check's ``id`` in ``checks.json``."""
    status: str
    """What the suite reports for it: ``FAILURE`` or ``WARNING``."""
    why: str
    spec: str
    """The spec lines that make the check inapplicable."""


@dataclass(frozen=True)
class SuiteStub:
    """A scenario the pinned suite ships as a stub: it sends nothing and reports one SKIPPED check."""

    scenario: str
    check: str
    """The one check's ``id`` in ``checks.json`` (status SKIPPED)."""
    why: str
    covered_by: str
    """What covers the behaviour instead (the spec lines, and our own tests when they exist)."""


SUITE_STUBS: tuple[SuiteStub, ...] = (
    SuiteStub(
        scenario="tasks-status-notifications",
        check="tasks-status-notifications",
        why='In 0.2.0-alpha.12 the scenario only reports SKIPPED ("Status notifications conformance, pending '
        'subscriptions/listen rewrite"): notifications/tasks now travel on the subscriptions/listen stream and '
        "the suite's harness does not read it yet. Nothing is sent to the gateway.",
        covered_by="ext-tasks specification/draft/tasks.md (notifications/tasks on subscriptions/listen with "
        "notifications.taskIds); tests/e2e/test_task_listen.py (docs/conformance.md A23-A26)",
    ),
)
"""Scenarios the suite cannot fail yet. Each must still report exactly its one SKIPPED check: a stub that
starts testing makes its entry stale, and ``test_official_suite.py`` says so."""


NOT_APPLICABLE: tuple[NotApplicable, ...] = (
    NotApplicable(
        scenario="input-required-result-basic-elicitation",
        check="sep-2322-elicitation-incomplete",
        status="FAILURE",
        why="The scenario expects the input key `user_name` by name. A legacy server asks inline "
        "(`elicitation/create` with no key of its own), so the gateway assigns the key (`elicit-1`); the "
        "request kind, message and schema are the fixture's. The scenario's second check (retry, complete "
        "result) is not run because it keys the answer by the same name.",
        spec="basic/patterns/mrtr.mdx:61 (InputRequests: keys are server-assigned string identifiers); "
        ":228 (keys are server assigned identifiers, unique within the request); :102 (InputResponses keys "
        "correspond to the keys in the InputRequests map)",
    ),
    NotApplicable(
        scenario="input-required-result-ignore-extra-params",
        check="sep-2322-ignore-unexpected-params",
        status="WARNING",
        why="The scenario sends a first request, without `requestState`, that answers a key (`user_name`) no "
        "InputRequiredResult ever issued. To the gateway it is a new call: the legacy tool runs, elicits, and "
        "the gateway asks again. Extra keys of a real retry are ignored "
        "(`tests/conformance/test_mrtr.py::test_input_responses[retry with an unknown extra key]`).",
        spec="basic/patterns/mrtr.mdx:61, :228 (keys are server-assigned); :254-255 (the client echoes the "
        "`requestState` it was given); :266-267 (missing information: the server SHOULD ask again with a new "
        "InputRequiredResult rather than fail)",
    ),
)
