"""Racks against the real broker seen as a cluster of several nodes in several racks
(``_cluster_front``): follower fetching (KIP-392) and rack-aware assignment (KIP-881).

For follower fetching the front has the leader and one replica, and the leader's Fetch
answers name the replica and carry no records: records reach the consumer through the
replica only once it follows the redirect, and through the leader only once it falls
back.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from aiokafka_lite.consumer import Consumer
from aiokafka_lite.producer import Producer
from aiokafka_lite.structs import TopicPartition
from tests.integration._cluster_front import (
    FAST_RECOVERY,
    ClusterFront,
    cluster_front,
    read_values,
)

_NOT_LEADER_OR_FOLLOWER = 6
_OFFSET_OUT_OF_RANGE = 1
REPLICA = 4242
RACK = "rack-b"


@asynccontextmanager
async def two_nodes(bootstrap_servers: str) -> AsyncIterator[ClusterFront]:
    """The leader and one replica (in rack RACK), which the leader redirects to."""
    async with cluster_front(bootstrap_servers, {"replica": (REPLICA, RACK)}) as front:
        front.redirect_to = REPLICA
        yield front


async def produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    async with Producer(bootstrap_servers=bootstrap, linger_ms=2) as producer:
        for value in values:
            await producer.send(topic, value, partition=0)
        await producer.flush(30)


def follower_consumer(front: ClusterFront, tp: TopicPartition, **kwargs: Any) -> Consumer:
    kwargs.setdefault("metadata_max_age_ms", 60000)
    consumer = Consumer(
        bootstrap_servers=front.bootstrap,
        client_rack=RACK,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=50,
        **FAST_RECOVERY,
        **kwargs,
    )
    consumer.assign([tp])
    return consumer


async def test_reads_from_the_replica_the_leader_names(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name)
    tp = TopicPartition(topic_name, 0)
    values = [b"r%d" % i for i in range(300)]
    await produce(bootstrap_servers, topic_name, values)
    async with two_nodes(bootstrap_servers) as front:
        async with follower_consumer(front, tp) as consumer:
            assert await read_values(consumer, 300) == values
            assert consumer.highwater(tp) == 300
            more = [b"m%d" % i for i in range(50)]
            await produce(bootstrap_servers, topic_name, more)
            assert await read_values(consumer, 50) == more
        # Every record came through the replica: the leader only redirected.
        assert front.served == {"leader": 0, "replica": front.served["replica"]}
        assert front.served["replica"] >= 2
        # The lease (metadata_max_age_ms, a minute here) kept the consumer there.
        assert front.fetches["leader"] == 1
        assert front.rack_ids == {RACK}


async def test_goes_back_to_the_leader_when_the_lease_ends(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name)
    tp = TopicPartition(topic_name, 0)
    async with two_nodes(bootstrap_servers) as front:
        async with follower_consumer(front, tp, metadata_max_age_ms=300) as consumer:
            sent: list[bytes] = []
            got: list[bytes] = []
            for round_ in range(6):
                batch = [b"%d-%d" % (round_, i) for i in range(20)]
                await produce(bootstrap_servers, topic_name, batch)
                sent += batch
                got += await read_values(consumer, 20)
                await asyncio.sleep(0.2)
            assert got == sent
        # Back to the leader after each lease, which named the replica again.
        assert front.fetches["leader"] >= 3
        assert front.served["leader"] == 0


async def test_falls_back_to_the_leader_when_the_replica_is_gone(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name)
    tp = TopicPartition(topic_name, 0)
    first = [b"a%d" % i for i in range(100)]
    await produce(bootstrap_servers, topic_name, first)
    async with two_nodes(bootstrap_servers) as front:
        async with follower_consumer(front, tp) as consumer:
            assert await read_values(consumer, 100) == first
            assert front.served["leader"] == 0
            # The replica goes away; the leader stops redirecting.
            replica = front.proxies["replica"]
            replica.refuse(True)
            replica.drop_connections()
            front.redirect_to = None
            second = [b"b%d" % i for i in range(100)]
            await produce(bootstrap_servers, topic_name, second)
            assert await read_values(consumer, 100) == second
        assert front.served["leader"] >= 1


@pytest.mark.parametrize(
    "code", [_NOT_LEADER_OR_FOLLOWER, _OFFSET_OUT_OF_RANGE], ids=["not_leader", "out_of_range"]
)
async def test_a_replica_error_sends_the_consumer_back_to_the_leader(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str], code: int
) -> None:
    create_topic(topic_name)
    tp = TopicPartition(topic_name, 0)
    first = [b"a%d" % i for i in range(50)]
    await produce(bootstrap_servers, topic_name, first)
    async with two_nodes(bootstrap_servers) as front:
        async with follower_consumer(front, tp) as consumer:
            assert await read_values(consumer, 50) == first
            leader_fetches = front.fetches["leader"]
            front.fetch_errors["replica"] = (code, 1)
            second = [b"b%d" % i for i in range(50)]
            await produce(bootstrap_servers, topic_name, second)
            # Nothing lost, nothing read twice: an out-of-range answer from a replica is
            # not a reason to reset the position (auto_offset_reset=earliest would
            # replay the first records).
            assert await read_values(consumer, 50) == second
            assert await consumer.getmany(timeout_ms=300) == {}
            assert await consumer.position(tp) == 100
        assert front.fetch_errors["replica"] == (code, 0)
        # The leader was asked again, and named the replica again.
        assert front.fetches["leader"] > leader_fetches
        assert front.served["leader"] == 0


# --- rack-aware assignment (KIP-881) --------------------------------------------------


async def test_group_members_get_the_partitions_of_their_racks(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """Partitions 0 and 3 have a replica in rack a, 1 and 2 in rack b: plain ranges would
    give each of two members one partition of the other rack, whichever sorts first."""
    create_topic(topic_name, 4)
    node_a, node_b = 4243, 4244

    def layout(partition: int, real: int) -> tuple[int, list[int]]:
        return real, [real, node_a if partition in (0, 3) else node_b]

    nodes = {"a": (node_a, "a"), "b": (node_b, "b")}
    async with cluster_front(bootstrap_servers, nodes, layout) as front:
        consumers = {
            rack: Consumer(
                topic_name,
                bootstrap_servers=front.bootstrap,
                group_id=f"g-{topic_name}",
                client_rack=rack,
                partition_assignment_strategy=["range"],
                session_timeout_ms=10000,
                heartbeat_interval_ms=300,
                auto_offset_reset="earliest",
                # Nothing is read, so nothing to commit at stop: a final commit racing the
                # other member's LeaveGroup meets noida's NOIDA_COMMIT_IN_REBALANCE.
                enable_auto_commit=False,
            )
            for rack in ("a", "b")
        }
        await asyncio.gather(*(c.start() for c in consumers.values()))
        try:
            deadline = time.monotonic() + 40
            while not all(len(c.assignment()) == 2 for c in consumers.values()):
                assert time.monotonic() < deadline, [c.health() for c in consumers.values()]
                await asyncio.gather(*(c.getmany(timeout_ms=100) for c in consumers.values()))
            assert consumers["a"].assignment() == {TopicPartition(topic_name, p) for p in (0, 3)}
            assert consumers["b"].assignment() == {TopicPartition(topic_name, p) for p in (1, 2)}
        finally:
            await asyncio.gather(*(c.stop() for c in consumers.values()))
