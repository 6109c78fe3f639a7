"""The cluster client against the real broker: bootstrap, metadata, topics, coordinators."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient as PeerAdmin

from aiokafka_lite import errors
from aiokafka_lite.client import BOOTSTRAP_REFUSED_TIMEOUT_MS, KafkaClient
from aiokafka_lite.protocol import bodies
from aiokafka_lite.protocol.api import ApiKey, RequestHeader
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing import FaultProxy, find_free_port

from ._helpers import AdvertisingBroker, ScriptedBroker


async def _create_topic(client: KafkaClient, name: str, partitions: int) -> dict[str, object]:
    controller = client.cluster.controller_id
    node = controller if controller >= 0 else client.least_loaded_node()
    response = await client.send(
        node,
        ApiKey.CREATE_TOPICS,
        {
            "topics": [
                {
                    "name": name,
                    "num_partitions": partitions,
                    "replication_factor": 1,
                    "assignments": [],
                    "configs": [],
                }
            ],
            "timeout_ms": 10000,
            "validate_only": False,
        },
    )
    (result,) = response["topics"]
    return result


async def test_bootstrap_negotiates_versions_and_loads_brokers(bootstrap_servers: str) -> None:
    async with KafkaClient(bootstrap_servers) as client:
        assert client.cluster.brokers, "metadata lists no broker"
        node = next(iter(client.cluster.brokers))
        conn = await client.get_connection(node)
        for api in (ApiKey.METADATA, ApiKey.PRODUCE, ApiKey.FETCH, ApiKey.API_VERSIONS):
            low, high = conn.api_versions[api]
            assert low <= conn.version_for(api) <= high


async def test_metadata_matches_confluent_kafka(bootstrap_servers: str, topic_name: str) -> None:
    async with KafkaClient(bootstrap_servers) as client:
        created = await _create_topic(client, topic_name, 3)
        assert created["error_code"] == 0, created
        partitions = await client.wait_for_metadata(topic_name, 10000)
        assert partitions == {0, 1, 2}
        ours = await client.refresh_metadata([topic_name])

    peer = PeerAdmin({"bootstrap.servers": bootstrap_servers})
    theirs = peer.list_topics(topic=topic_name, timeout=10)
    assert {b.id: (b.host, b.port) for b in theirs.brokers.values()} == {
        b.node_id: (b.host, b.port) for b in ours.brokers.values()
    }
    assert theirs.cluster_id == ours.cluster_id
    assert theirs.controller_id == ours.controller_id
    peer_topic = theirs.topics[topic_name]
    our_topic = ours.topics[topic_name]
    assert set(peer_topic.partitions) == set(our_topic.partitions)
    for number, p in peer_topic.partitions.items():
        mine = our_topic.partitions[number]
        assert (p.leader, list(p.replicas), list(p.isrs)) == (
            mine.leader,
            list(mine.replicas),
            list(mine.isr),
        )


async def test_create_and_delete_topic(bootstrap_servers: str, topic_name: str) -> None:
    # Auto-creation off, or the metadata lookup after the delete would create it again.
    async with KafkaClient(bootstrap_servers, allow_auto_create_topics=False) as client:
        assert (await _create_topic(client, topic_name, 2))["error_code"] == 0
        again = await _create_topic(client, topic_name, 2)
        assert errors.error_for_code(again["error_code"]).__class__.__name__ == (
            "TopicAlreadyExistsError"
        )
        await client.wait_for_metadata(topic_name, 10000)
        topic_id = client.cluster.topic_id(topic_name)
        response = await client.send(
            client.cluster.controller_id,
            ApiKey.DELETE_TOPICS,
            {
                "topic_names": [topic_name],
                "topics": [{"name": topic_name, "topic_id": topic_id or uuid.UUID(int=0)}],
                "timeout_ms": 10000,
            },
        )
        assert [r["error_code"] for r in response["responses"]] == [0]
        meta = await client.refresh_metadata([topic_name])
        assert meta.partitions_for_topic(topic_name) is None
        assert meta.topic_error(topic_name) == errors.UnknownTopicOrPartitionError.errno


async def test_leader_lookup_and_coordinator(bootstrap_servers: str, topic_name: str) -> None:
    async with KafkaClient(bootstrap_servers) as client:
        await _create_topic(client, topic_name, 1)
        await client.wait_for_metadata(topic_name, 10000)
        leader = client.cluster.leader_for(TopicPartition(topic_name, 0))
        assert leader in client.cluster.brokers
        coordinator = await client.find_coordinator(f"group-{topic_name}")
        assert coordinator in client.cluster.brokers or coordinator in client._extra_brokers


async def test_concurrent_requests_share_one_connection(bootstrap_servers: str) -> None:
    async with KafkaClient(bootstrap_servers) as client:
        node = client.least_loaded_node()
        results = await asyncio.gather(
            *(client.send(node, ApiKey.METADATA, {"topics": []}) for _ in range(50))
        )
        assert all(r["brokers"] for r in results)
        assert len([s for s in client._nodes.values() if s.conn is not None]) == 1


async def test_unknown_topic_without_auto_create_times_out(bootstrap_servers: str) -> None:
    async with KafkaClient(bootstrap_servers, allow_auto_create_topics=False) as client:
        with pytest.raises(errors.KafkaError) as info:
            await client.wait_for_metadata(f"absent-{uuid.uuid4().hex}", 1500)
        assert "absent-" in str(info.value)


async def test_closed_port_fails_fast_with_clear_message() -> None:
    port = find_free_port()
    started = time.monotonic()
    client = KafkaClient(f"127.0.0.1:{port}", request_timeout_ms=2000, connect_timeout_ms=500)
    with pytest.raises(errors.NoBrokersAvailableError) as info:
        await client.start()
    assert time.monotonic() - started < 5
    assert f"127.0.0.1:{port}" in str(info.value)
    assert client.closed


async def test_refused_bootstrap_fails_within_the_bound_naming_each_address() -> None:
    # Nothing listens at either address: start() stops after the short bound for
    # refusals, not after request_timeout_ms (30 s here), and names both addresses.
    ports = [find_free_port(), find_free_port()]
    client = KafkaClient([f"127.0.0.1:{p}" for p in ports])
    started = time.monotonic()
    with pytest.raises(errors.NoBrokersAvailableError) as info:
        await client.start()
    elapsed = time.monotonic() - started
    assert elapsed < BOOTSTRAP_REFUSED_TIMEOUT_MS / 1000 + 0.5, elapsed
    message = str(info.value)
    for port in ports:
        assert f"127.0.0.1:{port}: Connection refused" in message, message
    assert client.closed


async def test_unresolvable_bootstrap_host_fails_within_the_bound() -> None:
    client = KafkaClient("no-such-host.invalid:9092")
    started = time.monotonic()
    with pytest.raises(errors.NoBrokersAvailableError, match=r"no-such-host\.invalid:9092: cannot"):
        await client.start()
    assert time.monotonic() - started < BOOTSTRAP_REFUSED_TIMEOUT_MS / 1000 + 0.5


async def test_bootstrap_server_listening_within_the_bound_is_reached(
    proxied_broker: tuple[FaultProxy, str],
) -> None:
    # The bound is a short retry, not a single attempt: a broker that starts listening
    # a moment after start() was called is reached.
    proxy, bootstrap = proxied_broker
    proxy.refuse(True)
    asyncio.get_running_loop().call_later(0.8, proxy.refuse, False)
    async with KafkaClient(bootstrap) as client:
        assert client.cluster.brokers


async def test_running_client_outlasts_refusals_longer_than_the_bootstrap_bound(
    proxied_broker: tuple[FaultProxy, str],
) -> None:
    # The bound is start()'s only: a started client keeps retrying refused connections
    # for as long as its request allows.
    proxy, bootstrap = proxied_broker
    async with KafkaClient(bootstrap, request_timeout_ms=10_000) as client:
        proxy.refuse(True)
        proxy.drop_connections()
        await asyncio.sleep(0.1)
        refresh = asyncio.ensure_future(client.refresh_metadata())
        await asyncio.sleep(BOOTSTRAP_REFUSED_TIMEOUT_MS / 1000 + 1)
        assert not refresh.done()
        proxy.refuse(False)
        meta = await asyncio.wait_for(refresh, 10)
        assert meta.brokers


class _MovingCoordinator(ScriptedBroker):
    """Answers FindCoordinator with ``coordinator`` (node id, port; 0: this broker's)."""

    def __init__(self) -> None:
        super().__init__()
        self.coordinator = (self.NODE, 0)

    def _builtin(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any] | None:
        if header.api_key == ApiKey.FIND_COORDINATOR:
            node, port = self.coordinator
            entry = {
                "error_code": 0,
                "node_id": node,
                "host": "127.0.0.1",
                "port": port or self.port,
            }
            return {**entry, "coordinators": [{**entry, "key": body.get("key", "")}]}
        return super()._builtin(header, body)


async def test_coordinator_gets_a_connection_of_its_own_closed_when_it_moves() -> None:
    """A broker answers one request per connection at a time: coordinator requests (a
    JoinGroup it holds) go over a connection of their own, which is no broker of the
    metadata, and which is closed once the coordinator moved to another broker."""
    first, second = _MovingCoordinator(), ScriptedBroker()
    await first.start()
    await second.start()
    second.scripts[ApiKey.HEARTBEAT] = lambda h, body, n: {"throttle_time_ms": 0, "error_code": 0}
    try:
        async with KafkaClient(first.bootstrap) as client:
            data = await client.get_connection(first.NODE)
            node = await client.find_coordinator("g", dedicated=True)
            assert node != first.NODE and client.broker_of(node) == first.NODE
            dedicated = await client.get_connection(node)
            assert dedicated is not data and not data.closed
            assert (dedicated.host, dedicated.port) == ("127.0.0.1", first.port)
            assert set(client.cluster.brokers) == {first.NODE}
            assert {client.least_loaded_node() for _ in range(50)} == {first.NODE}
            # The plain lookup still names the broker.
            assert await client.find_coordinator("g") == first.NODE

            first.coordinator = (2, second.port)
            moved = await client.find_coordinator("g", dedicated=True)
            assert client.broker_of(moved) == 2 and moved != node
            heartbeat: bodies.HeartbeatRequest = {
                "group_id": "g",
                "generation_id": 1,
                "member_id": "m",
                "group_instance_id": None,
            }
            assert (await client.send(moved, bodies.HEARTBEAT, heartbeat))["error_code"] == 0
            assert second.calls[ApiKey.HEARTBEAT] == 1
            await asyncio.sleep(0)
            assert dedicated.closed, "the connection to the old coordinator stays open"
            assert not data.closed
            assert client.node_problem(moved) is None
    finally:
        await first.stop()
        await second.stop()


class _WithSecondBroker(ScriptedBroker):
    """Metadata names this broker (node 1) and node 2 at ``second_port``."""

    second_port = 0

    def _builtin(self, header: RequestHeader, body: dict[str, Any]) -> dict[str, Any] | None:
        answer = super()._builtin(header, body)
        if header.api_key == ApiKey.METADATA and answer is not None:
            answer["brokers"].append({"node_id": 2, "host": "127.0.0.1", "port": self.second_port})
        return answer


async def test_a_broker_that_lets_a_request_time_out_loses_its_other_connection_too() -> None:
    """The coordinator's connection and the data connection lead to one broker: when a
    request gets no answer within request_timeout_ms, the broker is not answering, and
    the requests on the other connection (a member's fetches, its heartbeat) fail then
    instead of each waiting out its own timeout; requests any broker can answer go
    elsewhere until it answers a handshake again (a member's FindCoordinator, sent to
    the hung broker, took another request timeout: the member's session expired). A
    caller's shorter bound running out says nothing about the broker: the other
    connection stays."""
    first, second = _WithSecondBroker(), ScriptedBroker()
    await second.start()
    first.second_port = second.port
    await first.start()
    first.scripts[ApiKey.HEARTBEAT] = lambda h, body, n: None  # hangs
    heartbeat: bodies.HeartbeatRequest = {
        "group_id": "g",
        "generation_id": 1,
        "member_id": "m",
        "group_instance_id": None,
    }
    try:
        async with KafkaClient(first.bootstrap, request_timeout_ms=600) as client:
            link_node = client.coordinator_node(1)
            data = await client.get_connection(1)
            link = await client.get_connection(link_node)
            with pytest.raises(errors.KafkaTimeoutError):
                await client.send(link_node, bodies.HEARTBEAT, heartbeat, timeout_ms=100)
            await asyncio.sleep(0.01)
            assert link.closed and not data.closed, "a caller's short bound closed both"
            link = await client.get_connection(link_node)
            other = await client.get_connection(2)
            held = asyncio.ensure_future(
                client.send(1, bodies.HEARTBEAT, heartbeat, timeout_ms=20000)
            )
            started = time.monotonic()
            with pytest.raises(errors.KafkaTimeoutError):
                await client.send(link_node, bodies.HEARTBEAT, heartbeat)
            with pytest.raises(errors.KafkaConnectionError, match="another connection"):
                await held
            assert time.monotonic() - started < 2, "the data connection's request waited on"
            assert link.closed and data.closed and not other.closed
            # No broker connected: the one whose reconnect backoff ends first would be
            # picked (1: its backoff is over), but 1 is out.
            await asyncio.sleep(0.3)
            other.close("the test")
            await asyncio.sleep(0.01)
            assert client.connection_delay(1) == 0 < client.connection_delay(2)
            assert {client.least_loaded_node() for _ in range(30)} == {2}
            # It answers a handshake again: back among the candidates.
            await client.get_connection(1)
            await client.get_connection(2)
            assert {client.least_loaded_node() for _ in range(60)} == {1, 2}
    finally:
        await first.stop()
        await second.stop()


async def test_every_known_broker_gone_falls_back_to_the_bootstrap_servers() -> None:
    """Every broker of the metadata is gone and the cluster answers again at the
    bootstrap address (redeployed: new node ids, new ports). Asking only the brokers
    metadata named, the client never learnt of the new ones: each refresh failed until
    its timeout, forever. It asks the bootstrap servers once every known broker failed."""
    front, old = AdvertisingBroker(), ScriptedBroker()
    await old.start()
    await front.start()
    front.advertised = [(7, old.port)]
    try:
        async with KafkaClient(
            front.bootstrap, request_timeout_ms=3000, reconnect_backoff_max_ms=200
        ) as client:
            assert set(client.cluster.brokers) == {7}
            await client.get_connection(7)
            await old.stop()
            front.advertised = [(1, front.port)]
            started = time.monotonic()
            meta = await client.refresh_metadata(timeout_ms=3000)
            assert set(meta.brokers) == {1}, meta
            assert time.monotonic() - started < 2
            # The new broker is reached by its own node id; no bootstrap connection stays.
            assert (await client.get_connection(1)).port == front.port
            assert all(node >= 0 for node in client._nodes)
    finally:
        await front.stop()
        await old.stop()


async def test_a_broker_at_a_new_address_is_reached_there() -> None:
    """Metadata moves node 2 to another address (a broker restarted elsewhere, its old
    address still answering): its open connection to the old address was kept, so
    every request for node 2 went on to the old address, forever."""
    front, old, new = AdvertisingBroker(), AdvertisingBroker(), AdvertisingBroker()
    for broker in (old, new, front):
        await broker.start()
    # Every broker answers the same metadata.
    advertised = [(1, front.port), (2, old.port)]
    front.advertised = old.advertised = new.advertised = advertised
    try:
        async with KafkaClient(front.bootstrap) as client:
            assert (await client.get_connection(2)).port == old.port
            advertised[1] = (2, new.port)
            await client.refresh_metadata(timeout_ms=3000)
            assert (await client.get_connection(2)).port == new.port
            assert client.connection_delay(2) == 0
    finally:
        for broker in (front, old, new):
            await broker.stop()


async def test_metadata_too_large_for_the_connection_is_raised_at_once() -> None:
    """Every topic's metadata is larger than receive_message_max_bytes: every broker
    sends the same answer, so asking again was pointless, and yet the refresh was
    retried (reconnecting each time) until the caller's timeout ran out with a
    KafkaTimeoutError that did not say why. It raises ResponseTooLargeError at once."""
    broker = ScriptedBroker()
    broker.topics = {f"a-topic-with-a-long-name-{i:05d}": 3 for i in range(2000)}
    await broker.start()
    try:
        async with KafkaClient(
            broker.bootstrap, request_timeout_ms=5000, receive_message_max_bytes=64 * 1024
        ) as client:
            client.track_all_topics()
            started = time.monotonic()
            with pytest.raises(errors.ResponseTooLargeError, match="receive_message_max_bytes"):
                await client.refresh_metadata()
            assert time.monotonic() - started < 1
    finally:
        await broker.stop()


async def test_a_connect_waiting_out_its_backoff_goes_to_the_address_metadata_names_then() -> None:
    """A connect attempt waits out the node's reconnect backoff first. It took the
    address before waiting: metadata moving the node meanwhile (the broker restarted
    elsewhere) was ignored, and the attempt went to the old, dead address."""
    front, new = AdvertisingBroker(), AdvertisingBroker()
    await front.start()
    await new.start()
    advertised = [(1, front.port), (2, find_free_port())]  # nothing listens there
    front.advertised = new.advertised = advertised
    try:
        async with KafkaClient(
            front.bootstrap, reconnect_backoff_ms=500, reconnect_backoff_max_ms=500
        ) as client:
            with pytest.raises(errors.KafkaConnectionError):
                await client.get_connection(2)
            waiting = asyncio.ensure_future(client.get_connection(2))
            await asyncio.sleep(0.05)
            advertised[1] = (2, new.port)
            await client.refresh_metadata(timeout_ms=3000)
            assert (await asyncio.wait_for(waiting, 3)).port == new.port
    finally:
        await front.stop()
        await new.stop()
