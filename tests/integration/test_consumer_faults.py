"""Faults through a proxy in front of the broker: a connection cut mid-consumption and
restored (the group recovers and the health view tells what happened), a broker that
stays down (``getone(timeout_ms=...)`` and ``stop()`` keep their bounds and say why), and
a coordinator that does not answer a JoinGroup (the errors and the health view name it).

Then partition errors from a scripted broker (``LogBroker``): retriable Fetch errors and
an out-of-range prefetch back the partition off, a partition's error is raised before
other partitions' buffered records, a full buffer does not starve a partition read on
its own, and a failed start-position lookup is raised when it cannot succeed.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import time
import uuid
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer

from aiokafka_lite import errors
from aiokafka_lite.consumer import Consumer, ConsumerRebalanceListener, GroupState
from aiokafka_lite.protocol.api import ApiKey
from aiokafka_lite.protocol.records import RecordBatchBuilder
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing import FaultProxy
from tests.integration._helpers import (
    SASL_PLAIN_CLIENT,
    ScriptedBroker,
    leader_refusing_credentials,
)


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


async def test_an_auto_commit_that_times_out_shows_in_health(
    proxied_broker: tuple[FaultProxy, str], topic_name: str, create_topic: Callable[..., str]
) -> None:
    """An auto-commit cut short by an unanswering coordinator is on record in health()
    (only commit errors the broker answered with were; this one was only a warning in
    the log), and a later successful commit clears it."""
    proxy, bootstrap = proxied_broker
    create_topic(topic_name, 1, bootstrap=bootstrap)
    await produce(bootstrap, topic_name, [b"v%d" % i for i in range(20)], 1)
    consumer = group_consumer(
        bootstrap, topic_name, auto_commit_interval_ms=1000, request_timeout_ms=1500
    )
    await consumer.start()
    try:
        seen: set[bytes] = set()
        await collect(consumer, seen, {b"v%d" % i for i in range(20)}, 30)
        assert consumer.health().last_commit_error is None
        proxy.blackhole()  # (before the next auto-commit: the positions moved since)
        await wait_until(lambda: consumer.health().last_commit_error, 15, "no commit error")
        assert "commit" in (consumer.health().last_commit_error or "")
        proxy.clear_blackhole()
        proxy.drop_connections()
        await consumer.commit(timeout_ms=20000)
        assert consumer.health().last_commit_error is None
    finally:
        proxy.clear_blackhole()
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


# --- partition errors from a scripted broker (answers a real broker gives only by chance) ---


class LogBroker(ScriptedBroker):
    """A scripted broker serving fixed in-memory logs: a Fetch gets every batch at or
    after the fetch offset up to the partition's max bytes (at least one batch), or the
    error code set for the partition in ``errors``; ListOffsets answers from the logs,
    or with ``list_offsets_error``. ``fetched`` records each (partition, fetch offset)."""

    def __init__(self, logs: dict[TopicPartition, list[tuple[int, bytes]]]) -> None:
        super().__init__()
        self.logs = logs  # partition -> [(base offset, batch bytes)]
        self.counts: dict[TopicPartition, list[int]] = {tp: [] for tp in logs}
        self.errors: dict[TopicPartition, int] = {}
        self.list_offsets_error = 0
        self.fetched: list[tuple[TopicPartition, int]] = []
        for tp in logs:
            self.topics[tp.topic] = max(self.topics.get(tp.topic, 0), tp.partition + 1)
        self.scripts[ApiKey.FETCH] = self._fetch
        self.scripts[ApiKey.LIST_OFFSETS] = self._list_offsets

    def append(self, tp: TopicPartition, values: list[bytes]) -> None:
        base = self.end(tp)
        self.logs[tp].append((base, record_batch(base, values)))
        self.counts[tp].append(len(values))

    def end(self, tp: TopicPartition) -> int:
        return (self.logs[tp][-1][0] + self.counts[tp][-1]) if self.logs[tp] else 0

    def _fetch(self, header: Any, body: dict[str, Any], n: int) -> dict[str, Any]:
        topics = []
        for topic in body["topics"]:
            partitions = []
            for p in topic["partitions"]:
                tp = TopicPartition(topic["topic"], p["partition"])
                offset = p["fetch_offset"]
                self.fetched.append((tp, offset))
                code = self.errors.get(tp, 0)
                data = b""
                if not code:
                    for (base, raw), count in zip(self.logs[tp], self.counts[tp], strict=True):
                        if base + count > offset and (
                            not data or len(data) + len(raw) <= p["partition_max_bytes"]
                        ):
                            data += raw
                partitions.append(
                    {
                        "partition_index": tp.partition,
                        "error_code": code,
                        "high_watermark": self.end(tp),
                        "last_stable_offset": self.end(tp),
                        "log_start_offset": 0,
                        "aborted_transactions": None,
                        "preferred_read_replica": -1,
                        "records": data,
                    }
                )
            topics.append({"topic": topic["topic"], "partitions": partitions})
        return {"throttle_time_ms": 0, "error_code": 0, "session_id": 0, "responses": topics}

    def _list_offsets(self, header: Any, body: dict[str, Any], n: int) -> dict[str, Any]:
        topics = []
        for topic in body["topics"]:
            partitions = []
            for p in topic["partitions"]:
                tp = TopicPartition(topic["name"], p["partition_index"])
                offset = 0 if p["timestamp"] == -2 else self.end(tp)
                partitions.append(
                    {
                        "partition_index": tp.partition,
                        "error_code": self.list_offsets_error,
                        "timestamp": -1,
                        "offset": offset,
                        "leader_epoch": 0,
                        "old_style_offsets": [offset],
                    }
                )
            topics.append({"name": topic["name"], "partitions": partitions})
        return {"throttle_time_ms": 0, "topics": topics}

    def fetches_since(self, start: int, tp: TopicPartition) -> list[int]:
        """The offsets ``tp`` was fetched at in the Fetches after the first ``start``."""
        return [offset for part, offset in self.fetched[start:] if part == tp]


def record_batch(base: int, values: list[bytes]) -> bytes:
    builder = RecordBatchBuilder(base_offset=base, max_size=1 << 20)
    for i, value in enumerate(values):
        builder.append(1000 + base + i, None, value, None)
    return builder.build()


@contextlib.asynccontextmanager
async def scripted_consumer(
    broker: LogBroker, *partitions: TopicPartition, **options: Any
) -> AsyncIterator[Consumer]:
    """A started consumer of ``broker`` (started too), assigned ``partitions`` from 0."""
    await broker.start()
    consumer = Consumer(
        bootstrap_servers=broker.bootstrap,
        **{"fetch_max_wait_ms": 50, "retry_backoff_ms": 100, "request_timeout_ms": 5000, **options},
    )
    try:
        await consumer.start()
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, 0)
        yield consumer
    finally:
        await consumer.stop(timeout_ms=2000)
        await broker.stop()


T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)


async def wait_until(condition: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} within {timeout} s"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("code", [6, 3], ids=["not-leader", "unknown-partition"])
async def test_a_retriable_partition_error_backs_the_partition_off(code: int) -> None:
    """A retriable partition error in a Fetch answer (the leader moved, the partition is
    not there yet) is retried after retry_backoff_ms, not at once: one failing
    partition must not spin Fetch and Metadata requests, and it reads on once well."""
    broker = LogBroker({T0: []})
    broker.append(T0, [b"a", b"b"])
    broker.errors[T0] = code
    async with scripted_consumer(broker, T0, retry_backoff_ms=100) as consumer:
        await wait_until(lambda: broker.fetched, 5, "no Fetch")
        metadata_before = broker.calls.get(ApiKey.METADATA, 0)
        start = len(broker.fetched)
        await asyncio.sleep(1.0)
        fetches = len(broker.fetches_since(start, T0))
        # One per retry_backoff_ms (10 in the second), with room for a slow runner.
        assert 3 <= fetches <= 15, fetches
        assert broker.calls.get(ApiKey.METADATA, 0) - metadata_before <= 15
        broker.errors.clear()
        got = await consumer.getmany(timeout_ms=2000)
        assert [r.value for r in got[T0]] == [b"a", b"b"]


async def test_offset_out_of_range_of_a_prefetch_backs_off_until_the_buffer_is_read() -> None:
    """OFFSET_OUT_OF_RANGE for a fetch ahead of the position (records still buffered)
    waits for the application to reach that offset: the prefetch is retried after
    retry_backoff_ms, not back to back, and the buffered records are all delivered."""
    broker = LogBroker({T0: []})
    broker.append(T0, [b"v%d" % i for i in range(10)])
    async with scripted_consumer(broker, T0, retry_backoff_ms=100) as consumer:
        await wait_until(lambda: consumer.health().buffered_bytes, 5, "nothing buffered")
        broker.errors[T0] = 1  # the log was truncated under the prefetch at offset 10
        start = len(broker.fetched)
        await asyncio.sleep(1.0)
        fetches = broker.fetches_since(start, T0)
        assert set(fetches) <= {10} and len(fetches) <= 15, fetches
        got = await consumer.getmany(timeout_ms=1000)
        assert [r.offset for r in got[T0]] == list(range(10))


@pytest.mark.parametrize("code", [29, 87], ids=["topic-authorization", "invalid-record"])
async def test_a_fatal_partition_error_of_a_prefetch_comes_after_the_buffered_records(
    code: int,
) -> None:
    """A partition error that is not retriable, met by the fetch ahead of the position
    (records before it still buffered), is raised once the application reached that
    offset, naming partition and offset: the buffered records come first, and the
    position does not move past them. Before, the bare broker error ("Not authorized to
    access the topic.") was raised at position 0 on every call, 0 of the 10 buffered
    records came out, and the seek it asked for dropped them."""
    broker = LogBroker({T0: []})
    broker.append(T0, [b"v%d" % i for i in range(10)])
    async with scripted_consumer(broker, T0) as consumer:
        await wait_until(lambda: consumer.health().buffered_bytes, 5, "nothing buffered")
        broker.errors[T0] = code
        start = len(broker.fetched)
        await wait_until(lambda: broker.fetches_since(start, T0), 5, "no fetch at offset 10")
        got = await consumer.getmany(timeout_ms=1000)
        assert [r.offset for r in got[T0]] == list(range(10))
        for _ in range(2):  # raised until a seek
            with pytest.raises(errors.BrokerResponseError, match="t-0 at offset 10") as raised:
                await consumer.getmany(timeout_ms=1000)
            assert raised.value.errno == code
            assert await consumer.position(T0) == 10
        broker.errors.clear()
        broker.append(T0, [b"w"])
        consumer.seek(T0, 10)
        got = await consumer.getmany(timeout_ms=2000)
        assert [(r.offset, r.value) for r in got[T0]] == [(10, b"w")]


class FlakyMetadataBroker(LogBroker):
    """A LogBroker whose Metadata answers give every topic ``topic_error`` (when set) and
    no partitions, as Kafka's does for a topic whose leaders are not available yet."""

    topic_error = 0
    #: Metadata answers given with ``topic_error``.
    flaky_answers = 0

    def _builtin(self, header: Any, body: dict[str, Any]) -> dict[str, Any] | None:
        answer = super()._builtin(header, body)
        if answer is not None and header.api_key == ApiKey.METADATA and self.topic_error:
            self.flaky_answers += 1
            for topic in answer["topics"]:
                topic["error_code"] = self.topic_error
                topic["partitions"] = []
        return answer


@pytest.mark.parametrize("reset", ["earliest", "latest"])
@pytest.mark.parametrize("subscription", ["topics", "pattern"])
async def test_a_passing_topic_error_in_the_metadata_keeps_a_groupless_subscriptions_positions(
    reset: str, subscription: str
) -> None:
    """Without a group, a Metadata answer that gives a subscribed topic an error other
    than "unknown topic" (LEADER_NOT_AVAILABLE) and no partitions does not take its
    partitions away: their positions stay, and every record is read once. Before, the
    partition was dropped and assigned again as new once the error passed, starting
    over by auto_offset_reset: "earliest" read the 5 records before the error twice,
    "latest" skipped the 3 produced while it lasted (0 of 3)."""
    broker = FlakyMetadataBroker({T0: []})
    broker.append(T0, [b"a%d" % i for i in range(5)])
    await broker.start()
    consumer = Consumer(
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset=reset,
        fetch_max_wait_ms=50,
        metadata_max_age_ms=200,
        retry_backoff_ms=50,
    )
    got: list[bytes] = []

    async def read(until: int, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while len(got) < until and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=100)).values():
                got.extend(r.value for r in records)

    try:
        await consumer.start()
        if subscription == "topics":
            consumer.subscribe(["t"])
        else:
            consumer.subscribe(pattern="^t$")
        await wait_until(consumer.assignment, 5, "no assignment")
        assert await consumer.position(T0) == (0 if reset == "earliest" else 5)
        await read(5 if reset == "earliest" else 0, 5)
        broker.topic_error = 5  # LEADER_NOT_AVAILABLE
        await wait_until(lambda: broker.flaky_answers >= 3, 5, "no metadata refresh")
        broker.append(T0, [b"b%d" % i for i in range(3)])
        await read(len(got) + 3, 0.5)
        assert consumer.assignment() == {T0}
        broker.topic_error = 0
        await read(8 if reset == "earliest" else 3, 5)
        await read(len(got) + 1, 0.5)  # and nothing more
    finally:
        await consumer.stop(timeout_ms=2000)
        await broker.stop()
    before = [b"a%d" % i for i in range(5)] if reset == "earliest" else []
    assert got == [*before, b"b0", b"b1", b"b2"]


