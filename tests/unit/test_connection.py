"""BrokerConnection against scripted asyncio brokers (no real Kafka).

The scripted broker speaks just enough Kafka through protocol/api.py's
``decode_request``/``encode_response``: ApiVersions, SASL and whatever each test needs.
"""

from __future__ import annotations

import asyncio
import gc
import importlib.util
import json
import random
import ssl
import struct
import sys
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from aiokafka_lite import connection as connection_module
from aiokafka_lite import errors
from aiokafka_lite.connection import BrokerConnection, connect
from aiokafka_lite.protocol import api
from aiokafka_lite.protocol.api import ApiKey, RequestHeader
from aiokafka_lite.security import SecurityConfig, create_ssl_context
from aiokafka_lite.testing import find_free_port
from aiokafka_lite.testing.pytest_plugin import require_tool
from tests.reliability.tls import make_pki


def _load_scram_server() -> Any:
    # The server-side SCRAM lives in test_sasl.py; load it by path so this works under
    # every pytest import mode (prepend, append, importlib) with or without packages.
    path = Path(__file__).with_name("test_sasl.py")
    spec = importlib.util.spec_from_file_location("_aiokafka_lite_test_sasl", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.ScramServer


ScramServer = _load_scram_server()

HEARTBEAT = int(ApiKey.HEARTBEAT)
PRODUCE = int(ApiKey.PRODUCE)


# --- a scripted broker ---------------------------------------------------------------


class ServerConn:
    """The broker's side of one client connection."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.state: dict[str, Any] = {}

    @staticmethod
    def frame(header: RequestHeader, body: dict[str, Any], version: int | None = None) -> bytes:
        payload = api.encode_response(
            header.api_key,
            header.api_version if version is None else version,
            header.correlation_id,
            body,
        )
        return struct.pack(">i", len(payload)) + payload

    async def respond(
        self, header: RequestHeader, body: dict[str, Any], version: int | None = None
    ) -> None:
        self.writer.write(self.frame(header, body, version))
        await self.writer.drain()


Handler = Callable[[ServerConn, RequestHeader, dict[str, Any]], Coroutine[Any, Any, None]]


def api_versions_body(
    overrides: dict[int, tuple[int, int]] | None = None,
) -> dict[str, Any]:
    versions = dict(api.SUPPORTED_VERSIONS)
    versions.update(overrides or {})
    return {
        "error_code": 0,
        "api_keys": [
            {"api_key": key, "min_version": lo, "max_version": hi}
            for key, (lo, hi) in sorted(versions.items())
        ],
    }


class ScriptedBroker:
    """An asyncio server: ApiVersions answered by default, everything else by handlers."""

    def __init__(self, ssl_context: ssl.SSLContext | None = None) -> None:
        self.handlers: dict[int, Handler] = {}
        self.concurrent: set[int] = set()
        self.tasks: set[asyncio.Task[None]] = set()
        self.requests: list[tuple[RequestHeader, dict[str, Any]]] = []
        self.connections: list[ServerConn] = []
        self.ssl_context = ssl_context
        self.server: asyncio.Server | None = None
        self.port = 0
        self.on(int(ApiKey.API_VERSIONS), self._api_versions)

    def on(self, api_key: int, handler: Handler, *, concurrent: bool = False) -> None:
        self.handlers[api_key] = handler
        if concurrent:
            self.concurrent.add(api_key)

    @staticmethod
    async def _api_versions(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        await conn.respond(header, api_versions_body())

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0, ssl=self.ssl_context)
        self.port = self.server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        for task in list(self.tasks):
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)
        for conn in self.connections:
            conn.writer.close()
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        conn = ServerConn(reader, writer)
        self.connections.append(conn)
        try:
            while True:
                size = struct.unpack(">i", await reader.readexactly(4))[0]
                header, body = api.decode_request(await reader.readexactly(size))
                self.requests.append((header, body))
                handler = self.handlers.get(header.api_key)
                if handler is None:
                    continue
                if header.api_key in self.concurrent:
                    # Answer in a task so the broker keeps reading further requests.
                    task = asyncio.create_task(handler(conn, header, body))
                    self.tasks.add(task)
                    task.add_done_callback(self.tasks.discard)
                else:
                    await handler(conn, header, body)
        except (asyncio.IncompleteReadError, ConnectionError, ssl.SSLError):
            pass
        finally:
            writer.close()

    def seen(self, api_key: int) -> list[tuple[RequestHeader, dict[str, Any]]]:
        return [(h, b) for h, b in self.requests if h.api_key == api_key]


@pytest.fixture(autouse=True)
async def no_loop_errors() -> AsyncIterator[list[dict[str, Any]]]:
    """Fail a test that leaves "Future exception was never retrieved" (or any loop error)."""
    loop = asyncio.get_running_loop()
    seen: list[dict[str, Any]] = []
    loop.set_exception_handler(lambda _loop, context: seen.append(context))
    yield seen
    gc.collect()
    await asyncio.sleep(0)
    loop.set_exception_handler(None)
    assert not seen, seen


@pytest.fixture
async def broker() -> AsyncIterator[ScriptedBroker]:
    server = ScriptedBroker()
    await server.start()
    yield server
    await server.stop()


async def open_conn(broker: ScriptedBroker, **kwargs: Any) -> BrokerConnection:
    return await connect("127.0.0.1", broker.port, **kwargs)


def echo_heartbeat(delay: float = 0.0) -> Handler:
    """Heartbeat handler that echoes generation_id back as throttle_time_ms."""

    async def handler(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        if delay:
            await asyncio.sleep(delay)
        await conn.respond(header, {"throttle_time_ms": body["generation_id"], "error_code": 0})

    return handler


def heartbeat(generation: int) -> dict[str, Any]:
    return {"group_id": "g", "generation_id": generation, "member_id": "m"}


async def swallow(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
    """A handler that never answers."""


# --- connecting and version negotiation -------------------------------------------------


async def test_connect_negotiates_versions(broker: ScriptedBroker) -> None:
    broker.on(int(ApiKey.API_VERSIONS), _versions_handler({int(ApiKey.METADATA): (0, 9)}))
    conn = await open_conn(broker, node_id=3, client_id="me")
    try:
        assert conn.api_versions[int(ApiKey.METADATA)] == (0, 9)
        assert conn.version_for(int(ApiKey.METADATA)) == 9
        assert conn.version_for(PRODUCE) == api.SUPPORTED_VERSIONS[PRODUCE][1]
        header, body = broker.seen(int(ApiKey.API_VERSIONS))[0]
        assert header.api_version == api.SUPPORTED_VERSIONS[int(ApiKey.API_VERSIONS)][1]
        assert header.client_id == "me"
        assert body["client_software_name"] == "aiokafka-lite"
        assert conn.node_id == 3 and conn.host == "127.0.0.1" and conn.port == broker.port
        assert not conn.closed and conn.in_flight_count == 0
        assert "127.0.0.1" in repr(conn) and "node_id=3" in repr(conn)
    finally:
        conn.close()
        await conn.wait_closed()


def _versions_handler(overrides: dict[int, tuple[int, int]]) -> Handler:
    async def handler(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        await conn.respond(header, api_versions_body(overrides))

    return handler


async def test_version_for_unsupported_api(broker: ScriptedBroker) -> None:
    async def handler(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        response = api_versions_body({PRODUCE: (50, 60)})
        response["api_keys"] = [e for e in response["api_keys"] if e["api_key"] != HEARTBEAT]
        await conn.respond(header, response)

    broker.on(int(ApiKey.API_VERSIONS), handler)
    conn = await open_conn(broker)
    try:
        with pytest.raises(errors.UnsupportedVersionError, match="no common version"):
            conn.version_for(PRODUCE)
        with pytest.raises(errors.UnsupportedVersionError, match="does not support Heartbeat"):
            await conn.send(HEARTBEAT, heartbeat(1))
    finally:
        conn.close()


@pytest.mark.parametrize(("broker_max", "expected_retry"), [(2, 2), (None, 0)])
async def test_api_versions_unsupported_version_fallback(
    broker: ScriptedBroker, broker_max: int | None, expected_retry: int
) -> None:
    async def handler(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        limit = 2 if broker_max is None else broker_max
        if header.api_version > limit:
            keys = (
                []
                if broker_max is None
                else [{"api_key": 18, "min_version": 0, "max_version": broker_max}]
            )
            # Kafka answers an unsupported ApiVersions version with a v0 body.
            await conn.respond(header, {"error_code": 35, "api_keys": keys}, version=0)
        else:
            await conn.respond(header, api_versions_body({18: (0, limit)}))

    broker.on(int(ApiKey.API_VERSIONS), handler)
    conn = await open_conn(broker)
    try:
        versions = [h.api_version for h, _ in broker.seen(int(ApiKey.API_VERSIONS))]
        assert versions == [api.SUPPORTED_VERSIONS[18][1], expected_retry]
        assert conn.api_versions[18] == (0, broker_max if broker_max is not None else 2)
    finally:
        conn.close()


async def test_api_versions_error_code_fails_connect(broker: ScriptedBroker) -> None:
    async def handler(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        await conn.respond(header, {"error_code": 35, "api_keys": []}, version=0)

    broker.on(int(ApiKey.API_VERSIONS), handler)
    with pytest.raises(errors.UnsupportedVersionError, match="ApiVersions"):
        await open_conn(broker)


async def test_connect_to_closed_port_fails_fast() -> None:
    port = find_free_port()
    start = time.monotonic()
    with pytest.raises(errors.KafkaConnectionError) as info:
        await connect("127.0.0.1", port, connect_timeout_ms=5000)
    assert time.monotonic() - start < 2
    assert f"127.0.0.1:{port}" in str(info.value)
    assert "connection refused" in str(info.value).lower()
    assert isinstance(info.value.__cause__, OSError)


async def test_connect_timeout_is_bounded() -> None:
    # A TCP server that never speaks TLS: the TLS handshake never finishes.
    writers: list[asyncio.StreamWriter] = []
    server = await asyncio.start_server(lambda r, w: writers.append(w), "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        start = time.monotonic()
        security = SecurityConfig(security_protocol="SSL")
        with pytest.raises(errors.KafkaConnectionError, match="timed out after 200 ms"):
            await connect("127.0.0.1", port, security=security, connect_timeout_ms=200)
        assert time.monotonic() - start < 2
    finally:
        for writer in writers:
            writer.close()
        server.close()
        await server.wait_closed()


async def test_handshake_timeout_is_a_connection_error(broker: ScriptedBroker) -> None:
    broker.on(int(ApiKey.API_VERSIONS), swallow)
    with pytest.raises(errors.KafkaConnectionError, match="timed out"):
        await open_conn(broker, request_timeout_ms=200)


async def test_broker_closing_during_handshake(broker: ScriptedBroker) -> None:
    async def hang_up(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        conn.writer.close()

    broker.on(int(ApiKey.API_VERSIONS), hang_up)
    with pytest.raises(errors.KafkaConnectionError, match=r"127\.0\.0\.1"):
        await open_conn(broker)


# --- requests and responses ------------------------------------------------------------


async def test_out_of_order_responses_match_by_correlation_id(broker: ScriptedBroker) -> None:
    pending: list[tuple[ServerConn, RequestHeader, dict[str, Any]]] = []

    async def collect(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        pending.append((conn, header, body))
        if len(pending) == 5:
            for c, h, b in reversed(pending):
                await c.respond(h, {"throttle_time_ms": b["generation_id"], "error_code": 0})

    broker.on(HEARTBEAT, collect)
    conn = await open_conn(broker)
    try:
        results = await asyncio.gather(*(conn.send(HEARTBEAT, heartbeat(i)) for i in range(5)))
        assert [r["throttle_time_ms"] for r in results] == list(range(5))
        assert conn.in_flight_count == 0
    finally:
        conn.close()


async def test_many_requests_in_flight(broker: ScriptedBroker) -> None:
    pending: list[tuple[ServerConn, RequestHeader, dict[str, Any]]] = []
    count = 500

    async def collect(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        pending.append((conn, header, body))
        if len(pending) == count:
            random.Random(7).shuffle(pending)
            # All responses in one write: many frames arrive in one chunk.
            conn.writer.write(
                b"".join(
                    c.frame(h, {"throttle_time_ms": b["generation_id"], "error_code": 0})
                    for c, h, b in pending
                )
            )
            await conn.writer.drain()

    broker.on(HEARTBEAT, collect)
    conn = await open_conn(broker, max_in_flight=None)
    try:
        futures = [conn.request(HEARTBEAT, heartbeat(i)) for i in range(count)]
        assert conn.in_flight_count == count
        results = await asyncio.gather(*futures)
        assert [r["throttle_time_ms"] for r in results] == list(range(count))
    finally:
        conn.close()


async def test_cork_sends_requests_in_one_write(broker: ScriptedBroker) -> None:
    broker.on(HEARTBEAT, echo_heartbeat())
    conn = await open_conn(broker, max_in_flight=3)
    writes: list[bytes] = []
    transport = conn._transport
    assert transport is not None
    real_write = transport.write

    def spy(data: bytes | bytearray | memoryview) -> None:
        writes.append(bytes(data))
        real_write(data)

    transport.write = spy  # type: ignore[method-assign]
    try:
        conn.cork()
        futures = [conn.request(HEARTBEAT, heartbeat(i)) for i in range(5)]
        assert not writes and conn.in_flight_count == 3 and conn.queued_count == 2
        conn.uncork()
        assert len(writes) == 1  # three requests, one write; two wait for a slot
        results = await asyncio.gather(*futures)
        assert [r["throttle_time_ms"] for r in results] == list(range(5))
        assert len(writes) == 3  # uncorked: the queued ones went one by one
        conn.uncork()  # harmless when not corked
        # Corked requests of a connection that closes fail like any other.
        conn.cork()
        late = conn.request(HEARTBEAT, heartbeat(9))
        conn.close("bye")
        conn.uncork()
        with pytest.raises(errors.KafkaConnectionError, match="bye"):
            await late
        assert len(writes) == 3
    finally:
        conn.close()


async def test_response_split_into_single_bytes(broker: ScriptedBroker) -> None:
    async def dribble(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        data = conn.frame(header, {"throttle_time_ms": 42, "error_code": 0})
        for i in range(len(data)):
            conn.writer.write(data[i : i + 1])
            await conn.writer.drain()
            await asyncio.sleep(0.001)

    broker.on(HEARTBEAT, dribble)
    conn = await open_conn(broker)
    try:
        assert (await conn.send(HEARTBEAT, heartbeat(1)))["throttle_time_ms"] == 42
    finally:
        conn.close()


async def test_framing_fed_directly(broker: ScriptedBroker) -> None:
    """Feed the protocol by hand: 1-byte chunks, many frames per chunk, a huge frame."""
    broker.on(HEARTBEAT, swallow)
    broker.on(int(ApiKey.DESCRIBE_CONFIGS), swallow)
    conn = await open_conn(broker, max_in_flight=None)
    protocol = conn._protocol
    assert protocol is not None
    try:
        futures = [conn.request(HEARTBEAT, heartbeat(i)) for i in range(200)]
        await _wait_for(lambda: len(broker.seen(HEARTBEAT)) == 200)
        frames = b"".join(
            ServerConn.frame(h, {"throttle_time_ms": b["generation_id"], "error_code": 0})
            for h, b in broker.seen(HEARTBEAT)
        )
        # The first 20 frames byte by byte, the rest in chunks that straddle frames.
        split = len(frames) // 10
        for i in range(split):
            _feed(protocol, frames[i : i + 1])
        for i in range(split, len(frames), 37):
            _feed(protocol, frames[i : i + 37])
        results = [f.result() for f in futures]
        assert [r["throttle_time_ms"] for r in results] == list(range(200))

        # One ~8 MB frame delivered in 4 KB chunks completes quickly (no quadratic copy).
        version = conn.version_for(int(ApiKey.DESCRIBE_CONFIGS))
        fut = conn.request(int(ApiKey.DESCRIBE_CONFIGS), {"resources": []})
        await _wait_for(lambda: len(broker.seen(int(ApiKey.DESCRIBE_CONFIGS))) == 1)
        header = broker.seen(int(ApiKey.DESCRIBE_CONFIGS))[0][0]
        big_value = "x" * (8 * 1024 * 1024)
        body = {
            "throttle_time_ms": 0,
            "results": [
                {
                    "error_code": 0,
                    "error_message": None,
                    "resource_type": 2,
                    "resource_name": "t",
                    "configs": [{"name": "big", "value": big_value}],
                }
            ],
        }
        data = ServerConn.frame(header, body, version)
        start = time.monotonic()
        held_most = 0
        for i in range(0, len(data), 4096):
            _feed(protocol, data[i : i + 4096])
            # Memory follows the bytes that came (at most twice them plus a read
            # buffer), never the 8 MB the size prefix announced.
            held = _held(protocol)
            assert held <= 2 * (i + 4096) + 2 * connection_module._READ_BUFFER_SIZE
            held_most = max(held_most, held)
        assert time.monotonic() - start < 5
        result = fut.result()
        assert result["results"][0]["configs"][0]["value"] == big_value
        assert protocol._start == protocol._end == 0
        # The frame was read on its own (in place, or in parts which together hold all
        # of it); the read buffer kept its size and the frame or its parts are gone.
        assert held_most >= len(data) - 4
        assert len(protocol._buf) == connection_module._READ_BUFFER_SIZE
        assert protocol._parts is None and protocol._frame is None
        assert _held(protocol) == connection_module._READ_BUFFER_SIZE
    finally:
        conn.close()


def _held(protocol: Any) -> int:
    """Bytes the protocol holds for reading: its buffer and a large frame's parts (or, for
    a frame read in place, what was written of it: the pages the kernel committed; see
    test_a_frame_read_in_place_commits_memory_as_it_arrives)."""
    parts = protocol._parts or []
    extra = len(protocol._part) if protocol._parts is not None else 0
    if protocol._frame is not None:
        extra = protocol._frame_fill
    return len(protocol._buf) + sum(map(len, parts)) + extra


def _feed(protocol: Any, data: bytes) -> None:
    """What a transport does with bytes from the socket: read them into the protocol's
    buffer (in several reads when they do not fit), keeping the view it was given while
    ``buffer_updated`` runs."""
    while data:
        view = protocol.get_buffer(-1)
        n = min(len(view), len(data))
        assert n > 0
        view[:n] = data[:n]
        protocol.buffer_updated(n)
        view.release()
        data = data[n:]


class _FrameSink:
    """The connection side of the protocol: collects the frames it is handed."""

    closed = False

    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def _on_frame(self, frame: bytes) -> None:
        assert type(frame) is bytes
        self.frames.append(frame)

    def _fail(self, reason: str, cause: BaseException | None = None) -> None:
        raise AssertionError(reason)


@settings(max_examples=200, deadline=None)
@given(
    sizes=st.lists(st.integers(4, 3000), min_size=1, max_size=20),
    cuts=st.lists(st.integers(1, 5000), min_size=1, max_size=50),
    data=st.data(),
)
def test_framing_any_chunking(sizes: list[int], cuts: list[int], data: Any) -> None:
    """However the stream is cut into reads, every frame comes out whole and in order,
    including frames larger than the read buffer (shrunk here to 1 KiB)."""
    frames = [data.draw(st.binary(min_size=n, max_size=n)) for n in sizes]
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    sink = _FrameSink()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(connection_module, "_READ_BUFFER_SIZE", 1024)
        mp.setattr(connection_module, "_MIN_READ", 256)

        async def make() -> Any:
            return connection_module._KafkaProtocol(sink, 2**31 - 1)  # type: ignore[arg-type]

        protocol = asyncio.run(make())
        pos = 0
        for cut in cuts:
            _feed(protocol, stream[pos : pos + cut])
            pos += cut
        _feed(protocol, stream[pos:])
    assert sink.frames == frames
    assert protocol._start == protocol._end == 0


@settings(max_examples=100, deadline=None)
@given(
    sizes=st.lists(st.integers(4, 40_000), min_size=1, max_size=12),
    cuts=st.lists(st.integers(1, 9000), min_size=1, max_size=60),
    seed=st.integers(0, 2**32),
)
def test_framing_large_frames_any_chunking(sizes: list[int], cuts: list[int], seed: int) -> None:
    """Frames up to 40 times the read buffer (1 KiB here), read in several growing parts
    however the reads fall, come out whole and in order; what the protocol holds never
    exceeds about twice what has come of the frame being read, plus the buffer."""
    rng = random.Random(seed)
    frames = [rng.randbytes(n) for n in sizes]
    stream = b"".join(struct.pack(">i", len(f)) + f for f in frames)
    sink = _FrameSink()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(connection_module, "_READ_BUFFER_SIZE", 1024)
        mp.setattr(connection_module, "_MIN_READ", 256)

        async def make() -> Any:
            return connection_module._KafkaProtocol(sink, 2**31 - 1)  # type: ignore[arg-type]

        protocol = asyncio.run(make())
        pos = 0
        for cut in [*cuts, len(stream)]:
            _feed(protocol, stream[pos : pos + cut])
            pos += cut
            # The bytes of the frame being read that have come (the stream up to pos,
            # less the frames before it and its prefix).
            done = sum(4 + len(f) for f in sink.frames)
            came = max(pos - done - 4, 0)
            assert _held(protocol) <= 2 * came + 2 * 1024 + 256
    assert sink.frames == frames
    assert protocol._start == protocol._end == 0 and protocol._parts is None


async def _wait_for(predicate: Callable[[], bool], timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        await asyncio.sleep(0.005)


async def test_server_closing_mid_response_fails_all_pending(broker: ScriptedBroker) -> None:
    count = 0

    async def half_then_close(
        conn: ServerConn, header: RequestHeader, body: dict[str, Any]
    ) -> None:
        nonlocal count
        count += 1
        if count == 3:
            data = conn.frame(header, {"throttle_time_ms": 0, "error_code": 0})
            conn.writer.write(data[: len(data) // 2])
            await conn.writer.drain()
            conn.writer.close()

    broker.on(HEARTBEAT, half_then_close)
    conn = await open_conn(broker)
    closed: list[BrokerConnection] = []
    conn.add_close_callback(closed.append)
    futures = [conn.request(HEARTBEAT, heartbeat(i)) for i in range(3)]
    results = await asyncio.gather(*futures, return_exceptions=True)
    for result in results:
        assert isinstance(result, errors.KafkaConnectionError)
        assert f"127.0.0.1:{broker.port}" in str(result)
        assert "closed" in str(result)
    assert conn.closed and closed == [conn]
    assert conn.in_flight_count == 0
    # Requests after the close fail the same way, without writing.
    with pytest.raises(errors.KafkaConnectionError, match="closed by the broker"):
        await conn.send(HEARTBEAT, heartbeat(9))
    late: list[BrokerConnection] = []
    conn.add_close_callback(late.append)
    await asyncio.sleep(0)
    assert late == [conn]


async def test_unobserved_failures_do_not_warn(broker: ScriptedBroker) -> None:
    broker.on(HEARTBEAT, swallow)
    conn = await open_conn(broker)
    for i in range(5):
        conn.request(HEARTBEAT, heartbeat(i))  # nobody ever looks at these futures
    conn.close("test is done")
    await conn.wait_closed()
    # The autouse no_loop_errors fixture checks nothing was reported.


async def test_request_timeout_closes_connection(broker: ScriptedBroker) -> None:
    broker.on(HEARTBEAT, swallow)
    conn = await open_conn(broker, request_timeout_ms=5000)
    other = conn.request(HEARTBEAT, heartbeat(1))
    start = time.monotonic()
    with pytest.raises(errors.KafkaTimeoutError, match=r"Heartbeat .* timed out after 100 ms"):
        await conn.send(HEARTBEAT, heartbeat(2), timeout_ms=100)
    assert time.monotonic() - start < 2
    assert conn.closed
    with pytest.raises(errors.KafkaConnectionError, match="timed out"):
        await other


async def test_close_fails_pending_with_reason(broker: ScriptedBroker) -> None:
    broker.on(HEARTBEAT, swallow)
    conn = await open_conn(broker)
    task = asyncio.create_task(conn.send(HEARTBEAT, heartbeat(1)))
    await asyncio.sleep(0.01)
    assert conn.in_flight_count == 1
    conn.close("shutting down")
    conn.close("twice is fine")
    with pytest.raises(errors.KafkaConnectionError, match="shutting down"):
        await task
    assert conn.close_reason == "shutting down"
    await conn.wait_closed()


async def test_on_response_runs_as_the_response_is_read_and_once_on_failure(
    broker: ScriptedBroker,
) -> None:
    # A response: the callback runs from the reading callback itself (no loop round
    # in between, where a done-callback would be scheduled); it sees the result. A
    # failure (the connection closed, a request cancelled): it runs once, soon.
    broker.on(HEARTBEAT, echo_heartbeat())
    conn = await open_conn(broker)
    calls: list[tuple[str, Any]] = []
    from_reader: list[bool] = []

    def on_response(fut: asyncio.Future[dict[str, Any]]) -> None:
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_name != "_on_frame":
            frame = frame.f_back  # type: ignore[assignment]
        from_reader.append(frame is not None)
        if fut.cancelled():
            calls.append(("cancelled", None))
        elif fut.exception() is not None:
            calls.append(("error", type(fut.exception()).__name__))
        else:
            calls.append(("ok", fut.result()["throttle_time_ms"]))

    try:
        fut = conn.request(HEARTBEAT, heartbeat(7), on_response=on_response)
        await _wait_for(lambda: bool(calls))
        assert calls == [("ok", 7)] and fut.done()
        assert from_reader == [True]  # called by the connection's reader, not the loop
        calls.clear()
        broker.on(HEARTBEAT, swallow)
        cancelled = conn.request(HEARTBEAT, heartbeat(8), on_response=on_response)
        cancelled.cancel()
        await asyncio.sleep(0)
        await asyncio.sleep(0)
        assert calls == [("cancelled", None)]
        calls.clear()
        conn.request(HEARTBEAT, heartbeat(9), on_response=on_response)
        conn.close("going away")
        await _wait_for(lambda: bool(calls))
        await asyncio.sleep(0.01)
        assert calls == [("error", "KafkaConnectionError")]
        assert from_reader == [True, False, False]
    finally:
        conn.close()


async def test_unknown_correlation_id_is_a_desync(broker: ScriptedBroker) -> None:
    async def wrong_id(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        bogus = RequestHeader(header.api_key, header.api_version, header.correlation_id + 1000)
        await conn.respond(bogus, {"throttle_time_ms": 0, "error_code": 0})

    broker.on(HEARTBEAT, wrong_id)
    conn = await open_conn(broker)
    with pytest.raises(errors.KafkaConnectionError, match=r"desync.*correlation id"):
        await conn.send(HEARTBEAT, heartbeat(1))
    assert conn.closed


async def test_undecodable_response_fails_only_that_request(broker: ScriptedBroker) -> None:
    async def garbage(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        if body["generation_id"] == 1:
            payload = struct.pack(">i", header.correlation_id) + b"\x01"
            conn.writer.write(struct.pack(">i", len(payload)) + payload)
        else:
            await conn.respond(header, {"throttle_time_ms": 5, "error_code": 0})

    broker.on(HEARTBEAT, garbage)
    conn = await open_conn(broker)
    try:
        with pytest.raises(errors.DecodeError):
            await conn.send(HEARTBEAT, heartbeat(1))
        assert (await conn.send(HEARTBEAT, heartbeat(2)))["throttle_time_ms"] == 5
    finally:
        conn.close()


async def test_max_in_flight_cap(broker: ScriptedBroker) -> None:
    outstanding: list[tuple[ServerConn, RequestHeader, dict[str, Any]]] = []
    high_water = 0
    release = asyncio.Event()

    async def hold(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        nonlocal high_water
        outstanding.append((conn, header, body))
        high_water = max(high_water, len(outstanding))
        await release.wait()
        while outstanding:
            c, h, b = outstanding.pop(0)
            await c.respond(h, {"throttle_time_ms": b["generation_id"], "error_code": 0})

    broker.on(HEARTBEAT, hold, concurrent=True)
    conn = await open_conn(broker, max_in_flight=3)
    try:
        tasks = [asyncio.create_task(conn.send(HEARTBEAT, heartbeat(i))) for i in range(10)]
        await asyncio.sleep(0.05)
        assert conn.in_flight_count == 3 and conn.queued_count == 7
        assert len(broker.seen(HEARTBEAT)) == 3
        release.set()
        results = await asyncio.gather(*tasks)
        assert [r["throttle_time_ms"] for r in results] == list(range(10))
        assert high_water <= 3
        # The broker received them in the order they were sent.
        assert [b["generation_id"] for _, b in broker.seen(HEARTBEAT)] == list(range(10))
    finally:
        conn.close()


async def test_queued_request_times_out_without_closing(broker: ScriptedBroker) -> None:
    broker.on(HEARTBEAT, echo_heartbeat(delay=0.3))
    conn = await open_conn(broker, max_in_flight=1)
    try:
        first = asyncio.create_task(conn.send(HEARTBEAT, heartbeat(1)))
        await asyncio.sleep(0)
        with pytest.raises(errors.KafkaTimeoutError, match="in-flight slot"):
            await conn.send(HEARTBEAT, heartbeat(2), timeout_ms=50)
        assert not conn.closed
        assert (await first)["throttle_time_ms"] == 1
        assert (await conn.send(HEARTBEAT, heartbeat(3)))["throttle_time_ms"] == 3
    finally:
        conn.close()


async def test_each_request_times_out_at_its_own_deadline(broker: ScriptedBroker) -> None:
    # One timer serves every pending request: a later request with a shorter timeout
    # must still expire first, and the next deadline must be found after each expiry.
    broker.on(HEARTBEAT, echo_heartbeat(delay=0.4))
    conn = await open_conn(broker, max_in_flight=1, request_timeout_ms=5000)
    try:
        start = time.monotonic()
        ended: dict[int, float] = {}

        async def send(n: int, timeout_ms: int | None = None) -> dict[str, Any]:
            try:
                return await conn.send(HEARTBEAT, heartbeat(n), timeout_ms=timeout_ms)
            finally:
                ended[n] = time.monotonic() - start

        first = asyncio.create_task(send(1))  # in flight, answered after 0.4 s
        await asyncio.sleep(0)
        second = asyncio.create_task(send(2, 300))  # queued: expires at 0.3 s
        third = asyncio.create_task(send(3, 2000))  # written at 0.4 s, answered at 0.8 s
        fourth = asyncio.create_task(send(4, 600))  # still queued at 0.6 s: expires
        for task in (second, fourth):
            with pytest.raises(errors.KafkaTimeoutError, match="in-flight slot"):
                await task
        assert (await first)["throttle_time_ms"] == 1
        assert (await third)["throttle_time_ms"] == 3
        assert 0.25 <= ended[2] < 0.4, ended
        assert 0.55 <= ended[4] < 0.8, ended
        assert not conn.closed
    finally:
        conn.close()


async def test_cancelled_request_keeps_connection_usable(broker: ScriptedBroker) -> None:
    broker.on(HEARTBEAT, echo_heartbeat(delay=0.1))
    conn = await open_conn(broker)
    try:
        task = asyncio.create_task(conn.send(HEARTBEAT, heartbeat(1)))
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # The late response for the cancelled request is consumed, not a desync.
        assert (await conn.send(HEARTBEAT, heartbeat(2)))["throttle_time_ms"] == 2
        assert not conn.closed
    finally:
        conn.close()


async def test_correlation_id_wraps_around(broker: ScriptedBroker) -> None:
    broker.on(HEARTBEAT, echo_heartbeat())
    conn = await open_conn(broker)
    try:
        conn._correlation_id = 2**31 - 2
        for i in range(3):
            await conn.send(HEARTBEAT, heartbeat(i))
        ids = [h.correlation_id for h, _ in broker.seen(HEARTBEAT)]
        assert ids == [2**31 - 1, 0, 1]
    finally:
        conn.close()


async def test_expect_response_false(broker: ScriptedBroker) -> None:
    broker.on(PRODUCE, swallow)
    broker.on(HEARTBEAT, echo_heartbeat())
    conn = await open_conn(broker)
    try:
        produce = {"acks": 0, "timeout_ms": 1000, "topic_data": []}
        assert await conn.send(PRODUCE, produce, expect_response=False) == {}
        assert conn.in_flight_count == 0
        assert (await conn.send(HEARTBEAT, heartbeat(4)))["throttle_time_ms"] == 4
        assert broker.seen(PRODUCE)[0][1]["acks"] == 0
    finally:
        conn.close()


async def test_send_waits_for_drain_when_paused(broker: ScriptedBroker) -> None:
    broker.on(HEARTBEAT, echo_heartbeat())
    conn = await open_conn(broker)
    protocol = conn._protocol
    assert protocol is not None
    try:
        protocol.pause_writing()
        task = asyncio.create_task(conn.send(HEARTBEAT, heartbeat(8)))
        await _wait_for(lambda: conn.in_flight_count == 0)  # the response came back
        await asyncio.sleep(0.02)
        assert not task.done()  # but send() still waits for the buffer to drain
        protocol.resume_writing()
        assert (await task)["throttle_time_ms"] == 8
    finally:
        conn.close()


async def test_send_waits_for_drain_no_longer_than_its_timeout(broker: ScriptedBroker) -> None:
    # Answered, but the socket still pushes back (other requests' bytes, acks=0 ones say,
    # wait in the buffer): send() waited for the drain with no bound of its own.
    broker.on(HEARTBEAT, echo_heartbeat())
    conn = await open_conn(broker)
    protocol = conn._protocol
    assert protocol is not None
    try:
        protocol.pause_writing()
        started = time.monotonic()
        response = await asyncio.wait_for(conn.send(HEARTBEAT, heartbeat(8), timeout_ms=300), 5)
        assert response["throttle_time_ms"] == 8
        assert 0.25 < time.monotonic() - started < 1.5
        assert not conn.closed
    finally:
        conn.close()


async def test_last_activity_advances(broker: ScriptedBroker) -> None:
    broker.on(HEARTBEAT, echo_heartbeat())
    conn = await open_conn(broker)
    try:
        before = conn.last_activity
        await asyncio.sleep(0.01)
        await conn.send(HEARTBEAT, heartbeat(1))
        assert conn.last_activity > before
    finally:
        conn.close()


async def test_invalid_arguments() -> None:
    with pytest.raises(errors.ConfigurationError, match="max_in_flight"):
        await connect("127.0.0.1", 1, max_in_flight=0)
    with pytest.raises(errors.ConfigurationError, match="request_timeout_ms"):
        await connect("127.0.0.1", 1, request_timeout_ms=0)
    with pytest.raises(errors.ConfigurationError, match="connect_timeout_ms"):
        await connect("127.0.0.1", 1, connect_timeout_ms=0)


# --- SASL against a scripted broker ---------------------------------------------------

USERS = {"alice": "alice-secret"}
SASL_ERROR = "Authentication failed: Invalid username or password"


def sasl_broker(
    broker: ScriptedBroker,
    enabled: list[str],
    *,
    lifetime_ms: int = 3600_000,
    refuse_from: int | None = None,
) -> None:
    """SASL as a Kafka broker does it: each success starts a session of ``lifetime_ms``
    (``conn.state["expires_at"]``, loop time); ``refuse_from``: the n-th exchange on a
    connection and later ones are refused (a re-authentication, from 2)."""

    async def handshake(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        mechanism = body["mechanism"]
        code = 0 if mechanism in enabled else 33
        conn.state["mechanism"] = mechanism
        conn.state.pop("scram", None)  # a handshake starts a new exchange
        await conn.respond(header, {"error_code": code, "mechanisms": enabled})

    async def authenticate(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        mechanism = conn.state["mechanism"]
        auth = body["auth_bytes"]
        ok, out = True, b""
        if mechanism == "PLAIN":
            _, user, password = auth.split(b"\0")
            ok = USERS.get(user.decode()) == password.decode()
        elif mechanism.startswith("SCRAM"):
            scram = conn.state.get("scram")
            if scram is None:
                scram = conn.state["scram"] = ScramServer(mechanism, USERS)
                out = scram.first(auth)
            else:
                ok, out = scram.final(auth)
        elif mechanism == "OAUTHBEARER":
            if auth == b"\x01":
                ok = False
            else:
                conn.state["oauth"] = auth
                conn.state.setdefault("tokens", []).append(auth)
                if b"auth=Bearer good-token" not in auth:
                    out = b'{"status":"invalid_token"}'
        # The exchange's last step: the session starts (or the refusal comes) there.
        done = (
            mechanism == "PLAIN"
            or out.startswith(b"v=")
            or (mechanism == "OAUTHBEARER" and not out)
        )
        if ok and done:
            count = conn.state["exchanges"] = conn.state.get("exchanges", 0) + 1
            if refuse_from is not None and count >= refuse_from:
                ok = False
            else:
                if lifetime_ms > 0:
                    loop_time = asyncio.get_running_loop().time()
                    conn.state["expires_at"] = loop_time + lifetime_ms / 1000
                if mechanism == "PLAIN":
                    conn.state.setdefault("principals", []).append(auth.split(b"\0")[1])
        response = {
            "error_code": 0 if ok else 58,
            "error_message": None if ok else SASL_ERROR,
            "auth_bytes": out if ok else b"",
            "session_lifetime_ms": lifetime_ms,
        }
        await conn.respond(header, response)
        if not ok:
            conn.writer.close()

    broker.on(int(ApiKey.SASL_HANDSHAKE), handshake)
    broker.on(int(ApiKey.SASL_AUTHENTICATE), authenticate)


def sasl_config(mechanism: str, password: str = "alice-secret") -> SecurityConfig:
    return SecurityConfig(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism=mechanism,
        sasl_plain_username="alice",
        sasl_plain_password=password,
    )


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_sasl_success(broker: ScriptedBroker, mechanism: str) -> None:
    sasl_broker(broker, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    broker.on(HEARTBEAT, echo_heartbeat())
    conn = await open_conn(broker, security=sasl_config(mechanism))
    try:
        assert conn.sasl_session_lifetime_ms == 3600_000
        assert (await conn.send(HEARTBEAT, heartbeat(1)))["throttle_time_ms"] == 1
        rounds = len(broker.seen(int(ApiKey.SASL_AUTHENTICATE)))
        assert rounds == (1 if mechanism == "PLAIN" else 2)
        assert "alice-secret" not in repr(conn)
    finally:
        conn.close()


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
async def test_sasl_wrong_password(broker: ScriptedBroker, mechanism: str) -> None:
    sasl_broker(broker, ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
    with pytest.raises(errors.AuthenticationFailedError, match="Invalid username or password"):
        await open_conn(broker, security=sasl_config(mechanism, password="wrong"))


async def test_sasl_unsupported_mechanism_lists_enabled(broker: ScriptedBroker) -> None:
    sasl_broker(broker, ["GSSAPI", "PLAIN"])
    with pytest.raises(
        errors.AuthenticationFailedError, match=r"SCRAM-SHA-512.*enabled mechanisms: GSSAPI, PLAIN"
    ):
        await open_conn(broker, security=sasl_config("SCRAM-SHA-512"))


async def test_sasl_scram_forged_server_signature(broker: ScriptedBroker) -> None:
    sasl_broker(broker, ["SCRAM-SHA-256"])
    original = broker.handlers[int(ApiKey.SASL_AUTHENTICATE)]

    async def forge(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        if "scram" not in conn.state:
            await original(conn, header, body)
        else:
            await conn.respond(header, {"error_code": 0, "auth_bytes": b"v=AAAA"})

    broker.on(int(ApiKey.SASL_AUTHENTICATE), forge)
    with pytest.raises(errors.AuthenticationFailedError, match="server signature"):
        await open_conn(broker, security=sasl_config("SCRAM-SHA-256"))


class _Provider:
    def __init__(self, token: str) -> None:
        self._token = token

    async def token(self) -> str:
        return self._token

    def extensions(self) -> dict[str, str]:
        return {"traceId": "abc"}


async def test_sasl_oauthbearer(broker: ScriptedBroker) -> None:
    sasl_broker(broker, ["OAUTHBEARER"])
    security = SecurityConfig(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=_Provider("good-token"),
    )
    conn = await open_conn(broker, security=security)
    conn.close()
    assert broker.connections[0].state["oauth"] == (
        b"n,,\x01auth=Bearer good-token\x01traceId=abc\x01\x01"
    )

    bad = SecurityConfig(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=lambda: "bad-token",
    )
    with pytest.raises(errors.AuthenticationFailedError, match="invalid_token"):
        await open_conn(broker, security=bad)


# --- SASL re-authentication (KIP-368) ---------------------------------------------------

SASL_HANDSHAKE = int(ApiKey.SASL_HANDSHAKE)
SASL_AUTHENTICATE = int(ApiKey.SASL_AUTHENTICATE)


def session_heartbeat(slow: dict[int, float] | None = None) -> Handler:
    """Heartbeat echoed within the SASL session only: after it ends, like Kafka, the
    broker closes the connection (``conn.state["expired"]``). ``slow``: generation ->
    seconds before the answer."""

    async def handler(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        delay = (slow or {}).get(body["generation_id"], 0.0)
        if delay:
            await asyncio.sleep(delay)
        if asyncio.get_running_loop().time() >= conn.state.get("expires_at", float("inf")):
            conn.state["expired"] = True
            conn.writer.close()
            return
        await conn.respond(header, {"throttle_time_ms": body["generation_id"], "error_code": 0})

    return handler


def reauth_after(monkeypatch: pytest.MonkeyPatch, seconds: float) -> None:
    """Re-authenticate ``seconds`` after each authentication (instead of 85-95% of the
    session lifetime), for tests that need to know when."""
    monkeypatch.setattr(connection_module, "reauth_delay", lambda lifetime_ms: seconds)


def test_reauthentication_comes_at_85_to_95_percent_of_the_session_lifetime() -> None:
    delays = [connection_module.reauth_delay(10_000) for _ in range(2000)]
    assert all(8.5 <= d <= 9.5 for d in delays)
    # Spread over the window (connections opened together do not re-authenticate together).
    assert min(delays) < 8.6 and max(delays) > 9.4
    assert connection_module.REAUTH_WINDOW == (0.85, 0.95)


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256"])
async def test_reauthenticates_on_the_same_connection_before_each_session_ends(
    broker: ScriptedBroker, mechanism: str
) -> None:
    # Without re-authentication the broker closes the connection at the first request
    # after 0.8 s.
    sasl_broker(broker, ["PLAIN", "SCRAM-SHA-256"], lifetime_ms=800)
    broker.on(HEARTBEAT, session_heartbeat())
    conn = await open_conn(broker, security=sasl_config(mechanism), request_timeout_ms=2000)
    try:
        loop = asyncio.get_running_loop()
        end = loop.time() + 2.0  # 2.5 session lifetimes
        generation = 0
        while loop.time() < end:
            # Three requests in flight at a time, whenever the re-authentication comes.
            futures = [conn.request(HEARTBEAT, heartbeat(generation + i)) for i in range(3)]
            answers = await asyncio.gather(*futures)
            assert [a["throttle_time_ms"] for a in answers] == [generation + i for i in range(3)]
            generation += 3
            await asyncio.sleep(0.005)
        assert not conn.closed
        assert len(broker.connections) == 1
        server = broker.connections[0]
        assert "expired" not in server.state
        # One re-authentication per 680-760 ms: 2 in 2 s, each a SaslHandshake (the
        # last one may still be under way).
        handshakes = len(broker.seen(SASL_HANDSHAKE))
        assert conn.reauthentications == 2
        assert handshakes - 1 - conn.reauthentications in (0, 1)
        assert {b["mechanism"] for _, b in broker.seen(SASL_HANDSHAKE)} == {mechanism}
        if mechanism == "PLAIN":  # the same principal every time
            assert server.state["principals"] == [b"alice"] * (1 + conn.reauthentications)
    finally:
        conn.close()


async def test_reauthentication_lets_in_flight_requests_finish_and_holds_new_ones(
    broker: ScriptedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    reauth_after(monkeypatch, 0.5)
    sasl_broker(broker, ["PLAIN"], lifetime_ms=5000)
    # The broker answers a connection's requests in order: heartbeat 0 (slow) first.
    broker.on(HEARTBEAT, session_heartbeat(slow={0: 0.5}))
    conn = await open_conn(broker, security=sasl_config("PLAIN"))
    try:
        await asyncio.sleep(0.3)
        in_flight = conn.request(HEARTBEAT, heartbeat(0))  # answered at 0.8 s
        await asyncio.sleep(0.35)  # re-authenticating since 0.5 s
        # Re-authenticating: the SaslHandshake went out with heartbeat 0 still in flight
        # (KIP-368 lets it), and new requests wait, written nowhere.
        assert conn.in_flight_count == 2
        held = [conn.request(HEARTBEAT, heartbeat(g)) for g in range(1, 6)]
        assert conn.queued_count == 5
        answers = await asyncio.gather(in_flight, *held)
        assert [a["throttle_time_ms"] for a in answers] == [0, 1, 2, 3, 4, 5]
        keys = [h.api_key for h, _ in broker.requests]
        assert keys == [
            int(ApiKey.API_VERSIONS),
            SASL_HANDSHAKE,
            SASL_AUTHENTICATE,
            HEARTBEAT,
            SASL_HANDSHAKE,
            SASL_AUTHENTICATE,
            *[HEARTBEAT] * 5,
        ]
        assert [b["generation_id"] for _, b in broker.seen(HEARTBEAT)] == [0, 1, 2, 3, 4, 5]
        assert conn.reauthentications == 1 and not conn.closed
        assert len(broker.connections) == 1
    finally:
        conn.close()


def slow_reauth_handshake(broker: ScriptedBroker, delay: float | None) -> None:
    """The broker answers a re-authentication's SaslHandshake after ``delay`` s (never
    with None), so that requests made meanwhile wait for it."""
    original = broker.handlers[SASL_HANDSHAKE]

    async def handshake(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        if "exchanges" in conn.state:
            if delay is None:
                return
            await asyncio.sleep(delay)
        await original(conn, header, body)

    broker.on(SASL_HANDSHAKE, handshake)


async def test_refused_reauthentication_fails_what_waited_typed_and_closes(
    broker: ScriptedBroker, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    reauth_after(monkeypatch, 0.2)
    sasl_broker(broker, ["PLAIN"], lifetime_ms=5000, refuse_from=2)
    slow_reauth_handshake(broker, 0.4)
    broker.on(HEARTBEAT, session_heartbeat())
    conn = await open_conn(broker, security=sasl_config("PLAIN"), request_timeout_ms=3000)
    await asyncio.sleep(0.3)  # re-authenticating from 0.2 s to 0.6 s
    loop = asyncio.get_running_loop()
    started = loop.time()
    with caplog.at_level("WARNING", logger="aiokafka_lite.connection"):
        waiting = conn.request(HEARTBEAT, heartbeat(1))
        with pytest.raises(errors.AuthenticationFailedError, match="re-authentication failed"):
            await waiting
    assert loop.time() - started < 1.5  # at the refusal, not at a timeout (3 s)
    assert conn.closed and "Invalid username or password" in (conn.close_reason or "")
    assert any("re-authentication" in r.getMessage() for r in caplog.records)
    # What comes next fails the same way, at once (the client then reconnects).
    with pytest.raises(errors.AuthenticationFailedError):
        await conn.send(HEARTBEAT, heartbeat(2))
    assert [b["generation_id"] for _, b in broker.seen(HEARTBEAT)] == []


async def test_unanswered_reauthentication_ends_within_the_request_timeout(
    broker: ScriptedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    reauth_after(monkeypatch, 0.2)
    sasl_broker(broker, ["PLAIN"], lifetime_ms=1000)
    slow_reauth_handshake(broker, None)
    broker.on(HEARTBEAT, session_heartbeat())
    conn = await open_conn(broker, security=sasl_config("PLAIN"), request_timeout_ms=500)
    await asyncio.sleep(0.25)
    loop = asyncio.get_running_loop()
    started = loop.time()
    with pytest.raises((errors.KafkaConnectionError, errors.KafkaTimeoutError)):
        await conn.send(HEARTBEAT, heartbeat(1))
    assert loop.time() - started < 0.6
    assert conn.closed


async def test_no_session_lifetime_no_reauthentication(
    broker: ScriptedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    reauth_after(monkeypatch, 0.05)  # would re-authenticate at once if it were armed
    sasl_broker(broker, ["PLAIN"], lifetime_ms=0)
    broker.on(HEARTBEAT, session_heartbeat())
    conn = await open_conn(broker, security=sasl_config("PLAIN"))
    try:
        await asyncio.sleep(0.2)
        assert (await conn.send(HEARTBEAT, heartbeat(7)))["throttle_time_ms"] == 7
        assert len(broker.seen(SASL_HANDSHAKE)) == 1
        assert conn.reauthentications == 0
    finally:
        conn.close()


async def test_closing_the_connection_cancels_the_reauthentication(
    broker: ScriptedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    reauth_after(monkeypatch, 0.1)
    sasl_broker(broker, ["PLAIN"], lifetime_ms=1000)
    conn = await open_conn(broker, security=sasl_config("PLAIN"))
    conn.close()
    await asyncio.sleep(0.25)
    assert len(broker.seen(SASL_HANDSHAKE)) == 1
    assert conn.reauthentications == 0


class _CountingProvider:
    """Hands out a new token on every call, as a provider of short-lived tokens does."""

    def __init__(self) -> None:
        self.calls = 0

    async def token(self) -> str:
        self.calls += 1
        return f"good-token-{self.calls}"


async def test_oauthbearer_reauthentication_uses_a_fresh_token(
    broker: ScriptedBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    reauth_after(monkeypatch, 0.1)
    sasl_broker(broker, ["OAUTHBEARER"], lifetime_ms=1000)
    broker.on(HEARTBEAT, session_heartbeat())
    provider = _CountingProvider()
    security = SecurityConfig(
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="OAUTHBEARER",
        sasl_oauth_token_provider=provider,
    )
    conn = await open_conn(broker, security=security)
    try:
        await asyncio.sleep(0.15)
        assert (await conn.send(HEARTBEAT, heartbeat(3)))["throttle_time_ms"] == 3
        assert conn.reauthentications >= 1
        tokens = broker.connections[0].state["tokens"]
        assert tokens[:2] == [
            b"n,,\x01auth=Bearer good-token-1\x01\x01",
            b"n,,\x01auth=Bearer good-token-2\x01\x01",
        ]
        assert len(broker.connections) == 1
    finally:
        conn.close()


# --- TLS ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    require_tool("openssl", "apt-get install openssl")  # in CI (CI=true) a failure, not a skip
    pki = make_pki(tmp_path_factory.mktemp("tls"), hostnames=("localhost",), ips=("127.0.0.1",))
    return {
        "ca": pki.ca_cert,
        "other_ca": pki.other_ca_cert,
        "cert": pki.server_cert,
        "key": pki.server_key,
    }


@pytest.fixture
async def tls_broker(tls_files: dict[str, Path]) -> AsyncIterator[ScriptedBroker]:
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(tls_files["cert"], tls_files["key"])
    server = ScriptedBroker(ssl_context=server_ctx)
    server.on(HEARTBEAT, echo_heartbeat())
    await server.start()
    yield server
    await server.stop()


async def test_tls_with_trusted_ca(tls_broker: ScriptedBroker, tls_files: dict[str, Path]) -> None:
    security = SecurityConfig(
        security_protocol="SSL", ssl_context=create_ssl_context(cafile=str(tls_files["ca"]))
    )
    for host in ("127.0.0.1", "localhost"):
        conn = await connect(host, tls_broker.port, security=security)
        try:
            assert (await conn.send(HEARTBEAT, heartbeat(5)))["throttle_time_ms"] == 5
            assert "SSL" in repr(conn)
        finally:
            conn.close()
            await conn.wait_closed()


async def test_tls_untrusted_ca_fails(
    tls_broker: ScriptedBroker, tls_files: dict[str, Path]
) -> None:
    security = SecurityConfig(
        security_protocol="SSL",
        ssl_context=create_ssl_context(cafile=str(tls_files["other_ca"])),
    )
    with pytest.raises(errors.KafkaConnectionError, match="certificate verification failed"):
        await connect("127.0.0.1", tls_broker.port, security=security)


async def test_tls_hostname_mismatch_fails(
    tls_broker: ScriptedBroker, tls_files: dict[str, Path]
) -> None:
    context = create_ssl_context(cafile=str(tls_files["ca"]))
    security = SecurityConfig(
        security_protocol="SSL", ssl_context=context, ssl_server_hostname="kafka.example.com"
    )
    with pytest.raises(errors.KafkaConnectionError, match="certificate verification failed"):
        await connect("127.0.0.1", tls_broker.port, security=security)
    # check_hostname=False still verifies the chain but accepts any name.
    relaxed = SecurityConfig(
        security_protocol="SSL",
        ssl_context=create_ssl_context(cafile=str(tls_files["ca"]), check_hostname=False),
        ssl_server_hostname="kafka.example.com",
    )
    conn = await connect("127.0.0.1", tls_broker.port, security=relaxed)
    conn.close()
    await conn.wait_closed()


async def test_sasl_over_tls(tls_broker: ScriptedBroker, tls_files: dict[str, Path]) -> None:
    sasl_broker(tls_broker, ["SCRAM-SHA-256"])
    security = SecurityConfig(
        security_protocol="SASL_SSL",
        ssl_context=create_ssl_context(cafile=str(tls_files["ca"])),
        sasl_mechanism="SCRAM-SHA-256",
        sasl_plain_username="alice",
        sasl_plain_password="alice-secret",
    )
    conn = await connect("localhost", tls_broker.port, security=security)
    try:
        assert (await conn.send(HEARTBEAT, heartbeat(6)))["throttle_time_ms"] == 6
    finally:
        conn.close()
        await conn.wait_closed()


# --- the response size cap, and peers that are not Kafka ---------------------------------

DESCRIBE_CONFIGS = int(ApiKey.DESCRIBE_CONFIGS)
MIB = 1024 * 1024
HTTP_ANSWER = (
    b"HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 11\r\n\r\nBad Request"
)
TLS_ALERT = bytes.fromhex("15 03 03 00 02 02 46")  # fatal alert: protocol_version
TLS_SERVER_HELLO = bytes.fromhex("16 03 03 00 7a 02 00 00 76 03 03") + bytes(32)


class RawPeer:
    """A TCP server that answers the client's first bytes with fixed bytes and then
    keeps the connection open, so the client's error can only come from those bytes."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.port = 0
        self._server: asyncio.Server | None = None
        self._writers: list[asyncio.StreamWriter] = []

    async def __aenter__(self) -> RawPeer:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            self._writers.append(writer)
            try:
                await reader.read(1)
                writer.write(self.answer)
                await writer.drain()
                await reader.read()  # until the client hangs up
            except ConnectionError:
                pass
            finally:
                writer.close()

        self._server = await asyncio.start_server(serve, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        for writer in self._writers:
            writer.close()
        self._server.close()
        await self._server.wait_closed()


@pytest.mark.parametrize(
    ("kind", "answer"),
    [("HTTP", HTTP_ANSWER), ("TLS", TLS_ALERT), ("TLS", TLS_SERVER_HELLO)],
    ids=["http", "tls-alert", "tls-handshake"],
)
async def test_a_peer_answering_http_or_tls_is_named_at_once(kind: str, answer: bytes) -> None:
    async with RawPeer(answer) as peer:
        start = time.monotonic()
        with pytest.raises(errors.NotAKafkaBrokerError) as info:
            await connect("127.0.0.1", peer.port, request_timeout_ms=30000)
        elapsed = time.monotonic() - start
    message = str(info.value)
    assert f"127.0.0.1:{peer.port}" in message
    assert f"answered with {kind}, not Kafka" in message
    assert "wrong port? security_protocol is PLAINTEXT" in message
    assert isinstance(info.value, errors.KafkaConnectionError)
    assert elapsed < 1.0  # the request timeout is 30 s


async def test_client_start_fails_fast_when_no_bootstrap_server_is_kafka() -> None:
    from aiokafka_lite.client import KafkaClient

    async with RawPeer(HTTP_ANSWER) as http, RawPeer(TLS_ALERT) as tls:
        client = KafkaClient(
            [f"127.0.0.1:{http.port}", f"127.0.0.1:{tls.port}"], request_timeout_ms=30000
        )
        start = time.monotonic()
        try:
            with pytest.raises(errors.NoBrokersAvailableError) as info:
                await client.start()
        finally:
            await client.close()
        elapsed = time.monotonic() - start
    message = str(info.value)
    assert "no bootstrap server is a Kafka broker" in message
    assert f"127.0.0.1:{http.port} closed: the peer answered with HTTP, not Kafka" in message
    assert f"127.0.0.1:{tls.port} closed: the peer answered with TLS, not Kafka" in message
    assert isinstance(info.value.__cause__, errors.NotAKafkaBrokerError)
    assert elapsed < 5.0  # not the 30 s request timeout


async def test_plaintext_to_a_real_tls_listener_says_what_may_be_wrong(
    tls_files: dict[str, Path],
) -> None:
    # An OpenSSL listener given plaintext closes without a word (no alert to recognise).
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(tls_files["cert"], tls_files["key"])

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_ctx)
    port = server.sockets[0].getsockname()[1]
    try:
        start = time.monotonic()
        with pytest.raises(errors.KafkaConnectionError) as info:
            await connect("127.0.0.1", port, request_timeout_ms=30000)
        elapsed = time.monotonic() - start
    finally:
        server.close()
        await server.wait_closed()
    message = str(info.value)
    assert "before answering ApiVersions (wrong port? security_protocol is PLAINTEXT)" in message
    assert elapsed < 2.0


