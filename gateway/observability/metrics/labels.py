"""Bounded label values: every value a label of the gateway's families takes passes through a policy.

A label is a time series, and a client that could choose one could grow ``/metrics`` without limit
(2,000 notifications with random 16 KiB method names once grew it from 1.4 KB to 625 MB). So no
collector is reachable except through :class:`Bounded`, whose ``labels()`` passes each value
through that label's policy:

* :class:`OneOf` — a known set (JSON-RPC methods of every era, HTTP verbs); anything else is
  ``other``;
* :class:`Capped` — labels the code chooses (routes, outcomes, reasons): a value must look like a
  label (``[a-z0-9_.:-]``, at most 64 characters) and at most ``limit`` distinct values are kept
  per label; later ones become ``other``. A code path that ever put a client string in such a
  label would cost at most ``limit`` series, not one per request.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable
from typing import Final, Generic, Protocol, TypeVar

from mcp_types.methods import CLIENT_NOTIFICATIONS, CLIENT_REQUESTS
from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.metrics_core import Metric

OTHER: Final = "other"
MAX_CACHED_CHILDREN: Final = 4096
"""Label sets a :class:`Bounded` family remembers the child of (a bound on top of the policies')."""
_LABEL_SHAPE: Final = re.compile(r"[A-Za-z0-9_.:/-]{1,64}")

KNOWN_METHODS: Final[frozenset[str]] = frozenset(
    {m for m, _ in (*CLIENT_REQUESTS, *CLIENT_NOTIFICATIONS)}
    | {"-", "batch", "response", "GET", "POST", "DELETE", "PUT", "PATCH"}
    | {"tasks/get", "tasks/update", "tasks/cancel"}
)
"""Every value the ``method`` label may take: client methods of every revision, the tasks
extension's, and the placeholders the front door uses (``-`` rejected, ``batch``, ``response``, HTTP verbs)."""


class LabelPolicy(Protocol):
    def __call__(self, value: str) -> str: ...


class OneOf:
    def __init__(self, values: Iterable[str]) -> None:
        self._values = frozenset(values)

    def __call__(self, value: str) -> str:
        return value if value in self._values else OTHER


class Capped:
    def __init__(self, limit: int = 64) -> None:
        self._limit = limit
        self._seen: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, value: str) -> str:
        if value in self._seen:
            return value
        if not isinstance(value, str) or not _LABEL_SHAPE.fullmatch(value):
            return OTHER
        with self._lock:
            if len(self._seen) >= self._limit:
                return OTHER
            self._seen.add(value)
        return value


def route_label() -> Capped:
    """The policy of a ``route`` label: route names come from the configuration, a few hundred at most."""
    return Capped(256)


def method_label() -> OneOf:
    """The policy of a ``method`` label: :data:`KNOWN_METHODS`."""
    return OneOf(KNOWN_METHODS)


M = TypeVar("M", Counter, Gauge, Histogram)


class Bounded(Generic[M]):
    """A labelled collector whose label values pass through one policy per label.

    ``defaults`` fill trailing labels a caller leaves out, so a label added to a family does not
    break callers written before it (they report the default until they pass the value)."""

    def __init__(self, metric: M, *policies: LabelPolicy, defaults: tuple[str, ...] = ()) -> None:
        self._metric: M = metric
        self._policies = policies
        self._defaults = defaults
        self._children: dict[tuple[str, ...], M] = {}
        """Label values a policy kept as they are → their child: most requests repeat a handful of
        label sets, and prometheus-client's own lookup costs several times this one."""

    def collect(self) -> list[Metric]:
        return list(self._metric.collect())

    def labels(self, *values: str) -> M:
        child = self._children.get(values)
        if child is not None:
            return child
        absent: int = len(self._policies) - len(values)
        full: tuple[str, ...] = values
        if 0 < absent <= len(self._defaults):
            full = (*values, *self._defaults[len(self._defaults) - absent :])
        if len(full) != len(self._policies):
            raise ValueError(f"expected {len(self._policies)} label values, got {len(values)}")
        kept = tuple(policy(value) for policy, value in zip(self._policies, full, strict=True))
        child = self._metric.labels(*kept)
        if kept == full and len(self._children) < MAX_CACHED_CHILDREN:
            # Only values every policy kept are remembered: those are bounded sets, never a
            # client's arbitrary string (which a policy turns into ``other``).
            self._children[values] = child
        return child
