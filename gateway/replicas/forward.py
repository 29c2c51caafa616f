"""Forward a retry to the replica that owns its hold, and stream the owner's answer back.

How the hop can fail decides what the route may do next:

* no connection could be made (refused, or no answer to the connect within
  ``replicas.forward_timeout``): the owner is not at its address, :data:`OWNER_UNREACHABLE` — the
  one failure after which a replay route may replay;
* connected, but no acknowledgement within ``replicas.forward_timeout`` (:data:`OWNER_UNRESPONSIVE`):
  the owner's kernel accepts connections while the process is stopped (SIGSTOP, a stalled node), so
  the hop asks for ``Expect: 100-continue`` and the owner's HTTP server answers ``100 Continue`` as
  soon as its event loop reads the request head, before any of the gateway's work; the body is sent
  after it. No ``100`` (nor a final answer) within ``forward_timeout`` of the hop's start (plus
  :data:`ACK_MARGIN`, so that a connect timing out is still told apart): the hop gives up. The owner
  may resume, so nothing is replayed;
* anything after the acknowledgement (the owner's handler silent past the route's
  ``backend.timeout``, or a dropped connection), and TLS failures: :data:`OWNER_FAILED`; the owner
  may be alive and running the call, so nothing is replayed on that alone. A retry's hop
  (``resend=True``) then finds out (:meth:`ReplicaHop.forward`): a fresh connection to the owner's
  address refused proves it gone (:data:`OWNER_UNREACHABLE`: a replay route replays); one accepted
  gets the same request sent once more (up to :data:`RESENDS` times, each after such a check),
  which is safe because the owner answers a resend of a retry it already ran with that retry's
  answer (:mod:`gateway.calls.resends`), and a replica that
  restarted at that address (another boot, or another id) replays or refuses the retry itself. A
  connect that neither succeeds nor fails within ``forward_timeout`` proves nothing: the client gets
  the hold-lost error, ``owner_failed``.

``100 Continue`` is informational: the status, headers and body the client receives are the
owner's final answer, unchanged. Once acknowledged, a silent owner never keeps the client past the
route's ``backend.timeout``: that is the read timeout of the hop. If it strikes after the owner's
answer has begun, an SSE answer is ended with a JSON-RPC error event; any other answer is cut off.
The answer is streamed by the gateway's one relay (:mod:`gateway.relay`).

The same hop carries ``tasks/get``, ``tasks/update`` and ``tasks/cancel`` for a task another replica
owns (:mod:`gateway.mcptasks.service`): the owner answers them as if they came to it directly. Its
read timeout is then the caller's (``forward_timeout`` for ``tasks/get`` and ``tasks/cancel``, which
the owner answers from memory), and a failed hop raises the same :class:`HoldLost` causes, which the
task service reads as "owner gone" (:data:`OWNER_UNREACHABLE`) or "not answering" (the others). The
request body is the client's, already bounded by ``listen.max_body_bytes``; the answer is streamed,
never buffered.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ssl
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any, Final

import aiohttp
import structlog
import yarl
from aiohttp import web

from gateway import envelopes
from gateway.calls.route import RouteRuntime
from gateway.config.model import ReplicasConfig
from gateway.errors import HoldLost
from gateway.http_errors import CLIENT_FAILURES, never_connected
from gateway.observability import tracing
from gateway.observability.metrics import forwards as outcomes
from gateway.observability.metrics.forwards import FORWARDED
from gateway.observability.metrics.registry import Metrics
from gateway.relay import end_to_end, relay
from gateway.replicas.auth import FORWARD_HEADER, ForwardSigner

log = structlog.get_logger("gateway.replicas")

# The hop's HoldLost causes, also forwards_total outcomes: named in their one list
# (gateway.observability.metrics.forwards.FORWARD_OUTCOMES).
OWNER_UNREACHABLE: Final = outcomes.OWNER_UNREACHABLE
OWNER_FAILED: Final = outcomes.OWNER_FAILED
OWNER_UNRESPONSIVE: Final = outcomes.OWNER_UNRESPONSIVE
RESENDS: Final = 3
"""Times a retry is sent once more to an owner whose connection died after the request was sent
while a fresh connection to its address is still accepted. A process being killed accepts for a
moment: in the chaos test (SIGKILL under load) a check 0.5 ms after the reset was accepted, the
resend was reset again, and the next check was refused (the owner gone: a replay route replays)."""
ACK_MARGIN: Final = 0.05
"""Seconds the acknowledgement is waited for past ``forward_timeout``: the connect's own timeout
(exactly ``forward_timeout``, never rounded up) strikes first, and stays ``owner_unreachable``."""

# What the owner needs to judge the request exactly as this replica would have.
_FORWARDED = {
    "accept",
    "authorization",
    "content-type",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    "traceparent",
    "tracestate",
    "baggage",
}


def hop_credential(headers: Mapping[str, str], route: RouteRuntime) -> str:
    """What identifies the client on the hop, for its MAC: the ``Authorization`` header and, on a
    route whose principal comes from a trusted header, that header too (the owner honours it on a
    signed hop, so it must not be changeable in transit)."""
    parts = [headers.get("Authorization") or ""]
    auth = route.config.auth
    if auth is not None and auth.trusted_header is not None:
        parts.append(headers.get(auth.trusted_header.header) or "")
    return "\n".join(parts)


@functools.lru_cache(maxsize=4)
def _tls_context(ca_file: str | None) -> ssl.SSLContext:
    """Certificate-verifying TLS for an https hop, trusting ``ca_file`` when one is configured."""
    return ssl.create_default_context(cafile=ca_file)


class _Acknowledgement:
    """Lifts a hop's acknowledgement deadline when the body is sent: aiohttp sends it once the owner
    answered ``100 Continue`` (or its final answer). From then on only the hop's read timeout applies."""

    def __init__(self, deadline: asyncio.Timeout) -> None:
        self._deadline = deadline

    def body_sent(self) -> None:
        # Only while the hop still waits for its acknowledgement: not once the deadline has struck (the
        # hop is being cancelled), nor once the block is left (the owner's answer came first).
        if self._deadline.when() is not None and not self._deadline.expired():
            with contextlib.suppress(RuntimeError):  # the block was left already
                self._deadline.reschedule(None)


