"""Leader failover on the real broker seen as a cluster (``_cluster_front``): the
partitions are led by node ``a``; mid-stream ``a`` goes down (connections cut, new ones
refused) and the metadata names node ``b`` as the new leader, as after a controller
election. Both nodes are the same real broker behind two proxies, so the new leader has
everything the old one wrote, producer state included, as a real in-sync follower would.

The producer (idempotent, the default) must re-route to ``b`` and deliver every record
exactly once and in order per partition; a consumer must follow the move and read every
record exactly once.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

import pytest

from aiokafka_lite import errors
from aiokafka_lite.consumer import Consumer
from aiokafka_lite.producer import Producer
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing.pytest_plugin import ExpectDeviation
from tests.integration._cluster_front import (
    FAST_RECOVERY,
    ClusterFront,
    cluster_front,
    read_values,
)

NODE_A, NODE_B = 4261, 4262
NODES = {"a": (NODE_A, None), "b": (NODE_B, None)}


def led_by(node: int) -> Callable[[int, int], tuple[int, list[int]]]:
    return lambda partition, real: (node, [node, NODE_B if node == NODE_A else NODE_A])


def front_consumer(front: ClusterFront, topic: str) -> Consumer:
    """A consumer of partitions 0 and 1 of ``topic``, through the front."""
    consumer = Consumer(
        bootstrap_servers=front.bootstrap,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=50,
        **FAST_RECOVERY,
    )
    consumer.assign([TopicPartition(topic, p) for p in (0, 1)])
    return consumer


def fail_over(front: ClusterFront) -> None:
    """Node a goes down; the metadata now names b."""
    front.layout = led_by(NODE_B)
    front.proxies["a"].refuse(True)
    front.proxies["a"].drop_connections()


# serial: on a busy machine the batch in flight at the failover is more often written and
# then retried, and Tansu answers such a retry DUPLICATE_SEQUENCE_NUMBER with offset -1
# (a known deviation, see test_chaos.py): measured once with the suite on 4 workers, and
# once in the serial phase with two CPU hogs beside it.
@pytest.mark.serial
async def test_producer_follows_the_new_leader_exactly_once(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    create_topic(topic_name, 2)
    async with cluster_front(bootstrap_servers, NODES, led_by(NODE_A)) as front:
        async with Producer(
            bootstrap_servers=front.bootstrap,
            linger_ms=5,
            max_batch_size=4096,
            metadata_max_age_ms=60000,
            **FAST_RECOVERY,
        ) as producer:
            futures: list[Any] = []
            for i in range(4000):
                futures.append(await producer.send(topic_name, b"%d" % i, partition=i % 2))
                if i % 100 == 99:
                    await asyncio.sleep(0.005)
                if i == 2000:
                    fail_over(front)
            await producer.flush(60)
        results = [f.result() for f in futures]  # raises if any record failed
        # Both nodes took produce requests: a before the failover, b after it.
        assert front.proxies["a"].stats.bytes_upstream > 0
        assert front.proxies["b"].stats.bytes_upstream > 0
    # The log: each partition holds every record once, in the order sent.
    async with Consumer(bootstrap_servers=bootstrap_servers, auto_offset_reset="earliest") as c:
        tps = [TopicPartition(topic_name, p) for p in (0, 1)]
        c.assign(tps)
        got: dict[int, list[Any]] = {0: [], 1: []}
        deadline = time.monotonic() + 30
        while sum(map(len, got.values())) < 4000:
            assert time.monotonic() < deadline, {p: len(v) for p, v in got.items()}
            for tp, records in (await c.getmany(timeout_ms=200)).items():
                got[tp.partition].extend(r.value for r in records)
        for p in (0, 1):
            assert got[p] == [b"%d" % i for i in range(p, 4000, 2)]
    # The acknowledgements: each record's offset is its place in the log. Only when a
    # batch was written and then retried can Tansu's deviation show (an ack of -1), so it
    # is expected then alone; the log above holds every record once either way.
    acked = {p: [r.offset for r in results if r.partition == p] for p in (0, 1)}
    retried = any(-1 in offsets for offsets in acked.values())
    with (
        expect_deviation(
            "tansu",
            "Tansu 0.6.0 answers a retried batch it holds DUPLICATE_SEQUENCE_NUMBER with "
            "base offset -1 (Kafka: that batch's offsets)",
            match=r"At index \d+ diff: -1 != \d+",
        )
        if retried
        else contextlib.nullcontext()
    ):
        for p in (0, 1):
            assert acked[p] == list(range(2000))


async def test_consumer_follows_the_new_leader(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 2)
    values = {p: [b"%d-%d" % (p, i) for i in range(300)] for p in (0, 1)}
    async with Producer(bootstrap_servers=bootstrap_servers, linger_ms=2) as producer:
        for p, vs in values.items():
            for v in vs[:150]:
                await producer.send(topic_name, v, partition=p)
        await producer.flush(30)
        async with cluster_front(bootstrap_servers, NODES, led_by(NODE_A)) as front:
            async with front_consumer(front, topic_name) as consumer:
                got: dict[int, list[Any]] = {0: [], 1: []}
                deadline = time.monotonic() + 30
                failed_over = False
                while sum(map(len, got.values())) < 600:
                    assert time.monotonic() < deadline, (got, consumer.health())
                    if not failed_over and sum(map(len, got.values())) >= 200:
                        fail_over(front)
                        failed_over = True
                        for p, vs in values.items():
                            for v in vs[150:]:
                                await producer.send(topic_name, v, partition=p)
                        await producer.flush(30)
                    for tp, records in (await consumer.getmany(timeout_ms=200)).items():
                        got[tp.partition].extend(r.value for r in records)
                assert got == values
                assert front.fetches["b"] > 0


async def test_group_follows_its_coordinator_to_another_node(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """The group coordinator moves from node a (which goes down) to node b, as when the
    broker leading the group's offsets partition fails: the member finds the new
    coordinator, stays in the group, and its commits land there."""
    create_topic(topic_name, 2)
    group = f"g-{topic_name}"
    tps = [TopicPartition(topic_name, p) for p in (0, 1)]
    async with Producer(bootstrap_servers=bootstrap_servers, linger_ms=2) as producer:

        async def produce(prefix: bytes) -> list[bytes]:
            values = [b"%s%d" % (prefix, i) for i in range(100)]
            for i, v in enumerate(values):
                await producer.send(topic_name, v, partition=i % 2)
            await producer.flush(30)
            return values

        first = await produce(b"a")
        async with cluster_front(bootstrap_servers, NODES) as front:
            front.coordinator = "a"
            async with Consumer(
                topic_name,
                bootstrap_servers=front.bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                session_timeout_ms=10000,
                heartbeat_interval_ms=300,
                **FAST_RECOVERY,
            ) as consumer:
                assert sorted(await read_values(consumer, 100, 40)) == sorted(first)
                await consumer.commit(timeout_ms=10000)
                coordinator_bytes = front.proxies["a"].stats.bytes_upstream
                assert coordinator_bytes > 0
                generation = consumer.health().generation_id

                front.coordinator = "b"
                front.proxies["a"].refuse(True)
                front.proxies["a"].drop_connections()
                second = await produce(b"b")
                assert sorted(await read_values(consumer, 100, 40)) == sorted(second)
                await consumer.commit(timeout_ms=15000)
                assert front.proxies["b"].stats.bytes_upstream > 0
                # The member kept its place: no rebalance for a coordinator move.
                assert consumer.health().generation_id == generation
                assert await consumer.getmany(timeout_ms=300) == {}
    async with Consumer(bootstrap_servers=bootstrap_servers, group_id=group) as check:
        committed = {tp: await check.committed(tp) for tp in tps}
    assert committed == {tp: 100 for tp in tps}


async def test_transactions_follow_their_coordinator_to_another_node(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """A transaction commits through coordinator a; a goes down and b takes over; the
    next transaction finds b and commits there."""
    create_topic(topic_name, 1)
    async with cluster_front(bootstrap_servers, NODES) as front:
        front.coordinator = "a"
        async with Producer(
            bootstrap_servers=front.bootstrap,
            transactional_id=f"txn-{topic_name}",
            **FAST_RECOVERY,
        ) as producer:
            async with producer.transaction():
                first = [await producer.send(topic_name, b"a%d" % i) for i in range(50)]
            assert front.proxies["a"].stats.bytes_upstream > 0
            front.coordinator = "b"
            front.proxies["a"].refuse(True)
            front.proxies["a"].drop_connections()
            async with producer.transaction():
                second = [await producer.send(topic_name, b"b%d" % i) for i in range(50)]
            assert front.proxies["b"].stats.bytes_upstream > 0
    # Each transaction's records, then its commit marker (an offset of its own).
    assert [f.result().offset for f in first] == list(range(50))
    assert [f.result().offset for f in second] == list(range(51, 101))
    tp = TopicPartition(topic_name, 0)
    async with Consumer(
        bootstrap_servers=bootstrap_servers,
        auto_offset_reset="earliest",
        isolation_level="read_committed",
    ) as consumer:
        consumer.assign([tp])
        got = await read_values(consumer, 100, 20)
    assert got == [b"a%d" % i for i in range(50)] + [b"b%d" % i for i in range(50)]


def split_leaders(partition: int, real: int) -> tuple[int, list[int]]:
    """Partition 0 led by node a, partition 1 by node b."""
    leader = NODE_A if partition == 0 else NODE_B
    return leader, [leader]


async def test_a_stalled_node_holds_up_only_its_own_partitions(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """Node b takes requests and never answers: records for partition 1 fail with a
    timeout after delivery_timeout_ms, while those for partition 0 (node a) are
    delivered all along, not held behind them."""
    create_topic(topic_name, 2)
    async with cluster_front(bootstrap_servers, NODES, split_leaders) as front:
        async with Producer(
            bootstrap_servers=front.bootstrap,
            linger_ms=5,
            delivery_timeout_ms=3000,
            **(FAST_RECOVERY | {"request_timeout_ms": 2000}),
        ) as producer:
            await producer.send_and_wait(topic_name, b"warm-up", partition=1)
            front.proxies["b"].blackhole()
            start = time.monotonic()
            stuck = [await producer.send(topic_name, b"b%d" % i, partition=1) for i in range(50)]
            for i in range(50):
                meta = await asyncio.wait_for(
                    await producer.send(topic_name, b"a%d" % i, partition=0), 2
                )
                assert meta.offset == i
            fast = time.monotonic() - start
            for fut in stuck:
                with pytest.raises(errors.KafkaTimeoutError):
                    await asyncio.wait_for(fut, 10)
            failed_after = time.monotonic() - start
            front.proxies["b"].clear_blackhole()
    assert fast < 2.0, fast
    assert 2.0 < failed_after < 8.0, failed_after


async def test_a_stalled_node_does_not_stop_the_consumer_reading_the_others(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 2)
    async with Producer(bootstrap_servers=bootstrap_servers, linger_ms=2) as producer:
        for i in range(100):
            await producer.send(topic_name, b"%d" % i, partition=i % 2)
        await producer.flush(30)
    async with cluster_front(bootstrap_servers, NODES, split_leaders) as front:
        front.proxies["b"].blackhole()
        async with front_consumer(front, topic_name) as consumer:
            # Partition 0's records arrive while node b holds every request.
            assert await read_values(consumer, 50, 15) == [b"%d" % i for i in range(0, 100, 2)]
            front.proxies["b"].clear_blackhole()
            assert await read_values(consumer, 50, 30) == [b"%d" % i for i in range(1, 100, 2)]


async def test_a_stalled_node_holds_up_no_other_partitions_seek(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """Node b never answers, so the start position of partition 1 (led by b) is looked
    up until request_timeout_ms: a seek_to_end / seek_to_beginning of partition 0 (led
    by node a) meanwhile gets its position from a at once, not after b's lookup gives
    up (the consumer looked positions up one lookup at a time: 2 s, then a timeout)."""
    create_topic(topic_name, 2)
    async with Producer(bootstrap_servers=bootstrap_servers) as producer:
        for i in range(6):  # one record a batch: Tansu's ListOffsets(latest) is right then
            await producer.send_and_wait(topic_name, b"%d" % i, partition=i % 2)
    p0 = TopicPartition(topic_name, 0)
    async with cluster_front(bootstrap_servers, NODES, split_leaders) as front:
        front.proxies["b"].blackhole()
        async with front_consumer(front, topic_name) as consumer:
            assert await consumer.position(p0, timeout_ms=3000) == 0
            start = time.monotonic()
            await consumer.seek_to_end(p0, timeout_ms=2000)
            assert await consumer.position(p0) == 3
            await consumer.seek_to_beginning(p0, timeout_ms=2000)
            assert await consumer.position(p0) == 0
            took = time.monotonic() - start
            front.proxies["b"].clear_blackhole()
    assert took < 1.0, took
