"""The test broker helpers work: brokers start and answer, the fault proxy does what it says."""

from __future__ import annotations

import asyncio
import os
import socket
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from aiokafka_lite.testing import (
    BrokerStartError,
    EmbeddedBroker,
    FaultProxy,
    async_probe_api_versions,
    find_free_port,
    probe_api_versions,
)
from aiokafka_lite.testing.probe import _api_versions_request as api_versions_request

ProxyAndBootstrap = tuple[FaultProxy, str]


def split(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host, int(port)


async def open_via(address: str) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    return await asyncio.open_connection(*split(address))


async def api_versions_round_trip(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, timeout: float = 5.0
) -> bytes:
    """Send ApiVersions v0 on an open connection; return the response frame."""
    writer.write(api_versions_request(7, "fixture-test"))
    await writer.drain()

    async def read() -> bytes:
        (size,) = struct.unpack(">i", await reader.readexactly(4))
        return await reader.readexactly(size)

    return await asyncio.wait_for(read(), timeout)


def metadata(bootstrap: str) -> Any:
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=10)


# --- the session broker -----------------------------------------------------------


def test_session_broker_answers(bootstrap_servers: str, broker_kind: str) -> None:
    host, port = split(bootstrap_servers.split(",")[0])
    versions = probe_api_versions(host, port)
    assert 18 in versions  # ApiVersions
    assert 3 in versions  # Metadata
    md = metadata(bootstrap_servers)
    assert md.brokers, f"{broker_kind} returned no brokers"


def test_create_topic_produce_consume(
    bootstrap_servers: str, topic_name: str, create_topic: Any
) -> None:
    from confluent_kafka import Consumer, Producer, TopicPartition

    create_topic(topic_name, 3)
    md = metadata(bootstrap_servers)
    assert len(md.topics[topic_name].partitions) == 3

    producer = Producer({"bootstrap.servers": bootstrap_servers})
    for i in range(5):
        producer.produce(topic_name, value=b"v%d" % i, partition=1)
    assert producer.flush(15) == 0

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap_servers,
            "group.id": topic_name,
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.assign([TopicPartition(topic_name, 1, 0)])
        got: list[bytes] = []
        deadline = time.monotonic() + 15
        while len(got) < 5 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
        assert got == [b"v%d" % i for i in range(5)]
    finally:
        consumer.close()


def test_topic_names_are_unique(topic_name: str) -> None:
    assert topic_name.startswith("t-test_topic_names_are_unique-")
    assert len(topic_name) < 249


# --- embedded brokers ---------------------------------------------------------------


@pytest.mark.parametrize("kind", ["tansu", "noida"])
def test_embedded_broker_lifecycle(kind: str) -> None:
    broker = EmbeddedBroker(kind)
    with broker:
        assert broker.running
        pid = broker.pid
        assert pid is not None
        log_path = broker.log_path
        assert log_path is not None and log_path.exists()
        assert 18 in broker.api_versions
        md = metadata(broker.bootstrap_servers)
        assert [b.port for b in md.brokers.values()] == [broker.port]
    assert not broker.running
    assert not log_path.exists()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(OSError), socket.create_connection(("127.0.0.1", broker.port), timeout=1):
        pass


async def test_embedded_broker_async() -> None:
    async with EmbeddedBroker("tansu") as broker:
        versions = await async_probe_api_versions("127.0.0.1", broker.port)
        assert 0 in versions  # Produce
    assert not broker.running


def test_broker_start_failure_shows_its_log() -> None:
    broker = EmbeddedBroker("tansu", extra_args=["--no-such-flag"], startup_timeout=10)
    with pytest.raises(BrokerStartError) as info:
        broker.start()
    text = str(info.value)
    assert "no-such-flag" in text  # the broker's own complaint, from its log
    assert "exit code" in text
    assert not broker.running
    broker.keep_logs = False
    broker.stop()


def test_failed_start_in_a_with_block_leaves_no_data_directory() -> None:
    """A with-block whose start fails never reaches __exit__; the start cleans up itself
    (the log stays for a post-mortem, as its error message names it)."""
    broker = EmbeddedBroker("noida", extra_args=["--no-such-flag"], startup_timeout=10)
    command = broker.command()  # makes the data directory the start will use
    data_dir = Path(command[command.index("--data-dir") + 1])
    assert data_dir.is_dir()
    with pytest.raises(BrokerStartError), broker:
        pass
    assert not broker.running
    assert not data_dir.exists()
    assert broker.log_path is not None and broker.log_path.exists()
    broker.keep_logs = False
    broker.stop()


def test_start_on_a_port_another_broker_holds() -> None:
    """The readiness probe must not take another listener's answer for the new broker's:
    with a broker already on the port, the start fails (a chosen port) or moves to a
    free port (a port picked by the helper), instead of reporting success while the new
    process dies on "address already in use"."""
    with EmbeddedBroker("tansu") as first:
        taken = first.port
        second = EmbeddedBroker("tansu", port=taken)
        with pytest.raises(BrokerStartError, match="already in use"), second:
            pass
        assert not second.running
        third = EmbeddedBroker("tansu")
        third.port = taken  # as if another process took the picked port meanwhile
        with third:
            assert third.port != taken
            assert third.pid is not None and third.running
            assert probe_api_versions("127.0.0.1", third.port)


def test_noida_cannot_advertise_another_port() -> None:
    with pytest.raises(ValueError):
        EmbeddedBroker("noida", advertised_port=find_free_port())


def test_noida_restart_keeps_data(topic_name: str) -> None:
    from confluent_kafka import Producer

    with EmbeddedBroker("noida") as broker:
        producer = Producer({"bootstrap.servers": broker.bootstrap_servers})
        producer.produce(topic_name, value=b"kept")
        assert producer.flush(15) == 0
        broker.restart()
        assert topic_name in metadata(broker.bootstrap_servers).topics