async def _on_chunk_sent(
    session: aiohttp.ClientSession, context: SimpleNamespace, params: aiohttp.TraceRequestChunkSentParams
) -> None:
    acknowledgement = context.trace_request_ctx
    if isinstance(acknowledgement, _Acknowledgement):
        acknowledgement.body_sent()


def hop_client() -> aiohttp.ClientSession:
    """The HTTP client of the replica hop: its own connection pool, and aiohttp's public request
    tracing (``on_request_chunk_sent``) to see the body leave, that is the owner's acknowledgement."""
    trace = aiohttp.TraceConfig()
    trace.on_request_chunk_sent.append(_on_chunk_sent)
    connector = aiohttp.TCPConnector(limit=0, limit_per_host=0, enable_cleanup_closed=True)
    return aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.DummyCookieJar(), trace_configs=[trace])


class ReplicaHop:
    """This replica's side of the hop: forwards retries to the replicas that hold their calls."""

    def __init__(
        self,
        config: ReplicasConfig,
        signer: ForwardSigner,
        metrics: Metrics,
        http: Callable[[], aiohttp.ClientSession],
    ) -> None:
        self._config = config
        self._signer = signer
        self._metrics = metrics
        self._http = http

    async def forward(
        self,
        request: web.Request,
        route: RouteRuntime,
        body: bytes,
        owner_url: str,
        *,
        request_id: Any = None,
        read_timeout: float | None = None,
        resend: bool = False,
    ) -> web.StreamResponse:
        """Stream ``request`` to ``owner_url``, or raise :class:`HoldLost` when the owner did not answer.

        Its ``reason`` is :data:`OWNER_UNREACHABLE` only when no connection could be made, or (with
        ``resend``: a retry, which the owner answers again if it ran it) when the connection died
        after the request was sent and a fresh one to the owner's address is refused; when a fresh
        one is accepted, the request is sent once more (up to :data:`RESENDS` times). Neither
        failure is counted here: the caller may still replay the call, and a retry counts once,
        under the outcome it ends with
        (``replayed``, or this one; :mod:`gateway.calls.replayer`). Once acknowledged, the owner's
        silence is bounded by ``read_timeout`` (default: the route's ``backend.timeout``)."""
        try:
            return await self._forward(request, route, body, owner_url, request_id, read_timeout)
        except HoldLost as lost:
            if not resend or lost.reason != OWNER_FAILED:
                raise
            failure = lost
        for _ in range(RESENDS):
            there = await self._owner_listening(owner_url)
            log.warning("forward_owner_checked", route=route.name, owner=owner_url, listening=there)
            if there is None:
                raise failure
            if not there:
                raise HoldLost(OWNER_UNREACHABLE) from failure
            try:
                return await self._forward(request, route, body, owner_url, request_id, read_timeout)
            except HoldLost as again:
                if again.reason != OWNER_FAILED:
                    raise
                failure = again
        raise failure

    async def _owner_listening(self, owner_url: str) -> bool | None:
        """Whether a fresh TCP connection to ``owner_url`` is accepted (True), refused (False), or
        neither within ``forward_timeout`` (None: proves nothing)."""
        url = yarl.URL(owner_url)
        if url.host is None or url.port is None:
            return None
        try:
            async with asyncio.timeout(self._config.forward_timeout):
                _, writer = await asyncio.open_connection(url.host, url.port)
        except TimeoutError:
            return None
        except OSError:
            return False
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        return True

    async def _forward(
        self,
        request: web.Request,
        route: RouteRuntime,
        body: bytes,
        owner_url: str,
        request_id: Any,
        read_timeout: float | None,
    ) -> web.StreamResponse:
        """One hop: see :meth:`forward`."""
        path = route.config.path
        headers = self._hop_headers(request, route, body, owner_url)
        timeout = self._hop_timeout(route, read_timeout)
        tls = _tls_context(self._config.ca_file) if owner_url.startswith("https://") else None
        forwards = self._metrics.forwards
        deadline = asyncio.timeout(self._config.forward_timeout + ACK_MARGIN)
        try:
            # No acknowledgement (nor answer, nor failure) by the deadline: the request is cancelled
            # and the block raises TimeoutError; the body's first write lifts the deadline.
            async with deadline:
                upstream = await self._http().post(
                    owner_url + path,
                    data=body,
                    trace_request_ctx=_Acknowledgement(deadline),
                    headers=headers,
                    timeout=timeout,
                    allow_redirects=False,
                    ssl=tls or True,
                    expect100=True,
                )
        except CLIENT_FAILURES as exc:
            if deadline.expired():
                log.warning("forward_failed", route=route.name, owner=owner_url, outcome=OWNER_UNRESPONSIVE)
                raise HoldLost(OWNER_UNRESPONSIVE) from None
            outcome = OWNER_UNREACHABLE if never_connected(exc) else OWNER_FAILED
            log.warning("forward_failed", route=route.name, owner=owner_url, outcome=outcome, error=type(exc).__name__)
            raise HoldLost(outcome) from exc
        forwards.labels(route.name, FORWARDED).inc()

        def broken(exc: BaseException) -> None:
            forwards.labels(route.name, OWNER_FAILED).inc()
            log.warning("forward_interrupted", route=route.name, owner=owner_url, error=type(exc).__name__)

        lost = envelopes.sse_event(envelopes.error(request_id, HoldLost(OWNER_FAILED).to_error()))
        try:
            return await relay(
                request,
                upstream,
                end_to_end(upstream.headers),
                on_broken=broken,
                broken_event=lost,
                cut_when_broken=True,
            )
        finally:
            upstream.release()

    def _hop_timeout(self, route: RouteRuntime, read_timeout: float | None) -> aiohttp.ClientTimeout:
        """The connect bounded by ``forward_timeout``; each read by ``read_timeout`` (default: the
        route's ``backend.timeout``)."""
        return aiohttp.ClientTimeout(
            total=None,
            sock_connect=self._config.forward_timeout,
            sock_read=route.config.backend.timeout if read_timeout is None else read_timeout,
            ceil_threshold=float("inf"),  # the connect timeout exactly at forward_timeout (ACK_MARGIN)
        )

    def _hop_headers(self, request: web.Request, route: RouteRuntime, body: bytes, owner_url: str) -> dict[str, str]:
        """The headers the hop sends: the client's that the owner reads, a trusted-header principal,
        the trace context, and the hop's signature."""
        headers = {
            k: v for k, v in request.headers.items() if k.lower() in _FORWARDED or k.lower().startswith("mcp-param-")
        }
        auth = route.config.auth
        if auth is not None and auth.trusted_header is not None and auth.trusted_header.header in request.headers:
            # The owner honours a trusted-header principal on a signed hop: this replica already checked the peer.
            headers[auth.trusted_header.header] = request.headers[auth.trusted_header.header]
        tracing.inject(headers)  # the owner's round span is this one's child
        headers[FORWARD_HEADER] = self._signer.sign(
            method=request.method,
            target=owner_url,
            path=route.config.path,
            body=body,
            credential=hop_credential(request.headers, route),
        )
        return headers
