"""Faults through a proxy in front of the broker: a connection cut mid-consumption and
restored (the group recovers and the health view tells what happened), a broker that
stays down (``getone(timeout_ms=...)`` and ``stop()`` keep their bounds and say why), and
a coordinator that does not answer a JoinGroup (the errors and the health view name it).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
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
    """A group member with short timeouts; ``kwargs`` add to or replace them."""
    options: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "group_id": f"g-{topic}",
        "auto_offset_reset": "earliest",
        "session_timeout_ms": 10000,
        "heartbeat_interval_ms": 300,
        "fetch_max_wait_ms": 100,
        "request_timeout_ms": 3000,
        "connect_timeout_ms": 1000,
        "retry_backoff_ms": 100,
        "reconnect_backoff_max_ms": 300,
        "metadata_max_age_ms": 5000,
    }
    return Consumer(topic, **{**options, **kwargs})


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


def _swallow(api_key: int) -> Callable[[int, str, bytes], bytes]:
    """Proxy hook: requests of ``api_key`` never reach the broker (a coordinator gone
    silent for them); the other requests of a chunk go on.

    Kafka requests start with a 4-byte size and a 2-byte API key (JoinGroup is 11,
    FindCoordinator 10); a chunk holds whole small requests here (one client write each,
    several when the client wrote them together).
    """

    def hook(link_id: int, direction: str, data: bytes) -> bytes:
        if direction != "upstream":
            return data
        kept = bytearray()
        pos = 0
        while pos + 6 <= len(data):
            end = pos + 4 + int.from_bytes(data[pos : pos + 4], "big")
            if int.from_bytes(data[pos + 4 : pos + 6], "big") != api_key:
                kept += data[pos:end]
            pos = end
        return bytes(kept + data[pos:])

    return hook


_swallow_join_group = _swallow(11)


@contextlib.asynccontextmanager
async def member_behind_hook(
    proxied_broker: tuple[FaultProxy, str],
    topic: str,
    create_topic: Callable[..., str],
    hook: Callable[[int, str, bytes], bytes],
    **options: Any,
) -> AsyncIterator[Consumer]:
    """A started group member of a new one-partition ``topic``, its requests through the
    proxy with ``hook`` set; stopped (and the proxy reset) on the way out."""
    proxy, bootstrap = proxied_broker
    create_topic(topic, 1, bootstrap=bootstrap)
    proxy.set_hook(hook)
    consumer = group_consumer(bootstrap, topic, **options)
    await consumer.start()
    try:
        yield consumer
    finally:
        proxy.reset()
        await consumer.stop(timeout_ms=3000)


async def _commit_error(consumer: Consumer, tp: TopicPartition, timeout_ms: int) -> str:
    started = time.monotonic()
    try:
        await consumer.commit({tp: 0}, timeout_ms=timeout_ms)
    except errors.KafkaTimeoutError as exc:
        message = str(exc)
    else:
        raise AssertionError("commit succeeded while the coordinator was unreachable")
    assert time.monotonic() - started < timeout_ms / 1000 + 1.0
    return message


async def test_commit_while_the_coordinator_is_unreachable_names_it(
    proxied_broker: tuple[FaultProxy, str], topic_name: str, create_topic: Callable[..., str]
) -> None:
    """A commit that waits for a rebalance the coordinator does not answer (outage during
    a join) says which coordinator and what is wrong with it, not just "rebalancing"."""
    proxy = proxied_broker[0]
    tp = TopicPartition(topic_name, 0)
    async with member_behind_hook(
        proxied_broker, topic_name, create_topic, _swallow_join_group, enable_auto_commit=False
    ) as consumer:
        deadline = time.monotonic() + 15
        while consumer.health().coordinator_id is None:
            assert time.monotonic() < deadline, consumer.health()
            await asyncio.sleep(0.05)
        coordinator = consumer.health().coordinator_id
        assert consumer.health().group_state is GroupState.REBALANCING

        # The coordinator is connected but does not answer the JoinGroup.
        message = await _commit_error(consumer, tp, 1500)
        assert "did not finish rebalancing in time" in message, message
        assert f"coordinator node {coordinator} (" in message, message
        assert "has not answered for" in message and "JoinGroup" in message, message

        # Now it is gone: the JoinGroup fails, connecting is refused.
        proxy.refuse(True)
        proxy.drop_connections()
        deadline = time.monotonic() + 10
        while consumer.health().group_state is not GroupState.NO_COORDINATOR:
            assert time.monotonic() < deadline, consumer.health()
            await asyncio.sleep(0.05)
        message = await _commit_error(consumer, tp, 1500)
        assert "lost its coordinator" in message, message
        assert f"node {coordinator} (" in message and "is unreachable" in message, message
        assert "last connection error" in message and "refused" in message, message


async def test_wait_for_assignment_names_the_join_group_the_coordinator_leaves_unanswered(
    proxied_broker: tuple[FaultProxy, str], topic_name: str, create_topic: Callable[..., str]
) -> None:
    """A JoinGroup the coordinator never answers (noida-db 0.2.3 does this now and then
    to a member joining beside another, see tests/integration/test_docs_examples.py):
    wait_for_assignment() ends at its timeout, and it and health() say which request the
    coordinator has left unanswered and for how long, not only "rebalancing"."""
    async with member_behind_hook(
        proxied_broker, topic_name, create_topic, _swallow_join_group, session_timeout_ms=1000
    ) as consumer:
        started = time.monotonic()
        with pytest.raises(errors.KafkaTimeoutError) as caught:
            await consumer.wait_for_assignment(timeout_ms=2500)
        assert time.monotonic() - started < 2.5 + 1.0
        message = str(caught.value)
        unanswered = (
            r"rebalancing for \d+\.\ds: its coordinator node \d+ \(127\.0\.0\.1:\d+\) "
            r"has not answered for \d+\.\d s \(in flight: JoinGroup\)"
        )
        assert message.startswith("no partitions assigned within 2500 ms ("), message
        assert re.search(unanswered, message), message
        assert any(re.fullmatch(unanswered, p) for p in consumer.health().problems), (
            consumer.health().problems
        )


async def test_health_while_the_coordinator_is_still_being_looked_for(
    proxied_broker: tuple[FaultProxy, str], topic_name: str, create_topic: Callable[..., str]
) -> None:
    """Before FindCoordinator has been answered (or has failed), health() says the group
    has no coordinator yet, not "no group coordinator: None"."""
    async with member_behind_hook(
        proxied_broker, topic_name, create_topic, _swallow(10)
    ) as consumer:
        await asyncio.sleep(0.5)
        health = consumer.health()
        assert health.group_state is GroupState.NO_COORDINATOR, health
        assert "no group coordinator yet (looking for it)" in health.problems, health.problems
