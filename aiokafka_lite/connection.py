# Long: the asyncio protocol and the connection it feeds share every field of the hot path (framing,
# in-flight requests, timeouts, SASL).
"""Layer 2: one asyncio connection to one broker.

:func:`connect` opens a TCP (optionally TLS) connection, negotiates API versions with
ApiVersions and authenticates with SASL when configured, and returns a
:class:`BrokerConnection`. ``await conn.send(api_key, body)`` encodes a request at the
highest version both sides support, frames it with the 4-byte size prefix, matches the
response by correlation id and resolves with the decoded body.

The transport is driven by a plain :class:`asyncio.Protocol` (no streams): frames are
cut out of a ``bytearray`` with a read offset, so neither many small frames nor one
huge frame cause quadratic copying. A frame larger than that buffer is read into parts
of its own that grow as its bytes come (each as large as all before it), so memory
follows what the peer sends, not what its size prefix claims; a claim above
``receive_message_max_bytes`` closes the connection at once.

Until the broker has answered ApiVersions (the first response, a few hundred bytes), a
frame claiming more than 1 MiB, or any response with a foreign correlation id, means the
peer is not Kafka: HTTP and TLS are recognised by their first bytes and named
(:class:`~aiokafka_lite.errors.NotAKafkaBrokerError`).

Every way the connection can end (``close()``, the broker closing, a request timeout,
a protocol desync, a failed handshake) goes through one path that fails every pending
future with :class:`~aiokafka_lite.errors.KafkaConnectionError`.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import importlib.metadata
import logging
import os
import random
import socket
import ssl
import struct
import time
from collections.abc import Callable
from typing import Any, Final

from aiokafka_lite import errors
from aiokafka_lite._aio import wait_for
from aiokafka_lite.accel import speedups
from aiokafka_lite.protocol import api, bodies
from aiokafka_lite.protocol.api import Api, RequestT, ResponseT
from aiokafka_lite.sasl import OAuthBearerMechanism, PlainMechanism, SaslMechanism, ScramMechanism
from aiokafka_lite.security import SecurityConfig, fetch_oauth_token

__all__ = [
    "DEFAULT_MAX_IN_FLIGHT",
    "DEFAULT_RECEIVE_MESSAGE_MAX_BYTES",
    "MIN_RECEIVE_MESSAGE_MAX_BYTES",
    "BrokerConnection",
    "CloseCallback",
    "check_receive_message_max_bytes",
    "connect",
]

log = logging.getLogger(__name__)

DEFAULT_MAX_IN_FLIGHT: Final = 100
_SIZE = struct.Struct(">i")
_MAX_CORRELATION_ID: Final = 2**31 - 1
_INT32_MAX: Final = 2**31 - 1
#: The read buffer. A frame larger than it is read into parts of its own. A read asks
#: the socket for at least _MIN_READ bytes.
_READ_BUFFER_SIZE: Final = 256 * 1024
# Large frames read in place (see _KafkaProtocol), where the compiled hot path is built.
_new_frame: Callable[[int], bytes] | None = None
_frame_view: Callable[[bytes, int], memoryview]
if speedups is not None:
    _new_frame, _frame_view = speedups.new_frame, speedups.frame_view
_MIN_READ: Final = 64 * 1024

#: The largest response a connection accepts unless told otherwise (librdkafka's
#: ``receive.message.max.bytes`` is 100 MB too). The producer and the admin client use
#: it; the consumer derives its default from its fetch sizes (never below this).
DEFAULT_RECEIVE_MESSAGE_MAX_BYTES: Final = 100 * 1024 * 1024
#: The smallest accepted ``receive_message_max_bytes``: below it even a Metadata answer
#: of a small cluster may not fit.
MIN_RECEIVE_MESSAGE_MAX_BYTES: Final = 64 * 1024
#: Until ApiVersions is answered, a frame claiming more than this is not from Kafka.
_HANDSHAKE_MAX_FRAME: Final = 1024 * 1024

_API_VERSIONS: Final = bodies.API_VERSIONS
_SASL_HANDSHAKE: Final = bodies.SASL_HANDSHAKE
_SASL_AUTHENTICATE: Final = bodies.SASL_AUTHENTICATE
_UNSUPPORTED_VERSION: Final = 35
_UNSUPPORTED_SASL_MECHANISM: Final = 33
#: Where in a SASL session's lifetime the client re-authenticates (KIP-368): at a random
#: point between these fractions, as Kafka's Java client does: early enough for network
#: latency and clock drift, spread so that connections opened together do not all
#: re-authenticate at once.
REAUTH_WINDOW: Final = (0.85, 0.95)

CloseCallback = Callable[["BrokerConnection"], object]


def check_receive_message_max_bytes(value: object) -> int:
    """``value`` if it is a valid ``receive_message_max_bytes``, else ConfigurationError."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or not MIN_RECEIVE_MESSAGE_MAX_BYTES <= value <= _INT32_MAX
    ):
        raise errors.ConfigurationError(
            f"receive_message_max_bytes must be an int from {MIN_RECEIVE_MESSAGE_MAX_BYTES} "
            f"to {_INT32_MAX} (2**31 - 1), got {value!r}"
        )
    return value


def _looks_like(prefix: bytes) -> str | None:
    """What a peer speaks, judged by the first bytes it sent, if it is not Kafka."""
    if prefix.startswith(b"HTTP"):
        return "HTTP"
    # A TLS record: content type alert (21) or handshake (22), then version 3.x.
    if len(prefix) >= 3 and prefix[0] in (0x15, 0x16) and prefix[1] == 3 and prefix[2] <= 4:
        return "TLS"
    return None


