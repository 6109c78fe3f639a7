"""Wire-format interop: our record batches checked by code nobody here wrote.

* Batches we build, for every codec, are accepted by the broker and read back
  byte-exact by aiokafka and by kcat (Debian's librdkafka).
* Batches produced by confluent-kafka, for every codec, decode byte-exact with us.

This uses only layers 1-3 (record batches, connection, cluster client), so it checks
the wire format independently of the producer and consumer built on top.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer
from aiokafka.structs import TopicPartition as PeerTopicPartition
from confluent_kafka import Producer as PeerProducer

from aiokafka_lite import errors
from aiokafka_lite.client import KafkaClient
from aiokafka_lite.consumer import Consumer
from aiokafka_lite.protocol import codecs
from aiokafka_lite.protocol.api import ApiKey
from aiokafka_lite.protocol.records import RecordBatchBuilder, iter_batches
from aiokafka_lite.structs import TopicPartition
from aiokafka_lite.testing import EmbeddedBroker
from aiokafka_lite.testing.pytest_plugin import require_tool

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]

Row = tuple[int, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...]]


def sample_rows(base_ts: int, *, binary: bool) -> list[Row]:
    """Records covering null keys, null values, headers (with a null value) and sizes."""
    blob = bytes(range(256)) * 4 if binary else b"abcdefghij" * 100
    rows: list[Row] = [
        (base_ts, b"key-0", b"value-0", ()),
        (base_ts + 1, None, b"no key", (("h1", b"v1"), ("h2", b""))),
        (base_ts + 2, b"tombstone", None, ()),
        (base_ts + 3, b"big", blob, (("kind", b"blob"),)),
    ]
    if binary:
        rows.append((base_ts + 4, b"\x00\xff", b"\xff\x00", (("bin", b"\x00\xfe"), ("nul", None))))
    # Enough similar records that every codec really compresses something.
    rows += [(base_ts + 10 + i, b"k%d" % i, b"v" * 50 + b"%d" % i, ()) for i in range(300)]
    return rows


def build_batch(rows: list[Row], codec: str) -> bytes:
    builder = RecordBatchBuilder(compression=None if codec == "none" else codec, max_size=10**7)
    for ts, key, value, headers in rows:
        assert builder.append(ts, key, value, list(headers)) is not None
    return builder.build()


async def produce_raw(client: KafkaClient, topic: str, batch: bytes) -> int:
    """Send one batch to partition 0 with acks=all; return its base offset."""
    await client.wait_for_metadata(topic, 10000)
    leader = client.cluster.leader_for(TopicPartition(topic, 0))
    assert leader is not None
    response = await client.send(
        leader,
        ApiKey.PRODUCE,
        {
            "transactional_id": None,
            "acks": -1,
            "timeout_ms": 10000,
            "topic_data": [{"name": topic, "partition_data": [{"index": 0, "records": batch}]}],
        },
    )
    (partition,) = response["responses"][0]["partition_responses"]
    assert partition["error_code"] == 0, partition
    return int(partition["base_offset"])


async def fetch_raw(client: KafkaClient, topic: str, count: int) -> list[Any]:
    """Fetch partition 0 from offset 0 until ``count`` records; return the batches."""
    await client.wait_for_metadata(topic, 10000)
    leader = client.cluster.leader_for(TopicPartition(topic, 0))
    assert leader is not None
    conn = await client.get_connection(leader)
    topic_id = client.cluster.topic_id(topic)
    version = conn.version_for(ApiKey.FETCH)
    if topic_id is None:
        version = min(version, 12)  # v13+ names topics only by id
    batches: list[Any] = []
    offset, seen = 0, 0
    deadline = time.monotonic() + 20
    while seen < count and time.monotonic() < deadline:
        response = await conn.send(
            ApiKey.FETCH,
            {
                "max_wait_ms": 200,
                "min_bytes": 1,
                "max_bytes": 50 * 1024 * 1024,
                "isolation_level": 0,
                "topics": [
                    {
                        "topic": topic,
                        "topic_id": topic_id or uuid.UUID(int=0),
                        "partitions": [
                            {
                                "partition": 0,
                                "fetch_offset": offset,
                                "partition_max_bytes": 10 * 1024 * 1024,
                            }
                        ],
                    }
                ],
                "forgotten_topics_data": [],
            },
            version=version,
        )
        (partition,) = response["responses"][0]["partitions"]
        assert partition["error_code"] == 0, partition
        for batch in iter_batches(partition["records"]):
            batches.append(batch)
            records = batch.records()
            seen += sum(1 for r in records if r.offset >= offset)
            offset = batch.next_offset
    assert seen >= count, f"fetched {seen} of {count} records"
    return batches


def rows_of(batches: list[Any]) -> list[Row]:
    return [
        (r.timestamp, r.key, r.value, tuple((k, v) for k, v in r.headers))
        for batch in batches
        for r in batch.records()
    ]


# --- ours -> aiokafka ------------------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
async def test_our_batches_read_back_by_aiokafka(
    bootstrap_servers: str, create_topic: Any, topic_name: str, codec: str
) -> None:
    create_topic(topic_name, 1)
    rows = sample_rows(recent_ms(), binary=True)
    async with KafkaClient(bootstrap_servers) as client:
        base = await produce_raw(client, topic_name, build_batch(rows, codec))
    assert base == 0

    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers, enable_auto_commit=False, auto_offset_reset="earliest"
    )
    await consumer.start()
    try:
        tp = PeerTopicPartition(topic_name, 0)
        consumer.assign([tp])
        await consumer.seek_to_beginning(tp)
        got: list[Any] = []
        deadline = time.monotonic() + 20
        while len(got) < len(rows) and time.monotonic() < deadline:
            batch = await consumer.getmany(tp, timeout_ms=500)
            got.extend(batch.get(tp, []))
    finally:
        await consumer.stop()
    assert [m.offset for m in got] == list(range(len(rows)))
    assert [(m.timestamp, m.key, m.value, tuple(m.headers)) for m in got] == rows


# --- ours -> kcat ----------------------------------------------------------------


@pytest.fixture(scope="module")
def kcat_bootstrap(request: pytest.FixtureRequest) -> Iterator[str]:
    """A broker Debian's kcat can talk to.

    Debian 12's kcat (librdkafka 2.0.2) fails on Tansu 0.6.0's ApiVersions v3
    response ("Read underflow") while newer librdkafka (confluent-kafka) works; so on
    Tansu this check runs against a noida-db broker, another real implementation.
    """
    require_tool("kcat", "make install adds it")  # in CI (CI=true) a failure, not a skip
    if request.getfixturevalue("broker_kind") != "tansu":
        yield request.getfixturevalue("bootstrap_servers")
        return
    with EmbeddedBroker("noida") as broker:
        yield broker.bootstrap_servers


def recent_ms() -> int:
    """A timestamp an hour ago: brokers apply retention.ms (7 days by default) to record
    timestamps, and noida-db deletes older records within a second of their write."""
    return (int(time.time()) - 3600) * 1000


def kcat_read(bootstrap: str, topic: str, count: int) -> list[dict[str, Any]]:
    # From offset 0 of a fresh topic. No -e: -c waits for all ``count``.
    out = subprocess.run(
        [
            "kcat",
            "-C",
            "-b",
            bootstrap,
            "-t",
            topic,
            "-p",
            "0",
            "-o",
            "0",
            "-c",
            str(count),
            "-J",
        ],
        capture_output=True,
        timeout=60,
        check=True,
    )
    return [json.loads(line) for line in out.stdout.decode().splitlines() if line.strip()]


@pytest.mark.parametrize("codec", CODECS)
async def test_our_batches_read_back_by_kcat(kcat_bootstrap: str, codec: str) -> None:
    topic = f"kcat-{codec}-{uuid.uuid4().hex[:8]}"
    rows = sample_rows(recent_ms(), binary=False)
    async with KafkaClient(kcat_bootstrap) as client:
        await produce_raw(client, topic, build_batch(rows, codec))
    got = await asyncio.to_thread(kcat_read, kcat_bootstrap, topic, len(rows))
    assert [m["offset"] for m in got] == list(range(len(rows)))
    expected = []
    for ts, key, value, headers in rows:
        flat: list[str | None] = []
        for k, v in headers:
            flat += [k, None if v is None else v.decode()]
        expected.append(
            (
                ts,
                None if key is None else key.decode(),
                None if value is None else value.decode(),
                flat,
            )
        )
    assert [(m["ts"], m["key"], m["payload"], m.get("headers") or []) for m in got] == expected


# --- confluent-kafka -> ours -----------------------------------------------------


@pytest.mark.parametrize("codec", CODECS)
async def test_confluent_batches_decode_with_us(
    bootstrap_servers: str, create_topic: Any, topic_name: str, codec: str
) -> None:
    create_topic(topic_name, 1)
    rows = sample_rows(recent_ms(), binary=True)
    producer = PeerProducer(
        {
            "bootstrap.servers": bootstrap_servers,
            "compression.type": codec,
            "linger.ms": 100,
            "enable.idempotence": True,
        }
    )
    for ts, key, value, headers in rows:
        producer.produce(
            topic_name, value=value, key=key, partition=0, timestamp=ts, headers=list(headers)
        )
    # Bounded (a flush without a timeout can wait forever); blocks the loop, which
    # has nothing else to run yet.
    unsent = producer.flush(30)
    assert unsent == 0, f"confluent-kafka still held {unsent} of {len(rows)} records after 30 s"

    async with KafkaClient(bootstrap_servers) as client:
        batches = await fetch_raw(client, topic_name, len(rows))
    assert {b.compression for b in batches} == {codecs.codec_id(None if codec == "none" else codec)}
    got = rows_of(batches)
    # librdkafka sends an absent header value as null and an empty one as b"".
    assert got == rows
    offsets = [r.offset for b in batches for r in b.records()]
    assert offsets == list(range(len(rows)))


async def test_a_confluent_batch_past_the_decompression_limit(
    bootstrap_servers: str, create_topic: Any, topic_name: str
) -> None:
    """librdkafka bounds a batch by its own batch.size, Kafka only by its compressed size:
    a valid batch of a few KiB may decompress past the consumer's limit. The error names
    where and what reads it, and raising ``max_decompressed_bytes`` does."""
    create_topic(topic_name, 1)
    values = [b"%04d" % i + bytes(64 * 1024) for i in range(32)]  # 2 MiB, one batch
    producer = PeerProducer(
        {
            "bootstrap.servers": bootstrap_servers,
            "compression.type": "zstd",
            "linger.ms": 200,
            "batch.size": 8 << 20,
            "message.max.bytes": 8 << 20,
        }
    )
    for value in values:
        producer.produce(topic_name, value=value, partition=0)
    assert producer.flush(30) == 0
    tp = TopicPartition(topic_name, 0)
    deadline = time.monotonic() + 30
    async with Consumer(
        bootstrap_servers=bootstrap_servers,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        max_decompressed_bytes=256 * 1024,
    ) as consumer:
        consumer.assign([tp])
        with pytest.raises(errors.CorruptRecordError) as info:
            while time.monotonic() < deadline:
                assert not (await consumer.getmany(timeout_ms=500)).get(tp)
        assert (info.value.topic, info.value.partition, info.value.offset) == (topic_name, 0, 0)
        assert "262144" in str(info.value) and "max_decompressed_bytes" in str(info.value)
    got: list[bytes] = []
    async with Consumer(
        bootstrap_servers=bootstrap_servers,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        max_decompressed_bytes=4 << 20,
    ) as consumer:
        consumer.assign([tp])
        while len(got) < len(values) and time.monotonic() < deadline:
            got += [r.value for r in (await consumer.getmany(timeout_ms=500)).get(tp, [])]
    assert got == values