async def test_a_first_response_with_a_foreign_correlation_id_is_not_kafka(
    broker: ScriptedBroker,
) -> None:
    async def wrong_id(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        bogus = RequestHeader(header.api_key, header.api_version, header.correlation_id + 7)
        await conn.respond(bogus, api_versions_body())

    broker.on(int(ApiKey.API_VERSIONS), wrong_id)
    with pytest.raises(
        errors.NotAKafkaBrokerError,
        match=r"something other than Kafka: its first response carries correlation id 8, "
        r"not 1 \(wrong port\? security_protocol is PLAINTEXT\)",
    ):
        await open_conn(broker)


async def test_a_first_response_claiming_2_gib_is_not_kafka() -> None:
    async with RawPeer(struct.pack(">i", 2**31 - 1) + bytes(64)) as peer:
        start = time.monotonic()
        with pytest.raises(errors.NotAKafkaBrokerError, match="claims 2147483647 bytes"):
            await connect("127.0.0.1", peer.port, receive_message_max_bytes=2**31 - 1)
        assert time.monotonic() - start < 1.0


def _describe_configs_frame(header: RequestHeader, version: int, size: int) -> bytes:
    """A DescribeConfigs answer whose size prefix says exactly ``size``."""
    value_len = size

    def build(n: int) -> bytes:
        result = {
            "error_code": 0,
            "error_message": None,
            "resource_type": 2,
            "resource_name": "t",
            "configs": [{"name": "big", "value": "x" * n}],
        }
        return ServerConn.frame(header, {"throttle_time_ms": 0, "results": [result]}, version)

    for _ in range(4):
        frame = build(value_len)
        if len(frame) - 4 == size:
            return frame
        value_len += size - (len(frame) - 4)
    raise AssertionError(f"cannot build a {size}-byte frame")


async def test_a_response_above_receive_message_max_bytes_fails_typed_and_named(
    broker: ScriptedBroker,
) -> None:
    limit = 1 * MIB
    sizes = [limit, limit + 1]

    async def answer(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        frame = _describe_configs_frame(header, header.api_version, sizes.pop(0))
        conn.writer.write(frame)
        await conn.writer.drain()

    broker.on(DESCRIBE_CONFIGS, answer)
    broker.on(HEARTBEAT, swallow)
    conn = await open_conn(broker, receive_message_max_bytes=limit)
    # Exactly the limit is accepted ...
    result = await conn.send(DESCRIBE_CONFIGS, {"resources": []})
    assert len(result["results"][0]["configs"][0]["value"]) > limit - 100
    # ... one byte more is not: the connection closes. The answer is the oldest
    # request's (a broker answers in order): only it fails with ResponseTooLargeError,
    # the requests behind it as on any closed connection (retriable), naming why.
    too_large = conn.request(DESCRIBE_CONFIGS, {"resources": []})
    pending = conn.request(HEARTBEAT, heartbeat(1))
    with pytest.raises(errors.ResponseTooLargeError) as info:
        await too_large
    message = str(info.value)
    assert f"127.0.0.1:{broker.port}" in message
    assert f"claims {limit + 1} bytes, more than receive_message_max_bytes ({limit})" in message
    assert conn.closed
    for later in (pending, conn.request(HEARTBEAT, heartbeat(2))):
        with pytest.raises(errors.KafkaConnectionError, match="receive_message_max_bytes") as info:
            await later
        assert not isinstance(info.value, errors.ResponseTooLargeError)


async def test_a_negative_frame_size_is_a_protocol_error(broker: ScriptedBroker) -> None:
    async def negative(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        conn.writer.write(struct.pack(">i", -5) + b"abc")
        await conn.writer.drain()

    broker.on(HEARTBEAT, negative)
    conn = await open_conn(broker)
    with pytest.raises(
        errors.KafkaProtocolError,
        match=r"invalid size -5 \(a valid one is 4 to 104857600 bytes, "
        r"the receive_message_max_bytes setting\)",
    ) as info:
        await conn.send(HEARTBEAT, heartbeat(1))
    assert not isinstance(info.value, errors.NotAKafkaBrokerError)
    assert conn.closed


def test_a_refused_size_allocates_nothing() -> None:
    """The cap is checked on the size prefix: not a byte of the claimed frame is held."""
    refused: list[tuple[int, bytes, int]] = []

    class Sink(_FrameSink):
        def _on_bad_frame_size(self, size: int, prefix: bytes, limit: int) -> None:
            refused.append((size, prefix, limit))
            self.closed = True

    sink = Sink()

    async def make() -> Any:
        return connection_module._KafkaProtocol(sink, 100 * MIB)  # type: ignore[arg-type]

    protocol = asyncio.run(make())
    _feed(protocol, struct.pack(">i", 2**31 - 1) + bytes(1000))
    assert refused == [(2**31 - 1, b"\x7f\xff\xff\xff", 100 * MIB)]
    assert protocol._parts is None
    assert _held(protocol) == connection_module._READ_BUFFER_SIZE


async def test_a_large_response_arriving_in_pieces_is_read_whole(broker: ScriptedBroker) -> None:
    size = 6 * MIB + 12345

    async def dribble(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        frame = _describe_configs_frame(header, header.api_version, size)
        for i in range(0, len(frame), 50_000):
            conn.writer.write(frame[i : i + 50_000])
            await conn.writer.drain()
            await asyncio.sleep(0)

    broker.on(DESCRIBE_CONFIGS, dribble)
    broker.on(HEARTBEAT, echo_heartbeat())
    conn = await open_conn(broker)
    try:
        for _ in range(2):
            result = await conn.send(DESCRIBE_CONFIGS, {"resources": []})
            value = result["results"][0]["configs"][0]["value"]
            assert value == "x" * len(value) and len(value) > size - 100
            # The stream stays in step: the next (small) response is read as well.
            assert (await conn.send(HEARTBEAT, heartbeat(7)))["throttle_time_ms"] == 7
    finally:
        conn.close()


_REPO = Path(__file__).resolve().parents[2]
_CLAIM_CHILD = """
import asyncio, json, sys, time
from aiokafka_lite import errors
from aiokafka_lite.connection import connect

def status(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise LookupError(field)

async def main(port):
    conn = await connect("127.0.0.1", port, receive_message_max_bytes=2**31 - 1)
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset the peak RSS (VmHWM) to the current RSS
    start = status("VmRSS")
    began = time.monotonic()
    try:
        await conn.send(12, {"group_id": "g", "generation_id": 1, "member_id": "m"})
        outcome = "answered"
    except errors.KafkaError as exc:
        outcome = f"{type(exc).__name__}: {exc}"
    print(json.dumps({"start": start, "peak": status("VmHWM"), "outcome": outcome,
                      "seconds": time.monotonic() - began}))

asyncio.run(main(int(sys.argv[1])))
"""


@pytest.mark.skipif(not Path("/proc/self/clear_refs").exists(), reason="needs Linux /proc")
async def test_a_peer_claiming_2_gib_costs_what_it_sends(broker: ScriptedBroker) -> None:
    """Even with the cap at its largest, a peer claiming a 2 GiB response and sending
    16 MiB of it makes the client's peak RSS grow by about what it sent, not by the
    2 GiB it claimed. Measured in a fresh process by the kernel's high-water mark
    (VmHWM, reset when the request is sent), so no allocation can slip between samples.
    """
    sent = 16 * MIB

    async def claim(conn: ServerConn, header: RequestHeader, body: dict[str, Any]) -> None:
        conn.writer.write(struct.pack(">ii", 2**31 - 1, header.correlation_id))
        chunk = bytes(64 * 1024)
        for _ in range(sent // len(chunk)):
            conn.writer.write(chunk)
            await conn.writer.drain()
        conn.writer.close()

    broker.on(HEARTBEAT, claim)
    child = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _CLAIM_CHILD,
        str(broker.port),
        cwd=_REPO,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(child.communicate(), 60)
    assert child.returncode == 0, err.decode()
    report = json.loads(out)
    assert "closed by the broker" in report["outcome"], report
    grown = report["peak"] - report["start"]
    assert grown <= 64 * MIB, f"peak RSS grew by {grown / MIB:.1f} MiB"