# --- the fault proxy ------------------------------------------------------------------


def test_proxy_forwards_all_client_traffic(proxied_broker: ProxyAndBootstrap) -> None:
    proxy, bootstrap = proxied_broker
    md = metadata(bootstrap)
    # The broker advertises the proxy, so the client's second connection goes through it too.
    assert [f"{b.host}:{b.port}" for b in md.brokers.values()] == [bootstrap]
    stats = proxy.stats
    assert stats.connections_accepted >= 1
    assert stats.bytes_upstream > 0 and stats.bytes_downstream > 0


async def test_drop_connections(proxied_broker: ProxyAndBootstrap) -> None:
    proxy, bootstrap = proxied_broker
    reader, writer = await open_via(bootstrap)
    await api_versions_round_trip(reader, writer)
    assert proxy.drop_connections() == 1
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError)):
        await api_versions_round_trip(reader, writer)
    writer.close()
    assert proxy.stats.connections_cut == 1
    # New connections work as before.
    reader, writer = await open_via(bootstrap)
    await api_versions_round_trip(reader, writer)
    writer.close()


async def test_blackhole_for_a_while(proxied_broker: ProxyAndBootstrap) -> None:
    proxy, bootstrap = proxied_broker
    reader, writer = await open_via(bootstrap)
    await api_versions_round_trip(reader, writer)
    proxy.blackhole(1.0)
    assert proxy.blackholed
    started = time.monotonic()
    with pytest.raises(asyncio.TimeoutError):
        await async_probe_api_versions(*split(bootstrap), timeout=0.3)
    # A request sent during the black hole is answered once it ends.
    frame = await api_versions_round_trip(reader, writer, timeout=5.0)
    assert frame[:4] == struct.pack(">i", 7)
    assert time.monotonic() - started >= 0.9
    assert not proxy.blackholed
    writer.close()


async def test_blackhole_until_cleared(proxied_broker: ProxyAndBootstrap) -> None:
    proxy, bootstrap = proxied_broker
    proxy.blackhole()
    with pytest.raises(asyncio.TimeoutError):
        await async_probe_api_versions(*split(bootstrap), timeout=0.5)
    assert proxy.stats.bytes_upstream == 0
    proxy.clear_blackhole()
    await async_probe_api_versions(*split(bootstrap), timeout=5)


async def test_refuse(proxied_broker: ProxyAndBootstrap) -> None:
    proxy, bootstrap = proxied_broker
    reader, writer = await open_via(bootstrap)
    await api_versions_round_trip(reader, writer)  # accepted by the proxy, not just the kernel
    proxy.refuse(True)
    assert proxy.refusing
    with pytest.raises(ConnectionRefusedError):
        await open_via(bootstrap)
    await api_versions_round_trip(reader, writer)  # existing connections carry on
    proxy.refuse(False)
    await async_probe_api_versions(*split(bootstrap), timeout=5)
    writer.close()


async def test_latency(proxied_broker: ProxyAndBootstrap) -> None:
    proxy, bootstrap = proxied_broker
    reader, writer = await open_via(bootstrap)
    await api_versions_round_trip(reader, writer)
    started = time.monotonic()
    await api_versions_round_trip(reader, writer)
    baseline = time.monotonic() - started
    proxy.set_latency(150, jitter_ms=20)
    started = time.monotonic()
    await api_versions_round_trip(reader, writer)
    slowed = time.monotonic() - started
    # 150 ms (+/- 20) each way.
    assert 0.25 <= slowed < 1.5, (baseline, slowed)
    assert slowed > baseline + 0.2
    proxy.set_latency(0)
    started = time.monotonic()
    await api_versions_round_trip(reader, writer)
    assert time.monotonic() - started < 0.2
    writer.close()


async def test_drop_after_bytes_cuts_a_response(proxied_broker: ProxyAndBootstrap) -> None:
    proxy, bootstrap = proxied_broker
    reader, writer = await open_via(bootstrap)
    proxy.drop_after_bytes(10, "downstream")
    writer.write(api_versions_request(7, "cut-me"))
    await writer.drain()
    received = b""
    with pytest.raises(ConnectionError):
        while True:
            chunk = await asyncio.wait_for(reader.read(1024), 5)
            if not chunk:
                raise ConnectionResetError("EOF")
            received += chunk
    assert len(received) == 10
    assert proxy.stats.connections_cut == 1
    writer.close()
    # The fault fires once; the next connection is whole.
    await async_probe_api_versions(*split(bootstrap), timeout=5)


async def test_hook_sees_and_cuts(proxied_broker: ProxyAndBootstrap) -> None:
    proxy, bootstrap = proxied_broker
    seen: list[tuple[int, str, int]] = []

    def hook(conn: int, direction: str, data: bytes) -> bytes | None:
        seen.append((conn, direction, len(data)))
        return None if direction == "upstream" and len(seen) > 2 else data

    proxy.set_hook(hook)
    await async_probe_api_versions(*split(bootstrap), timeout=5)
    assert [d for _, d, _ in seen] == ["upstream", "downstream"]
    with pytest.raises((ConnectionError, asyncio.IncompleteReadError, asyncio.TimeoutError)):
        await async_probe_api_versions(*split(bootstrap), timeout=5)
    proxy.reset()
    await async_probe_api_versions(*split(bootstrap), timeout=5)


async def test_proxy_on_the_running_loop_and_dead_upstream() -> None:
    dead_port = find_free_port()
    async with FaultProxy("127.0.0.1", dead_port) as proxy:
        reader, writer = await open_via(proxy.address)
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
        assert proxy.stats.upstream_failures == 1
    with pytest.raises(OSError):
        await open_via(proxy.address)