def reauth_delay(session_lifetime_ms: int) -> float:
    """Seconds from the end of an authentication to the re-authentication of a session
    that lives ``session_lifetime_ms`` (a random point of `REAUTH_WINDOW`)."""
    return session_lifetime_ms * random.uniform(*REAUTH_WINDOW) / 1000


def _client_software_version() -> str:
    # Sent in ApiVersions v3+ (KIP-511); from the installed distribution's metadata.
    try:
        return importlib.metadata.version("aiokafka-lite")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


_CLIENT_SOFTWARE_VERSION: Final = _client_software_version()


#: See BrokerConnection.request's ``on_response`` (typed there by the response body).
ResponseCallback = Callable[[asyncio.Future[Any]], None]


def _retrieve_exception(fut: asyncio.Future[Any]) -> None:
    # Mark a failed future's exception as retrieved: a request whose caller went
    # away (cancelled, or a fire-and-forget ``request()``) must not log
    # "Future exception was never retrieved" when the connection fails it.
    if not fut.cancelled():
        fut.exception()


def _wake(waiter: asyncio.Future[None], *_: object) -> None:
    if not waiter.done():
        waiter.set_result(None)


def _os_error_reason(exc: OSError) -> str:
    if isinstance(exc, socket.gaierror):
        return f"cannot resolve host: {exc.strerror}"
    if exc.errno is not None and exc.errno > 0:
        # asyncio replaces strerror with "Connect call failed (...)"; use the OS text.
        return f"{os.strerror(exc.errno)} (errno {exc.errno})"
    return str(exc) or type(exc).__name__


class _Request:
    """A request that was written (waiting for its response) or is queued for a slot."""

    __slots__ = (
        "api_key",
        "api_version",
        "callback",
        "correlation_id",
        "deadline",
        "expect_response",
        "frame",
        "future",
        "sent_at",
        "timeout",
    )

    def __init__(
        self,
        api_key: int,
        api_version: int,
        correlation_id: int,
        frame: bytearray,
        future: asyncio.Future[Any],
        expect_response: bool,
        timeout: float,
        deadline: float,
        callback: ResponseCallback | None = None,
    ) -> None:
        self.api_key = api_key
        self.api_version = api_version
        self.correlation_id = correlation_id
        #: The size-prefixed request while it waits for a slot (None once written).
        self.frame: bytearray | None = frame
        self.future = future
        self.expect_response = expect_response
        self.timeout = timeout
        #: ``loop.time()`` by which the answer must have come.
        self.deadline = deadline
        #: Called with the future once it is done (see BrokerConnection.request).
        self.callback = callback
        #: ``time.monotonic()`` when it was written (0.0 while queued).
        self.sent_at = 0.0


def release_reused_frames() -> None:
    """Free the large frames the compiled path keeps for reuse (up to 32 MiB, see
    ``_speedups.new_frame``) once nothing else holds them; a closing client calls it."""
    if speedups is not None:
        speedups.drop_frames()