class TopicIdBroker(LogBroker):
    """A LogBroker with topic ids (KIP-516), ``topic_ids``, that leaves the ListOffsets
    requests unanswered while ``hold_list_offsets``."""

    def __init__(self, logs: dict[TopicPartition, list[tuple[int, bytes]]]) -> None:
        super().__init__(logs)
        self.topic_ids = {topic: uuid.uuid4() for topic in self.topics}
        self.hold_list_offsets = True
        self.metadata_answers = 0
        self.scripts[ApiKey.LIST_OFFSETS] = self._list_offsets_unless_held

    def create_again(self, tp: TopicPartition, values: list[bytes]) -> None:
        """``tp``'s topic is deleted and created again (a new id), with ``values``."""
        self.topic_ids[tp.topic] = uuid.uuid4()
        self.logs[tp], self.counts[tp] = [], []
        self.append(tp, values)

    async def metadata_refreshed(self) -> None:
        """Until the client took up a Metadata answer given after this call (it sends one
        at a time: the second answer since means the first is in)."""
        answers = self.metadata_answers
        await wait_until(lambda: self.metadata_answers >= answers + 2, 5, "no new metadata")

    def _list_offsets_unless_held(
        self, header: Any, body: dict[str, Any], n: int
    ) -> dict[str, Any] | None:
        return None if self.hold_list_offsets else self._list_offsets(header, body, n)

    def _builtin(self, header: Any, body: dict[str, Any]) -> dict[str, Any] | None:
        answer = super()._builtin(header, body)
        if answer is not None and header.api_key == ApiKey.METADATA:
            self.metadata_answers += 1
            for topic in answer["topics"]:
                topic["topic_id"] = self.topic_ids.get(topic["name"], uuid.uuid4())
        return answer

    def _fetch(self, header: Any, body: dict[str, Any], n: int) -> dict[str, Any]:
        names = {topic_id: name for name, topic_id in self.topic_ids.items()}
        for topic in body["topics"]:  # by id from Fetch v13
            if not topic.get("topic"):
                topic["topic"] = names[topic["topic_id"]]
        answer = super()._fetch(header, body, n)
        for topic in answer["responses"]:
            topic["topic_id"] = self.topic_ids[topic["topic"]]
        return answer


