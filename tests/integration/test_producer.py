"""The producer against a real broker; what landed is checked with a peer consumer."""

from __future__ import annotations

import asyncio
import itertools
import json
import random
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer as CkProducer

from aiokafka_lite import errors
from aiokafka_lite.producer import (
    AIOKafkaProducer,
    Producer,
    ProducerInterceptor,
    ProducerRecord,
    RecordMetadata,
    SerializationError,
    murmur2_partition,
)
from aiokafka_lite.protocol.api import ApiKey
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing import FaultProxy
from aiokafka_lite.testing.pytest_plugin import ExpectDeviation

from ._helpers import RequestLog
from .test_producer_helpers import read_all

pytestmark = pytest.mark.timeout(120)


async def peer(bootstrap: str, topic: str, partitions: int = 1, **kw: Any) -> dict[int, list[Any]]:
    return await asyncio.to_thread(read_all, bootstrap, topic, partitions, **kw)


@pytest.mark.parametrize(("acks", "on_the_wire"), [(1, 1), ("all", -1), (-1, -1)])
async def test_acks(
    proxied_broker: tuple[FaultProxy, str],
    topic_name: str,
    create_topic: Callable[..., str],
    acks: int | str,
    on_the_wire: int,
) -> None:
    """The acks setting is what every Produce request carries, as the broker receives it
    (read through the proxy), and each record is acknowledged with its offset."""
    proxy, bootstrap = proxied_broker
    create_topic(topic_name, 1, bootstrap=bootstrap)
    log = RequestLog()
    proxy.set_hook(log)
    async with Producer(bootstrap_servers=bootstrap, acks=acks) as producer:
        await producer.send_and_wait(topic_name, b"first")
        futures = [await producer.send(topic_name, b"v%d" % i) for i in range(200)]
        results = await asyncio.gather(*futures)
    produce_requests = log.bodies(ApiKey.PRODUCE)
    assert produce_requests, "no Produce request went through the proxy"
    assert {body["acks"] for body in produce_requests} == {on_the_wire}
    assert all(isinstance(r, RecordMetadata) for r in results)
    assert [r.offset for r in results] == list(range(1, 201))
    got = (await peer(bootstrap, topic_name, expect=201))[0]
    assert [r[3] for r in got] == [b"first"] + [b"v%d" % i for i in range(200)]


async def test_acks_0_is_fire_and_forget(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    expected = [b"v%d" % i for i in range(200)]
    async with Producer(bootstrap_servers=bootstrap_servers, acks=0) as producer:
        futures = [await producer.send(topic_name, v) for v in expected]
        results = await asyncio.gather(*futures)
    # Nothing is acknowledged: a future resolves once its request is written, and the
    # offset is unknown.
    assert {r.offset for r in results} == {-1}
    got = [r[3] for r in (await peer(bootstrap_servers, topic_name, expect=200, timeout=5))[0]]
    # No guarantee that everything arrives, but what arrives is in order, once each.
    assert got == [v for v in expected if v in set(got)]
    assert len(got) == len(set(got)) > 0


async def test_acks_0_requests_get_no_response(
    bootstrap_servers: str,
    topic_name: str,
    create_topic: Callable[..., str],
    expect_deviation: ExpectDeviation,
) -> None:
    create_topic(topic_name, 1)
    async with Producer(bootstrap_servers=bootstrap_servers, acks=0) as producer:
        await producer.send_and_wait(topic_name, b"v")
        node = producer.client.cluster.leader_for(TopicPartition(topic_name, 0))
        assert node is not None
        conn = await producer.client.get_connection(node)
        for i in range(20):
            await producer.send_and_wait(topic_name, b"v%d" % i)
        await asyncio.sleep(0.3)
        # A conforming broker sends nothing back: the connection stays in sync and open.
        with expect_deviation(
            ("tansu", "noida"),
            "the broker answers Produce requests with acks=0, which Kafka never does; the "
            "client sees a response it did not ask for and closes the connection",
            match="protocol desync: response with unknown correlation id",
        ):
            assert not conn.closed, conn.close_reason
        assert await producer.client.get_connection(node) is conn
    got = (await peer(bootstrap_servers, topic_name, expect=21))[0]
    assert len(got) == 21


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
async def test_every_codec(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str], codec: str
) -> None:
    create_topic(topic_name, 1)
    values = [(b"%d-" % i) * (i % 50 + 1) for i in range(500)]
    async with Producer(
        bootstrap_servers=bootstrap_servers, compression_type=codec, linger_ms=20
    ) as producer:
        futures = [await producer.send(topic_name, v, key=b"k%d" % i) for i, v in enumerate(values)]
        await producer.flush()
        assert producer.metrics()["bytes_sent"] < sum(map(len, values))  # it compressed
    offsets = [f.result().offset for f in futures]
    assert offsets == list(range(500))
    got = (await peer(bootstrap_servers, topic_name, expect=500))[0]
    assert [(r[2], r[3]) for r in got] == [(b"k%d" % i, v) for i, v in enumerate(values)]