class _KafkaProtocol(asyncio.BufferedProtocol):
    """Cuts the byte stream into size-prefixed frames and hands them to the connection.

    A buffered protocol: the transport reads straight into our buffer. (With a plain
    ``Protocol`` asyncio allocates a 256 KiB bytes object for every read and shrinks it
    to what came: three memory-map system calls per read, and one more copy.)

    A frame larger than the buffer is read on its own. With the compiled hot path it is
    read in place into the ``bytes`` object handed over (``_speedups.new_frame``: its
    pages are committed as the data arrives, and a frame nothing holds any more is
    filled again rather than freed and its pages faulted in anew). Without it, into
    parts of its own, each allocated once the one before is full and as large as
    everything received so far (at most what the frame still lacks), joined into the
    frame at the end. Either way memory grows with the bytes that arrive, whatever size
    the peer claimed.
    A size prefix outside ``4..max_frame_size`` goes to the connection, which closes.
    """

    def __init__(self, conn: BrokerConnection, max_frame_size: int) -> None:
        self._conn = conn
        #: The largest frame accepted (the connection raises it after the handshake).
        self.max_frame_size = max_frame_size
        self._buf = bytearray(_READ_BUFFER_SIZE)
        self._start = 0  # first unconsumed byte in _buf
        self._end = 0  # end of the bytes received
        self._frame_size = -1  # size of the frame being read, -1 while reading a prefix
        # A large frame being read into parts (None otherwise): the full parts, the part
        # being filled, how much of it is filled, and the bytes the frame still lacks.
        self._parts: list[bytes | bytearray] | None = None
        self._part = bytearray()
        self._part_fill = 0
        self._missing = 0
        # A large frame being read in place (compiled path), and how much of it is filled.
        self._frame: bytes | None = None
        self._frame_fill = 0
        self.lost: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def get_buffer(self, sizehint: int) -> memoryview:
        if self._frame is not None:
            return _frame_view(self._frame, self._frame_fill)
        if self._parts is not None:
            return memoryview(self._part)[self._part_fill :]
        # The buffer is only moved or resized here: the transport still holds the view it
        # filled while buffer_updated runs, and a bytearray with a view cannot resize.
        # (buffer_updated sets _start and _end to 0 once everything is consumed.)
        buf = self._buf
        start, end = self._start, self._end
        pending = end - start
        size = self._frame_size
        # Room for the whole frame being read (or its size prefix), and a useful read.
        room = max(size if size >= 0 else 4, pending + _MIN_READ)
        if room > len(buf):
            # A frame nearly as large as the buffer and the next read do not fit.
            new = bytearray(max(room, _READ_BUFFER_SIZE))
            new[:pending] = buf[start:end]
            self._buf = buf = new
            self._start, self._end = 0, pending
        elif start + room > len(buf):
            buf[:pending] = buf[start:end]
            self._start, self._end = 0, pending
        elif not pending and size < 0 and len(buf) > _READ_BUFFER_SIZE:
            # Between frames after a large one: back to the usual size.
            self._buf = buf = bytearray(_READ_BUFFER_SIZE)
        return memoryview(buf)[self._end :]

    def buffer_updated(self, nbytes: int) -> None:
        if self._frame is not None:
            self._frame_updated(nbytes)
            return
        if self._parts is not None:
            self._part_updated(nbytes)
            return
        conn = self._conn
        end = self._end = self._end + nbytes
        if conn.closed:
            return
        buf = self._buf
        pos = self._start
        size = self._frame_size
        limit = self.max_frame_size
        try:
            while True:
                if size < 0:
                    if end - pos < 4:
                        break
                    size = _SIZE.unpack_from(buf, pos)[0]
                    pos += 4
                    if not 4 <= size <= limit:
                        conn._on_bad_frame_size(size, bytes(buf[pos - 4 : pos]), limit)
                        return
                if end - pos < size:
                    if size > _READ_BUFFER_SIZE:
                        self._start_parts(bytes(buf[pos:end]), size)
                        pos, size = end, -1
                    break
                with memoryview(buf) as view:
                    frame = bytes(view[pos : pos + size])
                pos += size
                size = -1
                conn._on_frame(frame)
                if conn.closed:
                    return
        finally:
            self._frame_size = size
            if pos == end:
                pos = self._end = 0
            self._start = pos

    def _start_parts(self, head: bytes, size: int) -> None:
        # A frame larger than the buffer: what came of it so far is its start.
        if _new_frame is not None:
            self._frame = frame = _new_frame(size)
            _frame_view(frame, 0)[: len(head)] = head
            self._frame_fill = len(head)
            return
        self._parts = [head]
        self._missing = size - len(head)
        self._part = bytearray(min(self._missing, max(_READ_BUFFER_SIZE, len(head))))
        self._part_fill = 0

    def _part_updated(self, nbytes: int) -> None:
        self._part_fill += nbytes
        self._missing -= nbytes
        parts = self._parts
        if self._conn.closed or parts is None or self._part_fill < len(self._part):
            return
        parts.append(self._part)
        missing = self._missing
        if missing:
            # The next part is as large as the frame so far: memory at most doubles
            # what the peer has sent, however large a size it claimed.
            received = sum(map(len, parts))
            self._part = bytearray(min(missing, received))
            self._part_fill = 0
            return
        self._parts = None
        self._part = bytearray()
        self._conn._on_frame(b"".join(parts))

    def _frame_updated(self, nbytes: int) -> None:
        frame = self._frame
        self._frame_fill += nbytes
        if self._conn.closed or frame is None or self._frame_fill < len(frame):
            return
        self._frame = None
        self._conn._on_frame(frame)

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost follows

    def pause_writing(self) -> None:
        self._conn._pause_writing()

    def resume_writing(self) -> None:
        self._conn._resume_writing()

    def connection_lost(self, exc: Exception | None) -> None:
        self._buf = bytearray()
        self._start = self._end = 0
        self._frame_size = -1
        self._parts = None
        self._part = bytearray()
        self._frame = None
        if not self.lost.done():
            self.lost.set_result(None)
        self._conn._on_connection_lost(exc)