async def test_a_start_position_looked_up_in_a_topic_created_again_meanwhile_is_not_applied() -> (
    None
):
    """The topic is deleted and created again while the lookup of a partition's start
    position (auto_offset_reset) is unanswered: the answer, the old topic's, is dropped
    and the position looked up in the new topic. Before, the old topic's earliest offset
    (5) was applied to the new topic: 5 of its 10 records were skipped."""
    broker = TopicIdBroker({T0: []})
    broker.append(T0, [b"old%d" % i for i in range(40)])
    await broker.start()
    consumer = Consumer(
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=50,
        metadata_max_age_ms=200,
        retry_backoff_ms=50,
        request_timeout_ms=10000,
    )
    try:
        await consumer.start()
        consumer.assign([T0])
        await wait_until(lambda: broker.unanswered, 5, "no ListOffsets")
        held = len(broker.unanswered)
        broker.hold_list_offsets = False
        broker.create_again(T0, [b"new%d" % i for i in range(10)])
        await broker.metadata_refreshed()
        assert len(broker.unanswered) == held
        # The old topic's answer: its log started at 5.
        partition = {"partition_index": 0, "error_code": 0, "timestamp": -1, "leader_epoch": 0}
        broker.answer_late(
            {
                "throttle_time_ms": 0,
                "topics": [
                    {
                        "name": "t",
                        "partitions": [{**partition, "offset": 5, "old_style_offsets": [5]}],
                    }
                ],
            }
        )
        got: list[bytes] = []
        deadline = time.monotonic() + 5
        while len(got) < 10 and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=100)).values():
                got.extend(r.value for r in records)
        assert got == [b"new%d" % i for i in range(10)]
    finally:
        await consumer.stop(timeout_ms=2000)
        await broker.stop()