async def test_headers_keys_nulls_and_timestamps(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    async with Producer(bootstrap_servers=bootstrap_servers) as producer:
        await producer.send(topic_name, b"v1", headers=[("a", b"1"), ("b", b""), ("a", b"2")])
        await producer.send(topic_name, None, key=b"tombstone")
        await producer.send(topic_name, b"", key=b"")
        meta = await producer.send_and_wait(topic_name, b"ts", timestamp_ms=1_600_000_000_123)
    assert meta.timestamp == 1_600_000_000_123
    got = (await peer(bootstrap_servers, topic_name, expect=4))[0]
    assert got[0][4] == [("a", b"1"), ("b", b""), ("a", b"2")]
    assert (got[1][2], got[1][3]) == (b"tombstone", None)
    assert (got[2][2], got[2][3]) == (b"", b"")
    assert got[3][5] == 1_600_000_000_123


async def test_explicit_partitions(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 3)
    async with Producer(bootstrap_servers=bootstrap_servers) as producer:
        assert await producer.partitions_for(topic_name) == {0, 1, 2}
        for i in range(30):
            meta = await producer.send_and_wait(topic_name, b"%d" % i, partition=i % 3)
            assert meta.partition == i % 3
            assert meta.topic_partition == TopicPartition(topic_name, i % 3)
        with pytest.raises(errors.UnknownTopicOrPartitionError):
            await producer.send(topic_name, b"x", partition=3)
    got = await peer(bootstrap_servers, topic_name, 3, expect=30)
    for p in range(3):
        assert [r[3] for r in got[p]] == [b"%d" % i for i in range(p, 30, 3)]


async def test_keyed_records_keep_order_on_their_murmur2_partition(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 4)
    keys = [b"user-%d" % k for k in range(10)]
    async with Producer(bootstrap_servers=bootstrap_servers, linger_ms=1) as producer:
        futures = []
        for i in range(400):
            key = keys[i % 10]
            futures.append(await producer.send(topic_name, b"%d" % i, key=key))
        results = await asyncio.gather(*futures)
    for i, meta in enumerate(results):
        assert meta.partition == murmur2_partition(keys[i % 10], 4)
    got = await peer(bootstrap_servers, topic_name, 4, expect=400)
    for key in keys:
        part = murmur2_partition(key, 4)
        seq = [int(r[3]) for r in got[part] if r[2] == key]
        assert seq == sorted(seq) and len(seq) == 40


async def test_ignore_keys_sends_keyed_records_the_sticky_way(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    # partitioner_ignore_keys (Java's partitioner.ignore.keys): keys are kept on the
    # records but do not pick the partition; 40 small records (far below a batch's
    # worth of bytes) stick to one partition, where murmur2 would spread them.
    create_topic(topic_name, 4)
    keys = [b"user-%d" % k for k in range(40)]
    assert len({murmur2_partition(k, 4) for k in keys}) == 4
    async with Producer(
        bootstrap_servers=bootstrap_servers, partitioner_ignore_keys=True, linger_ms=50
    ) as producer:
        futures = [await producer.send(topic_name, b"v%d" % i, key=k) for i, k in enumerate(keys)]
        results = await asyncio.gather(*futures)
    assert len({m.partition for m in results}) == 1
    part = results[0].partition
    got = await peer(bootstrap_servers, topic_name, 4, expect=40)
    assert [r[2] for r in got[part]] == keys


@pytest.mark.parametrize("partitions", [3, 7])
async def test_keyed_partition_matches_confluent_murmur2_random(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str], partitions: int
) -> None:
    create_topic(topic_name, partitions)
    keys = [b"key-%d" % i for i in range(60)] + [b"", b"\x00\xff", "日本".encode()]
    chosen: dict[bytes, int] = {}

    def delivered(err: Any, msg: Any) -> None:
        assert err is None
        chosen[msg.key()] = msg.partition()

    def produce_with_confluent() -> None:
        ck: Any = CkProducer(
            {"bootstrap.servers": bootstrap_servers, "partitioner": "murmur2_random"}
        )
        for key in keys:
            ck.produce(topic_name, b"v", key=key, on_delivery=delivered)
        assert ck.flush(30) == 0

    await asyncio.to_thread(produce_with_confluent)
    async with Producer(bootstrap_servers=bootstrap_servers) as producer:
        ours = {
            key: (await producer.send_and_wait(topic_name, b"v", key=key)).partition for key in keys
        }
    assert ours == chosen
    assert len(set(chosen.values())) > 1


async def test_keyless_records_are_sticky_then_spread(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 4)
    async with Producer(
        bootstrap_servers=bootstrap_servers, max_batch_size=1000, linger_ms=50
    ) as producer:
        futures = [await producer.send(topic_name, b"x" * 100) for _ in range(400)]
        results = await asyncio.gather(*futures)
    parts = [r.partition for r in results]
    # Sticky: long runs on one partition (not a new partition per record)...
    switches = sum(1 for a, b in itertools.pairwise(parts) if a != b)
    assert switches < 100
    # ...and spread over the partitions in the end.
    assert len(set(parts)) >= 2


async def test_round_robin_and_callable_partitioners(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 3)
    async with Producer(bootstrap_servers=bootstrap_servers, partitioner="round_robin") as p:
        parts = [(await p.send_and_wait(topic_name, b"v", key=b"same")).partition for _ in range(6)]
    assert parts == [0, 1, 2, 0, 1, 2]

    def last(key: bytes | None, all_parts: list[int], available: list[int]) -> int:
        return all_parts[-1]

    async with Producer(bootstrap_servers=bootstrap_servers, partitioner=last) as p:
        assert (await p.send_and_wait(topic_name, b"v")).partition == 2


async def test_flush_delivers_everything(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    async with Producer(bootstrap_servers=bootstrap_servers, linger_ms=60_000) as producer:
        futures = [await producer.send(topic_name, b"%d" % i) for i in range(100)]
        assert not any(f.done() for f in futures)  # lingering
        await producer.flush(timeout=30)
        assert all(f.done() and f.exception() is None for f in futures)
        await producer.flush()  # nothing pending: returns at once


async def test_stop_delivers_pending_records(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    producer = Producer(bootstrap_servers=bootstrap_servers, linger_ms=60_000)
    await producer.start()
    futures = [await producer.send(topic_name, b"%d" % i) for i in range(300)]
    await producer.stop()
    assert [f.result().offset for f in futures] == list(range(300))
    with pytest.raises(errors.IllegalStateError):
        await producer.send(topic_name, b"late")
    got = (await peer(bootstrap_servers, topic_name, expect=300))[0]
    assert len(got) == 300


async def test_serializers_and_aiokafka_style_code(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    producer = AIOKafkaProducer(
        bootstrap_servers=bootstrap_servers,
        key_serializer=str.encode,
        value_serializer=lambda v: json.dumps(v).encode(),
        acks="all",
        enable_idempotence=True,
        linger_ms=5,
    )
    await producer.start()
    try:
        fut = await producer.send(topic_name, {"a": 1}, key="k1")
        meta = await fut
        assert meta.offset == 0
        meta = await producer.send_and_wait(topic_name, value=[1, 2], key="k2")
        assert meta.offset == 1
        batch = producer.create_batch()
        for i in range(10):  # the producer's serializers apply, as in aiokafka
            assert batch.append(key=f"b{i}", value={"i": i}, timestamp=None) is not None
        batch.close()
        batch_meta = await (await producer.send_batch(batch, topic_name, partition=0))
        assert batch_meta.offset == 2
    finally:
        await producer.stop()
    got = (await peer(bootstrap_servers, topic_name, expect=12))[0]
    assert [(r[2], r[3]) for r in got[:2]] == [(b"k1", b'{"a": 1}'), (b"k2", b"[1, 2]")]
    assert [(r[2], r[3]) for r in got[2:]] == [(b"b%d" % i, b'{"i": %d}' % i) for i in range(10)]


async def test_a_batch_sent_again_is_refused_and_holds_nothing_up(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """send_batch of a create_batch() batch that was sent already (at once, or after
    its delivery) raises IllegalStateError. (The one batch object was queued again: sent
    at once, it was in the accumulator twice; once delivered, its records were gone, so
    the second future never resolved, its buffer memory stayed reserved and every
    flush() timed out on it.)"""
    create_topic(topic_name, 1)
    async with Producer(bootstrap_servers=bootstrap_servers, linger_ms=0) as producer:
        batch = producer.create_batch()
        for value in (b"b1", b"b2"):
            assert batch.append(timestamp=None, key=None, value=value) is not None
        fut = await producer.send_batch(batch, topic_name, partition=0)
        with pytest.raises(errors.IllegalStateError, match="sent already"):
            await producer.send_batch(batch, topic_name, partition=0)
        assert (await fut).offset == 0
        with pytest.raises(errors.IllegalStateError, match="sent already"):
            await producer.send_batch(batch, topic_name, partition=0)
        await producer.flush(5)
        assert producer.metrics()["buffer_memory_used"] == 0
    got = (await peer(bootstrap_servers, topic_name, expect=2))[0]
    assert [r[3] for r in got] == [b"b1", b"b2"]


async def test_send_many_gives_one_future_per_record(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    async with Producer(bootstrap_servers=bootstrap_servers) as producer:
        futures = await producer.send_many(
            topic_name, [b"m%d" % i for i in range(50)], keys=[b"k"] * 50
        )
        results = await asyncio.gather(*futures)
    assert [r.offset for r in results] == list(range(50))
    got = (await peer(bootstrap_servers, topic_name, expect=50))[0]
    assert [r[3] for r in got] == [b"m%d" % i for i in range(50)]


async def test_send_many_keyless_spreads_over_partitions_each_record_once(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    # Keyless records through the sticky partitioner, several batches per partition:
    # every record lands once, in call order within its partition, where its future says.
    create_topic(topic_name, 3)
    values = [b"r%d-" % i + b"x" * (i % 300) for i in range(6000)]
    async with Producer(bootstrap_servers=bootstrap_servers, max_batch_size=4096) as producer:
        futures = [
            *(await producer.send_many(topic_name, values[:2500])),
            *(await producer.send_many(topic_name, values[2500:])),
        ]
        results = await asyncio.gather(*futures)
    got = await peer(bootstrap_servers, topic_name, 3, expect=len(values))
    placed = {(r[0], r[1]): r[3] for part in got.values() for r in part}
    assert len(placed) == len(values)
    assert [placed[(m.partition, m.offset)] for m in results] == values
    assert all(len(got[p]) > 500 for p in range(3))  # spread, not all on one
    position = {value: i for i, value in enumerate(values)}
    for part in got.values():  # call order within each partition
        order = [position[r[3]] for r in part]
        assert order == sorted(order)


async def test_many_concurrent_senders(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    async with Producer(
        bootstrap_servers=bootstrap_servers, buffer_memory=64 * 1024, max_batch_size=4096
    ) as producer:

        async def one(i: int) -> RecordMetadata:
            return await producer.send_and_wait(topic_name, b"c%d" % i + b"." * 200)

        results = await asyncio.gather(*(one(i) for i in range(3000)))
    assert sorted(r.offset for r in results) == list(range(3000))


async def test_a_header_name_utf8_cannot_encode_is_a_serialization_error(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    """A header name with a lone surrogate raised UnicodeEncodeError (not the
    SerializationError bad input gets) from send() and send_many(); nothing of the
    record goes into the batch, and the records around it arrive intact."""
    create_topic(topic_name, 1)
    async with Producer(bootstrap_servers=bootstrap_servers, linger_ms=100) as producer:
        before = await producer.send(topic_name, b"before", partition=0)
        with pytest.raises(SerializationError, match="cannot be encoded as UTF-8"):
            await producer.send(topic_name, b"v", partition=0, headers=[("\udc80", b"x")])
        with pytest.raises(SerializationError, match="cannot be encoded as UTF-8"):
            await producer.send(topic_name, b"v", headers=[("ok", b"1"), ("\ud800", b"x")])
        with pytest.raises(SerializationError, match="cannot be encoded as UTF-8"):
            await producer.send_many(topic_name, [b"a", b"b"], headers=[("\ud800", b"x")])
        after = await producer.send(topic_name, b"after", partition=0, headers=[("é", b"y")])
        assert [(await before).offset, (await after).offset] == [0, 1]
    got = (await peer(bootstrap_servers, topic_name, expect=2))[0]
    assert [(r[3], r[4]) for r in got] == [(b"before", []), (b"after", [("é", b"y")])]


async def test_bad_input_types(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    async with Producer(bootstrap_servers=bootstrap_servers) as producer:
        with pytest.raises(SerializationError, match="value is str"):
            await producer.send(topic_name, "text")
        with pytest.raises(SerializationError, match="key is int"):
            await producer.send(topic_name, b"v", key=5)
        with pytest.raises(TypeError):  # SerializationError is a TypeError too
            await producer.send(topic_name, {"a": 1})
        with pytest.raises(SerializationError, match="header"):
            await producer.send(topic_name, b"v", headers=[("h", "not-bytes")])
        with pytest.raises(SerializationError):
            await producer.send(topic_name, b"v", headers=[(1, b"x")])
        with pytest.raises(TypeError):
            await producer.send(topic_name, b"v", partition="0")  # type: ignore[arg-type]
        # A timestamp is a number of milliseconds from 0 (as the Java client requires;
        # a float is truncated, as aiokafka does), checked before the record is taken,
        # on every path.
        for stamp in (float("nan"), float("inf"), -1, -0.5e3, "now", True, 1 << 63):
            with pytest.raises(TypeError, match="timestamp_ms must be a number"):
                await producer.send(topic_name, b"v", partition=0, timestamp_ms=stamp)  # type: ignore[arg-type]
            with pytest.raises(TypeError, match="timestamp_ms must be a number"):
                await producer.send_many(topic_name, [b"v"], timestamp_ms=stamp)  # type: ignore[arg-type]
            batch = producer.create_batch()
            with pytest.raises(TypeError, match="timestamp_ms must be a number"):
                batch.append(key=None, value=b"v", timestamp=stamp)  # type: ignore[arg-type]
            assert batch.record_count() == 0
        # bytearray and memoryview are fine
        await producer.send_and_wait(topic_name, bytearray(b"ba"), key=memoryview(b"mv"))
    got = (await peer(bootstrap_servers, topic_name, expect=1))[0]
    assert [(r[2], r[3]) for r in got] == [(b"mv", b"ba")]


async def test_serializer_failure_is_serialization_error(bootstrap_servers: str) -> None:
    def boom(value: object) -> bytes:
        raise ValueError("cannot")

    async with Producer(bootstrap_servers=bootstrap_servers, value_serializer=boom) as producer:
        with pytest.raises(SerializationError, match="value_serializer failed"):
            await producer.send("any-topic", 1)


async def test_record_too_large_fails_at_once(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    async with Producer(bootstrap_servers=bootstrap_servers, max_request_size=10_000) as producer:
        with pytest.raises(errors.RecordTooLargeError, match="max_request_size"):
            await producer.send(topic_name, b"x" * 20_000)
        with pytest.raises(errors.MessageSizeTooLargeError):  # aiokafka's name
            await producer.send(topic_name, b"x" * 9_990, headers=[("h", b"y" * 100)])
        # Just under the limit goes through.
        meta = await producer.send_and_wait(topic_name, b"x" * 9_000)
        assert meta.offset == 0


async def test_unknown_topic_with_auto_creation_off(
    bootstrap_servers: str, topic_name: str
) -> None:
    async with Producer(
        bootstrap_servers=bootstrap_servers, allow_auto_create_topics=False, max_block_ms=1500
    ) as producer:
        with pytest.raises(errors.UnknownTopicOrPartitionError, match="does not exist"):
            await producer.send(topic_name, b"v")


class Recorder(ProducerInterceptor):
    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.acked: list[tuple[RecordMetadata | None, BaseException | None]] = []

    def on_send(self, record: ProducerRecord) -> ProducerRecord:
        self.sent.append(record.value)
        return ProducerRecord(
            record.topic, b"intercepted:" + record.value, record.key, record.partition
        )

    def on_acknowledgement(
        self, metadata: RecordMetadata | None, exception: BaseException | None
    ) -> None:
        self.acked.append((metadata, exception))


async def test_interceptors_and_metrics(
    bootstrap_servers: str, topic_name: str, create_topic: Callable[..., str]
) -> None:
    create_topic(topic_name, 1)
    rec = Recorder()
    async with Producer(bootstrap_servers=bootstrap_servers, interceptors=[rec]) as producer:
        for i in range(20):
            await producer.send(topic_name, b"%d" % i)
        await producer.flush()
        await asyncio.sleep(0)  # done callbacks run on the next loop iteration
        metrics = producer.metrics()
    assert rec.sent == [b"%d" % i for i in range(20)]
    assert [m.offset for m, e in rec.acked if m is not None] == list(range(20))
    assert metrics["records_sent"] == 20
    assert metrics["records_failed"] == 0
    assert metrics["batches_sent"] >= 1
    assert metrics["bytes_sent"] > 20 * len(b"intercepted:")
    assert metrics["request_latency_avg_ms"] > 0
    assert metrics["buffer_memory_used"] == 0
    assert set(metrics) >= {"batch_size_avg", "records_retried", "buffer_memory_total"}
    got = (await peer(bootstrap_servers, topic_name, expect=20))[0]
    assert got[0][3] == b"intercepted:0"


def _records_bytes(body: dict[str, Any]) -> int:
    return sum(
        len(part["records"] or b"")
        for topic in body["topic_data"]
        for part in topic["partition_data"]
    )


@pytest.mark.parametrize("codec", [None, "lz4"])
async def test_no_batch_larger_than_max_request_size_goes_out(
    proxied_broker: tuple[FaultProxy, str],
    topic_name: str,
    create_topic: Callable[..., str],
    codec: str | None,
) -> None:
    """A built batch over ``max_request_size`` is not sent: with ``max_batch_size`` above
    it, the batch is split before it goes (before: 3,000,586-byte requests went out with
    ``max_request_size`` 1 MiB); a record that compression made larger than the limit
    fails at the client with RecordTooLargeError naming the limit and the codec (before:
    it went out and failed with the broker's error, or was taken by a lenient broker)."""
    proxy, bootstrap = proxied_broker
    create_topic(topic_name, 1, bootstrap=bootstrap)
    log = RequestLog()
    proxy.set_hook(log)
    limit = 1 << 20
    rng = random.Random(7)
    values = [rng.randbytes(100_000) for _ in range(30)]
    async with Producer(
        bootstrap_servers=bootstrap,
        compression_type=codec,
        max_request_size=limit,
        max_batch_size=8 << 20,
        linger_ms=100,
    ) as producer:
        futures = [await producer.send(topic_name, v) for v in values]
        results = await asyncio.gather(*futures)
        assert [r.offset for r in results] == list(range(30))
        sizes = [_records_bytes(body) for body in log.bodies(ApiKey.PRODUCE)]
        assert sizes and max(sizes) <= limit, sizes
        if codec is not None:
            # Incompressible: the lz4 frame is larger than the record, and than the limit.
            log.requests.clear()
            fut = await producer.send(topic_name, rng.randbytes(limit - 100))
            with pytest.raises(errors.RecordTooLargeError, match=r"max_request_size.*not sent"):
                await fut
            assert "lz4 compression" in str(fut.exception())
            assert log.bodies(ApiKey.PRODUCE) == []
            assert (await producer.send_and_wait(topic_name, b"after")).offset == 30
    got = (await peer(bootstrap, topic_name, expect=30 + (codec is not None)))[0]
    assert [r[3] for r in got][:30] == values
