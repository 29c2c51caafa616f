"""Prometheus collectors, one registry per gateway app (tests build many apps in one process).

Each module holds the families of one subject, and :mod:`.registry` puts them all in one app's
registry:

* :mod:`.labels` — the bounded label policies every family's labels pass through (why: there);
* :mod:`.requests` — client requests, their latency, and the front door's refusals;
* :mod:`.holds` — held calls, rounds per call, the age of a hold at its retry, expirations;
* :mod:`.backends` — backend sessions, handshakes, failures, answer times, memory-guard kills;
* :mod:`.forwards` — retries forwarded to the replica owning their hold, or replayed here;
* :mod:`.tasks` — tasks made of legacy calls: by status, created, ended, evicted, refused ids;
* :mod:`.process` — the event loop's lag, the build, the container's memory, and the process,
  platform and GC collectors;
* :mod:`.live` — families read at scrape time from the hold registry and the session pools;
* :mod:`.registry` — :class:`~.registry.Metrics`: one app's registry, every family above in it.

This face imports nothing (a re-export here would run every module above whenever one of them is
imported, and tie them in a cycle): import each name from its module.
"""