async def test_a_seek_in_a_topic_created_again_while_it_was_not_assigned_is_kept() -> None:
    """A topic read, given up (assign() of another), deleted and created again, then
    assigned again and seeked: the seek stands. Before, the id the topic had when it was
    first read was still on record, so the next metadata took the new id for a topic
    created again under the consumer and dropped the seek for auto_offset_reset
    ("latest": position 10, 0 of the 10 records from the seek on delivered)."""
    u0 = TopicPartition("u", 0)
    broker = TopicIdBroker({T0: [], u0: []})
    broker.hold_list_offsets = False
    broker.append(T0, [b"old%d" % i for i in range(40)])
    await broker.start()
    consumer = Consumer(
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="latest",
        fetch_max_wait_ms=50,
        metadata_max_age_ms=200,
        retry_backoff_ms=50,
    )
    got: list[bytes] = []

    async def read(until: int) -> None:
        deadline = time.monotonic() + 5
        while len(got) < until and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=100)).values():
                got.extend(r.value for r in records)

    try:
        await consumer.start()
        consumer.assign([T0])
        consumer.seek(T0, 0)
        await read(40)
        assert got == [b"old%d" % i for i in range(40)]
        consumer.assign([u0])
        await broker.metadata_refreshed()
        broker.create_again(T0, [b"new%d" % i for i in range(10)])
        await broker.metadata_refreshed()
        consumer.assign([T0])
        consumer.seek(T0, 0)
        got.clear()
        await read(10)
        await broker.metadata_refreshed()
        await read(11)  # and nothing more
        assert got == [b"new%d" % i for i in range(10)]
        assert await consumer.position(T0) == 10
    finally:
        await consumer.stop(timeout_ms=2000)
        await broker.stop()