class BrokerConnection:
    """One connection to one broker. Build it with :func:`connect`."""

    def __init__(
        self,
        host: str,
        port: int,
        *,
        client_id: str | None = "aiokafka-lite",
        security: SecurityConfig | None = None,
        request_timeout_ms: int = 30000,
        max_in_flight: int | None = DEFAULT_MAX_IN_FLIGHT,
        node_id: int | None = None,
        receive_message_max_bytes: int = DEFAULT_RECEIVE_MESSAGE_MAX_BYTES,
    ) -> None:
        if request_timeout_ms <= 0:
            raise errors.ConfigurationError("request_timeout_ms must be positive")
        if max_in_flight is not None and max_in_flight < 1:
            raise errors.ConfigurationError("max_in_flight must be at least 1 (or None)")
        #: The largest response accepted: a frame claiming more closes the connection
        #: with ResponseTooLargeError.
        self.receive_message_max_bytes = check_receive_message_max_bytes(receive_message_max_bytes)
        self.host = host
        self.port = port
        self.node_id = node_id
        self.client_id = client_id
        self.security = security if security is not None else SecurityConfig()
        self.request_timeout_ms = request_timeout_ms
        self.max_in_flight = max_in_flight
        #: Broker version range per API key, from ApiVersions.
        self.api_versions: dict[int, tuple[int, int]] = {}
        #: SaslAuthenticate's session lifetime (ms, 0 = none): the connection
        #: re-authenticates before it ends (KIP-368, see _start_reauthentication).
        self.sasl_session_lifetime_ms = 0
        #: Re-authentications that succeeded on this connection.
        self.reauthentications = 0
        #: ``time.monotonic()`` of the last byte written or frame received.
        self.last_activity = time.monotonic()
        #: ``time.monotonic()`` of the last frame received (of the connect before one).
        self.last_received = self.last_activity
        self.close_reason: str | None = None
        #: Closed because a written request got no answer within ``request_timeout_ms``:
        #: the broker is not answering (hung, or overloaded), not just this connection.
        self.timed_out = False
        # What pending and later requests fail with once closed.
        self._close_error: type[errors.KafkaError] = errors.KafkaConnectionError

        self._loop = asyncio.get_running_loop()
        self._protocol: _KafkaProtocol | None = None
        self._transport: asyncio.Transport | None = None
        self._closed = False
        self._correlation_id = 0
        self._in_flight: dict[int, _Request] = {}
        self._queued: collections.deque[_Request] = collections.deque()
        self._write_paused = False
        #: Frames held by cork() until uncork() (None: not corked).
        self._corked: list[bytearray] | None = None
        self._drain_waiters: list[asyncio.Future[None]] = []
        self._close_callbacks: list[CloseCallback] = []
        # One timer for all pending requests, armed for the earliest deadline (a timer
        # per request costs a heap push and a cancel for every request sent).
        self._timeout_timer: asyncio.TimerHandle | None = None
        self._timeout_at = 0.0
        # SASL re-authentication (KIP-368): the timer that starts it, the task running
        # it, and whether new requests are held in _queued meanwhile.
        self._reauth_timer: asyncio.TimerHandle | None = None
        self._reauth_task: asyncio.Task[None] | None = None
        self._held = False

    # --- public state ------------------------------------------------------

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def in_flight_count(self) -> int:
        """Requests written and waiting for their response."""
        return len(self._in_flight)

    @property
    def queued_count(self) -> int:
        """Requests waiting for an in-flight slot (``max_in_flight`` reached)."""
        return len(self._queued)

    def unanswered(self) -> tuple[float, list[str]]:
        """How long the connection has waited for an answer, and for what.

        ``(seconds, api names)``: the time since the oldest request in flight was
        written or, if later, since the last frame came in; ``(0.0, [])`` when nothing
        is in flight. For error messages ("node 1 has not answered for 6.0 s").
        """
        if not self._in_flight:
            return 0.0, []
        reqs = self._in_flight.values()
        since = max(self.last_received, min(r.sent_at for r in reqs))
        return time.monotonic() - since, [api.api_name(r.api_key) for r in reqs]

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        node = "" if self.node_id is None else f" node_id={self.node_id}"
        return (
            f"<BrokerConnection{node} {self.host}:{self.port} "
            f"{self.security.security_protocol} {state} in_flight={len(self._in_flight)}>"
        )

    def version_for(self, api_key: int) -> int:
        """Highest version of ``api_key`` both sides support (UnsupportedVersionError if none)."""
        broker = self.api_versions.get(api_key)
        if broker is None:
            raise errors.UnsupportedVersionError(
                f"broker {self.host}:{self.port} does not support "
                f"{api.api_name(api_key)} (API key {api_key})"
            )
        return api.pick_version(api_key, broker[0], broker[1])

    def add_close_callback(self, callback: CloseCallback) -> None:
        """Call ``callback(conn)`` once the connection is closed (soon, if it already is)."""
        if self._closed:
            self._loop.call_soon(self._run_close_callback, callback)
        else:
            self._close_callbacks.append(callback)

    # --- requests ----------------------------------------------------------

    def request(
        self,
        api_key: Api[RequestT, ResponseT],
        body: RequestT,
        *,
        version: int | None = None,
        timeout_ms: int | None = None,
        expect_response: bool = True,
        on_response: Callable[[asyncio.Future[ResponseT]], None] | None = None,
    ) -> asyncio.Future[ResponseT]:
        """Write a request now (or queue it for a free in-flight slot); return its future.

        ``api_key`` is a typed key of `protocol.bodies` (``bodies.FETCH``), so mypy
        checks ``body`` against the request's ``TypedDict``; the future resolves with
        the decoded response body (the response's ``TypedDict``: a plain dict), or
        fails with KafkaConnectionError / KafkaTimeoutError / DecodeError. With
        ``expect_response=False`` (Produce with acks=0) it resolves with ``{}`` once the
        request is written. Encoding errors and unsupported versions raise here.

        ``on_response(future)`` is a done-callback of the future, except that for a
        response it runs at once, as the response is read, instead of a loop round later
        (the producer's sender uses it).
        """
        fut: asyncio.Future[ResponseT] = self._loop.create_future()
        fut.add_done_callback(_retrieve_exception)
        if on_response is not None:
            fut.add_done_callback(on_response)
        if self._closed:
            fut.set_exception(self._closed_error())
            return fut
        if version is None:
            version = self.version_for(api_key)
        correlation_id = self._next_correlation_id()
        frame = api.encode_request_frame(api_key, version, correlation_id, self.client_id, body)
        timeout = (self.request_timeout_ms if timeout_ms is None else timeout_ms) / 1000
        deadline = self._loop.time() + timeout
        req = _Request(
            api_key,
            version,
            correlation_id,
            frame,
            fut,
            expect_response,
            timeout,
            deadline,
            on_response,
        )
        if self._timeout_timer is None or deadline < self._timeout_at:
            self._arm_timeout(deadline)
        if (
            self._queued
            or self._held
            or (self.max_in_flight is not None and len(self._in_flight) >= self.max_in_flight)
        ):
            self._queued.append(req)
        else:
            self._write(req)
        return fut

    async def send(
        self,
        api_key: Api[RequestT, ResponseT],
        body: RequestT,
        *,
        version: int | None = None,
        timeout_ms: int | None = None,
        expect_response: bool = True,
    ) -> ResponseT:
        """Send a request and return the decoded response body (see :meth:`request`).

        Waits for a free slot when ``max_in_flight`` requests are outstanding, and for
        the transport's buffer to drain when the socket pushes back; never longer than
        the request's timeout.
        """
        timeout = self.request_timeout_ms if timeout_ms is None else timeout_ms
        deadline = self._loop.time() + timeout / 1000
        fut = self.request(
            api_key, body, version=version, timeout_ms=timeout_ms, expect_response=expect_response
        )
        if self._write_paused and not fut.done():
            await self._drain(fut, deadline)
        return await fut

    def cork(self) -> None:
        """Hold the requests written from now on until :meth:`uncork`.

        A caller about to write several requests at once (the producer's sender) corks
        the connection so that they go to the socket in one write: one system call
        instead of one per request. Everything else about them is unchanged (their
        order, correlation ids, timeouts, the in-flight limit).
        """
        if self._corked is None:
            self._corked = []

    def uncork(self) -> None:
        """Write the requests held since :meth:`cork`, in order, in one write."""
        frames, self._corked = self._corked, None
        if frames and not self._closed and self._transport is not None:
            self._transport.write(frames[0] if len(frames) == 1 else b"".join(frames))

    def close(self, reason: str | None = None) -> None:
        """Close the connection; pending requests fail with KafkaConnectionError."""
        self._fail(reason or "closed by the client", cause=None, abort=False)

    async def wait_closed(self) -> None:
        """Wait until the transport is fully closed (after :meth:`close`)."""
        if self._protocol is not None:
            await asyncio.shield(self._protocol.lost)

    # --- internals: writing ------------------------------------------------

    def _next_correlation_id(self) -> int:
        # Non-negative int32 ids that wrap around; skip any id still in flight.
        cid = self._correlation_id
        while True:
            cid = 0 if cid >= _MAX_CORRELATION_ID else cid + 1
            if cid not in self._in_flight:
                break
        self._correlation_id = cid
        return cid

    def _write(self, req: _Request) -> None:
        assert self._transport is not None and req.frame is not None
        frame, req.frame = req.frame, None
        corked = self._corked
        if corked is None:
            self._transport.write(frame)
        else:
            corked.append(frame)
        self.last_activity = req.sent_at = time.monotonic()
        if req.expect_response:
            self._in_flight[req.correlation_id] = req
        else:
            if not req.future.done():
                req.future.set_result({})

    def _pump(self) -> None:
        # Move queued requests into free in-flight slots, in order (none while held for
        # a re-authentication).
        if self._held:
            return
        while self._queued and not self._closed:
            if self.max_in_flight is not None and len(self._in_flight) >= self.max_in_flight:
                return
            req = self._queued.popleft()
            if req.future.done():  # cancelled while waiting for a slot
                continue
            self._write(req)

    def _pause_writing(self) -> None:
        self._write_paused = True

    def _resume_writing(self) -> None:
        self._write_paused = False
        self._wake_drain_waiters()

    def _wake_drain_waiters(self) -> None:
        waiters, self._drain_waiters = self._drain_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def _drain(self, fut: asyncio.Future[Any], deadline: float) -> None:
        # Until the transport takes more or the connection closes, but not past the
        # request's deadline, nor past its failure: a request that timed out waiting for
        # a slot neither closes the connection nor resumes writing, so only the (later)
        # timeouts of the requests ahead of it would end the wait.
        while self._write_paused and not self._closed and self._loop.time() < deadline:
            if fut.done() and (fut.cancelled() or fut.exception() is not None):
                return
            waiter: asyncio.Future[None] = self._loop.create_future()
            self._drain_waiters.append(waiter)
            wake = functools.partial(_wake, waiter)
            timer = self._loop.call_at(deadline, wake)
            if not fut.done():
                fut.add_done_callback(wake)
            try:
                await waiter
            finally:
                timer.cancel()
                fut.remove_done_callback(wake)

    # --- internals: reading ------------------------------------------------

    def _on_frame(self, frame: bytes) -> None:
        self.last_activity = self.last_received = time.monotonic()
        correlation_id = _SIZE.unpack_from(frame, 0)[0]
        req = self._in_flight.pop(correlation_id, None)
        if req is None:
            if not self.api_versions:
                expected = ", ".join(map(str, sorted(self._in_flight))) or "none"
                self._fail(
                    "the peer answered with something other than Kafka: its first response "
                    f"carries correlation id {correlation_id}, not {expected} "
                    f"({self._wrong_port_hint()})",
                    error=errors.NotAKafkaBrokerError,
                )
            else:
                self._fail(
                    f"protocol desync: response with unknown correlation id {correlation_id}",
                    error=errors.KafkaProtocolError,
                )
            return
        fut = req.future
        if not fut.done():  # the caller may have cancelled; the response is dropped
            try:
                _, body = api.decode_response(req.api_key, req.api_version, frame)
            except errors.KafkaError as exc:
                fut.set_exception(exc)
            except Exception as exc:  # a decoder bug must not kill the connection
                fut.set_exception(
                    errors.DecodeError(
                        f"cannot decode {api.api_name(req.api_key)} v{req.api_version} "
                        f"response: {exc!r}"
                    )
                )
            else:
                callback = req.callback
                if callback is None:
                    fut.set_result(body)
                else:
                    fut.remove_done_callback(callback)
                    fut.set_result(body)
                    try:
                        callback(fut)
                    except Exception:
                        log.exception("error in the response callback of %r", self)
        self._pump()

    def _wrong_port_hint(self) -> str:
        return f"wrong port? security_protocol is {self.security.security_protocol}"

    def _on_bad_frame_size(self, size: int, prefix: bytes, limit: int) -> None:
        # A size prefix outside 4..limit: nothing of the frame is read or allocated.
        if not self.api_versions:
            # The first response: a Kafka broker's is small, so this is something else.
            what = _looks_like(prefix)
            if what is not None:
                reason = f"the peer answered with {what}, not Kafka ({self._wrong_port_hint()})"
            else:
                reason = (
                    "the peer answered with something other than Kafka: its first response "
                    f"claims {size} bytes (bytes {prefix.hex(' ')}; at most {limit} are "
                    f"accepted before ApiVersions is answered) ({self._wrong_port_hint()})"
                )
            self._fail(reason, error=errors.NotAKafkaBrokerError)
        elif size > limit:
            # The answer to the oldest request in flight (a broker answers in order): only
            # it is too large; the others fail as on any closed connection, retriable.
            self._fail(
                f"a response claims {size} bytes, more than receive_message_max_bytes "
                f"({limit}); raise receive_message_max_bytes if the broker really sends "
                "responses this large",
                oldest_error=errors.ResponseTooLargeError,
            )
        else:
            self._fail(
                f"protocol error: a response claims an invalid size {size} (a valid one is "
                f"4 to {limit} bytes, the receive_message_max_bytes setting)",
                error=errors.KafkaProtocolError,
            )

    def _on_connection_lost(self, exc: Exception | None) -> None:
        reason = "connection closed by the broker" if exc is None else f"connection lost: {exc}"
        if not self.api_versions and not self._closed:
            # A TLS listener spoken to in plaintext hangs up like this, for one.
            reason += f" before answering ApiVersions ({self._wrong_port_hint()})"
        self._fail(reason, cause=exc)

    def _arm_timeout(self, when: float) -> None:
        if self._timeout_timer is not None:
            self._timeout_timer.cancel()
        self._timeout_at = when
        self._timeout_timer = self._loop.call_at(when, self._check_timeouts)

    def _check_timeouts(self) -> None:
        self._timeout_timer = None
        # A timer may fire a hair before its time: a millisecond of slack.
        now = self._loop.time() + 0.001
        for req in [*self._queued, *self._in_flight.values()]:
            if req.deadline <= now:
                self._on_timeout(req)
                if self._closed:
                    return
        pending = [*self._queued, *self._in_flight.values()]
        if pending:
            self._arm_timeout(min(req.deadline for req in pending))

    def _on_timeout(self, req: _Request) -> None:
        timeout = req.timeout
        what = f"{api.api_name(req.api_key)} v{req.api_version} request to {self.host}:{self.port}"
        if req.frame is not None:
            # Still queued for a slot: nothing was written, the stream is intact.
            try:
                self._queued.remove(req)
            except ValueError:
                pass
            if not req.future.done():
                waiting = "SASL re-authentication" if self._held else "an in-flight slot"
                req.future.set_exception(
                    errors.KafkaTimeoutError(
                        f"{what} timed out after {timeout * 1000:.0f} ms waiting for {waiting}"
                    )
                )
            return
        if self._in_flight.get(req.correlation_id) is not req:
            return
        del self._in_flight[req.correlation_id]
        if not req.future.done():
            req.future.set_exception(
                errors.KafkaTimeoutError(f"{what} timed out after {timeout * 1000:.0f} ms")
            )
        # Like Kafka's Java client, close the connection on a request timeout: the
        # broker may still answer later and the stream is in an unknown state, so the
        # connection cannot be trusted for other requests.
        if not self._closed and timeout * 1000 >= self.request_timeout_ms:
            # The whole request timeout went by unanswered: the broker is not answering
            # (a caller's shorter bound running out says nothing about the broker).
            self.timed_out = True
        self._fail(f"{what} timed out after {timeout * 1000:.0f} ms")

    # --- internals: the one close path ---------------------------------------

    def _closed_error(self) -> errors.KafkaError:
        return self._close_error(
            f"connection to {self.host}:{self.port} closed: {self.close_reason}"
        )

    def _fail(
        self,
        reason: str,
        cause: BaseException | None = None,
        abort: bool = True,
        error: type[errors.KafkaError] = errors.KafkaConnectionError,
        oldest_error: type[errors.KafkaConnectionError] | None = None,
    ) -> None:
        """Close the connection; every request not answered yet fails with ``error``,
        the oldest one in flight with ``oldest_error`` when given."""
        if self._closed:
            return
        self._closed = True
        self.close_reason = reason
        self._close_error = error
        log.debug("closing %r: %s", self, reason)
        transport = self._transport
        if transport is not None and not transport.is_closing():
            if abort:
                transport.abort()
            else:
                transport.close()
        pending = list(self._in_flight.values())
        pending.extend(self._queued)
        self._in_flight.clear()
        self._queued.clear()
        if self._timeout_timer is not None:
            self._timeout_timer.cancel()
            self._timeout_timer = None
        if self._reauth_timer is not None:
            self._reauth_timer.cancel()
            self._reauth_timer = None
        for req in pending:
            if not req.future.done():
                exc = self._closed_error()
                if oldest_error is not None and req is pending[0]:
                    exc = oldest_error(str(exc))
                exc.__cause__ = cause
                req.future.set_exception(exc)
        self._wake_drain_waiters()
        callbacks, self._close_callbacks = self._close_callbacks, []
        for callback in callbacks:
            self._run_close_callback(callback)

    def _run_close_callback(self, callback: CloseCallback) -> None:
        try:
            callback(self)
        except Exception:
            log.exception("close callback %r of %r failed", callback, self)

    # --- connecting --------------------------------------------------------

    async def _open(self, connect_timeout_ms: int) -> None:
        security = self.security
        ssl_context = security.ssl_context if security.uses_ssl else None
        server_hostname: str | None = None
        if ssl_context is not None:
            server_hostname = security.ssl_server_hostname or self.host
        where = f"{self.host}:{self.port}"
        log.debug("connecting to %s (%s)", where, security.security_protocol)
        try:
            transport, protocol = await wait_for(
                self._loop.create_connection(
                    lambda: _KafkaProtocol(
                        self, min(self.receive_message_max_bytes, _HANDSHAKE_MAX_FRAME)
                    ),
                    self.host,
                    self.port,
                    ssl=ssl_context,
                    server_hostname=server_hostname,
                ),
                connect_timeout_ms / 1000,
            )
        except asyncio.TimeoutError:
            raise errors.KafkaConnectionError(
                f"cannot connect to {where}: timed out after {connect_timeout_ms} ms"
            ) from None
        except ssl.SSLCertVerificationError as exc:
            raise errors.KafkaConnectionError(
                f"cannot connect to {where}: TLS certificate verification failed: "
                f"{exc.verify_message or exc}"
            ) from exc
        except ssl.SSLError as exc:
            raise errors.KafkaConnectionError(
                f"cannot connect to {where}: TLS handshake failed: {exc}"
            ) from exc
        except OSError as exc:
            raise errors.KafkaConnectionError(
                f"cannot connect to {where}: {_os_error_reason(exc)}"
            ) from exc
        assert isinstance(transport, asyncio.Transport)
        self._transport = transport
        self._protocol = protocol
        self.last_activity = time.monotonic()
        if self._closed:  # the peer hung up during the handshake
            raise self._closed_error()
        try:
            await self._negotiate_versions()
            if security.uses_sasl:
                await self._authenticate()
        except errors.KafkaTimeoutError as exc:
            self._fail(f"handshake failed: {exc}")
            raise errors.KafkaConnectionError(f"cannot connect to {where}: {exc}") from exc
        except BaseException as exc:
            self._fail(f"handshake failed: {exc}")
            raise
        log.debug("connected to %s", where)

    async def _negotiate_versions(self) -> None:
        lo, version = api.SUPPORTED_VERSIONS[_API_VERSIONS]
        body: bodies.ApiVersionsRequest = {
            "client_software_name": "aiokafka-lite",
            "client_software_version": _CLIENT_SOFTWARE_VERSION,
        }
        tried: set[int] = set()
        while True:
            tried.add(version)
            response = await self.send(_API_VERSIONS, body, version=version)
            code = response["error_code"]
            listed = {
                entry["api_key"]: (entry["min_version"], entry["max_version"])
                for entry in response["api_keys"]
            }
            if code == _UNSUPPORTED_VERSION:
                # The broker lists the ApiVersions versions it supports; retry at the
                # highest common one, or v0 when it lists none (as Kafka's protocol says).
                broker = listed.get(_API_VERSIONS)
                retry = lo if broker is None else min(version - 1, broker[1])
                if retry < lo or retry in tried:
                    raise errors.UnsupportedVersionError(
                        f"broker {self.host}:{self.port} supports no ApiVersions version "
                        f"this client speaks ({lo}-{version})"
                    )
                log.debug("ApiVersions v%d unsupported by %s; retrying v%d", version, self, retry)
                version = retry
                continue
            if code != 0:
                raise errors.error_for_code(code, f"ApiVersions to {self.host}:{self.port}")
            self.api_versions = listed
            if self._protocol is not None:
                # Kafka has answered: from now on responses may be as large as allowed.
                self._protocol.max_frame_size = self.receive_message_max_bytes
            log.debug("%r negotiated ApiVersions v%d: %d APIs", self, version, len(listed))
            return

    def _make_mechanism(self, token: str, extensions: dict[str, str]) -> SaslMechanism:
        security = self.security
        name = security.sasl_mechanism
        if name == "OAUTHBEARER":
            return OAuthBearerMechanism(token, extensions)
        assert security.sasl_plain_username is not None
        assert security.sasl_plain_password is not None
        if name == "PLAIN":
            return PlainMechanism(security.sasl_plain_username, security.sasl_plain_password)
        assert name is not None
        return ScramMechanism(name, security.sasl_plain_username, security.sasl_plain_password)

    async def _authenticate(self) -> None:
        security = self.security
        name = security.sasl_mechanism
        assert name is not None
        token = ""
        extensions: dict[str, str] = {}
        if name == "OAUTHBEARER":
            assert security.sasl_oauth_token_provider is not None
            # A step of the handshake, bounded like its requests: a provider whose
            # identity service hangs must not hang the connect (and start()) with it.
            timeout = self.request_timeout_ms / 1000
            try:
                token, extensions = await wait_for(
                    fetch_oauth_token(security.sasl_oauth_token_provider), timeout
                )
            except asyncio.TimeoutError:
                raise errors.KafkaTimeoutError(
                    f"the OAUTHBEARER token provider gave no token within {timeout:.1f}s"
                ) from None
        mechanism = self._make_mechanism(token, extensions)

        if _SASL_AUTHENTICATE not in self.api_versions:
            raise errors.UnsupportedVersionError(
                f"broker {self.host}:{self.port} does not support SaslAuthenticate "
                "(only the pre-KIP-152 raw SASL exchange, which this client does not speak)"
            )
        handshake_body: bodies.SaslHandshakeRequest = {"mechanism": name}
        handshake = await self._sasl_send(_SASL_HANDSHAKE, handshake_body)
        code = handshake["error_code"]
        if code != 0:
            enabled = ", ".join(handshake["mechanisms"]) or "none"
            if code == _UNSUPPORTED_SASL_MECHANISM:
                raise errors.AuthenticationFailedError(
                    f"broker {self.host}:{self.port} does not enable SASL mechanism {name}; "
                    f"enabled mechanisms: {enabled}"
                )
            raise errors.AuthenticationFailedError(
                f"SaslHandshake with {self.host}:{self.port} failed: "
                f"{errors.error_for_code(code)} (enabled mechanisms: {enabled})"
            )

        self.sasl_session_lifetime_ms = 0
        out: bytes | None = mechanism.first_message()
        while out is not None:
            step: bodies.SaslAuthenticateRequest = {"auth_bytes": out}
            response = await self._sasl_send(_SASL_AUTHENTICATE, step)
            code = response["error_code"]
            if code != 0:
                detail = response.get("error_message") or str(errors.error_for_code(code))
                server_error = getattr(mechanism, "server_error", None)
                if server_error:
                    detail = f"{detail} ({server_error})"
                raise errors.AuthenticationFailedError(
                    f"SASL {name} authentication with {self.host}:{self.port} failed: {detail}"
                )
            self.sasl_session_lifetime_ms = response.get("session_lifetime_ms", 0)
            server_bytes = response["auth_bytes"]
            # The step's costly part (SCRAM's PBKDF2) runs in a thread, not on the loop.
            work = mechanism.prepare_step(server_bytes)
            if work is not None:
                await self._loop.run_in_executor(None, work)
            out = mechanism.step(server_bytes)
        log.debug("%r authenticated with SASL %s", self, name)
        lifetime = self.sasl_session_lifetime_ms
        if lifetime > 0 and not self._closed:
            # Timed from the end of the exchange (the broker's session began a little
            # earlier, at its answer: the window's 5-15% margin covers that).
            self._reauth_timer = self._loop.call_later(
                reauth_delay(lifetime), self._start_reauthentication
            )

    async def _sasl_send(self, api_key: Api[RequestT, ResponseT], body: RequestT) -> ResponseT:
        # A SASL request of the handshake or of a re-authentication.
        fut = self.request(api_key, body)
        if self._held and not fut.done():
            # request() held it at the end of the queue with the others; it is what they
            # wait for, so it goes out now.
            req = self._queued.pop()
            assert req.future is fut
            self._write(req)
        return await fut

    # --- SASL re-authentication (KIP-368) -------------------------------------------

    def _start_reauthentication(self) -> None:
        # The rule of KIP-368 followed here (as Kafka's Java client does): the client
        # re-authenticates with SaslHandshake then SaslAuthenticate on the connection,
        # using the ApiVersions of its first handshake, the same mechanism and the same
        # principal (OAUTHBEARER asks its provider for a fresh token). It may start with
        # requests in flight: a broker answers a connection's requests in order, so
        # their responses come before the SaslHandshake's, and they are delivered as
        # they come (they were sent within the valid session). No other request is
        # written until the re-authentication completes: once the session has expired,
        # anything but a re-authentication makes the broker close the connection. So
        # new requests are held in the queue (their own timeouts still run) and flow
        # again, in order, when it succeeds.
        self._reauth_timer = None
        if self._closed:
            return
        self._held = True
        self._reauth_task = self._loop.create_task(self._reauthenticate())

    async def _reauthenticate(self) -> None:
        started = self._loop.time()
        try:
            await self._authenticate()
        except Exception as exc:
            detail = exc.message if isinstance(exc, errors.KafkaError) else repr(exc)
            if self._closed:
                # Closed meanwhile, which failed what waited: by the client (nothing to
                # report), or because a SASL request went unanswered.
                level = (
                    logging.WARNING if isinstance(exc, errors.KafkaTimeoutError) else logging.DEBUG
                )
                log.log(level, "SASL re-authentication of %r ended: %s", self, detail)
                return
            log.warning("SASL re-authentication of %r failed: %s", self, detail)
            # The broker closes the connection after a refusal (that close is read after
            # this: the refusal woke this task first). What waited fails as a failed
            # first authentication fails the connect: AuthenticationFailedError (a token
            # provider that timed out: a retriable connection error).
            error: type[errors.KafkaError] = (
                errors.KafkaConnectionError
                if isinstance(exc, errors.KafkaTimeoutError)
                else errors.AuthenticationFailedError
            )
            self._fail(f"SASL re-authentication failed: {detail}", error=error)
            return
        finally:
            self._reauth_task = None
        self.reauthentications += 1
        log.debug(
            "%r re-authenticated with SASL %s in %.0f ms; session lifetime %d ms",
            self,
            self.security.sasl_mechanism,
            (self._loop.time() - started) * 1000,
            self.sasl_session_lifetime_ms,
        )
        self._held = False
        self._pump()


