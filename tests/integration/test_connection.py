"""BrokerConnection against a real Kafka-protocol broker (``bootstrap_servers`` fixture)."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator
from typing import Any

import pytest

from aiokafka_lite import errors
from aiokafka_lite.connection import BrokerConnection, connect
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.api import ApiKey

from ._helpers import ScriptedBroker

METADATA = int(ApiKey.METADATA)
CREATE_TOPICS = int(ApiKey.CREATE_TOPICS)


def _first_address(bootstrap_servers: str) -> tuple[str, int]:
    host, _, port = bootstrap_servers.split(",")[0].strip().rpartition(":")
    return host.strip("[]"), int(port)


@pytest.fixture
async def conn(bootstrap_servers: str) -> AsyncIterator[BrokerConnection]:
    host, port = _first_address(bootstrap_servers)
    connection = await connect(host, port, client_id="it-connection", request_timeout_ms=15000)
    yield connection
    connection.close()
    await connection.wait_closed()


def _metadata_request(topics: list[str] | None) -> dict[str, Any]:
    return {
        "topics": None if topics is None else [{"name": t} for t in topics],
        "allow_auto_topic_creation": False,
        "include_cluster_authorized_operations": False,
        "include_topic_authorized_operations": False,
    }


async def test_connect_negotiates_api_versions(conn: BrokerConnection) -> None:
    for key in (ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.API_VERSIONS):
        assert int(key) in conn.api_versions, key
        low, high = conn.api_versions[int(key)]
        assert 0 <= low <= high
    assert conn.version_for(METADATA) >= 1
    assert not conn.closed and conn.in_flight_count == 0


async def test_metadata(conn: BrokerConnection) -> None:
    response = await conn.send(METADATA, _metadata_request(None))
    assert response["brokers"], response
    for broker in response["brokers"]:
        assert broker["node_id"] >= 0 and broker["host"] and broker["port"] > 0
    assert isinstance(response["topics"], list)


async def test_create_topic_then_metadata(conn: BrokerConnection) -> None:
    topic = f"t-conn-{uuid.uuid4().hex[:10]}"
    created = await conn.send(
        CREATE_TOPICS,
        {
            "topics": [
                {
                    "name": topic,
                    "num_partitions": 3,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 10000,
            "validate_only": False,
        },
    )
    [result] = created["topics"]
    assert result["name"] == topic
    assert result["error_code"] == 0, result

    deadline = time.monotonic() + 15
    while True:
        response = await conn.send(METADATA, _metadata_request([topic]))
        topics = {t["name"]: t for t in response["topics"]}
        meta = topics.get(topic)
        if meta is not None and meta["error_code"] == 0 and len(meta["partitions"]) == 3:
            break
        assert time.monotonic() < deadline, f"topic {topic} never appeared: {response}"
        await asyncio.sleep(0.2)
    assert sorted(p["partition_index"] for p in meta["partitions"]) == [0, 1, 2]

    # Creating it again is a per-topic error in the body, not a connection error.
    again = await conn.send(
        CREATE_TOPICS,
        {"topics": [{"name": topic, "num_partitions": 1, "replication_factor": 1}]},
    )
    assert again["topics"][0]["error_code"] == 36  # TOPIC_ALREADY_EXISTS
    assert not conn.closed


async def test_concurrent_requests(conn: BrokerConnection) -> None:
    results = await asyncio.gather(
        *(conn.send(METADATA, _metadata_request(None)) for _ in range(50))
    )
    assert len(results) == 50
    assert all(r["brokers"] for r in results)
    futures = [conn.request(METADATA, _metadata_request(None)) for _ in range(20)]
    assert conn.in_flight_count + conn.queued_count >= 1
    assert all(r["brokers"] for r in await asyncio.gather(*futures))
    assert conn.in_flight_count == 0


async def test_two_connections_and_close(bootstrap_servers: str) -> None:
    host, port = _first_address(bootstrap_servers)
    first = await connect(host, port, node_id=0)
    second = await connect(host, port)
    try:
        assert first.api_versions == second.api_versions
        pending = first.request(METADATA, _metadata_request(None))
        first.close("test closes it")
        with pytest.raises(errors.KafkaConnectionError, match="test closes it"):
            await pending
        assert (await second.send(METADATA, _metadata_request(None)))["brokers"]
    finally:
        first.close()
        second.close()
        await first.wait_closed()
        await second.wait_closed()


async def test_send_waiting_for_a_slot_on_a_pushed_back_socket_ends_at_its_timeout(
    proxied_broker: tuple[Any, str],
) -> None:
    # The one in-flight slot is held by a ~20 MB request the broker does not read (the
    # proxy's black hole stops reading), so the socket pushes back. A send() queued
    # behind it waited for the buffer to drain until the request ahead timed out and
    # closed the connection (7.5 s for timeout_ms=500 with 8 s ahead), not its own 500 ms.
    proxy, bootstrap = proxied_broker
    host, port = _first_address(bootstrap)
    conn = await connect(host, port, max_in_flight=1, request_timeout_ms=5000)
    proxy.blackhole()
    names = [f"t{i:0100d}" for i in range(200_000)]
    ahead = conn.request(METADATA, _metadata_request(names))
    try:
        for _ in range(100):
            if conn._write_paused:
                break
            await asyncio.sleep(0.02)
        assert conn._write_paused and conn.in_flight_count == 1
        started = time.monotonic()
        with pytest.raises(errors.KafkaTimeoutError, match="waiting for an in-flight slot"):
            await conn.send(METADATA, _metadata_request([]), timeout_ms=300)
        assert time.monotonic() - started < 1.5
        assert not conn.closed  # nothing of it was written: the stream is intact
    finally:
        proxy.clear_blackhole()
        conn.close()
        await asyncio.gather(ahead, return_exceptions=True)
        await conn.wait_closed()


async def test_a_response_too_large_fails_only_its_own_request() -> None:
    """A response larger than receive_message_max_bytes closes the connection. It is
    the answer to the oldest request in flight (a broker answers a connection's
    requests in order): only that one fails with ResponseTooLargeError, which says
    asking again is pointless (the fetcher stops its partitions until a seek). The
    others failed with it too: a Fetch behind a too large Metadata answer stopped its
    partitions, blamed for a response it never got."""
    broker = ScriptedBroker()
    broker.topics = {f"a-topic-with-a-long-name-{i:05d}": 3 for i in range(2000)}
    broker.scripts[ApiKey.HEARTBEAT] = lambda h, b, n: None  # held
    await broker.start()
    conn = await connect("127.0.0.1", broker.port, receive_message_max_bytes=64 * 1024)
    try:
        metadata = conn.request(bodies.METADATA, _metadata_request(None))  # type: ignore[arg-type]
        heartbeat = conn.request(
            bodies.HEARTBEAT,
            {"group_id": "g", "generation_id": 1, "member_id": "m", "group_instance_id": None},
        )
        with pytest.raises(errors.ResponseTooLargeError):
            await metadata
        with pytest.raises(errors.KafkaConnectionError, match="more than") as info:
            await heartbeat
        assert not isinstance(info.value, errors.ResponseTooLargeError)
    finally:
        conn.close()
        await broker.stop()