@pytest.mark.parametrize("taken", ["all-taken", "none-taken"])
async def test_a_full_buffer_does_not_starve_a_partition_read_on_its_own(taken: str) -> None:
    """With the buffer over max_buffer_bytes by one partition's fetch, another partition
    with nothing buffered is still fetched, and getmany/getone of that partition alone
    get its records; a fetch whose last record was taken leaves the buffer at once."""
    broker = LogBroker({T0: [], T1: []})
    for _ in range(20):
        broker.append(T1, [b"x" * 1000] * 10)
    async with scripted_consumer(broker, T0, T1, max_buffer_bytes=64 * 1024) as consumer:
        await wait_until(
            lambda: consumer.health().buffered_bytes >= 64 * 1024, 5, "T1 did not fill the buffer"
        )
        if taken == "all-taken":
            got = await consumer.getmany(T1, timeout_ms=1000, max_records=200)
            assert len(got[T1]) == 200  # exactly every record of the fetch
            assert consumer.health().buffered_bytes == 0
        broker.append(T0, [b"a%d" % i for i in range(5)])
        got = await consumer.getmany(T0, timeout_ms=3000)
        assert [r.value for r in got.get(T0, [])] == [b"a0", b"a1", b"a2", b"a3", b"a4"]
        broker.append(T0, [b"a5"])
        assert (await consumer.getone(T0, timeout_ms=3000)).value == b"a5"


@pytest.mark.parametrize("reader", ["getmany", "async-for"])
async def test_a_partition_error_is_raised_before_other_partitions_records(reader: str) -> None:
    """A partition's error (here offset out of range with auto_offset_reset="none") is
    raised by the next call although another partition has records buffered, not after
    the backlog; once handled, every record is delivered once, in order."""
    broker = LogBroker({T0: [], T1: []})
    broker.append(T0, [b"a%d" % i for i in range(10)])
    for _ in range(30):
        broker.append(T1, [b"b" * 100] * 100)
    broker.errors[T0] = 1
    async with scripted_consumer(broker, T0, T1, auto_offset_reset="none") as consumer:
        await wait_until(
            lambda: consumer.health().partitions[T0].error and consumer.health().buffered_bytes,
            5,
            "no error for T0 and records of T1",
        )

        async def read() -> list[Any]:
            if reader == "getmany":
                got = await consumer.getmany(timeout_ms=1000, max_records=50)
                return [r for records in got.values() for r in records]
            async for record in consumer:
                return [record]
            raise AssertionError("the consumer stopped")

        with pytest.raises(errors.OffsetOutOfRangeError, match="t-0"):
            await read()
        with pytest.raises(errors.OffsetOutOfRangeError):
            await read()  # raised until handled: a seek
        assert consumer.assignment() == {T0, T1} and await consumer.position(T1) == 0
        broker.errors.clear()
        consumer.seek(T0, 0)
        seen: dict[TopicPartition, list[int]] = {T0: [], T1: []}
        while len(seen[T0]) < 10 or len(seen[T1]) < 3000:
            for record in await read():
                seen[TopicPartition(record.topic, record.partition)].append(record.offset)
        assert seen == {T0: list(range(10)), T1: list(range(3000))}


