"""The delivery contract on a real broker: a record that cannot be deserialized, a batch
damaged in transit, a batch damaged for good.

Every good record reaches the application exactly once; a bad one is named in an
exception (topic, partition, offset) with the consumer staying on it; the committed
offset never passes a record the application did not get.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest

from aiokafka_lite import Producer, errors
from aiokafka_lite.consumer import Consumer, RecordDeserializationError
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing import FaultProxy

pytestmark = pytest.mark.integration

PARTITIONS = 3
PER_BATCH = 10
BATCHES = 3
#: Partition 1's bad records: first of batch 0, middle of batch 1, last of batch 2.
POISON = {0, 14, 29}
READERS = ["getone", "getmany", "async-for", "group-auto-commit"]


async def produce_batches(bootstrap: str, topic: str) -> None:
    """``BATCHES`` batches of ``PER_BATCH`` JSON records per partition, one request each,
    so the batch edges are where the test says; partition 1 has the bad ones."""
    async with Producer(bootstrap_servers=bootstrap, acks="all") as producer:
        futures = []
        for p in range(PARTITIONS):
            for b in range(BATCHES):
                batch = producer.create_batch()
                for i in range(PER_BATCH):
                    offset = b * PER_BATCH + i
                    bad = p == 1 and offset in POISON
                    value = b"{not json" if bad else json.dumps({"p": p, "o": offset}).encode()
                    assert batch.append(timestamp=None, key=b"%d" % offset, value=value)
                futures.append(await producer.send_batch(batch, topic, partition=p))
                await asyncio.gather(futures[-1])  # in order: one batch per request
        for fut in futures:
            await fut


def make_consumer(bootstrap: str, topic: str, reader: str) -> Consumer:
    common: dict[str, Any] = {
        "bootstrap_servers": bootstrap,
        "value_deserializer": json.loads,
        "auto_offset_reset": "earliest",
        "fetch_max_wait_ms": 100,
        "request_timeout_ms": 10000,
    }
    if reader == "group-auto-commit":
        return Consumer(
            topic,
            group_id=f"g-{topic}",
            enable_auto_commit=True,
            auto_commit_interval_ms=100,
            session_timeout_ms=10000,
            heartbeat_interval_ms=500,
            **common,
        )
    return Consumer(**common)


@asynccontextmanager
async def started(
    consumer: Consumer, topic: str, reader: str, partitions: int = PARTITIONS
) -> AsyncIterator[Consumer]:
    await consumer.start()
    try:
        if reader != "group-auto-commit":
            consumer.assign([TopicPartition(topic, p) for p in range(partitions)])
        else:
            await consumer.wait_for_assignment(timeout_ms=30000)
        yield consumer
    finally:
        await consumer.stop()


async def read_some(consumer: Consumer, reader: str) -> list[Any]:
    if reader == "getone":
        return [await consumer.getone(timeout_ms=5000)]
    if reader == "async-for":
        async for record in consumer:
            return [record]
        raise AssertionError("the consumer stopped")
    batches = await consumer.getmany(timeout_ms=1000, max_records=7)
    return [r for records in batches.values() for r in records]


@pytest.mark.parametrize("reader", READERS)
async def test_poison_pills_are_reported_and_every_good_record_delivered_once(
    reader: str, bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, PARTITIONS)
    await produce_batches(bootstrap_servers, topic_name)
    bad_tp = TopicPartition(topic_name, 1)
    total = PARTITIONS * BATCHES * PER_BATCH
    seen: list[tuple[int, int]] = []
    reported: list[int] = []
    consumer = make_consumer(bootstrap_servers, topic_name, reader)
    async with started(consumer, topic_name, reader) as c:
        deadline = time.monotonic() + 60
        while len(seen) + len(reported) < total:
            assert time.monotonic() < deadline, (len(seen), reported, c.health())
            try:
                for r in await read_some(c, reader):
                    assert r.value == {"p": r.partition, "o": r.offset}
                    seen.append((r.partition, r.offset))
            except RecordDeserializationError as exc:
                assert (exc.topic, exc.partition) == (topic_name, 1), exc
                offset = exc.offset
                assert offset in POISON and offset not in reported, exc
                assert exc.value == b"{not json" and exc.key == b"%d" % offset
                assert isinstance(exc.__cause__, json.JSONDecodeError)
                # Everything before it was handed over; the consumer stays on it.
                assert [o for p, o in seen if p == 1] == [
                    o for o in range(offset) if o not in POISON
                ]
                assert await c.position(bad_tp) == offset
                with pytest.raises(RecordDeserializationError) as again:
                    await read_some(c, reader)
                assert again.value.partition == 1 and again.value.offset == offset
                if reader == "group-auto-commit":
                    await asyncio.sleep(0.4)  # several auto-commit intervals
                    committed = await c.committed(bad_tp)
                    assert committed is not None and committed <= offset, (committed, offset)
                reported.append(offset)
                c.seek(bad_tp, offset + 1)
    assert sorted(reported) == sorted(POISON)
    assert len(seen) == len(set(seen)), "a record came twice"
    expected = {
        (p, o)
        for p in range(PARTITIONS)
        for o in range(BATCHES * PER_BATCH)
        if not (p == 1 and o in POISON)
    }
    assert set(seen) == expected
    if reader == "group-auto-commit":
        async with Consumer(
            bootstrap_servers=bootstrap_servers, group_id=f"g-{topic_name}"
        ) as check:
            for p in range(PARTITIONS):
                assert await check.committed(TopicPartition(topic_name, p)) == BATCHES * PER_BATCH


# --- damaged Fetch responses through the proxy ----------------------------------------

RECORDS = 5000
TARGET = 2_345  # the record whose value is damaged: mid-batch, mid-partition


class FetchDamage:
    """A proxy hook that flips one bit in the value of record ``TARGET`` wherever a
    response carries it: only the first time (``times=1``, in transit) or every time.

    It reassembles the broker's size-prefixed frames, so a value split between two
    reads is still found."""

    def __init__(self, times: int | None) -> None:
        self.left = times
        self.hits = 0
        self._pending: dict[int, bytearray] = {}
        self.needle = b"rec-%05d" % TARGET

    def __call__(self, link: int, direction: str, data: bytes) -> bytes:
        if direction != "downstream":
            return data
        buf = self._pending.setdefault(link, bytearray())
        buf += data
        out = bytearray()
        while len(buf) >= 4:
            size = int.from_bytes(buf[:4], "big")
            if len(buf) < 4 + size:
                break
            frame = bytearray(buf[: 4 + size])
            del buf[: 4 + size]
            at = frame.find(self.needle)
            if at >= 0 and (self.left is None or self.left > 0):
                frame[at + 5] ^= 0x01
                self.hits += 1
                if self.left is not None:
                    self.left -= 1
            out += frame
        return bytes(out)


async def fill(bootstrap: str, topic: str) -> None:
    async with Producer(bootstrap_servers=bootstrap, linger_ms=5, max_batch_size=16384) as p:
        futures = [
            await p.send(topic, b"rec-%05d" % i + b"." * (i % 40), partition=0)
            for i in range(RECORDS)
        ]
        await asyncio.gather(*futures)


def proxied_consumer(bootstrap: str, topic: str, reader: str) -> Consumer:
    group = reader == "group-auto-commit"
    return Consumer(
        *([topic] if group else []),
        bootstrap_servers=bootstrap,
        group_id=f"g-{topic}" if group else None,
        auto_commit_interval_ms=200,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        max_partition_fetch_bytes=65536,
        session_timeout_ms=10000,
        heartbeat_interval_ms=500,
        request_timeout_ms=10000,
    )


@pytest.mark.parametrize("reader", READERS)
async def test_a_batch_damaged_in_transit_heals_with_nothing_lost_or_repeated(
    reader: str,
    proxied_broker: tuple[FaultProxy, str],
    topic_name: str,
    create_topic: Callable[..., str],
) -> None:
    proxy, bootstrap = proxied_broker
    create_topic(topic_name, 1, bootstrap=bootstrap)
    await fill(bootstrap, topic_name)
    damage = FetchDamage(times=1)
    proxy.set_hook(damage)
    consumer = proxied_consumer(bootstrap, topic_name, reader)
    got: list[int] = []
    async with started(consumer, topic_name, reader, partitions=1) as c:
        deadline = time.monotonic() + 60
        while len(got) < RECORDS:
            assert time.monotonic() < deadline, (len(got), c.health())
            got += [r.offset for r in await read_some(c, reader)]
        assert damage.hits == 1
        assert c.health().corrupt_batches == 1
        assert c.health().healthy, c.health().problems
    assert got == list(range(RECORDS))


async def test_a_batch_damaged_for_good_raises_every_time_and_health_says_so(
    proxied_broker: tuple[FaultProxy, str], topic_name: str, create_topic: Callable[..., str]
) -> None:
    proxy, bootstrap = proxied_broker
    create_topic(topic_name, 1, bootstrap=bootstrap)
    await fill(bootstrap, topic_name)
    damage = FetchDamage(times=None)
    proxy.set_hook(damage)
    tp = TopicPartition(topic_name, 0)
    got: list[int] = []
    raised: list[int] = []
    async with Consumer(
        bootstrap_servers=bootstrap,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        max_partition_fetch_bytes=65536,
    ) as c:
        c.assign([tp])
        deadline = time.monotonic() + 60
        while len(raised) < 3:
            assert time.monotonic() < deadline, (len(got), raised, c.health())
            try:
                batch = await c.getmany(timeout_ms=500)
                got += [r.offset for r in batch.get(tp, [])]
            except errors.CorruptRecordError as exc:
                assert (exc.topic, exc.partition) == (topic_name, 0)
                assert exc.offset is not None and exc.offset <= TARGET
                assert exc.offset == len(got) == await c.position(tp)
                raised.append(exc.offset)
                health = c.health()
                assert not health.healthy
                assert f"at offset {exc.offset}" in (health.partitions[tp].error or "")
                assert any(f"{topic_name}-0 at offset {exc.offset}" in p for p in health.problems)
        assert len(set(raised)) == 1  # the same offset every time
        assert got == list(range(raised[0]))
        # Once the broker sends the batch intact, reading goes on from where it stopped.
        proxy.set_hook(None)
        rest: list[int] = []
        while len(rest) < RECORDS - raised[0]:
            assert time.monotonic() < deadline, (len(rest), c.health())
            batch = await c.getmany(timeout_ms=500)
            rest += [r.offset for r in batch.get(tp, [])]
        assert rest == list(range(raised[0], RECORDS))
        assert c.health().healthy and c.health().partitions[tp].error is None
