"""The cluster client against the real broker: bootstrap, metadata, topics, coordinators."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient as PeerAdmin

from aiokafka_lite import errors
from aiokafka_lite.client import BOOTSTRAP_REFUSED_TIMEOUT_MS, KafkaClient
from aiokafka_lite.protocol.api import ApiKey
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing import FaultProxy, find_free_port


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