async def test_a_list_offsets_error_that_is_not_retriable_is_raised() -> None:
    """TOPIC_AUTHORIZATION_FAILED while looking up the start position (the reset to
    "earliest") is raised to the caller naming the partition, by getmany and position,
    not logged and retried for ever; a seek clears it."""
    broker = LogBroker({T0: []})
    broker.append(T0, [b"v"] * 3)
    broker.list_offsets_error = 29
    await broker.start()
    consumer = Consumer(
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        request_timeout_ms=1500,
        retry_backoff_ms=100,
        fetch_max_wait_ms=50,
    )
    try:
        await consumer.start()
        consumer.assign([T0])
        with pytest.raises(errors.TopicAuthorizationFailedError, match="t-0"):
            await consumer.getmany(timeout_ms=3000)
        with pytest.raises(errors.TopicAuthorizationFailedError, match="t-0"):
            await consumer.position(T0, timeout_ms=1000)
        asked = broker.calls.get(ApiKey.LIST_OFFSETS, 0)
        await asyncio.sleep(0.5)
        assert broker.calls.get(ApiKey.LIST_OFFSETS, 0) == asked, "asked again without a seek"
        consumer.seek(T0, 1)
        got = await consumer.getmany(timeout_ms=2000)
        assert [r.offset for r in got[T0]] == [1, 2]
    finally:
        await consumer.stop(timeout_ms=2000)
        await broker.stop()


async def test_a_retriable_list_offsets_error_is_retried_until_it_clears() -> None:
    """A retriable error looking up the start position (the leader moved) is retried
    with a backoff, and the partition starts where the reset says once it clears."""
    broker = LogBroker({T0: []})
    broker.append(T0, [b"v"] * 3)
    broker.list_offsets_error = 6
    await broker.start()
    consumer = Consumer(
        bootstrap_servers=broker.bootstrap,
        auto_offset_reset="earliest",
        request_timeout_ms=1000,
        retry_backoff_ms=100,
        fetch_max_wait_ms=50,
    )
    try:
        await consumer.start()
        consumer.assign([T0])
        assert await consumer.getmany(timeout_ms=1500) == {}
        asked = broker.calls.get(ApiKey.LIST_OFFSETS, 0)
        assert 2 <= asked <= 40, asked
        broker.list_offsets_error = 0
        got = await consumer.getmany(timeout_ms=3000)
        assert [r.offset for r in got[T0]] == [0, 1, 2]
    finally:
        await consumer.stop(timeout_ms=2000)
        await broker.stop()


class _FailingAssignment(ConsumerRebalanceListener):
    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        pass

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        raise RuntimeError("the assignment callback failed")


