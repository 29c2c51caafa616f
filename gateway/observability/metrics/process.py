"""The process that runs the gateway: its event loop's lag, which build it is, its container's
memory as the stdio memory guard reads it, and the standard process (CPU, memory, file
descriptors, start time), platform (Python version) and garbage collector collectors."""

from __future__ import annotations

import platform
from importlib import metadata
from typing import Final

from prometheus_client import CollectorRegistry, Gauge, GCCollector, Histogram, PlatformCollector, ProcessCollector

from gateway.observability.metrics.labels import Bounded, OneOf

LOOP_LAG_BUCKETS: Final = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5)
CONTAINER_MEMORY_KINDS: Final = ("working_set", "limit")


def gateway_version() -> str:
    try:
        return metadata.version("mrtr-gateway")
    except metadata.PackageNotFoundError:  # run from a source tree that was never installed
        return "unknown"


class ProcessFamilies:
    """The event loop's lag, the build, and the process, platform and GC collectors."""

    def __init__(self, r: CollectorRegistry) -> None:
        self.loop_lag = Histogram(
            "mrtr_gateway_event_loop_lag_seconds",
            "How late the event loop ran a timer: time every request waits behind work that does not yield",
            registry=r,
            buckets=LOOP_LAG_BUCKETS,
        )
        self.container_memory = Bounded(
            Gauge(
                "mrtr_gateway_container_memory_bytes",
                "The container's memory as the stdio memory guard reads it from its cgroup: working_set (usage "
                "minus inactive file cache) and limit",
                ["kind"],
                registry=r,
            ),
            OneOf(CONTAINER_MEMORY_KINDS),
        )
        self.build_info = Gauge(
            "mrtr_gateway_build_info",
            "Always 1; the labels say which gateway and Python version run",
            ["version", "python"],
            registry=r,
        )
        self.build_info.labels(gateway_version()[:32], platform.python_version()[:32]).set(1)
        ProcessCollector(registry=r)
        PlatformCollector(registry=r)
        GCCollector(registry=r)
