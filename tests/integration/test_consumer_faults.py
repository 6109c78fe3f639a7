"""Faults through a proxy in front of the broker: a connection cut mid-consumption and
restored (the group recovers and the health view tells what happened), and a broker that
stays down (``getone(timeout_ms=...)`` and ``stop()`` keep their bounds and say why).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

from aiokafka import AIOKafkaProducer

from aiokafka_lite import errors
from aiokafka_lite.consumer import Consumer, GroupState
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing import FaultProxy


async def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int) -> None:
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=5)
    await producer.start()
    try:
        for i, value in enumerate(values):
            await producer.send(topic, value, partition=i % partitions)
        await producer.flush()
    finally:
        await producer.stop()


def group_consumer(bootstrap: str, topic: str, **kwargs: Any) -> Consumer:
    return Consumer(
        topic,
        bootstrap_servers=bootstrap,
        group_id=f"g-{topic}",
        auto_offset_reset="earliest",
        session_timeout_ms=10000,
        heartbeat_interval_ms=300,
        fetch_max_wait_ms=100,
        request_timeout_ms=3000,
        connect_timeout_ms=1000,
        retry_backoff_ms=100,
        reconnect_backoff_max_ms=300,
        metadata_max_age_ms=5000,
        **kwargs,
    )


async def collect(
    consumer: Consumer, values: set[bytes], expected: set[bytes], timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while not expected <= values:
        assert time.monotonic() < deadline, (
            f"missing {len(expected - values)} records; health: {consumer.health()}"
        )
        batch = await consumer.getmany(timeout_ms=200)
        for records in batch.values():
            values.update(r.value for r in records)


async def test_connection_cut_and_restored_mid_consumption(
    proxied_broker: tuple[FaultProxy, str], topic_name: str, create_topic: Callable[..., str]
) -> None:
    proxy, bootstrap = proxied_broker
    create_topic(topic_name, 2, bootstrap=bootstrap)
    first = [b"a%d" % i for i in range(200)]
    await produce(bootstrap, topic_name, first, 2)
    consumer = group_consumer(bootstrap, topic_name)
    seen: set[bytes] = set()
    await consumer.start()
    try:
        await collect(consumer, seen, set(first[:100]), 20)
        assert consumer.health().healthy

        proxy.refuse(True)
        proxy.drop_connections()
        await asyncio.sleep(3)
        down = consumer.health()
        assert not down.healthy, "the outage is not visible in the health view"
        assert down.fetch_failing_since is not None and down.last_fetch_error
        assert any("fetch" in p or "coordinator" in p for p in down.problems), down.problems

        proxy.refuse(False)
        second = [b"b%d" % i for i in range(100)]
        await produce(bootstrap, topic_name, second, 2)
        await collect(consumer, seen, set(first) | set(second), 30)

        deadline = time.monotonic() + 15
        while True:
            health = consumer.health()
            if health.healthy and health.group_state is GroupState.STABLE:
                break
            assert time.monotonic() < deadline, f"did not recover: {health}"
            await asyncio.sleep(0.1)
        assert health.last_fetch_time is not None and health.last_fetch_time > time.time() - 10
        assert health.fetch_failing_since is None
        assert health.last_fetch_error  # the outage stays on record
        assert health.assigned_partitions == {
            TopicPartition(topic_name, 0),
            TopicPartition(topic_name, 1),
        }
    finally:
        await consumer.stop(timeout_ms=5000)


async def test_broker_down_getone_and_stop_keep_their_bounds(
    proxied_broker: tuple[FaultProxy, str], topic_name: str, create_topic: Callable[..., str]
) -> None:
    proxy, bootstrap = proxied_broker
    create_topic(topic_name, 1, bootstrap=bootstrap)
    await produce(bootstrap, topic_name, [b"x%d" % i for i in range(10)], 1)
    consumer = group_consumer(bootstrap, topic_name, auto_commit_interval_ms=60000)
    await consumer.start()
    stopped = False
    try:
        seen: set[bytes] = set()
        await collect(consumer, seen, {b"x%d" % i for i in range(10)}, 20)

        proxy.refuse(True)
        proxy.drop_connections()
        await asyncio.sleep(0.5)
        started = time.monotonic()
        try:
            await consumer.getone(timeout_ms=2000)
        except errors.KafkaTimeoutError as exc:
            message = str(exc)
        else:
            raise AssertionError("getone() returned a record from a dead broker")
        assert time.monotonic() - started < 2.0 + 1.0
        assert "no record within 2000 ms" in message
        assert "fail" in message or "coordinator" in message, message

        started = time.monotonic()
        stop_error: BaseException | None = None
        try:
            await consumer.stop(timeout_ms=3000)
        except errors.KafkaError as exc:
            stop_error = exc
        stopped = True
        assert time.monotonic() - started < 3.0 + 1.5
        # The consumed offsets could not be committed: stop says so.
        assert stop_error is not None, "stop() hid the failed final commit"
        assert consumer.health().closed
    finally:
        if not stopped:
            await consumer.stop(timeout_ms=1000)