@pytest.mark.parametrize("reader", ["getmany", "async-for"])
async def test_a_listener_error_is_raised_before_buffered_records(
    reader: str, bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """An exception of a rebalance callback is raised from the next read although
    records are buffered (not once the buffer runs dry), once; nothing is lost."""
    create_topic(topic_name, 1)
    values = [b"v%d" % i for i in range(300)]
    await produce(bootstrap_servers, topic_name, values, 1)
    consumer = group_consumer(bootstrap_servers, topic_name)
    await consumer.start()
    try:
        consumer.subscribe([topic_name], listener=_FailingAssignment())
        await consumer.wait_for_assignment(timeout_ms=30000)
        await wait_until(lambda: consumer.health().buffered_bytes, 10, "nothing buffered")

        async def read() -> list[bytes]:
            if reader == "getmany":
                got = await consumer.getmany(timeout_ms=1000, max_records=50)
                return [r.value for records in got.values() for r in records]
            async for record in consumer:
                return [record.value]
            raise AssertionError("the consumer stopped")

        with pytest.raises(RuntimeError, match="the assignment callback failed"):
            await read()
        seen: list[bytes] = []
        while len(seen) < len(values):
            seen += await read()
        assert seen == values
    finally:
        await consumer.stop(timeout_ms=5000)


class _CancelledOnce(ConsumerRebalanceListener):
    """Its first callback with partitions raises CancelledError itself (an awaited call
    of the application's was cancelled, say); nothing cancelled the consumer."""

    def __init__(self, which: str) -> None:
        self.which = which
        self.raised = False

    async def _maybe_raise(self, which: str, partitions: set[TopicPartition]) -> None:
        if which == self.which and partitions and not self.raised:
            self.raised = True
            raise asyncio.CancelledError()

    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        await self._maybe_raise("revoked", revoked)

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        await self._maybe_raise("assigned", assigned)


@pytest.mark.parametrize("which", ["revoked", "assigned"])
async def test_a_callback_raising_cancelled_error_fails_the_read_not_the_group(
    which: str, bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """A rebalance callback that raises CancelledError of its own used to end the
    consumer's group task in silence: no rejoin (a new subscription was never
    assigned), no auto-commit. Now the next read raises it as the callback's failure (a
    RuntimeError, not a CancelledError the caller would take for its own cancellation)
    and the member goes on: it joins for the new subscription and reads it."""
    first, second = topic_name, topic_name + "-next"
    create_topic(first, 1)
    create_topic(second, 1)
    await produce(bootstrap_servers, first, [b"a0", b"a1"], 1)
    await produce(bootstrap_servers, second, [b"b0", b"b1", b"b2"], 1)
    consumer = group_consumer(bootstrap_servers, first)
    await consumer.start()
    listener = _CancelledOnce(which)
    failures: list[BaseException] = []

    async def read_until(expected: set[bytes]) -> set[bytes]:
        seen: set[bytes] = set()
        deadline = time.monotonic() + 30
        while not expected <= seen and time.monotonic() < deadline:
            try:
                got = await consumer.getmany(timeout_ms=500)
            except RuntimeError as exc:
                failures.append(exc)
                continue
            seen |= {r.value for records in got.values() for r in records}
        return seen

    try:
        consumer.subscribe([first], listener=listener)
        assert await read_until({b"a0", b"a1"}) == {b"a0", b"a1"}
        consumer.subscribe([second], listener=listener)
        assert await read_until({b"b0", b"b1", b"b2"}) == {b"b0", b"b1", b"b2"}
    finally:
        await consumer.stop(timeout_ms=5000)
    assert listener.raised
    assert len(failures) == 1 and "CancelledError" in str(failures[0]), failures


class _BothFail(ConsumerRebalanceListener):
    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        if revoked:
            raise RuntimeError("revoke failed")

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        raise RuntimeError("assign failed")


async def test_when_both_callbacks_of_a_rebalance_fail_the_first_error_is_raised(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """The revoke callback fails (its commit, say), then the assign callback, with no
    read in between: the next read raises the revoke callback's error, as Java keeps
    the first (it raised the assign callback's, which replaced it; the other is only
    logged), and the member goes on."""
    first, second = topic_name, topic_name + "-next"
    create_topic(first, 1)
    create_topic(second, 1)
    await produce(bootstrap_servers, second, [b"b0"], 1)
    consumer = group_consumer(bootstrap_servers, first)
    await consumer.start()
    try:
        consumer.subscribe([first], listener=_BothFail())
        await consumer.wait_for_assignment(timeout_ms=30000)
        with pytest.raises(RuntimeError, match="assign failed"):
            await consumer.getmany(timeout_ms=5000)
        consumer.subscribe([second], listener=_BothFail())
        await wait_until(
            lambda: {tp.topic for tp in consumer.assignment()} == {second}, 30, "no rebalance"
        )
        errors_seen: list[str] = []
        seen: list[bytes] = []
        deadline = time.monotonic() + 30
        while not seen and time.monotonic() < deadline:
            try:
                got = await consumer.getmany(timeout_ms=500)
            except RuntimeError as exc:
                errors_seen.append(str(exc))
                continue
            seen += [r.value for records in got.values() for r in records]
        assert errors_seen == ["revoke failed"]
        assert seen == [b"b0"]
    finally:
        # stop() runs the revoke callback once more: it fails, and stop() raises that.
        with pytest.raises(RuntimeError, match="revoke failed"):
            await consumer.stop(timeout_ms=5000)


@pytest.mark.parametrize("call", ["end_offsets", "offsets_for_times"])
async def test_an_offsets_lookup_keeps_one_timeout_for_metadata_and_the_lookup(call: str) -> None:
    """The topic's metadata arrives late (0.7 s of a 1 s timeout) and ListOffsets is never
    answered: the call raises within its one timeout, not 0.7 s + another full one."""
    broker = ScriptedBroker()
    broker.scripts[ApiKey.LIST_OFFSETS] = lambda header, body, count: None
    await broker.start()
    tp = TopicPartition("late", 0)
    consumer = Consumer(bootstrap_servers=broker.bootstrap, retry_backoff_ms=50)
    try:
        await consumer.start()
        asyncio.get_running_loop().call_later(0.7, broker.topics.__setitem__, "late", 1)
        started = time.monotonic()
        with pytest.raises(errors.KafkaTimeoutError):
            if call == "end_offsets":
                await consumer.end_offsets([tp], timeout_ms=1000)
            else:
                await consumer.offsets_for_times({tp: 0}, timeout_ms=1000)
        assert broker.calls.get(ApiKey.LIST_OFFSETS, 0) >= 1  # (the metadata did arrive)
        assert time.monotonic() - started < 1.4
    finally:
        await consumer.stop(timeout_ms=1000)
        await broker.stop()


async def test_a_leader_refusing_the_credentials_is_raised_by_getmany() -> None:
    """The bootstrap broker accepts the credentials, the partition's leader refuses
    them: each Fetch failed to connect with AuthenticationFailedError, logged as a
    warning and tried again for ever while getmany returned nothing. Asking again
    only repeats the refusal: getmany raises it, as a start-position lookup does."""
    async with leader_refusing_credentials(T0.topic) as front:
        consumer = Consumer(
            bootstrap_servers=front.bootstrap,
            **SASL_PLAIN_CLIENT,
            request_timeout_ms=1500,
            retry_backoff_ms=100,
        )
        try:
            await consumer.start()
            consumer.assign([T0])
            consumer.seek(T0, 0)
            started = time.monotonic()
            with pytest.raises(errors.AuthenticationFailedError, match="Invalid username"):
                while time.monotonic() - started < 5:
                    await consumer.getmany(timeout_ms=500)
            assert time.monotonic() - started < 1
        finally:
            await consumer.stop(timeout_ms=2000)


class _FailingRevocation(ConsumerRebalanceListener):
    async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        raise RuntimeError(f"the revoke callback failed for {sorted(revoked)}")

    async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        pass


async def test_a_revoke_callback_failing_in_stop_is_raised_once_everything_is_closed(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """stop() runs on_partitions_revoked; its exception was only logged, and the
    application never learned that its clean-up (a flush, its own commit) failed. Now
    stop() raises it after leaving the group and closing the connections, as it raises a
    failed final commit."""
    create_topic(topic_name, 1)
    group = f"g-{topic_name}"
    consumer = group_consumer(bootstrap_servers, topic_name, group_id=group)
    await consumer.start()
    consumer.subscribe([topic_name], listener=_FailingRevocation())
    await consumer.wait_for_assignment(timeout_ms=30000)
    with pytest.raises(RuntimeError, match="the revoke callback failed"):
        await consumer.stop(timeout_ms=10000)
    assert consumer._client.closed
    # It left the group: a new member gets the partition without waiting for a session
    # to expire.
    other = group_consumer(bootstrap_servers, topic_name, group_id=group)
    await other.start()
    try:
        other.subscribe([topic_name])
        await other.wait_for_assignment(timeout_ms=8000)
        assert other.assignment() == {TopicPartition(topic_name, 0)}
    finally:
        await other.stop(timeout_ms=5000)


class SessionLogBroker(LogBroker):
    """A LogBroker that opens fetch sessions (neither embedded broker does): a full
    fetch (epoch 0) gets session ``next_id``; the Fetch numbered ``fail_at`` is
    answered INVALID_FETCH_SESSION_EPOCH. ``sessions`` records each Fetch's (session
    id, epoch, partitions named)."""

    def __init__(self, logs: dict[TopicPartition, list[tuple[int, bytes]]]) -> None:
        super().__init__(logs)
        self.next_id = 42
        self.fail_at = 0
        self.sessions: list[tuple[int, int, int]] = []
        self.scripts[ApiKey.FETCH] = self._session_fetch

    def _session_fetch(self, header: Any, body: dict[str, Any], n: int) -> dict[str, Any]:
        named = sum(len(t["partitions"]) for t in body["topics"])
        self.sessions.append((body["session_id"], body["session_epoch"], named))
        if n == self.fail_at:
            return {"throttle_time_ms": 0, "error_code": 71, "session_id": 0, "responses": []}
        answer = self._fetch(header, body, n)
        if body["session_epoch"] == 0:
            answer["session_id"] = self.next_id
            self.next_id += 1
        elif body["session_epoch"] > 0:
            answer["session_id"] = body["session_id"]
        return answer


async def test_fetch_sessions_are_closed_after_an_error_and_at_stop() -> None:
    """KIP-227 asks a client to close a session it gives up: the full fetch after an
    error names it at epoch 0, and stop() sends it at the final epoch (-1). The full
    fetch went out as session 0 and stop() sent nothing, so a broker kept both sessions
    in its cache (1000 slots in Kafka by default) until they expired."""
    broker = SessionLogBroker({T0: []})
    broker.append(T0, [b"a", b"b"])
    broker.fail_at = 3
    async with scripted_consumer(broker, T0) as consumer:
        got = await consumer.getmany(timeout_ms=3000)
        assert [r.value for r in got[T0]] == [b"a", b"b"]
        await wait_until(lambda: len(broker.sessions) >= 5, 5, "five fetches")
        # Full (opens 42), incremental, refused; then the full fetch that closes 42.
        assert [f[:2] for f in broker.sessions[:5]] == [(0, 0), (42, 1), (42, 2), (42, 0), (43, 1)]
        assert broker.sessions[3][2] == 1  # a full fetch names every partition
        await consumer.stop(timeout_ms=3000)
        assert broker.sessions[-1] == (43, -1, 0)
