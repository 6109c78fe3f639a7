"""The consumer against a real broker: assignment, subscriptions, resets, seeks, pause,
getmany limits, record contents, codecs, timestamps, transactions, commits, health.

Test data is produced with peers (aiokafka, confluent-kafka for transactions).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from aiokafka import AIOKafkaProducer
from aiokafka import TopicPartition as AIOKafkaTopicPartition

from aiokafka_lite import errors
from aiokafka_lite.consumer import (
    Consumer,
    ConsumerRebalanceListener,
    ConsumerRecord,
    GroupState,
    NoOffsetForPartitionError,
)
from aiokafka_lite.structs import OffsetAndMetadata, TopicPartition
from aiokafka_lite.testing.pytest_plugin import ExpectDeviation

TANSU_LIST_OFFSETS = (
    "Tansu 0.6 answers ListOffsets(latest) with the last batch's base offset + 1 when that "
    "batch holds several records"
)

NOIDA_NO_LONG_POLL = (
    "noida-db 0.2.3 answers a Fetch that has nothing to return at once, not after "
    "max_wait_ms: an idle consumer's Fetches follow one another without a pause"
)

TANSU_NOTHING_WITHOUT_WAIT = (
    "Tansu 0.6 answers a Fetch whose max_wait_ms is 0 with no topics at all, records there "
    "or not: a consumer with fetch_max_wait_ms=0 reads nothing"
)

Records = dict[TopicPartition, list[ConsumerRecord[Any, Any]]]


async def produce(
    bootstrap: str,
    topic: str,
    values: Sequence[bytes | None],
    *,
    partition: int = 0,
    keys: Sequence[bytes | None] | None = None,
    headers: Sequence[tuple[str, bytes]] | None = None,
    compression: str | None = None,
    one_per_batch: bool = False,
    timestamps: Sequence[int] | None = None,
) -> None:
    """Write records with aiokafka (one request per record when ``one_per_batch``)."""
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap, compression_type=compression, linger_ms=5
    )
    await producer.start()
    try:
        futures = []
        for i, value in enumerate(values):
            kwargs: dict[str, Any] = {
                "partition": partition,
                "key": keys[i] if keys is not None else b"k%d" % i,
                "headers": list(headers) if headers else None,
            }
            if timestamps is not None:
                kwargs["timestamp_ms"] = timestamps[i]
            if one_per_batch:
                await producer.send_and_wait(topic, value, **kwargs)
            else:
                futures.append(await producer.send(topic, value, **kwargs))
        await producer.flush()
        for fut in futures:
            await fut
    finally:
        await producer.stop()


async def drain(
    consumer: Consumer, expected: int, timeout: float = 10.0
) -> list[ConsumerRecord[Any, Any]]:
    """getmany until ``expected`` records arrived (fails after ``timeout``)."""
    got: list[ConsumerRecord[Any, Any]] = []
    deadline = time.monotonic() + timeout
    while len(got) < expected:
        assert time.monotonic() < deadline, (
            f"only {len(got)}/{expected} records: {consumer.health()}"
        )
        batch = await consumer.getmany(timeout_ms=200)
        for records in batch.values():
            got.extend(records)
    return got


async def nothing_more(consumer: Consumer, wait_ms: int = 500) -> None:
    assert await consumer.getmany(timeout_ms=wait_ms) == {}


def assigned_consumer(bootstrap: str, tps: Sequence[TopicPartition], **kwargs: Any) -> Consumer:
    kwargs.setdefault("auto_offset_reset", "earliest")
    kwargs.setdefault("request_timeout_ms", 10000)
    kwargs.setdefault("fetch_max_wait_ms", 100)
    consumer = Consumer(bootstrap_servers=bootstrap, **kwargs)
    consumer.assign(tps)
    return consumer


# --- assign and subscribe --------------------------------------------------------------


async def test_assign_reads_every_partition_in_order(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 3)
    for p in range(3):
        await produce(
            bootstrap_servers, topic_name, [b"%d-%d" % (p, i) for i in range(50)], partition=p
        )
    tps = [TopicPartition(topic_name, p) for p in range(3)]
    async with assigned_consumer(bootstrap_servers, tps) as consumer:
        assert consumer.assignment() == set(tps)
        got = await drain(consumer, 150)
        for p in range(3):
            offsets = [r.offset for r in got if r.partition == p]
            assert offsets == list(range(50))
            assert [r.value for r in got if r.partition == p] == [
                b"%d-%d" % (p, i) for i in range(50)
            ]
            assert consumer.highwater(tps[p]) == 50
            assert await consumer.position(tps[p]) == 50
        await nothing_more(consumer)


async def test_partitions_take_turns_when_a_fetch_has_room_for_one_batch(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    # KIP-74: a broker fills a Fetch's partitions in request order up to fetch_max_bytes
    # (at least one batch). At one batch per response, a consumer that listed its
    # partitions in the same order every time would read all of partition 0 first.
    create_topic(topic_name, 3)
    for p in range(3):
        await produce(
            bootstrap_servers,
            topic_name,
            [b"%d-%d" % (p, i) + b"." * 2000 for i in range(8)],
            partition=p,
            one_per_batch=True,
        )
    tps = [TopicPartition(topic_name, p) for p in range(3)]
    async with assigned_consumer(
        bootstrap_servers, tps, fetch_max_bytes=1, max_partition_fetch_bytes=1
    ) as consumer:
        got = await drain(consumer, 24)
        first = [r.partition for r in got[:6]]
        with expect_deviation(
            "noida",
            "noida-db 0.2.3 ignores a Fetch's max_bytes and partition_max_bytes: the first "
            "response holds every batch of every partition, in request order",
            match=r"^\[0, 0, 0, 0, 0, 0\]",
        ):
            assert sorted(set(first)) == [0, 1, 2], first
        for p in range(3):
            assert [r.offset for r in got if r.partition == p] == list(range(8))


NOIDA_IGNORES_MAX_BYTES = (
    "noida-db 0.2.3 ignores a Fetch's max_bytes: it answers with every batch there is, and "
    "an answer above receive_message_max_bytes is refused"
)


async def test_fetch_answers_stay_within_fetch_max_bytes(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    """A partition holding far more than ``fetch_max_bytes`` is read in answers of about
    that size, so a connection's ``receive_message_max_bytes`` just above it is enough;
    from a broker that ignores ``max_bytes`` the refused answer is raised by name, not
    retried in silence."""
    create_topic(topic_name, 1)
    values = [b"%04d" % i + b"." * 10_000 for i in range(200)]  # ~2 MB
    await produce(bootstrap_servers, topic_name, values)
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(
        bootstrap_servers,
        [tp],
        fetch_max_bytes=64 * 1024,
        max_partition_fetch_bytes=64 * 1024,
        receive_message_max_bytes=64 * 1024 + 512 * 1024,
    ) as consumer:
        with expect_deviation(
            "noida",
            NOIDA_IGNORES_MAX_BYTES,
            raises=errors.ResponseTooLargeError,
            match=rf"Fetch from node \d+ for {topic_name}-0 at offset 0 .*does not honour",
        ):
            got = await drain(consumer, 200)
            assert [r.value for r in got] == values


async def test_subscribe_without_group_reads_all_partitions(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 2)
    await produce(bootstrap_servers, topic_name, [b"a", b"b"], partition=0)
    await produce(bootstrap_servers, topic_name, [b"c"], partition=1)
    async with Consumer(
        topic_name,
        bootstrap_servers=bootstrap_servers,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
    ) as consumer:
        values = set()
        async for record in consumer:
            values.add(record.value)
            if len(values) == 3:
                break
        assert values == {b"a", b"b", b"c"}
        assert consumer.assignment() == {
            TopicPartition(topic_name, 0),
            TopicPartition(topic_name, 1),
        }


async def test_subscribe_with_group_and_listener(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 2)
    await produce(bootstrap_servers, topic_name, [b"x"] * 5, partition=1)
    events: list[tuple[str, set[TopicPartition]]] = []

    class Listener(ConsumerRebalanceListener):
        async def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
            # Committing from the callback works, also while the consumer stops.
            await consumer.commit({tp: await consumer.position(tp) for tp in revoked})
            events.append(("revoked", revoked))

        async def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
            events.append(("assigned", assigned))

    consumer = Consumer(
        bootstrap_servers=bootstrap_servers,
        group_id=f"g-{topic_name}",
        auto_offset_reset="earliest",
        session_timeout_ms=6000,
        heartbeat_interval_ms=500,
        fetch_max_wait_ms=100,
        enable_auto_commit=False,
    )
    await consumer.start()
    try:
        consumer.subscribe([topic_name], listener=Listener())
        assert await consumer.wait_for_assignment(15000) == {
            TopicPartition(topic_name, 0),
            TopicPartition(topic_name, 1),
        }
        got = await drain(consumer, 5)
        assert {r.partition for r in got} == {1}
        assert events == [("assigned", consumer.assignment())]
        health = consumer.health()
        assert health.group_state is GroupState.STABLE and health.is_leader
        assert health.generation_id >= 0 and health.last_heartbeat_time is not None
    finally:
        await consumer.stop(timeout_ms=10000)
    assert events[-1] == ("revoked", {TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)})
    async with Consumer(bootstrap_servers=bootstrap_servers, group_id=f"g-{topic_name}") as c:
        assert await c.committed(TopicPartition(topic_name, 1)) == 5


async def test_subscribe_pattern_picks_up_matching_topics(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(f"{topic_name}-one", 1)
    await produce(bootstrap_servers, f"{topic_name}-one", [b"1"])
    consumer = Consumer(
        bootstrap_servers=bootstrap_servers,
        auto_offset_reset="earliest",
        metadata_max_age_ms=500,
        fetch_max_wait_ms=100,
    )
    async with consumer:
        consumer.subscribe(pattern=rf"{topic_name}-.*")
        first = await consumer.getone(timeout_ms=10000)
        assert (first.topic, first.value) == (f"{topic_name}-one", b"1")
        create_topic(f"{topic_name}-two", 1)
        await produce(bootstrap_servers, f"{topic_name}-two", [b"2"])
        second = await consumer.getone(timeout_ms=10000)
        assert (second.topic, second.value) == (f"{topic_name}-two", b"2")
        assert consumer.subscription() == {f"{topic_name}-one", f"{topic_name}-two"}


# --- auto_offset_reset ---------------------------------------------------------------------


async def test_auto_offset_reset_earliest(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    await produce(bootstrap_servers, topic_name, [b"old1", b"old2"])
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(bootstrap_servers, [tp], auto_offset_reset="earliest") as c:
        assert [r.value for r in await drain(c, 2)] == [b"old1", b"old2"]


async def test_auto_offset_reset_latest_reads_only_new_records(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    # One record per batch: Tansu's ListOffsets(latest) is right for those.
    await produce(bootstrap_servers, topic_name, [b"old1", b"old2"], one_per_batch=True)
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(bootstrap_servers, [tp], auto_offset_reset="latest") as c:
        assert await c.position(tp) == 2
        await produce(bootstrap_servers, topic_name, [b"new"])
        assert [r.value for r in await drain(c, 1)] == [b"new"]
        await nothing_more(c)


async def test_auto_offset_reset_latest_after_multi_record_batches(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    create_topic(topic_name, 1)
    await produce(bootstrap_servers, topic_name, [b"a", b"b", b"c"])  # one batch
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(bootstrap_servers, [tp], auto_offset_reset="latest") as c:
        position = await c.position(tp)
    with expect_deviation("tansu", TANSU_LIST_OFFSETS):
        assert position == 3


async def test_an_idle_consumer_waits_in_the_brokers_long_poll(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    """At the log end a Fetch (``min_bytes`` 1) is held by the broker for up to
    ``fetch_max_wait_ms``: an idle consumer sends a few Fetches a second, not a loop of
    them."""
    create_topic(topic_name, 1)
    await produce(bootstrap_servers, topic_name, [b"old"])
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(bootstrap_servers, [tp], fetch_max_wait_ms=250) as c:
        assert [r.value for r in await drain(c, 1)] == [b"old"]
        assert c._fetcher is not None
        stats = c._fetcher.stats
        before = stats.round_trips
        started = time.monotonic()
        await nothing_more(c, wait_ms=2000)
        seconds = time.monotonic() - started
        fetches = stats.round_trips - before
    # One Fetch per fetch_max_wait_ms, and one more at each end of the interval.
    with expect_deviation("noida", NOIDA_NO_LONG_POLL):
        assert fetches <= seconds / 0.25 + 2, f"{fetches} Fetches in {seconds:.1f} s, idle"


async def test_fetch_max_wait_zero_reads_what_is_there(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    """``fetch_max_wait_ms=0``: the broker answers each Fetch at once, with the records
    it has."""
    create_topic(topic_name, 1)
    await produce(bootstrap_servers, topic_name, [b"a", b"b"])
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(bootstrap_servers, [tp], fetch_max_wait_ms=0) as c:
        with expect_deviation("tansu", TANSU_NOTHING_WITHOUT_WAIT, match="only 0/2 records"):
            assert [r.value for r in await drain(c, 2, timeout=3.0)] == [b"a", b"b"]


async def test_auto_offset_reset_none_raises_until_seek(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    await produce(bootstrap_servers, topic_name, [b"a", b"b"])
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(
        bootstrap_servers, [tp], auto_offset_reset="none", group_id=f"g-{topic_name}"
    ) as c:
        with pytest.raises(NoOffsetForPartitionError):
            await c.getone(timeout_ms=5000)
        c.seek(tp, 1)
        assert (await c.getone(timeout_ms=5000)).value == b"b"


async def test_out_of_range_offset_is_reset_or_raised(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    create_topic(topic_name, 1)
    await produce(bootstrap_servers, topic_name, [b"a", b"b"])
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(bootstrap_servers, [tp], auto_offset_reset="earliest") as c:
        c.seek(tp, 1000)
        with expect_deviation(
            "tansu",
            "Tansu 0.6 answers a Fetch past the log end with no records and no "
            "OFFSET_OUT_OF_RANGE error",
            match="only 0/2 records",  # drain's own assertion, when no record comes
        ):
            assert [r.value for r in await drain(c, 2)] == [b"a", b"b"]
    async with assigned_consumer(bootstrap_servers, [tp], auto_offset_reset="none") as c:
        c.seek(tp, 1000)
        with pytest.raises(errors.OffsetOutOfRangeError, match="out of range"):
            await c.getone(timeout_ms=5000)


# --- seek family ---------------------------------------------------------------------------


async def test_seek_family(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    await produce(bootstrap_servers, topic_name, [b"%d" % i for i in range(6)], one_per_batch=True)
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(
        bootstrap_servers, [tp], group_id=f"g-{topic_name}", enable_auto_commit=False
    ) as c:
        assert [r.value for r in await drain(c, 6)] == [b"%d" % i for i in range(6)]
        c.seek(tp, 2)
        assert (await c.getone(timeout_ms=5000)).offset == 2
        await c.seek_to_beginning(tp)
        assert await c.position(tp) == 0
        assert (await c.getone(timeout_ms=5000)).offset == 0
        await c.seek_to_end(tp)
        assert await c.position(tp) == 6
        await nothing_more(c)
        await c.commit({tp: OffsetAndMetadata(4, "checkpoint")})
        assert await c.seek_to_committed(tp) == {tp: 4}
        assert (await c.getone(timeout_ms=5000)).offset == 4


async def test_seek_to_end_and_end_offsets_on_multi_record_batches(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    create_topic(topic_name, 1)
    await produce(bootstrap_servers, topic_name, [b"%d" % i for i in range(5)])
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(bootstrap_servers, [tp]) as c:
        with expect_deviation("tansu", TANSU_LIST_OFFSETS):
            assert await c.end_offsets([tp]) == {tp: 5}
        await c.seek_to_end(tp)
        assert await c.position(tp) == 5


async def test_beginning_and_end_offsets(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 2)
    await produce(bootstrap_servers, topic_name, [b"a", b"b", b"c"], one_per_batch=True)
    tps = [TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)]
    async with Consumer(bootstrap_servers=bootstrap_servers) as c:
        assert await c.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
        assert await c.end_offsets(tps) == {tps[0]: 3, tps[1]: 0}
        assert c.partitions_for_topic(topic_name) == {0, 1}
        assert topic_name in await c.topics()


# --- pause / resume, getmany limits -----------------------------------------------------------


async def test_pause_and_resume(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 2)
    await produce(bootstrap_servers, topic_name, [b"p0"] * 10, partition=0)
    await produce(bootstrap_servers, topic_name, [b"p1"] * 10, partition=1)
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    async with assigned_consumer(bootstrap_servers, [tp0, tp1]) as c:
        c.pause(tp0)
        assert c.paused() == {tp0}
        got = await drain(c, 10)
        assert {r.partition for r in got} == {1}
        await nothing_more(c)
        assert await c.position(tp0) == 0
        c.resume(tp0)
        assert c.paused() == set()
        got = await drain(c, 10)
        assert {r.partition for r in got} == {0}


async def test_pause_drops_prefetched_records_without_losing_them(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    await produce(bootstrap_servers, topic_name, [b"%d" % i for i in range(100)])
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(bootstrap_servers, [tp]) as c:
        first = await c.getmany(timeout_ms=5000, max_records=10)
        assert [r.offset for r in first[tp]] == list(range(10))
        c.pause(tp)
        await nothing_more(c, 300)
        c.resume(tp)
        rest = await drain(c, 90)
        assert [r.offset for r in rest] == list(range(10, 100))


async def test_getmany_limits(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 2)
    await produce(bootstrap_servers, topic_name, [b"a"] * 30, partition=0)
    await produce(bootstrap_servers, topic_name, [b"b"] * 30, partition=1)
    tp0, tp1 = TopicPartition(topic_name, 0), TopicPartition(topic_name, 1)
    async with assigned_consumer(bootstrap_servers, [tp0, tp1], max_poll_records=25) as c:
        seen: list[ConsumerRecord[Any, Any]] = []
        only_one = await c.getmany(tp1, timeout_ms=5000, max_records=5)
        assert list(only_one) == [tp1] and len(only_one[tp1]) == 5
        seen += only_one[tp1]
        one = await c.getone(tp0, timeout_ms=5000)
        assert one.partition == 0
        seen.append(one)
        batch = await c.getmany(timeout_ms=5000, max_records=7)
        assert sum(len(v) for v in batch.values()) == 7
        seen += [r for v in batch.values() for r in v]
        while True:
            batch = await c.getmany(timeout_ms=1000)
            if not batch:
                break
            assert sum(len(v) for v in batch.values()) <= 25  # max_poll_records
            seen += [r for v in batch.values() for r in v]
        with pytest.raises(ValueError):
            await c.getmany(max_records=0)
    # Every record exactly once, in order per partition.
    for p in (0, 1):
        assert [r.offset for r in seen if r.partition == p] == list(range(30))


async def test_partition_arguments_that_are_not_topic_partitions_are_refused(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """A topic name (or a bare TopicPartition where a list is wanted) is refused with a
    TypeError naming the method, as assign() does: getmany("t") returned {} after its
    timeout and getone("t") waited for ever, beginning_offsets(tp) raised AttributeError;
    and max_records must be an int (2.5 was taken)."""
    create_topic(topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(bootstrap_servers, [tp]) as c:
        calls: dict[str, Callable[[], Any]] = {
            "getmany": lambda: c.getmany(topic_name, timeout_ms=300),  # type: ignore[arg-type]
            "getone": lambda: c.getone(topic_name, timeout_ms=300),  # type: ignore[arg-type]
            "beginning_offsets": lambda: c.beginning_offsets(tp),
            "end_offsets": lambda: c.end_offsets([topic_name]),  # type: ignore[list-item]
            "offsets_for_times": lambda: c.offsets_for_times({topic_name: 0}),  # type: ignore[dict-item]
        }
        for method, call in calls.items():
            with pytest.raises(TypeError, match=rf"^{method}\(\) takes"):
                await call()
        for bad in (2.5, True):
            with pytest.raises(ValueError, match="max_records must be an int >= 1"):
                await c.getmany(max_records=bad)  # type: ignore[arg-type]
        # aiokafka's TopicPartition (a named tuple equal to ours) is still taken.
        assert await c.end_offsets([AIOKafkaTopicPartition(topic_name, 0)]) == {tp: 0}
        assert await c.getmany(AIOKafkaTopicPartition(topic_name, 0)) == {}


async def test_getmany_timeout_returns_empty_in_time(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(bootstrap_servers, [tp]) as c:
        assert await c.getmany(timeout_ms=300) == {}
        with pytest.raises(errors.KafkaTimeoutError, match="no record within 300 ms"):
            await c.getone(timeout_ms=300)


async def test_getmany_without_a_timeout_waits_for_records(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """getmany(timeout_ms=None) waits until records arrive, as getone() does (it was a
    TypeError from comparing None with 0)."""
    create_topic(topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(bootstrap_servers, [tp]) as c:
        assert await c.getmany(timeout_ms=300) == {}  # (positioned at the end)
        waiting = asyncio.create_task(c.getmany(timeout_ms=None))
        await asyncio.sleep(0.5)
        assert not waiting.done()
        await produce(bootstrap_servers, topic_name, [b"late"])
        got = await asyncio.wait_for(waiting, 30)
        assert [r.value for r in got[tp]] == [b"late"]


async def test_a_zero_timeout_on_committed_is_zero(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """committed() and seek_to_committed() with timeout_ms=0 raise KafkaTimeoutError at
    once, as Java's with Duration.ZERO; 0 used to mean request_timeout_ms (here 20 s)."""
    create_topic(topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    consumer = Consumer(
        bootstrap_servers=bootstrap_servers, group_id=topic_name, request_timeout_ms=20000
    )
    async with consumer:
        consumer.assign([tp])
        assert await consumer.committed(tp) is None  # (the coordinator is known now)
        for call in (consumer.committed, consumer.seek_to_committed):
            started = time.monotonic()
            with pytest.raises(errors.KafkaTimeoutError, match="within 0 ms"):
                await asyncio.wait_for(call(tp, timeout_ms=0), 30)
            assert time.monotonic() - started < 1.0


# --- record contents and codecs ----------------------------------------------------------------


async def test_headers_null_keys_and_null_values(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    await produce(
        bootstrap_servers,
        topic_name,
        [b"v", None, b""],
        keys=[None, b"k", b""],
        headers=[("trace", b"1"), ("empty", b"")],
    )
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(bootstrap_servers, [tp]) as c:
        got = await drain(c, 3)
    assert [(r.key, r.value) for r in got] == [(None, b"v"), (b"k", None), (b"", b"")]
    assert [r.serialized_key_size for r in got] == [-1, 1, 0]
    assert [r.serialized_value_size for r in got] == [1, -1, 0]
    assert all(list(r.headers) == [("trace", b"1"), ("empty", b"")] for r in got)
    assert all(r.timestamp > 0 and r.timestamp_type == 0 for r in got)


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_every_codec(
    codec: str, bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    values = [b"%d-" % i + b"x" * (i % 50) for i in range(300)]
    await produce(bootstrap_servers, topic_name, values, compression=codec)
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(bootstrap_servers, [tp]) as c:
        got = await drain(c, 300)
    assert [r.value for r in got] == values
    assert [r.offset for r in got] == list(range(300))


async def test_deserializers(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    await produce(bootstrap_servers, topic_name, [b'{"n": 1}', None], keys=[None, b"key"])
    tp = TopicPartition(topic_name, 0)
    import json

    async with assigned_consumer(
        bootstrap_servers, [tp], key_deserializer=bytes.decode, value_deserializer=json.loads
    ) as c:
        got = await drain(c, 2)
    assert [(r.key, r.value) for r in got] == [(None, {"n": 1}), ("key", None)]


async def test_offsets_for_times(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    create_topic(topic_name, 1)
    base = int(time.time() * 1000) - 60_000
    stamps = [base, base + 1000, base + 2000]
    await produce(
        bootstrap_servers, topic_name, [b"a", b"b", b"c"], timestamps=stamps, one_per_batch=True
    )
    tp = TopicPartition(topic_name, 0)
    async with Consumer(bootstrap_servers=bootstrap_servers, auto_offset_reset="earliest") as c:
        c.assign([tp])
        assert [r.timestamp for r in await drain(c, 3)] == stamps
        found = await c.offsets_for_times({tp: base + 500})
        assert found[tp] is not None
        with expect_deviation(
            "tansu", "Tansu 0.6 answers ListOffsets by timestamp with offset 0 and now"
        ):
            assert (found[tp].offset, found[tp].timestamp) == (1, base + 1000)
        assert (await c.offsets_for_times({tp: base}))[tp].offset == 0  # type: ignore[union-attr]
        assert (await c.offsets_for_times({tp: base + 10_000}))[tp] is None


# --- transactions ---------------------------------------------------------------------------


def transactional_producer(bootstrap: str, txn_id: str) -> Any:
    from confluent_kafka import Producer

    producer = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txn_id, "linger.ms": 5}
    )
    producer.init_transactions(20)
    return producer


async def test_read_committed_never_sees_aborted_records(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    producer = transactional_producer(bootstrap_servers, f"tx-{topic_name}")
    for round_ in range(3):
        producer.begin_transaction()
        for i in range(4):
            producer.produce(topic_name, value=b"aborted-%d-%d" % (round_, i), partition=0)
        producer.abort_transaction(20)
        producer.begin_transaction()
        for i in range(4):
            producer.produce(topic_name, value=b"committed-%d-%d" % (round_, i), partition=0)
        producer.commit_transaction(20)
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(bootstrap_servers, [tp], isolation_level="read_committed") as c:
        got = await drain(c, 12)
        await nothing_more(c)
        assert [r.value for r in got] == [
            b"committed-%d-%d" % (r, i) for r in range(3) for i in range(4)
        ]
        end = c.last_stable_offset(tp)
        assert end is not None and await c.position(tp) == end  # past the last marker


async def test_read_committed_stops_at_an_open_transaction(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    await produce(bootstrap_servers, topic_name, [b"plain"])
    producer = transactional_producer(bootstrap_servers, f"tx-{topic_name}")
    producer.begin_transaction()
    producer.produce(topic_name, value=b"pending", partition=0)
    producer.flush(10)
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(bootstrap_servers, [tp], isolation_level="read_committed") as c:
        assert [r.value for r in await drain(c, 1)] == [b"plain"]
        await nothing_more(c)
        producer.commit_transaction(20)
        assert [r.value for r in await drain(c, 1)] == [b"pending"]


# --- commits and health ------------------------------------------------------------------------


async def test_manual_commit_of_positions_and_explicit_offsets(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    await produce(bootstrap_servers, topic_name, [b"%d" % i for i in range(10)])
    tp = TopicPartition(topic_name, 0)
    group = f"g-{topic_name}"
    async with assigned_consumer(
        bootstrap_servers, [tp], group_id=group, enable_auto_commit=False
    ) as c:
        assert await c.committed(tp) is None
        got = await c.getmany(timeout_ms=5000, max_records=4)
        assert len(got[tp]) == 4
        await c.commit()
        assert await c.committed(tp) == 4
        await c.commit({tp: 7})
        assert await c.committed(tp) == 7
        assert c.health().partitions[tp].committed == 7
    # A new consumer of the group starts at the committed offset.
    async with assigned_consumer(bootstrap_servers, [tp], group_id=group) as c:
        assert [r.offset for r in await drain(c, 3)] == [7, 8, 9]


async def test_commit_metadata_roundtrip(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    create_topic(topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(bootstrap_servers, [tp], group_id=f"g-{topic_name}") as c:
        await c.commit({tp: OffsetAndMetadata(3, "checkpoint-3")})
        await c.commit({TopicPartition(topic_name, 0): (4, "checkpoint-4")})
        committed = (await c.committed_offsets([tp]))[tp]
        assert committed.offset == 4
        with expect_deviation("tansu", "Tansu 0.6 drops the metadata string of committed offsets"):
            assert committed == OffsetAndMetadata(4, "checkpoint-4", -1)


async def test_commit_on_stop_with_auto_commit(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    await produce(bootstrap_servers, topic_name, [b"%d" % i for i in range(5)])
    tp = TopicPartition(topic_name, 0)
    group = f"g-{topic_name}"
    c = assigned_consumer(bootstrap_servers, [tp], group_id=group, auto_commit_interval_ms=60000)
    await c.start()
    await drain(c, 5)
    await c.stop()
    async with assigned_consumer(bootstrap_servers, [tp], group_id=group) as c2:
        assert await c2.committed(tp) == 5


async def test_auto_commit_on_interval(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    await produce(bootstrap_servers, topic_name, [b"%d" % i for i in range(5)])
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(
        bootstrap_servers, [tp], group_id=f"g-{topic_name}", auto_commit_interval_ms=200
    ) as c:
        await drain(c, 5)
        deadline = time.monotonic() + 5
        while c.health().partitions[tp].committed != 5:
            assert time.monotonic() < deadline, c.health()
            await asyncio.sleep(0.05)
        assert await c.committed(tp) == 5


async def test_health_reports_lag_and_fetch_times(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    await produce(bootstrap_servers, topic_name, [b"%d" % i for i in range(20)])
    tp = TopicPartition(topic_name, 0)
    async with assigned_consumer(bootstrap_servers, [tp]) as c:
        await c.getmany(timeout_ms=5000, max_records=5)
        health = c.health()
        assert health.healthy and health.problems == ()
        assert health.assigned_partitions == frozenset({tp})
        assert health.partitions[tp].position == 5
        assert health.partitions[tp].lag == 15 and health.total_lag == 15
        assert health.last_fetch_time is not None and health.last_fetch_time <= time.time()
        assert health.group_state is GroupState.UNJOINED  # no group
    assert c.health().group_state is GroupState.CLOSED


async def test_stopped_consumer_refuses_work_and_ends_iteration(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    tp = TopicPartition(topic_name, 0)
    c = assigned_consumer(bootstrap_servers, [tp])
    await c.start()

    async def iterate() -> int:
        n = 0
        async for _ in c:
            n += 1
        return n

    task = asyncio.ensure_future(iterate())
    await asyncio.sleep(0.3)
    await c.stop()
    assert await asyncio.wait_for(task, 5) == 0
    with pytest.raises(errors.ConsumerStoppedError):  # as aiokafka: not a KafkaError
        await c.getone()
