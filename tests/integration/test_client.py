"""The cluster client against the real broker: bootstrap, metadata, topics, coordinators."""

from __future__ import annotations

import asyncio
import time
import uuid

import pytest
from confluent_kafka.admin import AdminClient as PeerAdmin

from aiokafka_lite import errors
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.protocol.api import ApiKey
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing import find_free_port


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