async def connect(
    host: str,
    port: int,
    *,
    client_id: str | None = "aiokafka-lite",
    security: SecurityConfig | None = None,
    request_timeout_ms: int = 30000,
    connect_timeout_ms: int = 10000,
    max_in_flight: int | None = DEFAULT_MAX_IN_FLIGHT,
    node_id: int | None = None,
    receive_message_max_bytes: int = DEFAULT_RECEIVE_MESSAGE_MAX_BYTES,
) -> BrokerConnection:
    """Open, negotiate and (with SASL) authenticate a connection to one broker.

    Raises KafkaConnectionError (TCP/TLS failure or timeout, with host:port and the
    reason), UnsupportedVersionError, or AuthenticationFailedError.
    ``connect_timeout_ms`` bounds the TCP and TLS handshake; each request of the Kafka
    handshake (ApiVersions, SASL) is bounded by ``request_timeout_ms``.
    ``receive_message_max_bytes`` bounds the size of a response (ResponseTooLargeError
    above it); a peer that is not Kafka fails the connect with NotAKafkaBrokerError.
    """
    if connect_timeout_ms <= 0:
        raise errors.ConfigurationError("connect_timeout_ms must be positive")
    conn = BrokerConnection(
        host,
        port,
        client_id=client_id,
        security=security,
        request_timeout_ms=request_timeout_ms,
        max_in_flight=max_in_flight,
        node_id=node_id,
        receive_message_max_bytes=receive_message_max_bytes,
    )
    await conn._open(connect_timeout_ms)
    return conn
